// torch.distributed.checkpoint's Hugging Face storage, sharded
// (torch/distributed/checkpoint/hf_storage.py, _hf_utils.py, 2.8 to 2.14):
// HuggingFaceStorageWriter(save_distributed=True) has each rank write its
// pieces of the state dict as one safetensors file,
//
//   DIR/shard-<rank+1>-model-<i>-of-<n>.safetensors    (5 digits each)
//
// whose __metadata__ carries DCP_SHARDING_INFO, a JSON object
// {fqn: {"saved_offsets": [o0, o1, ...]}}: where each of the file's tensors
// lies in the global one. There is no .metadata and no index:
// HuggingFaceStorageReader.read_metadata lists every *.safetensors file of
// the folder and makes each tensor of each file one chunk (offsets from
// DCP_SHARDING_INFO, sizes its shape) of the global tensor of that name,
// whose size is the largest offset + size per dimension and whose dtype is
// the first chunk's. (With enable_consolidation the shards go to
// DIR/sharded/ and DIR gets an ordinary Hugging Face checkpoint, which
// read_sharded reads.)
//
// torch checks none of it: a file without DCP_SHARDING_INFO is placed at
// offset 0 (its consolidation refuses it), offsets of the wrong rank are
// zipped short, chunks may overlap (the later file wins) or leave holes
// (torch.empty's memory), and chunks of another dtype are converted in
// copy_. We refuse each of these; a chunk lost with its file at the end of
// a dimension shrinks the tensor in torch's reading and ours alike (no file
// records the global shape).

#include <algorithm>
#include <map>

#include "formats/read/dcp.hpp"
#include "formats/read/readers.hpp"
#include "formats/read/shards.hpp"
#include "formats/read/strict_json.hpp"

namespace torchport::formats {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::ordered_json;
constexpr std::string_view kSuffix = ".safetensors";  // _hf_utils.SUFFIX
constexpr const char* kShardingInfo = "DCP_SHARDING_INFO";

// The folder's *.safetensors files (by name, as os.listdir lists them,
// then sorted: torch's order is the directory's).
std::vector<std::string> safetensors_files(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.ends_with(kSuffix)) out.push_back(std::move(name));
  }
  if (ec)
    throw Error(ErrorCode::io, "cannot list the directory: " + ec.message(), {}, std::nullopt,
                dir.string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<std::map<std::string, Shape>> dcp_sharding_info(const TensorCatalog& cat,
                                                              const std::string& where,
                                                              const Limits& limits) {
  const auto it = cat.metadata().find(kShardingInfo);
  // HuggingFaceStorageReader: `if extra_metadata and extra_metadata.get(KEY)`.
  if (it == cat.metadata().end() || it->second.empty()) return std::nullopt;
  json info;
  try {
    info = parse_strict_json(it->second, "DCP_SHARDING_INFO", 0, where, 4, limits.max_nodes);
  } catch (const Error& e) {
    throw Error(e.code(), "in its __metadata__: " + e.message(), e.key(), std::nullopt, where);
  }
  if (!info.is_object())
    throw Error(ErrorCode::corrupt,
                "its __metadata__'s DCP_SHARDING_INFO is a JSON " + std::string(info.type_name()) +
                    ", not an object of tensors",
                {}, std::nullopt, where);
  std::map<std::string, Shape> out;
  for (const auto& item : info.items()) {
    const std::string& fqn = item.key();  // not a structured binding: the lambda captures it
    const auto& v = item.value();
    const auto bad = [&](const std::string& why) {
      throw Error(ErrorCode::corrupt, "DCP_SHARDING_INFO: " + why, fqn, std::nullopt, where);
    };
    if (!v.is_object()) bad("the entry is a JSON " + std::string(v.type_name()));
    const auto o = v.find("saved_offsets");
    if (o == v.end() || !o->is_array()) bad("the entry has no \"saved_offsets\" list");
    Shape offsets;
    for (const auto& x : *o) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
          (x.is_number_unsigned() && x.get<std::uint64_t>() > INT64_MAX))
        bad("saved_offsets " + o->dump() + " holds " + x.dump() + ", not an offset");
      offsets.push_back(x.get<std::int64_t>());
    }
    out.emplace(fqn, std::move(offsets));
  }
  return out;
}

