// torchport: inspect, load and convert PyTorch checkpoints without Python.
//
// Exit status: 0 success, 1 bad input (one message on stderr naming the key
// path and byte offset where they apply), 2 usage errors: a command line
// that cannot be acted on, found before any input is read (UsageError).

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "torchport/core/error.hpp"
#include "torchport/version.hpp"

namespace {
std::string error_word() {
  return torchport::cli::styled("error", torchport::cli::Style::red,
                                torchport::cli::colour_enabled(2));
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"torchport: read PyTorch checkpoints safely, without Python or libtorch"};
  app.set_version_flag("--version", std::string("torchport ") + torchport::kVersion);
  app.require_subcommand(1);
  const torchport::cli::Command commands[] = {
      torchport::cli::add_inspect(app), torchport::cli::add_load(app),
      torchport::cli::add_convert(app), torchport::cli::add_diff(app),
      torchport::cli::add_scan(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
    return 2;
  } catch (const torchport::cli::UsageError& e) {
    std::fprintf(stderr, "torchport: %s: %s\n", error_word().c_str(), e.what());
    return 2;
  } catch (const torchport::Error& e) {
    // Whatever its code: the command line was understood, the input was not.
    std::fprintf(stderr, "torchport: %s: %s\n", error_word().c_str(), e.what());
    return 1;
  } catch (...) {
    // Never a bare std:: message: out of memory and faults of ours become
    // an Error with context, like every other failure.
    try {
      torchport::rethrow_as_error("running the command");
    } catch (const torchport::Error& e) {
      std::fprintf(stderr, "torchport: %s: %s\n", error_word().c_str(), e.what());
    }
    return 1;
  }
}
