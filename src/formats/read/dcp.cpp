// torch.distributed.checkpoint (DCP) folders, as torch's FileSystemWriter
// writes them (2.6 to 2.14; torch/distributed/checkpoint: metadata.py,
// filesystem.py, _extension.py, _traverse.py):
//
//   DIR/.metadata             a pickle of Metadata: state_dict_metadata
//                             (FQN -> TensorStorageMetadata | BytesStorage-
//                             Metadata), planner_data (FQN -> its key path),
//                             storage_data (MetadataIndex(fqn, offset) ->
//                             _StorageInfo(relative_path, offset, length
//                             [, transform_descriptors])), storage_meta, and
//                             from 2.7 version ("1.0.0")
//   DIR/__<rank>_<n>.distcp   blobs back to back: each a whole torch.save
//                             zip, of one chunk of a tensor or of a value,
//                             or that zip through the stream transforms
//                             its transform_descriptors list (2.14 knows
//                             one, "stream.zstd/1": one or more zstd frames)
//
// A tensor is the chunks its TensorStorageMetadata lists (offsets and sizes
// in the global tensor, per dimension), each found in storage_data by
// (fqn, offsets). torch reads .metadata with plain pickle.load and checks
// none of the chunk geometry; we read it with our VM (the dataclasses are
// on the allow-list as inert values) and refuse chunks that overlap, leave
// holes, reach past their tensor or file, or name a file outside the
// folder, and transforms we do not know (dcp_chunks.cpp).
//
// Opening reads .metadata and the values' blobs (small: an epoch, a
// param_groups list); a tensor's chunks are read when its bytes are first
// used. The whole object is rebuilt by the key paths of planner_data as
// torch's set_element does (dicts for string keys, lists for indices).

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include "formats/read/dcp.hpp"
#include "formats/read/readers.hpp"
#include "formats/read/shards.hpp"
#include "formats/read/torch_common.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport::formats {

namespace fs = std::filesystem;

