#pragma once
// The subcommands of the torchport tool. Each registers its subcommand and
// options on the app and returns it with the function that runs it.

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "torchport/core/error.hpp"

namespace torchport::cli {

/// A command line the tool cannot act on (exit status 2), found before any
/// input is read. Everything about a file's content is a torchport::Error:
/// exit status 1 for inspect, load and convert (2 when the file cannot be
/// read at all, ErrorCode::io), 2 for scan and diff (main.cpp).
struct UsageError : std::runtime_error {
  /// `path`: the file the message is about (an output that exists), printed
  /// first as for an input ("torchport: PATH: what"); else the message is
  /// printed as "torchport: error: MESSAGE".
  explicit UsageError(const std::string& message, std::string path = {})
      : std::runtime_error(message), path_(std::move(path)) {}
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

/// Runs `check` (the parsing of option values), turning a torchport::Error
/// it throws into a UsageError (its message and place).
template <class F>
auto usage_checked(F&& check) {
  try {
    return check();
  } catch (const Error& e) {
    throw UsageError(e.message(), e.where());
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
