// The remote tests' client (tests/remote/run_remote_tests.py): opens a URL
// (or a path) with torchport::remote and prints one JSON line of what it
// read, or of the error.
//
//   remote_client URL [--owned] [--stall-ms N] [--retries N] [--max-unranged N]
//                     [--shard RANK WORLD PLAN_FILE]
//
// {"ok": true, "format": F, "tensors": [[name, dtype, shape, sha256], ...],
//  "requests": N, "bytes": N, "retries": N}   or   {"ok": false, "code": C, "message": M}

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "support/fixtures.hpp"
#include "torchport/io/remote.hpp"
#include "torchport/torchport.hpp"

using namespace torchport;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: remote_client URL [options]\n");
    return 2;
  }
  const std::string url = argv[1];
  OpenOptions o;
  o.remote = remote::opener();
  bool owned = false, open_only = false;
  int rank = -1, world = 0;
  std::string plan_file;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&] { return std::string(argv[++i]); };
    if (a == "--owned")
      owned = true;
    else if (a == "--open-only")
      open_only = true;
    else if (a == "--stall-ms")
      o.limits.remote_stall_timeout_ms = static_cast<std::uint32_t>(std::stoul(next()));
    else if (a == "--retries")
      o.limits.remote_retries = static_cast<std::uint32_t>(std::stoul(next()));
    else if (a == "--max-unranged")
      o.limits.max_unranged_bytes = std::stoull(next());
    else if (a == "--shard") {
      rank = std::stoi(next());
      world = std::stoi(next());
      plan_file = next();
    }
  }
  nlohmann::json out;
  try {
    TensorCatalog cat = open(url, o);
    out["format"] = std::string(cat.format_name());
    if (rank >= 0) {
      // Each rank's slices, as LoadArgs::shard reads them: a split tensor's
      // part (read_slice), every other tensor whole.
      const ShardPlan plan = ShardPlan::read_file(plan_file);
      nlohmann::json list = nlohmann::json::array();
      std::uint64_t bytes = 0;
      for (const auto& [name, t] : cat.tensors()) {
        const ShardSlice s = plan.resolve(name, t.shape(), rank, world);
        Tensor x;
        if (s.kind == ShardKind::replicate) {
          x = Tensor::empty(t.dtype(), t.shape());
          t.copy_to(x.mutable_bytes());
        } else {
          x = read_slice(t, s.dim, s.ranges, {nullptr, /*lazy*/ false});
          if (x.storage() == t.storage()) x = x.clone();
        }
        bytes += x.nbytes();
        list.push_back({name, test::tensor_sha256(x)});
      }
      out["tensors"] = list;
      out["slice_bytes"] = bytes;
    } else {
      if (owned) cat = materialize(std::move(cat), Residence::owned);
      nlohmann::json list = nlohmann::json::array();
      for (const auto& [name, t] : cat.tensors())
        list.push_back(
            {name, std::string(dtype_name(t.dtype())), t.shape(),
             t.is_sparse() || t.is_meta() || open_only ? std::string() : test::tensor_sha256(t)});
      out["tensors"] = list;
    }
    out["ok"] = true;
  } catch (const Error& e) {
    out["ok"] = false;
    out["code"] = std::string(error_code_name(e.code()));
    out["message"] = e.what();
  }
  const remote::Counters c = remote::counters();
  out["requests"] = c.requests;
  out["bytes"] = c.bytes;
  out["retries"] = c.retries;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