namespace {

using dcp::Blob;
using dcp::Chunk;
using dcp::Folder;
using dcp::TensorPlan;

constexpr std::string_view kMetadataModule = "torch.distributed.checkpoint.metadata";

// --- the inert dataclasses -------------------------------------------------

const Object& object_of(const Folder& f, const Value& v, std::string_view module,
                        std::string_view cls, const std::string& key) {
  if (!v.is(Value::Kind::Object) || v.as_object().cls.module != module ||
      v.as_object().cls.name != cls)
    f.fail(ErrorCode::corrupt,
           "expected a " + std::string(cls) + ", found " + v.repr(2) +
               " (not a distributed checkpoint torch wrote?)",
           key);
  return v.as_object();
}

// A dataclass's field from its BUILD dict; nullptr when absent (a field
// the class's default then gives, as in files of other torch versions).
const Value* field(const Object& o, const char* name) {
  return o.state.is(Value::Kind::Dict) ? o.state.find(name) : nullptr;
}

const Value& need(const Folder& f, const Object& o, const char* name, const std::string& key) {
  const Value* v = field(o, name);
  if (v == nullptr)
    f.fail(ErrorCode::corrupt, o.cls.name + " without its field '" + name + "'", key);
  return *v;
}

Shape int_tuple(const Folder& f, const Value& v, const char* what, const std::string& key) {
  if (!v.is(Value::Kind::Tuple) && !v.is(Value::Kind::List))
    f.fail(ErrorCode::corrupt, std::string(what) + " is " + v.repr(2) + ", not a torch.Size", key);
  Shape out;
  out.reserve(v.size());
  for (const Value& x : v.items()) {
    if (!x.is(Value::Kind::Int) || x.as_int() < 0)
      f.fail(ErrorCode::corrupt,
             std::string(what) + " " + v.repr(2) + " holds " + x.repr(1) + ", not a size", key);
    out.push_back(x.as_int());
  }
  return out;
}

std::uint64_t uint_field(const Folder& f, const Object& o, const char* name,
                         const std::string& key) {
  const Value& v = need(f, o, name, key);
  if (!v.is(Value::Kind::Int) || v.as_int() < 0)
    f.fail(ErrorCode::corrupt, o.cls.name + "." + name + " is " + v.repr(1), key);
  return static_cast<std::uint64_t>(v.as_int());
}

// storage_data's key: the FQN and the chunk's offsets (None for a value).
std::string index_key(const std::string& fqn, const Shape* offsets) {
  std::string k = fqn;
  k.push_back('\0');
  if (offsets == nullptr) return k + "-";
  for (const std::int64_t o : *offsets) k += std::to_string(o) + ",";
  return k;
}

detail::StringMap<Blob> storage_index(Folder& f, const Value& storage_data) {
  if (!storage_data.is(Value::Kind::Dict))
    f.fail(ErrorCode::corrupt, "storage_data is " + storage_data.repr(2) + ", not a dict");
  detail::StringMap<Blob> out;
  for (const auto& [k, v] : storage_data.pairs()) {
    const Object& index = object_of(f, k, kMetadataModule, "MetadataIndex", {});
    const Value& fqn = need(f, index, "fqn", {});
    if (!fqn.is(Value::Kind::Str))
      f.fail(ErrorCode::corrupt, "a MetadataIndex's fqn is " + fqn.repr(1));
    const std::string& name = fqn.as_str();
    const Value* at = field(index, "offset");
    Shape offsets;
    const bool chunk = at != nullptr && !at->is_none();
    if (chunk) offsets = int_tuple(f, *at, "a MetadataIndex's offset", name);
    const Object& info =
        object_of(f, v, "torch.distributed.checkpoint.filesystem", "_StorageInfo", name);
    const Value& path = need(f, info, "relative_path", name);
    if (!path.is(Value::Kind::Str))
      f.fail(ErrorCode::corrupt, "relative_path is " + path.repr(1), name);
    Blob b{path.as_str(),
           uint_field(f, info, "offset", name),
           uint_field(f, info, "length", name),
           {}};
    // Stream transforms (torch 2.7+'s FileSystemWriter(_extensions=...)):
    // a list of descriptors, left out when there are none. Each is known
    // or refused now, before any blob is read.
    if (const Value* t = field(info, "transform_descriptors"); t != nullptr && !t->is_none()) {
      if (!t->is(Value::Kind::List) && !t->is(Value::Kind::Tuple))
        f.fail(ErrorCode::corrupt, "transform_descriptors is " + t->repr(2) + ", not a list", name);
      for (const Value& d : t->items()) {
        if (!d.is(Value::Kind::Str))
          f.fail(ErrorCode::corrupt, "transform_descriptors holds " + d.repr(1) + ", not a string",
                 name);
        dcp::check_transform(f, d.as_str(), name);
        b.transforms.push_back(d.as_str());
      }
    }
    if (!out.emplace(index_key(name, chunk ? &offsets : nullptr), std::move(b)).second)
      f.fail(ErrorCode::corrupt, "storage_data lists one chunk twice", name);
  }
  return out;
}

// --- tensors ---------------------------------------------------------------

TensorPlan tensor_plan(Folder& f, const Object& meta, const std::string& fqn,
                       const detail::StringMap<Blob>& index) {
  TensorPlan t;
  const Object& props =
      object_of(f, need(f, meta, "properties", fqn), kMetadataModule, "TensorProperties", fqn);
  // TensorProperties.__setstate__: (dtype, layout, requires_grad,
  // memory_format, pin_memory); a dict from other versions.
  const Value* dtype = nullptr;
  const Value* layout = nullptr;
  if (props.state.is(Value::Kind::Tuple) && props.state.size() >= 2) {
    dtype = &props.state.items()[0];
    layout = &props.state.items()[1];
  } else {
    dtype = field(props, "dtype");
    layout = field(props, "layout");
  }
  std::optional<DType> d;
  if (dtype != nullptr && dtype->is(Value::Kind::Global) && dtype->as_global().module == "torch")
    d = dtype_from_torch_name(dtype->as_global().name);
  if (!d)
    f.fail(ErrorCode::unsupported, "a tensor of dtype " + (dtype ? dtype->repr(1) : "?"), fqn);
  t.dtype = *d;
  if (layout != nullptr && !layout->is_none()) {
    const bool strided = layout->is(Value::Kind::Object) && layout->as_object().args.size() == 1 &&
                         layout->as_object().args.items()[0].is(Value::Kind::Str) &&
                         layout->as_object().args.items()[0].as_str() == "torch.strided";
    if (!strided)
      f.fail(ErrorCode::unsupported,
             "a tensor of layout " + layout->repr(2) + " (DCP saves strided)", fqn);
  }
  t.size = int_tuple(f, need(f, meta, "size", fqn), "size", fqn);
  const Value& chunks = need(f, meta, "chunks", fqn);
  if (!chunks.is(Value::Kind::List))
    f.fail(ErrorCode::corrupt, "chunks is " + chunks.repr(2) + ", not a list", fqn);
  for (const Value& cv : chunks.items()) {
    const Object& co = object_of(f, cv, kMetadataModule, "ChunkStorageMetadata", fqn);
    Chunk c;
    c.offsets = int_tuple(f, need(f, co, "offsets", fqn), "offsets", fqn);
    c.sizes = int_tuple(f, need(f, co, "sizes", fqn), "sizes", fqn);
    const auto it = index.find(index_key(fqn, &c.offsets));
    if (it == index.end())
      f.fail(ErrorCode::corrupt,
             "its chunk at offsets " + shape_to_string(c.offsets) +
                 " has no entry in storage_data (where its bytes are)",
             fqn);
    c.blob = it->second;
    // Its file inside the folder, its bytes inside the file (transforms
    // are undone when it is read).
    (void)f.raw(c.blob, fqn);
    t.chunks.push_back(std::move(c));
  }
  dcp::check_chunks(f, t, fqn);
  return t;
}

// --- the whole object --------------------------------------------------------

// torch's _traverse.set_element over a tree built before it becomes values
// (values are sealed once nested).
struct Node {
  enum class Kind { leaf, dict, list } kind = Kind::leaf;
  Value leaf;
  std::vector<std::pair<std::string, std::unique_ptr<Node>>> entries;  // dict
  detail::StringMap<std::size_t> where;                                // dict key -> entry
  std::vector<std::unique_ptr<Node>> items;                            // list (null: None)

