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
//
// A folder without an index is read as the libraries that lay it out read
// it: its one weights file, by the names they save it under.

#include <algorithm>
#include <map>
#include <optional>
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

// The folder's *.index.json, or nothing.
std::optional<fs::path> find_index(const fs::path& dir) {
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
  if (found.empty()) return std::nullopt;
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

// The weights file of a folder without an index, as the library that laid
// it out loads it. Each library saves under one stem and loads its
// safetensors file before its pickle (transformers' from_pretrained, which
// sentence-transformers and timm's save_for_hf folders go through too:
// model.safetensors, then pytorch_model.bin; PEFT's adapter_model.*;
// diffusers' diffusion_pytorch_model.*). A folder holding the files of two
// of them (a model and an adapter) is refused: which one a user means, only
// the library they call says.
std::optional<fs::path> folder_weights(const fs::path& dir) {
  static constexpr std::pair<std::string_view, std::string_view> kLayouts[] = {
      {"model.safetensors", "pytorch_model.bin"},
      {"adapter_model.safetensors", "adapter_model.bin"},
      {"diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.bin"},
  };
  std::vector<fs::path> picks;
  std::error_code ec;
  for (const auto& [first, second] : kLayouts)
    for (const std::string_view name : {first, second})
      if (fs::is_regular_file(dir / name, ec) || fs::is_symlink(dir / name, ec)) {
        picks.push_back(dir / name);
        break;
      }
  if (picks.empty()) return std::nullopt;
  if (picks.size() > 1)
    throw Error(ErrorCode::ambiguous,
                "the folder holds the weights of " + std::to_string(picks.size()) +
                    " libraries' layouts (" + picks[0].filename().string() + ", " +
                    picks[1].filename().string() +
                    "): which one a loader reads depends on the library; open the file you mean",
                {}, std::nullopt, dir.string());
  return picks.front();
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

TensorCatalog read_sharded(const fs::path& path, const OpenOptions& options, Walker& walker) {
  std::error_code ec;
  fs::path index = path;
  if (fs::is_directory(path, ec)) {
    if (const auto found = find_index(path)) {
      index = *found;
    } else if (const auto weights = folder_weights(path)) {
      // A model folder: its weights file, confined to the folder as a
      // shard is, read as a file of its own.
      const std::string name = weights->filename().string();
      OpenOptions file_options = options;
      file_options.format.reset();
      TensorCatalog cat =
          walk(Source::map_file(resolve_shard(shard_root(path), path, name), options.map),
               file_options, walker);
      cat.set_metadata("torchport.folder_file", name);
      return cat;
    } else {
      throw Error(ErrorCode::not_a_checkpoint,
                  "the folder holds no *.index.json (the index of a Hugging Face sharded "
                  "checkpoint), no distributed checkpoint's .metadata and no model.safetensors, "
                  "pytorch_model.bin, adapter_model.safetensors/.bin or "
                  "diffusion_pytorch_model.safetensors/.bin; to read another file in it, open "
                  "that file",
                  {}, std::nullopt, path.string());
    }
  }
  const fs::path dir = index.parent_path();
  const fs::path confine = shard_root(dir);
  return read_shard_index(
      Source::map_file(index, options.map),
      [&](const std::string& shard) {
        return Source::map_file(resolve_shard(confine, dir, shard), options.map);
      },
      options, walker);
}

TensorCatalog read_shard_index(const Source& src,
                               const std::function<Source(const std::string&)>& open_shard,
                               const OpenOptions& options, Walker& walker) {
  const std::string where = src.name();
  if (src.size() > options.limits.max_header_bytes)
    throw Error(ErrorCode::limit_exceeded,
                "index of " + std::to_string(src.size()) +
                    " bytes exceeds Limits::max_header_bytes = " +
                    std::to_string(options.limits.max_header_bytes),
                {}, 0, where);
  const Source index_bytes = src.fetch(0, src.size());
  const std::string_view text(reinterpret_cast<const char*>(index_bytes.bytes().data()),
                              src.size());
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

  OpenOptions shard_options = options;
  shard_options.format.reset();
  std::vector<NamedTensor> all;
  all.reserve(shard_of.size());
  std::map<std::string, std::string> metadata;
  bool all_safetensors = true;
  for (const auto& [shard, names] : names_in) {
    TensorCatalog cat;
    try {
      Source shard_source = open_shard(shard);
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
    all_safetensors = all_safetensors && cat.format() == Format::safetensors;
    // A shard of torch's HuggingFaceStorageWriter says where its tensors
    // lie in global ones: at offset zero it is the tensor itself (what the
    // writer's rank-0 layout holds); elsewhere a piece, which torch's
    // HuggingFaceStorageReader reads into a larger tensor and transformers
    // reads as the whole one.
    if (const auto info = dcp_sharding_info(cat, where + ": " + shard, options.limits))
      for (const auto& [name, offsets] : *info)
        if (cat.find(name) != nullptr &&
            std::any_of(offsets.begin(), offsets.end(), [](std::int64_t o) { return o != 0; }))
          throw Error(ErrorCode::ambiguous,
                      "shard '" + shard + "' is a piece of torch's distributed checkpoint: its " +
                          "DCP_SHARDING_INFO places this tensor at offsets " +
                          shape_to_string(offsets) +
                          " of a larger one (torch's HuggingFaceStorageReader reads it so), "
                          "where the index makes it a whole tensor (transformers reads it so); "
                          "refusing to pick one",
                      name, std::nullopt, where);
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
  return TensorCatalog::from_tensors(
      all_safetensors ? Format::sharded_safetensors : Format::sharded_pytorch, std::move(all),
      std::move(metadata));
}

}  // namespace torchport::formats
