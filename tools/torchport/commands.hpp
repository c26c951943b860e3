#pragma once
// The subcommands of the torchport tool. Each registers its subcommand and
// options on the app and returns it with the function that runs it.

#include <functional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

namespace torchport::cli {

/// A command line the tool cannot act on (exit status 2), found before any
/// input is read. Everything about a file's content is a torchport::Error:
/// exit status 1 for inspect, load and convert (2 when the file cannot be
/// read at all, ErrorCode::io), 2 for scan and diff (main.cpp).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs `check` (the parsing of option values), turning a torchport::Error
/// it throws into a UsageError.
template <class F>
auto usage_checked(F&& check) {
  try {
    return check();
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

struct Command {
  CLI::App* app = nullptr;   ///< the subcommand
  std::function<int()> run;  ///< returns the exit status
};

Command add_inspect(CLI::App& app);
Command add_load(CLI::App& app);
Command add_convert(CLI::App& app);
Command add_diff(CLI::App& app);
Command add_scan(CLI::App& app);

}  // namespace torchport::cli