  Value value() const {
    switch (kind) {
      case Kind::dict: {
        Value::Pairs pairs;
        pairs.reserve(entries.size());
        for (const auto& [k, n] : entries) pairs.emplace_back(Value::str(k), n->value());
        return Value::dict(std::move(pairs));
      }
      case Kind::list: {
        Value::Items out;
        out.reserve(items.size());
        for (const auto& n : items) out.push_back(n ? n->value() : Value());
        return Value::list(std::move(out));
      }
      default:
        return leaf;
    }
  }
};

class TreeBuilder {
 public:
  TreeBuilder(const Folder& f, const Limits& limits)
      : f_(f), max_items_(limits.max_container_items), max_depth_(limits.max_depth) {
    root_.kind = Node::Kind::dict;
  }

  void set(const Value& path, Value leaf, const std::string& fqn) {
    if (!path.is(Value::Kind::Tuple) || path.size() == 0)
      f_.fail(ErrorCode::corrupt, "its key path in planner_data is " + path.repr(2), fqn);
    // The tree is built and taken apart recursively: its depth is bounded
    // as a pickle's nesting is.
    if (path.size() >= max_depth_)
      f_.fail(ErrorCode::limit_exceeded,
              "its key path in planner_data has " + std::to_string(path.size()) +
                  " keys, past Limits::max_depth = " + std::to_string(max_depth_),
              fqn);
    Node* cur = &root_;
    const auto& p = path.items();
    for (std::size_t i = 0; i < p.size(); ++i) {
      const bool last = i + 1 == p.size();
      Node* next = child(cur, p[i], fqn, last ? nullptr : &p[i + 1]);
      if (last) {
        if (next->kind != Node::Kind::leaf || !next->leaf.is_none())
          f_.fail(ErrorCode::corrupt, "two items of planner_data set the same key path", fqn);
        next->leaf = std::move(leaf);
      }
      cur = next;
    }
  }
  Value value() const { return root_.value(); }

