// torchport: inspect, load and convert PyTorch checkpoints without Python.
//
// Exit status, one convention for every command: 0 success (scan clean,
// diff equal); 1 the answer is no (scan unsafe, diff different) or, for
// inspect, load and convert, the input was refused (one message on stderr
// naming the file, key path and byte offset where they apply); 2 trouble:
// usage errors (a command line that cannot be acted on, found before any
// input is read: UsageError and CLI11's), inputs that are missing,
// unreadable or no checkpoint at all (ErrorCode::io, not_a_checkpoint), and
// for scan and diff any input they cannot read to the end. Every message
// starts with "torchport:"; one about a file reads
// "torchport: PATH: what: why", PATH as the user typed it.

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "input.hpp"
#include "torchport/core/error.hpp"
#include "torchport/io/atomic_file.hpp"
#include "torchport/version.hpp"

namespace {
std::string error_word() {
  return torchport::cli::styled("error", torchport::cli::Style::red,
                                torchport::cli::colour_enabled(2));
}
}  // namespace

int main(int argc, char** argv) {
  // Ctrl-C, SIGTERM or SIGHUP during a write leave no temporary file.
  torchport::AtomicFile::remove_temporaries_on_signals();
  CLI::App app{"torchport: read PyTorch checkpoints safely, without Python or libtorch"};
  app.set_version_flag("--version", std::string("torchport ") + torchport::kVersion);
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success (scan clean, diff equal); 1 the answer is no (unsafe, different) or\n"
      "the input was refused; 2 trouble (usage; missing, unreadable or non-checkpoint inputs; for\n"
      "scan and diff, inputs they cannot read). `torchport help COMMAND` or `man torchport` for "
      "more.");
  const torchport::cli::Command commands[] = {
      torchport::cli::add_inspect(app), torchport::cli::add_load(app),
      torchport::cli::add_convert(app), torchport::cli::add_diff(app),
      torchport::cli::add_scan(app),
  };
  // torchport help [COMMAND]: what --help prints.
  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "Print the help of torchport or of one command");
  help->add_option("command", help_topic, "A command: inspect, load, convert, diff or scan");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "torchport: %s: %s\nRun with --help for more information.\n",
                 error_word().c_str(), e.what());
    return 2;
  }
  // scan and diff answer a question: an input they cannot read is trouble
  // (2), not the answer no (1).
  bool answers = false;
  if (help->parsed()) {
    if (help_topic.empty()) {
      std::fputs(
          app.get_formatter()->make_help(&app, "torchport", CLI::AppFormatMode::Normal).c_str(),
          stdout);
      return 0;
    }
    for (const auto& c : commands)
      if (c.app->get_name() == help_topic) {
        std::fputs(c.app->get_formatter()
                       ->make_help(c.app, "torchport " + help_topic, CLI::AppFormatMode::Normal)
                       .c_str(),
                   stdout);
        return 0;
      }
    std::fprintf(stderr, "torchport: %s: no command '%s' (inspect, load, convert, diff, scan)\n",
                 error_word().c_str(), help_topic.c_str());
    return 2;
  }
  try {
    for (const auto& c : commands)
      if (c.app->parsed()) {
        answers = c.app->get_name() == "scan" || c.app->get_name() == "diff";
        return c.run();
      }
    return 2;
  } catch (const torchport::cli::UsageError& e) {
    if (e.path().empty())
      std::fprintf(stderr, "torchport: %s: %s\n", error_word().c_str(), e.what());
    else
      std::fprintf(stderr, "torchport: %s: %s\n", e.path().c_str(), e.what());
    return 2;
  } catch (const torchport::Error& e) {
    std::fprintf(stderr, "torchport: %s\n", torchport::cli::error_line(e).c_str());
    return answers || torchport::cli::is_trouble(e) ? 2 : 1;
  } catch (...) {
    // Never a bare std:: message: out of memory and faults of ours become
    // an Error with context, like every other failure.
    try {
      torchport::rethrow_as_error("running the command");
    } catch (const torchport::Error& e) {
      std::fprintf(stderr, "torchport: %s\n", torchport::cli::error_line(e).c_str());
    }
    return 1;
  }
}
