#pragma once
// The subcommands of the torchport tool. Each registers its subcommand and
// options on the app and returns it with the function that runs it.

#include <functional>

#include <CLI/CLI.hpp>

namespace torchport::cli {

struct Command {
  CLI::App* app = nullptr;        ///< the subcommand
  std::function<int()> run;       ///< returns the exit status
};

Command add_inspect(CLI::App& app);
Command add_load(CLI::App& app);
Command add_convert(CLI::App& app);
Command add_diff(CLI::App& app);
Command add_scan(CLI::App& app);

}  // namespace torchport::cli