 private:
  // The child of `cur` at `key`, made as `next_key` needs it (a dict for a
  // string, a list for an index) when new.
  Node* child(Node* cur, const Value& key, const std::string& fqn, const Value* next_key) {
    const auto fresh = [&] {
      auto n = std::make_unique<Node>();
      if (next_key != nullptr)
        n->kind = next_key->is(Value::Kind::Int) ? Node::Kind::list : Node::Kind::dict;
      return n;
    };
    const auto expect = [&](Node* n) {
      const Node::Kind want = next_key == nullptr              ? Node::Kind::leaf
                              : next_key->is(Value::Kind::Int) ? Node::Kind::list
                                                               : Node::Kind::dict;
      if (n->kind != want && !(n->kind == Node::Kind::leaf && n->leaf.is_none()))
        f_.fail(ErrorCode::corrupt,
                "planner_data nests a key inside a value another item set, or an index inside "
                "a dict (" +
                    key.repr(1) + ")",
                fqn);
      if (n->kind == Node::Kind::leaf && want != Node::Kind::leaf) n->kind = want;
      return n;
    };
    if (cur->kind == Node::Kind::dict) {
      if (!key.is(Value::Kind::Str))
        f_.fail(ErrorCode::corrupt, "planner_data indexes a dict with " + key.repr(1), fqn);
      if (const auto it = cur->where.find(key.as_str()); it != cur->where.end())
        return expect(cur->entries[it->second].second.get());
      if (++items_ > max_items_) limit();
      cur->where.emplace(key.as_str(), cur->entries.size());
      cur->entries.emplace_back(key.as_str(), fresh());
      return cur->entries.back().second.get();
    }
    if (!key.is(Value::Kind::Int) || key.as_int() < 0)
      f_.fail(ErrorCode::corrupt, "planner_data indexes a list with " + key.repr(1), fqn);
    const auto i = static_cast<std::uint64_t>(key.as_int());
    if (i >= cur->items.size()) {
      // torch pads a list with None up to the index.
      if (i - cur->items.size() + 1 > max_items_ - std::min(items_, max_items_)) limit();
      items_ += i - cur->items.size() + 1;
      cur->items.resize(i + 1);
    }
    auto& slot = cur->items[i];
    if (!slot) {
      slot = fresh();
      return slot.get();
    }
    return expect(slot.get());
  }
  [[noreturn]] void limit() const {
    f_.fail(ErrorCode::limit_exceeded,
            "planner_data builds containers of more than Limits::max_container_items = " +
                std::to_string(max_items_) + " items");
  }

  const Folder& f_;
  std::uint64_t max_items_;
  std::uint64_t max_depth_;
  std::uint64_t items_ = 0;
  Node root_;
};

}  // namespace

TensorCatalog read_dcp_metadata(const std::shared_ptr<Folder>& f, const Source& meta,
                                const OpenOptions& options, Walker& walker);

TensorCatalog read_dcp(const fs::path& path, const OpenOptions& options, Walker& walker) {
  std::error_code ec;
  auto f = std::make_shared<Folder>();
  f->dir = fs::is_directory(path, ec) ? path : path.parent_path();
  f->root = shard_root(f->dir);
  f->options = options;
  f->options.format.reset();
  const Source meta = Source::map_file(resolve_inside(f->root, f->dir / ".metadata"), options.map);
  f->where = (f->dir / ".metadata").string();
  return read_dcp_metadata(f, meta, options, walker);
}

