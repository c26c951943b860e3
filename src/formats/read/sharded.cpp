// Hugging Face sharded checkpoints (transformers' modeling_utils:
// `load_sharded_checkpoint`, and huggingface_hub's `split_torch_state_dict_
// into_shards`): an index `model.safetensors.index.json` or
// `pytorch_model.bin.index.json`
//
//   {"metadata": {"total_size": 13476839424},
//    "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors", ...}}
//
// next to the shard files it names. The index is the table of contents: we
// require it and the shards to agree exactly, and shard names to be plain
// file names in the index's directory (an index must not reach elsewhere).

#include <algorithm>
#include <map>
#include <set>

#include "formats/read/readers.hpp"
#include "formats/read/shards.hpp"
#include "formats/read/strict_json.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/format.hpp"

namespace torchport::formats {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr std::string_view kIndexSuffix = ".index.json";

fs::path find_index(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > kIndexSuffix.size() && name.ends_with(kIndexSuffix) &&
        it->is_regular_file(ec))
      found.push_back(it->path());
  }
  if (ec)
    throw Error(ErrorCode::io, "cannot list the directory: " + ec.message(), {}, std::nullopt,
                dir.string());
  if (found.empty())
    throw Error(ErrorCode::not_a_checkpoint,
                "the directory holds no *.index.json (the index of a Hugging Face sharded "
                "checkpoint); to read a single checkpoint file in it, open that file",
                {}, std::nullopt, dir.string());
  if (found.size() > 1) {
    std::sort(found.begin(), found.end());
    std::string names;
    for (const auto& f : found) names += (names.empty() ? "" : ", ") + f.filename().string();
    throw Error(ErrorCode::invalid_argument,
                "the directory holds " + std::to_string(found.size()) + " indexes (" + names +
                    "); open the one you mean",
                {}, std::nullopt, dir.string());
  }
  return found.front();
}

}  // namespace

// A shard must be a plain file name: the index may only name files next to it.
bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\\') == std::string::npos && s.find('\0') == std::string::npos;
}

// The folder every shard's real path must lie in: the index's directory, or,
// when that is a snapshot of the Hugging Face hub cache
// (`models--org--name/snapshots/<revision>/`, whose files are symlinks to
// `../../blobs/<hash>`), the repository's cache folder that holds both.
fs::path shard_root(const fs::path& dir) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir.empty() ? fs::path(".") : dir, ec);
  if (ec)
    throw Error(ErrorCode::io, "cannot resolve the checkpoint's directory: " + ec.message(), {},
                std::nullopt, dir.string());
  if (real.has_parent_path() && real.parent_path().filename() == "snapshots" &&
      real.parent_path().has_parent_path())
    return real.parent_path().parent_path();
  return real;
}

// The shard's real path, which must lie inside `root`: a symlink may not
// lead the reader out of the checkpoint (to /etc/passwd, another user's
// file...). Nothing of a file outside is read, nor quoted in the error.
fs::path resolve_shard(const fs::path& root, const fs::path& dir, const std::string& shard) {
  return resolve_inside(root, dir / shard, false);
}

fs::path resolve_inside(const fs::path& root, const fs::path& path, bool directory) {
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (ec) throw Error(ErrorCode::io, "cannot open: " + ec.message());
  const auto [r, p] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
  if (r != root.end() || p == real.end())
    throw Error(ErrorCode::invalid_argument,
                "a link to a file outside the checkpoint's directory (" + root.string() +
                    "); it is not read");
  // Only a regular file is opened: a FIFO would block the reader, a device
  // or a directory is no shard.
  if (directory ? !fs::is_directory(real, ec) : !fs::is_regular_file(real, ec))
    throw Error(ErrorCode::invalid_argument,
                directory ? "not a directory; it is not read"
                          : "not a regular file (a FIFO, device, socket or directory); it is "
                            "not read");
  return real;
}

bool is_sharded_path(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return true;
  const std::string name = path.filename().string();
  return name.size() > kIndexSuffix.size() && name.ends_with(kIndexSuffix);
}

