// Tensor-parallel loading across processes: tensor_parallel.py builds a
// random Llama layer with torch and its reference output, runs
// examples/tensor_parallel's llama_tp under `mpirun -np N` (2 and 4 ranks,
// a torch.save zip of bf16 weights, a safetensors file of f32 ones, and
// distributed checkpoints that 2 or 4 ranks saved, under torch 2.x), and
// checks the output (1e-4 relative) and the bytes each rank read (within 5%
// of 1/N of the split weights plus the replicated ones).

#include <iostream>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"

namespace fs = std::filesystem;
using torchport::test::run_command;

namespace {

struct Case {
  int np;
  const char* format;
  const char* dtype;
  int save_world = 2;  // --format dcp: the ranks that saved it
};

class TensorParallel : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallel, MatchesTorchAndReadsOneNthPerRank) {
  const Case c = GetParam();
  const std::string name = "tp-" + std::to_string(c.np) + "-" + c.format + "-" + c.dtype + "-" +
                           std::to_string(c.save_world);
  const fs::path dir = torchport::test::temp_dir(name);
  std::string out;
  const int rc = run_command(torchport::test::python() +
                                 " -W ignore '" TORCHPORT_INTEROP_DIR
                                 "/tensor_parallel.py' --llama-tp '" TORCHPORT_LLAMA_TP
                                 "' --mpirun '" TORCHPORT_MPIRUN "' --np " +
                                 std::to_string(c.np) + " --format " + c.format + " --dtype " +
                                 c.dtype + " --save-world " + std::to_string(c.save_world) +
                                 " --dir '" + dir.string() + "'",
                             &out);
  EXPECT_EQ(rc, 0) << out;
  std::cout << out;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Mpi, TensorParallel,
                         ::testing::Values(Case{2, "pt", "bf16"}, Case{4, "pt", "bf16"},
                                           Case{2, "safetensors", "f32"},
                                           Case{4, "safetensors", "f32"}, Case{1, "pt", "bf16"},
                                           // Distributed checkpoints saved by 2 and 4 ranks,
                                           // loaded by 1, 2 and 4 (torch 2.x: the torch2 run).
                                           Case{1, "dcp", "f32", 4}, Case{2, "dcp", "bf16", 4},
                                           Case{4, "dcp", "f32", 2}, Case{2, "dcp", "f32", 2}),
                         [](const auto& p) {
                           return "np" + std::to_string(p.param.np) + "_" + p.param.format + "_" +
                                  p.param.dtype +
                                  (std::string(p.param.format) == "dcp"
                                       ? "_saved" + std::to_string(p.param.save_world)
                                       : std::string());
                         });

}  // namespace
