// mpirun -np N build/bin/llama_tp --weights FILE --input FILE --output FILE --heads H --kv-heads K
//                                 [--rope-theta 10000] [--eps 1e-6]
//
// One Llama decoder layer run tensor-parallel over N MPI ranks. Each rank
// loads only its slice of the weights (LoadArgs::shard: its query heads,
// its key/value heads, its share of the MLP; the norms whole), runs its
// part of the layer, and the ranks add up the row-parallel outputs with
// MPI_Allreduce. Rank 0 then runs the layer on the whole weights in one
// process, compares, writes the output ("output", F32 [batch, seq, hidden])
// to a safetensors file and prints one line:
//
//   tensor-parallel: ranks=N max_rel_err=E bytes_read_per_rank=B total_tensor_bytes=T
//
// E = max |tensor-parallel - single process| / max |single process|;
// B = the most bytes of tensors any rank read (LoadReport::shard);
// T = the bytes of the tensors the layer uses, whole.
// The weights are one layer of a Hugging Face LlamaDecoderLayer state dict
// (input_layernorm.weight, self_attn.{q,k,v,o}_proj.weight,
// post_attention_layernorm.weight, mlp.{gate,up,down}_proj.weight), any
// dtype, any format torchport::open reads; the input is a safetensors file
// with "input", F32 [batch, seq, hidden], at positions 0..seq-1.

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <torchport/torchport.hpp>

#include "llama_tp.hpp"

using namespace torchport;

namespace {

Tensor positions_for(std::int64_t batch, std::int64_t seq) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(batch * seq));
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::int64_t>(i) % seq;
  return Tensor::from(std::span<const std::int64_t>(p), {batch, seq});
}

double max_rel_err(const Tensor& got, const Tensor& want) {
  const Tensor g = got.contiguous(), w = want.contiguous();
  const auto a = g.span<float>();
  const auto b = w.span<float>();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

int run(int rank, int world, int argc, char** argv) {
  CLI::App app{"A Llama decoder layer, tensor-parallel over MPI ranks"};
  std::string weights, input, output;
  std::int64_t heads = 0, kv_heads = 0;
  double rope_theta = 10000.0, eps = 1e-6;
  bool verbose = false;
  app.add_option("--weights", weights, "one LlamaDecoderLayer's state dict, any format")
      ->required();
  app.add_option("--input", input, "safetensors file with 'input', F32 [batch, seq, hidden]")
      ->required();
  app.add_option("--output", output, "safetensors file rank 0 writes 'output' to")->required();
  app.add_option("--heads", heads, "attention heads")->required();
  app.add_option("--kv-heads", kv_heads, "key/value heads")->required();
  app.add_option("--rope-theta", rope_theta, "rotary base")->capture_default_str();
  app.add_option("--eps", eps, "RMSNorm epsilon")->capture_default_str();
  app.add_flag("--verbose", verbose, "each rank prints what it read to stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
  }

  const TensorCatalog cat = open(weights);
  const llama_tp::Dims d = llama_tp::dims_of(cat, heads, kv_heads);
  transformer_blocks::LlamaBlock blk = llama_tp::rank_block(d, world, eps, rope_theta);
  const LoadReport report =
      load(blk, cat, LoadArgs{}.shard(rank, world, llama_tp::plan(heads, kv_heads)));
  if (verbose)
    std::fprintf(stderr, "rank %d:\n%s%s", rank, report.summary().c_str(),
                 report.shard_listing().c_str());

  const TensorCatalog in = open(input);
  const Tensor* xp = in.find("input");
  if (xp == nullptr || xp->dim() != 3 || xp->size(2) != d.hidden)
    throw Error(ErrorCode::missing_key,
                "expected 'input' F32 [batch, seq, " + std::to_string(d.hidden) + "]", "input",
                std::nullopt, input);
  const Tensor x = xp->to(DType::F32);
  const Tensor pos = positions_for(x.size(0), x.size(1));
  const Tensor out = llama_tp::forward(blk, x, pos, [](Tensor& t) {
    MPI_Allreduce(MPI_IN_PLACE, t.mutable_data<float>(), static_cast<int>(t.numel()), MPI_FLOAT,
                  MPI_SUM, MPI_COMM_WORLD);
  });

  unsigned long long mine = report.shard->bytes, most = 0;
  MPI_Reduce(&mine, &most, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank != 0) return 0;

  // The same layer in one process on the whole weights.
  transformer_blocks::LlamaBlock whole = llama_tp::rank_block(d, 1, eps, rope_theta);
  load(whole, cat);
  const Tensor want = llama_tp::forward(whole, x, pos, [](Tensor&) {});
  save(TensorCatalog::from_tensors(Format::state_dict, {{"output", out}}), output,
       SaveFormat::safetensors);
  std::printf(
      "tensor-parallel: ranks=%d max_rel_err=%.3g bytes_read_per_rank=%llu "
      "total_tensor_bytes=%llu\n",
      world, max_rel_err(out, want), most,
      static_cast<unsigned long long>(report.shard->file_bytes));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int rc = 0;
  try {
    rc = run(rank, world, argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_tp: rank %d: error: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