TensorCatalog read_dcp_safetensors(const fs::path& path, const OpenOptions& options,
                                   Walker& walker) {
  auto f = std::make_shared<dcp::Folder>();
  f->dir = path;
  f->root = shard_root(path);
  f->options = options;
  f->options.format.reset();
  f->where = path.string();
  const std::vector<std::string> files = safetensors_files(path);
  if (files.empty())
    f->fail(ErrorCode::not_a_checkpoint,
            "the directory holds no *.safetensors file (the shards of torch's "
            "HuggingFaceStorageWriter)");

  // fqn -> its chunks, in the order torch's read_metadata meets them.
  std::vector<std::pair<std::string, dcp::TensorPlan>> plans;
  std::map<std::string, std::size_t> plan_of;
  for (const std::string& file : files) {
    TensorCatalog cat;
    const Source& src = f->file(file, {});
    walker.enter(file);
    try {
      cat = read_safetensors(src, f->options, walker);
    } catch (const Error& e) {
      walker.leave();
      throw Error(e.code(), "shard '" + file + "': " + e.message(), e.key(), e.offset(),
                  e.where().empty() ? (f->dir / file).string() : e.where());
    }
    walker.leave();
    const auto found = dcp_sharding_info(cat, (f->dir / file).string(), options.limits);
    if (!found)
      f->fail(ErrorCode::corrupt,
              "'" + file +
                  "' has no DCP_SHARDING_INFO in its __metadata__ (where its tensors lie in the "
                  "global ones): not a shard torch's HuggingFaceStorageWriter wrote, or one of "
                  "another checkpoint (torch's consolidation refuses such a folder)");
    const std::map<std::string, Shape>& info = *found;
    for (const auto& [fqn, t] : cat.tensors()) {
      const auto at = info.find(fqn);
      if (at == info.end())
        f->fail(ErrorCode::corrupt,
                "'" + file +
                    "' holds this tensor but its DCP_SHARDING_INFO does not say where "
                    "it lies in the global tensor",
                fqn);
      const Shape& offsets = at->second;
      if (offsets.size() != t.shape().size())
        f->fail(ErrorCode::corrupt,
                "'" + file + "' holds a piece of shape " + shape_to_string(t.shape()) +
                    " whose saved_offsets " + shape_to_string(offsets) +
                    " have another number of dimensions",
                fqn);
      auto [slot, fresh] = plan_of.emplace(fqn, plans.size());
      if (fresh) {
        if (plans.size() >= options.limits.max_tensors)
          f->fail(ErrorCode::limit_exceeded, "more tensors than Limits::max_tensors = " +
                                                 std::to_string(options.limits.max_tensors));
        dcp::TensorPlan p;
        p.dtype = t.dtype();
        p.size = Shape(offsets.size(), 0);
        plans.emplace_back(fqn, std::move(p));
      }
      dcp::TensorPlan& p = plans[slot->second].second;
      if (p.size.size() != offsets.size())
        f->fail(ErrorCode::corrupt,
                "'" + file + "' holds a " + std::to_string(offsets.size()) +
                    "-dimensional piece of a tensor whose other pieces have " +
                    std::to_string(p.size.size()) + " dimensions",
                fqn);
      if (t.dtype() != p.dtype)
        f->fail(ErrorCode::corrupt,
                "'" + file + "' holds a " + std::string(dtype_name(t.dtype())) +
                    " piece of a tensor whose first piece is " + std::string(dtype_name(p.dtype)) +
                    " (torch would convert it silently)",
                fqn);
      for (std::size_t d = 0; d < offsets.size(); ++d) {
        std::int64_t end;
        if (__builtin_add_overflow(offsets[d], t.shape()[d], &end))
          f->fail(ErrorCode::corrupt, "saved_offsets " + shape_to_string(offsets) + " overflow",
                  fqn);
        p.size[d] = std::max(p.size[d], end);
      }
      if (p.chunks.size() >= options.limits.max_container_items)
        f->fail(ErrorCode::limit_exceeded,
                "more chunks than Limits::max_container_items = " +
                    std::to_string(options.limits.max_container_items),
                fqn);
      p.chunks.push_back({offsets, t.shape(), {file, 0, t.nbytes(), {}}, t});
    }
  }

  std::vector<NamedTensor> tensors;
  tensors.reserve(plans.size());
  for (auto& [fqn, p] : plans) {
    dcp::check_chunks(*f, p, fqn);
    // One chunk covering its tensor is that tensor as the file holds it.
    if (p.chunks.size() == 1) {
      tensors.push_back({fqn, p.chunks[0].piece});
      continue;
    }
    tensors.push_back({fqn, dcp::lazy_tensor(f, std::move(p), fqn)});
  }
  return TensorCatalog::from_tensors(Format::dcp_safetensors, std::move(tensors));
}

}  // namespace torchport::formats
