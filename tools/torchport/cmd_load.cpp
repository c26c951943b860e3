// torchport load FILE [--mmap]: materialise every tensor and report speed.

#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "format.hpp"
#include "input.hpp"
#include "progress.hpp"
#include "torchport/formats/open.hpp"

namespace torchport::cli {
namespace {

struct LoadArgs {
  std::string file;
  bool mmap = false;
  bool quiet = false;
  bool verify = false;
  Trust trust;
};

int run_load(const LoadArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  MaterializeStats st;
  OpenOptions options;
  options.verify_crc = a.verify;
  apply_trust(a.trust, options);
  ProgressBar bar("loading");  // on a terminal, once it takes more than a second
  MaterializeProgress progress;
  if (!a.quiet)
    progress = [&bar](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
  const TensorCatalog loaded = materialize(
      open_input(a.file, options), a.mmap ? Residence::mapped : Residence::owned, &st, progress);
  bar.finish();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.quiet) return 0;
  fmt::print("{}, {} in {:.4f} s, {:.2f} GB/s, {}\n", counted(loaded.size(), "tensor"),
             human_bytes(st.bytes), s, s > 0 ? static_cast<double>(st.bytes) / s / 1e9 : 0.0,
             a.mmap ? fmt::format("mapped ({} left in the file)", human_bytes(st.mapped_bytes))
                    : std::string("owned"));
  return 0;
}

}  // namespace

Command add_load(CLI::App& app) {
  auto args = std::make_shared<LoadArgs>();
  CLI::App* sub =
      app.add_subcommand("load", "Read every tensor of a checkpoint and report the speed");
  sub->add_option("file", args->file, "Checkpoint file ('-': standard input)")->required();
  sub->add_flag("-q,--quiet", args->quiet, "Print nothing but errors: the exit status answers");
  sub->add_flag("--verify", args->verify,
                "Check every zip entry's CRC-32 (torch's zip files carry them); a mismatch names "
                "the entries");
  sub->add_flag("--mmap", args->mmap,
                "Leave tensors in the mapped file where possible (zero copy)");
  add_trust_options(sub, args->trust);
  sub->footer("Example:\n  torchport load resnet152.pt --mmap");
  return {sub, [args] { return run_load(*args); }};
}

}  // namespace torchport::cli
