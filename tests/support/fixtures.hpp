#pragma once
// Access to the committed fixtures and their expectation files.

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "torchport/core/tensor.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/io/source.hpp"

namespace torchport::test {

/// tests/fixtures/<relative>.
std::filesystem::path fixture(const std::string& relative);
/// Parses a JSON file.
nlohmann::json read_json(const std::filesystem::path& path);
/// Reads a whole file.
std::vector<std::byte> read_bytes(const std::filesystem::path& path);
/// A source over `bytes` (which must outlive it), named `name`.
inline Source borrow(const std::string& bytes, const std::string& name) {
  return Source::borrow(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
      name);
}
/// Writes a whole file (for tests that build bad inputs).
void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes);
/// SHA-256 of a tensor's elements in C order (what the fixture script hashes).
std::string tensor_sha256(const Tensor& t);
/// Expects the catalogue to hold exactly `want["tensors"]` (in order: name,
/// dtype name, shape, SHA-256 of the elements) and, when `want` has
/// "shared", each listed group of names to share one storage (the form the
/// fixture scripts write into their *.expected.json files).
void expect_tensors(const TensorCatalog& cat, const nlohmann::json& want);
/// A damaged fixture and the error it must give: an entry of a `bad/`
/// folder's expected.json ({"file", "code", "message"}).
struct BadCase {
  std::string file, code, message;
};
/// The entries of an expected.json of damaged fixtures.
std::vector<BadCase> bad_cases(const std::filesystem::path& expected_json);
/// `text` as a parameterised test's name: every character that is not a
/// letter or a digit becomes '_'.
std::string param_name(std::string text);
/// A fresh empty directory under the system temp dir, for one test.
std::filesystem::path temp_dir(const std::string& name);
/// The Python that runs torch for the interop tests: $TORCHPORT_PYTHON when
/// set (the `_torch2` variants set it to scripts/torch.sh 2.6 python3, torch
/// 2.6), else Debian 12's /usr/bin/python3 (torch 1.13).
std::string python();
/// Runs a shell command; returns its exit status and fills `output` with
/// stdout+stderr.
int run_command(const std::string& command, std::string* output = nullptr);
/// A field of /proc/self/status in KiB ("RssFile", "VmHWM", ...); -1 when
/// the kernel does not report it.
long status_kib(const std::string& field);
/// This process's resident file-backed pages, in KiB.
inline long rss_file_kib() {
  return status_kib("RssFile");
}
/// Resets the peak resident set (VmHWM) to the current one; false when the
/// kernel does not let it.
bool reset_peak_rss();

}  // namespace torchport::test
