// differential_dump: torchport's reading of many files in one process, for
// the differential suite (tests/differential/README.md).
//
// Reads file paths from stdin, one per line. For each, prints one JSON line
// (flushed, so a runner that sees the process die knows which file did it):
//
//   {"path": ..., "open": {"ok": true, "format": "pytorch-zip", "tensors": [
//        {"name", "dtype" (torch's name: "float32"), "shape", "strides",
//         "offset", "storage" (index of the first tensor on the same storage,
//         -1 for an empty storage), "storage_nbytes", "sha256" (the elements
//         in C order, native byte order; "" when not computed)}, ...]}
//        or {"ok": false, "code": "corrupt", "message": ...},
//    "scan": {"verdict": "clean", "format": ..., "reason": ...}}
//
// Options (the ecosystem corpus uses them): --profile NAME and --allow
// PATTERN, each repeatable, set OpenOptions::profiles and ::allow for both
// the reading and the scan; the scan's JSON then also carries "needs" and
// "add_safe_globals" (what torch >= 2.6's default torch.load would need).
//
// Nothing here decides whether torchport is right: run.py compares this with
// torch's reading of the same file.

#include <cstdint>
#include <exception>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/fixtures.hpp"
#include "torchport/core/dtype.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/scan.hpp"

namespace {

using nlohmann::json;

// Tensors whose bytes exceed this are listed without a hash (mutants are small).
constexpr std::uint64_t kMaxHashBytes = std::uint64_t{256} << 20;

json error_json(const std::string& code, const std::string& message) {
  return json{{"ok", false}, {"code", code}, {"message", message}};
}

torchport::OpenOptions g_options;  // from the command line

json read_open(const std::string& path) {
  try {
    const torchport::TensorCatalog catalog =
        torchport::open(std::filesystem::path(path), g_options);
    json tensors = json::array();
    std::map<const torchport::Storage*, std::int64_t> first_user;
    std::int64_t index = 0;
    for (const auto& [name, t] : catalog.tensors()) {
      json j;
      j["name"] = name;
      j["dtype"] = std::string(torchport::dtype_torch_name(t.dtype()));
      j["shape"] = t.shape();
      if (t.is_sparse()) {
        // Compared by layout and dense values, as torch's side does.
        j["layout"] =
            "torch." + std::string(torchport::SparseParts::layout_name(t.sparse()->layout));
        try {
          j["sha256"] =
              t.nbytes() <= kMaxHashBytes ? torchport::test::tensor_sha256(t.to_dense()) : "";
        } catch (const torchport::Error& e) {
          return error_json(std::string(torchport::error_code_name(e.code())), e.what());
        }
        tensors.push_back(std::move(j));
        ++index;
        continue;
      }
      j["strides"] = t.strides();
      j["offset"] = t.storage_offset();
      const auto* storage = t.storage().get();
      const std::uint64_t storage_bytes = storage ? storage->nbytes() : 0;
      j["storage_nbytes"] = storage_bytes;
      if (storage == nullptr || storage_bytes == 0) {
        j["storage"] = -1;
      } else {
        const auto [it, fresh] = first_user.emplace(storage, index);
        j["storage"] = it->second;
      }
      std::string hash;
      try {
        if (t.nbytes() <= kMaxHashBytes) hash = torchport::test::tensor_sha256(t);
      } catch (const torchport::Error& e) {
        // Reading the bytes failed (a deferred record that does not inflate):
        // torchport refuses the file, as torch.load would fail to read it.
        return error_json(std::string(torchport::error_code_name(e.code())), e.what());
      }
      j["sha256"] = hash;
      tensors.push_back(std::move(j));
      ++index;
    }
    return json{{"ok", true},
                {"format", std::string(catalog.format_name())},
                {"tensors", std::move(tensors)}};
  } catch (const torchport::Error& e) {
    return error_json(std::string(torchport::error_code_name(e.code())), e.what());
  } catch (const std::exception& e) {
    return error_json("exception", e.what());  // a library bug: never escapes on input
  }
}

json read_scan(const std::string& path) {
  try {
    const torchport::ScanReport r = torchport::scan(std::filesystem::path(path), g_options);
    json out{{"verdict", std::string(torchport::scan_verdict_name(r.verdict))},
             {"format", r.format},
             {"reason", r.reason()}};
    // Whether torch >= 2.6's default torch.load loads it (null: not judged).
    if (r.torch_weights_only && r.torch_weights_only->loads)
      out["weights_only_loads"] = *r.torch_weights_only->loads;
    if (r.torch_weights_only) {
      out["weights_only_why"] = r.torch_weights_only->why;
      out["needs"] = r.torch_weights_only->needs;
      out["add_safe_globals"] =
          r.torch_weights_only->why.empty()
              ? torchport::add_safe_globals_line(r, r.torch_weights_only->needs)
              : std::string();
      // Release by release, for the torch the run compares with.
      auto& releases = out["weights_only_releases"] = json::array();
      for (const auto& x : r.torch_weights_only->releases)
        releases.push_back({{"first", x.first},
                            {"last", x.last},
                            {"loads", x.loads ? json(*x.loads) : json(nullptr)},
                            {"why", x.why}});
    }
    return out;
  } catch (const torchport::Error& e) {
    return json{{"verdict", "error"}, {"format", ""}, {"reason", e.what()}};
  } catch (const std::exception& e) {
    return json{{"verdict", "exception"}, {"format", ""}, {"reason", e.what()}};
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--profile") {
      g_options.profiles.emplace_back(argv[i + 1]);
    } else if (flag == "--allow") {
      g_options.allow.emplace_back(argv[i + 1]);
    } else {
      std::cerr << "differential_dump: unknown option " << flag << '\n';
      return 2;
    }
  }
  std::string path;
  while (std::getline(std::cin, path)) {
    if (path.empty()) continue;
    json out;
    out["path"] = path;
    out["open"] = read_open(path);
    out["scan"] = read_scan(path);
    std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << '\n' << std::flush;
  }
  return 0;
}
