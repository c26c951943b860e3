#pragma once
// Inputs of the tool's commands: a path, or `-` for standard input (mapped
// when redirected from a file; a pipe is read into memory, within
// Limits::max_stdin_bytes).

#include <string>

#include <CLI/CLI.hpp>

#include "torchport/formats/open.hpp"

namespace torchport::cli {

/// A path that exists, or `-`.
CLI::Validator existing_path_or_stdin();
/// True for `-`.
inline bool is_stdin(const std::string& path) {
  return path == "-";
}
/// How a message names the input: "<stdin>" for `-`.
inline std::string display_name(const std::string& path) {
  return is_stdin(path) ? "<stdin>" : path;
}
/// Standard input's bytes, named "<stdin>": mapped when it is redirected
/// from a file, else read into memory. \throws Error(limit_exceeded) when a
/// pipe brings more than `limits.max_stdin_bytes`, Error(io) when it cannot
/// be read.
Source read_stdin(const Limits& limits);
/// `open(path)`, or for `-` the catalogue of standard input's bytes.
TensorCatalog open_input(const std::string& path, const OpenOptions& options = {});

}  // namespace torchport::cli
