// A GPT-2 block and a Llama block (tests/record/transformer_blocks.hpp) loaded
// from checkpoints written by the PyTorch references in
// tests/record/cases/{gpt2_block,llama_block}.py, their forward passes
// matched to torch's.

#include <algorithm>
#include <cmath>
#include <iostream>

#include <gtest/gtest.h>

#include "burn_modules.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/load.hpp"
#include "transformer_blocks.hpp"

using namespace torchport;
using namespace transformer_blocks;
using burn_cases::case_file;

namespace {

// Tolerances, named per case, as |got - want| <= tol * max(1, |want|).
//
// f32 weights, f32 compute on both sides: the results differ only in the
// order of f32 sums (sgemm blocking, softmax and norm reductions).
constexpr double kF32 = 1e-5;
// bf16 weights: torch's reference is its f32 forward of the same
// bf16-rounded weights. bf16 -> f32 is exact, so both sides compute with
// identical f32 weights and again differ only in summation order: the f32
// tolerance holds. (Against torch's all-bf16 forward the gap is ~2e-2 of
// the output's scale: that is bf16 arithmetic, not what a f32 runtime should
// be judged by.)
constexpr double kBf16WeightsF32Compute = 1e-5;

// The largest |got - want| / max(1, |want|); fails when above `tol`.
double expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  if (got.shape() != want.shape()) return INFINITY;
  const Tensor g = got.to(DType::F64), w = want.to(DType::F64);
  const auto gs = g.span<double>(), ws = w.span<double>();
  double worst = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < gs.size(); ++i) {
    const double err = std::fabs(gs[i] - ws[i]) / std::max(1.0, std::fabs(ws[i]));
    if (!(err <= tol) && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "]: got " << gs[i] << ", torch " << ws[i];
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  std::cout << what << ": max relative error " << worst << " (tolerance " << tol << ")\n";
  return worst;
}

const Tensor& at(const TensorCatalog& c, const char* name) {
  const Tensor* t = c.find(name);
  if (t == nullptr) throw std::runtime_error(std::string("fixture lacks ") + name);
  return *t;
}

// Every tensor the module holds equals torch's (in our names and layout), bit for bit.
template <class M>
void expect_loaded_exactly(const M& module, const std::string& name) {
  const TensorCatalog got = to_catalog(module);
  const TensorCatalog want = open(case_file(name + ".expected.pt"));
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (const auto& t : want.tensors()) {
    const Tensor* mine = got.find(t.name);
    ASSERT_NE(mine, nullptr) << t.name;
    const DType dt = t.tensor.dtype() == DType::BOOL ? DType::BOOL : DType::F64;
    EXPECT_TRUE(mine->to(dt).equal(t.tensor.to(dt))) << t.name;
  }
}

// --- GPT-2 ------------------------------------------------------------------------

struct FusedAsLinear {
  nn::Linear c_attn{16, 48};
  TORCHPORT_FIELDS(c_attn)
};

Gpt2Block gpt2() {
  return Gpt2Block::make(/*n_embd*/ 16, /*n_head*/ 2, /*n_ctx*/ 8);
}

TEST(Gpt2Block, LoadsHuggingFaceNamesAndConv1DLayout) {
  Gpt2Block blk = gpt2();
  const LoadReport r = load(blk, case_file("gpt2_block.pt"), LoadArgs{}.strict());
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(blk.attn.c_attn.weight.shape(), (Shape{16, 48}));  // Conv1D's [in, out], untransposed
  EXPECT_EQ(blk.attn.bias->dtype(), DType::BOOL);
  expect_loaded_exactly(blk, "gpt2_block");
}

TEST(Gpt2Block, ForwardMatchesTorch) {
  Gpt2Block blk = gpt2();
  load(blk, case_file("gpt2_block.pt"));
  const TensorCatalog f = open(case_file("gpt2_block.io.pt"));
  const auto [out, attn] = blk.forward(at(f, "input"));
  expect_close(attn, at(f, "attn"), kF32, "gpt2 attn");
  expect_close(out, at(f, "output"), kF32, "gpt2 output");
}

TEST(Gpt2Block, CheckpointMaskAndCausalFlagAgree) {
  Gpt2Block blk = gpt2();
  load(blk, case_file("gpt2_block.pt"));
  const TensorCatalog f = open(case_file("gpt2_block.io.pt"));
  const Tensor with_mask = blk.forward(at(f, "input")).first;
  blk.attn.bias.reset();  // SDPA's causal flag instead of the file's mask
  expect_close(blk.forward(at(f, "input")).first, with_mask, kF32, "gpt2 causal vs mask");
  expect_close(blk.forward(at(f, "input")).first, at(f, "output"), kF32,
               "gpt2 output (causal flag)");
}

TEST(Gpt2Block, SequenceLongerThanTheMaskIsAnError) {
  Gpt2Block blk = gpt2();
  load(blk, case_file("gpt2_block.pt"));
  EXPECT_THROW(blk.forward(Tensor::zeros(DType::F32, {1, 9, 16})), Error);
}

TEST(Gpt2Block, AsLinearTheFusedWeightIsRefused) {
  // The reason Conv1D is its own record: an nn::Linear of the same sizes
  // expects torch's [out, in] in the file and transposes it.
  FusedAsLinear w;
  EXPECT_THROW(
      load(w, case_file("gpt2_block.pt"), LoadArgs{}.remap(R"(^attn\.c_attn\.)", "c_attn.")),
      Error);
}

// --- Llama ------------------------------------------------------------------------

LlamaBlock llama(DType dtype = DType::F32) {
  return LlamaBlock::make(/*hidden*/ 16, /*n_heads*/ 4, /*n_kv_heads*/ 2, /*intermediate*/ 32,
                          /*rms_eps*/ 1e-5,
                          /*rope_theta*/ 10000.0, dtype);
}

TEST(LlamaBlock, LoadsBf16CheckpointIntoF32) {
  LlamaBlock blk = llama();
  const LoadReport r = load(blk, case_file("llama_block.pt"), LoadArgs{}.strict());
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(blk.self_attn.k_proj.weight.dtype(), DType::F32);
  EXPECT_EQ(blk.self_attn.k_proj.weight.shape(), (Shape{16, 8}));  // ours: [in, out]
  expect_loaded_exactly(blk, "llama_block");                       // bf16 -> f32 is exact
}

TEST(LlamaBlock, ForwardMatchesTorchsF32ForwardOfTheBf16Weights) {
  LlamaBlock blk = llama();
  load(blk, case_file("llama_block.pt"));
  const TensorCatalog f = open(case_file("llama_block.io.pt"));
  const auto [out, attn] = blk.forward(at(f, "input"), at(f, "position_ids"));
  expect_close(attn, at(f, "attn"), kBf16WeightsF32Compute, "llama attn");
  expect_close(out, at(f, "output"), kBf16WeightsF32Compute, "llama output");
  // Our f32 result is far closer to torch's f32 one than torch's own bf16
  // forward is: the gap printed here is what bf16 arithmetic costs.
  double bf16_gap = 0;
  const auto want = at(f, "output").to(DType::F64),
             bf = at(f, "output_bf16_compute").to(DType::F64);
  for (std::size_t i = 0; i < want.span<double>().size(); ++i)
    bf16_gap = std::max(bf16_gap, std::fabs(want.span<double>()[i] - bf.span<double>()[i]) /
                                      std::max(1.0, std::fabs(want.span<double>()[i])));
  std::cout << "torch's all-bf16 forward vs its f32 forward: max relative error " << bf16_gap
            << "\n";
  EXPECT_GT(bf16_gap, 100 * kBf16WeightsF32Compute);
}

TEST(LlamaBlock, Bf16FieldsComputeInF32WithTheSameResult) {
  // Kept as bf16 in memory (half the bytes); every op converts to f32 first,
  // so the output is bit for bit the f32-loaded block's.
  LlamaBlock kept = llama(DType::BF16);
  load(kept, case_file("llama_block.pt"), LoadArgs{}.precision(Precision::Keep));
  EXPECT_EQ(kept.mlp.down_proj.weight.dtype(), DType::BF16);
  LlamaBlock full = llama();
  load(full, case_file("llama_block.pt"));
  const TensorCatalog f = open(case_file("llama_block.io.pt"));
  const Tensor a = kept.forward(at(f, "input"), at(f, "position_ids")).first;
  const Tensor b = full.forward(at(f, "input"), at(f, "position_ids")).first;
  EXPECT_EQ(a.dtype(), DType::F32);
  EXPECT_TRUE(a.equal(b));
}

}  // namespace