TensorCatalog read_dcp_files(const std::function<Source(const std::string&)>& open_file,
                             const std::string& where, const OpenOptions& options, Walker& walker) {
  auto f = std::make_shared<Folder>();
  f->opener = open_file;
  f->options = options;
  f->options.format.reset();
  f->where = where;
  const Source meta = open_file(".metadata");
  return read_dcp_metadata(f, meta, options, walker);
}

TensorCatalog read_dcp_metadata(const std::shared_ptr<Folder>& f, const Source& meta,
                                const OpenOptions& options, Walker& walker) {
  if (meta.size() > options.limits.max_pickle_bytes)
    f->fail(ErrorCode::limit_exceeded, ".metadata of " + std::to_string(meta.size()) +
                                           " bytes exceeds Limits::max_pickle_bytes");
  const Source meta_bytes = meta.fetch(0, meta.size());
  ByteReader r(meta_bytes.bytes(), f->where);
  const Value root = run_torch_pickle(walker, ".metadata", r, f->options, {});
  const Object& m = object_of(*f, root, kMetadataModule, "Metadata", {});
  const Value& sdm = need(*f, m, "state_dict_metadata", {});
  if (!sdm.is(Value::Kind::Dict))
    f->fail(ErrorCode::corrupt, "state_dict_metadata is " + sdm.repr(2) + ", not a dict");
  const detail::StringMap<Blob> index = storage_index(*f, need(*f, m, "storage_data", {}));
  const Value* planner = field(m, "planner_data");
  if (planner != nullptr && !planner->is_none() && !planner->is(Value::Kind::Dict))
    f->fail(ErrorCode::corrupt, "planner_data is " + planner->repr(2) + ", not a dict");

  TreeBuilder tree(*f, options.limits);
  for (const auto& [k, v] : sdm.pairs()) {
    if (!k.is(Value::Kind::Str))
      f->fail(ErrorCode::corrupt, "state_dict_metadata has a key " + k.repr(1));
    const std::string& fqn = k.as_str();
    Value leaf;
    if (v.is(Value::Kind::Object) && v.as_object().cls.name == "BytesStorageMetadata") {
      object_of(*f, v, kMetadataModule, "BytesStorageMetadata", fqn);
      const auto it = index.find(index_key(fqn, nullptr));
      if (it == index.end())
        f->fail(ErrorCode::corrupt, "the value has no entry in storage_data (where its bytes are)",
                fqn);
      // A value is torch.save of the Python object (tensors inside it too).
      const Source blob = f->blob(it->second, fqn);
      walker.enter(it->second.file);
      try {
        leaf = read_pytorch_zip(blob, f->options, walker).root();
      } catch (const Error& e) {
        walker.leave();
        throw Error(e.code(), "the value of '" + fqn + "': " + e.message(), e.key(), e.offset(),
                    e.where());
      }
      walker.leave();
    } else {
      const Object& tm = object_of(*f, v, kMetadataModule, "TensorStorageMetadata", fqn);
      TensorPlan plan = tensor_plan(*f, tm, fqn, index);
      if (walker.lists_parts())  // a scan reads every blob a loader would unpickle
        for (const Chunk& c : plan.chunks) dcp::chunk_tensor(*f, c, plan.dtype, fqn, walker);
      leaf = Value::tensor(dcp::lazy_tensor(f, std::move(plan), fqn));
    }
    const Value* p =
        planner != nullptr && planner->is(Value::Kind::Dict) ? planner->find(fqn) : nullptr;
    tree.set(p != nullptr ? *p : Value::tuple({Value::str(fqn)}), std::move(leaf), fqn);
  }
  return TensorCatalog::from_value(Format::dcp, tree.value(), options.limits);
}

}  // namespace torchport::formats