TensorCatalog read_sharded(const fs::path& path, const OpenOptions& options, Walker& walker) {
  std::error_code ec;
  const fs::path index = fs::is_directory(path, ec) ? find_index(path) : path;
  const fs::path dir = index.parent_path();
  const Source src = Source::map_file(index, options.map);
  const std::string where = src.name();
  if (src.size() > options.limits.max_header_bytes)
    throw Error(ErrorCode::limit_exceeded,
                "index of " + std::to_string(src.size()) +
                    " bytes exceeds Limits::max_header_bytes = " +
                    std::to_string(options.limits.max_header_bytes),
                {}, 0, where);
  const std::string_view text(reinterpret_cast<const char*>(src.bytes().data()), src.size());
  if (walker.lists_parts()) walker.part({PartRole::metadata, where, 0, src.size(), 0, {}});
  const json root = parse_strict_json(text, "index", 0, where, 8, options.limits.max_nodes);
  if (!root.is_object())
    throw Error(ErrorCode::corrupt,
                "index is a JSON " + std::string(root.type_name()) + ", not an object", {}, 0,
                where);
  const auto wm = root.find("weight_map");
  if (wm == root.end() || !wm->is_object())
    throw Error(
        ErrorCode::corrupt,
        "index has no \"weight_map\" object (tensor name -> shard file); not a Hugging Face "
        "sharded checkpoint index?",
        {}, 0, where);

  // name -> shard, and each shard's names in index order.
  std::map<std::string, std::string> shard_of;
  std::map<std::string, std::vector<std::string>> names_in;  // sorted by shard file name
  for (const auto& [name, v] : wm->items()) {
    // The key's offset only for a message: searching the text for every
    // key would make a large index quadratic.
    const std::string& key =
        name;  // (a structured binding cannot be captured before C++20 in clang 14)
    const auto at = [&] { return json_key_offset(text, key, 0); };
    if (!v.is_string())
      throw Error(ErrorCode::corrupt, "weight_map value " + v.dump() + " is not a shard file name",
                  name, at(), where);
    std::string shard = v.get<std::string>();
    if (!plain_file_name(shard))
      throw Error(
          ErrorCode::corrupt,
          "shard '" + shard +
              "' is not a plain file name; an index may only name files in its own directory",
          name, at(), where);
    if (shard_of.size() >= options.limits.max_tensors)
      throw Error(
          ErrorCode::limit_exceeded,
          "more tensors than Limits::max_tensors = " + std::to_string(options.limits.max_tensors),
          {}, at(), where);
    names_in[shard].push_back(name);
    shard_of.emplace(name, std::move(shard));
  }

  const fs::path confine = shard_root(dir);
  OpenOptions shard_options = options;
  shard_options.format.clear();
  std::vector<NamedTensor> all;
  all.reserve(shard_of.size());
  std::map<std::string, std::string> metadata;
  bool all_safetensors = true;
  for (const auto& [shard, names] : names_in) {
    TensorCatalog cat;
    try {
      Source shard_source = Source::map_file(resolve_shard(confine, dir, shard), options.map);
      walker.enter(shard);
      try {
        cat = walk(shard_source, shard_options, walker);
      } catch (...) {
        walker.leave();
        throw;
      }
      walker.leave();
    } catch (const Error& e) {
      throw Error(e.code(),
                  "shard '" + shard + "' (" + std::to_string(names.size()) + " tensors, e.g. '" +
                      names.front() + "'): " + e.message(),
                  e.key(), e.offset(), where + ": " + (e.where().empty() ? shard : e.where()));
    }
    all_safetensors = all_safetensors && parse_format(cat.format()) == Format::safetensors;
    for (const auto& [name, t] : cat.tensors()) {
      const auto it = shard_of.find(name);
      if (it == shard_of.end())
        throw Error(ErrorCode::corrupt,
                    "shard '" + shard + "' holds this tensor but the index does not list it", name,
                    std::nullopt, where);
      if (it->second != shard)
        throw Error(ErrorCode::corrupt,
                    "shard '" + shard + "' holds this tensor but the index assigns it to '" +
                        it->second + "'",
                    name, std::nullopt, where);
      all.push_back({name, t});
    }
    for (const auto& name : names)
      if (cat.find(name) == nullptr)
        throw Error(ErrorCode::corrupt,
                    "the index assigns this tensor to shard '" + shard +
                        "', which has no such tensor (it holds " + std::to_string(cat.size()) +
                        "); incomplete download or stale index?",
                    name, json_key_offset(text, name, 0), where);
    for (const auto& [k, v] : cat.metadata()) metadata.emplace(k, v);
  }
  return TensorCatalog::from_tensors(all_safetensors ? "sharded-safetensors" : "sharded-pytorch",
                                     std::move(all), std::move(metadata));
}

}  // namespace torchport::formats
