#pragma once
// Inputs of the tool's commands: a path, or `-` for standard input (mapped
// when redirected from a file; a pipe is read into memory, within
// Limits::max_stdin_bytes).

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"

namespace torchport::cli {

/// What a command trusts beyond the allow-list: `--profile NAME` (a profile
/// of a library's classes, OpenOptions::profiles) and `--allow PATTERN`
/// (OpenOptions::allow), each repeatable.
struct Trust {
  std::vector<std::string> profiles;
  std::vector<std::string> allow;
};
/// Adds `--profile` (and, with `allow`, `--allow`) to `sub`.
void add_trust_options(CLI::App* sub, Trust& trust, bool allow = true);
/// Puts `trust` into `options`, checked. \throws UsageError for an unknown
/// profile or a malformed pattern.
void apply_trust(const Trust& trust, OpenOptions& options);

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
/// `options` with `OpenOptions::remote` set, when the tool was built with
/// torchport::remote: inputs may be URLs.
OpenOptions with_remote(OpenOptions options);
/// `open(path)` (a URL too), or for `-` the catalogue of standard input's bytes. The
/// path is noted as an input (`note_input`).
TensorCatalog open_input(const std::string& path, const OpenOptions& options = {});

/// Notes `path`, as the user typed it, as an input of the command, so that
/// `error_line` names the file as typed (the library names a file by its
/// base name).
void note_input(const std::string& path);

/// The tool's one line for an error, after "torchport: ": `PATH: what: why`
/// with the key and byte offset where they apply (`PATH: 'key': what: why
/// (byte N)`). PATH is the file as the user typed it: the error's own place
/// when it names a noted input's file (or a file in a noted directory),
/// else that place, else the first noted input.
std::string error_line(const Error& e);

/// True for errors about an input that is missing, unreadable or no
/// checkpoint at all (ErrorCode::io, not_a_checkpoint): trouble, exit
/// status 2, for every command.
bool is_trouble(const Error& e);

}  // namespace torchport::cli
