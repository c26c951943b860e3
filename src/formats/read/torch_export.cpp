// torch.export archives (.pt2), read as the torch.export.load of torch 2.6
// and 2.14 reads them (docs/format.md has the table). Two layouts:
//
// torch 2.6's torch.export.save (torch/export/__init__.py), which 2.14's
// torch.export.load still reads as its fallback: a zip (Python's zipfile,
// stored) of
//
//   serialized_exported_program.json   the program: graph and signature
//   serialized_state_dict.pt           torch.save(ep.state_dict): parameters
//                                      and persistent buffers by FQN
//   serialized_constants.pt            torch.save(constants): tensor
//                                      attributes, non-persistent buffers,
//                                      lifted tensors, by name
//   serialized_example_inputs.pt       torch.save(example inputs)
//   version                            the schema version ("8.2")
//   extra_files/NAME                   the caller's files
//
// torch >= 2.8's torch.export.save writes the PT2 archive
// (torch/export/pt2_archive/_package.py, package_pt2; record names from
// torch/csrc/export/pt2_archive_constants.h, JSON from
// torch/_export/serde/schema.py), checked against the files torch 2.14.1
// writes (tests/fixtures/export/make_export214_fixtures.py), under the
// folder torch's zip writer names after the file:
//
//   archive_format               "pt2"
//   archive_version              "0" (the loader refuses any other)
//   models/<model>.json          the program of each model
//   data/weights/<model>_weights_config.json
//                                {"config": {fqn: PayloadMeta}}
//   data/weights/weight_<i>      one storage's raw bytes (one blob per
//                                storage and dtype), or, for a tensor
//                                subclass (use_pickle), a torch.save archive
//                                torch reads with weights_only=False
//   data/constants/<model>_constants_config.json, data/constants/tensor_<i>
//                                the same for constants; custom_obj_<i>
//                                (torchbind, TorchScript's unpickler) and
//                                opaque_obj_<i> (pickle.loads) are objects
//   data/weights/<model>.pt, data/constants/<model>.pt
//                                the older layout: torch.save of the dicts
//   data/sample_inputs/<model>.pt, extra/*, data/aotinductor/<model>/...
//
// A raw tensor is torch.as_strided over its blob, viewed as the dtype of
// the first tensor naming that blob: tensors naming one blob share one
// storage. With one model the names are its FQNs; with several, each is
// `<model>.<fqn>` (load_pt2's programs). The program is never read; objects
// are refused by name (a scan judges each blob torch unpickles as a file of
// its own); AOTInductor packages without an exported program are refused
// by name, and a scan lists their files as code.

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "formats/read/readers.hpp"
#include "formats/read/registry.hpp"
#include "formats/read/strict_json.hpp"
#include "formats/read/torch_common.hpp"
#include "io/byte_reader.hpp"
#include "pickle/unpickler.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport::formats {
namespace {

constexpr std::string_view kProgram = "serialized_exported_program.json";

// The entry `stem`.pt, or its older ".json" spelling (the same torch.save
// bytes), as torch.export.load (2.6, and 2.14's fallback) finds it: Python's
// zipfile, names matched exactly, going through the entries in order and
// keeping the last one that matches.
const ZipEntry* find_either(const ZipArchive& zip, const std::string& stem) {
  const ZipEntry* found = nullptr;
  for (const ZipEntry& e : zip.entries())
    if (e.name == stem + ".pt" || e.name == stem + ".json") found = &e;
  return found;
}

bool later_layout(const ZipEntry& e) {
  // archive_format at the root or under one folder (PT2 archives, AOTI packages).
  const auto slash = e.name.find('/');
  const std::string_view rest = slash == std::string::npos
                                    ? std::string_view(e.name)
                                    : std::string_view(e.name).substr(slash + 1);
  return rest == "archive_format";
}

bool is_code(const std::string& name) {
  return name.ends_with(".so") || name.ends_with(".cpp") || name.ends_with(".py") ||
         name.ends_with(".cubin") || name.find("/aotinductor/") != std::string::npos ||
         name.find("/executorch/") != std::string::npos;
}

// A torch.save blob inside the archive (a .pt entry, a pickled payload),
// read as torch.load reads it (torch.export.load hands the bytes to it).
TensorCatalog nested(const ZipArchive& zip, const ZipEntry& e, const OpenOptions& options,
                     Walker& walker) {
  const Source inner = zip.read(e);
  OpenOptions o = options;
  o.format.reset();
  walker.enter(e.name);
  try {
    TensorCatalog cat = read_as_torch_load(inner, o, walker);
    walker.leave();
    return cat;
  } catch (const Error& x) {
    walker.leave();
    throw Error(x.code(), e.name + ": " + x.message(), x.key(), x.offset(), zip.source().name());
  }
}

// --- the PT2 archive layout ---------------------------------------------

using json = nlohmann::ordered_json;

// schema.ScalarType, the numbers TensorMeta.dtype uses (torch 2.14's
// torch/_export/serde/schema.py adds 33..35; it has none for
// float4_e2m1fn_x2 or bcomplex32).
std::optional<DType> scalar_type(std::int64_t v) {
  switch (v) {
    case 1:
      return DType::U8;
    case 2:
      return DType::I8;
    case 3:
      return DType::I16;
    case 4:
      return DType::I32;
    case 5:
      return DType::I64;
    case 6:
      return DType::F16;
    case 7:
      return DType::F32;
    case 8:
      return DType::F64;
    case 9:
      return DType::C32;
    case 10:
      return DType::C64;
    case 11:
      return DType::C128;
    case 12:
      return DType::BOOL;
    case 13:
      return DType::BF16;
    case 28:
      return DType::U16;
    case 29:
      return DType::F8_E4M3;
    case 30:
      return DType::F8_E5M2;
    case 31:
      return DType::F8_E4M3FNUZ;
    case 32:
      return DType::F8_E5M2FNUZ;
    case 33:
      return DType::F8_E8M0;
    case 34:
      return DType::U32;
    case 35:
      return DType::U64;
    default:
      return std::nullopt;
  }
}

constexpr std::int64_t kStrided = 7;  // schema.Layout.Strided

// A raw tensor's view of its blob (torch.as_strided's arguments).
struct View {
  DType dtype = DType::U8;
  Shape sizes, strides;
  std::int64_t offset = 0;
};

class Pt2Archive {
 public:
  Pt2Archive(std::shared_ptr<const ZipArchive> archive, const OpenOptions& options, Walker& walker)
      : archive_(std::move(archive)),
        zip_(*archive_),
        options_(options),
        walker_(walker),
        where_(zip_.source().name()),
        listed_(zip_.entries().size(), false) {}

  TensorCatalog read();

 private:
  [[noreturn]] void fail(ErrorCode code, const std::string& msg, const std::string& key = {},
                         std::optional<std::uint64_t> offset = std::nullopt) const {
    throw Error(code, msg, key, offset, where_);
  }
  // The record `rel` below the archive's folder, as torch's reader looks it
  // up (miniz, ignoring ASCII case).
  const ZipEntry* find(const std::string& rel) const { return zip_.find(root_ + rel); }
  std::string text(const ZipEntry& e, std::uint64_t cap) const;
  json config(const ZipEntry& e) const;
  View view(const json& meta, const std::string& fqn, const ZipEntry& config) const;
  std::int64_t sym_int(const json& v, const std::string& fqn, const char* what,
                       const ZipEntry& config) const;
  std::shared_ptr<Storage> storage(const ZipEntry& blob, DType dtype) const;
  Value::Pairs payloads(const std::string& model, bool constants);
  // Tells the walker about a record, once.
  // (`torch_load`: torch.load reads it, from an io.BytesIO.)
  void list(const ZipEntry& e, PartRole role, bool torch_load = false) {
    const auto i = static_cast<std::size_t>(&e - zip_.entries().data());
    if (!walker_.lists_parts() || listed_[i]) return;
    listed_[i] = true;
    Part p{role, e.name, e.data_offset, e.compressed_size, e.method, {}};
    p.torch_load = torch_load;
    if (role == PartRole::member || role == PartRole::tensor_data)
      p.bytes = [archive = archive_, e] { return archive->read(e); };
    walker_.part(std::move(p));
  }
  // Whether a raw weight blob holds anything torch.load acts on: a zip, a
  // tar, or a pickle that reaches STOP or, before it breaks, names a
  // global, an extension or a persistent id (the opcodes through which an
  // unpickler runs code). Tensor bytes that merely begin like a pickle
  // break at once, having named nothing: raw data, not a damaged pickle.
  bool unpicklable(const ZipEntry& e) const {
    const Source b = zip_.read(e);
    if (open_detail::torch_archive(b.bytes())) return true;
    ByteReader r(b.bytes(), where_ + ":" + e.name, e.method == 0 ? e.data_offset : 0);
    const pickle::OpcodeWalk w = pickle::walk_opcodes(r, options_.limits);
    return w.reached_stop || !w.globals.empty() || w.unresolved > 0 || w.extensions > 0 ||
           w.persistent_ids > 0;
  }
  // A torch.save blob, read (and walked) as torch.load reads it.
  TensorCatalog load(const ZipEntry& e) {
    listed_[static_cast<std::size_t>(&e - zip_.entries().data())] = true;
    return nested(zip_, e, options_, walker_);
  }

  std::shared_ptr<const ZipArchive> archive_;
  const ZipArchive& zip_;
  const OpenOptions& options_;
  Walker& walker_;
  std::string where_;
  std::string root_;  // "<folder>/"
  std::vector<bool> listed_;
};

std::string Pt2Archive::text(const ZipEntry& e, std::uint64_t cap) const {
  if (e.size > cap)
    fail(ErrorCode::limit_exceeded,
         "record of " + std::to_string(e.size) + " bytes, more than the " + std::to_string(cap) +
             " this record may hold",
         e.name, e.header_offset);
  const Source s = zip_.read(e);
  return std::string(reinterpret_cast<const char*>(s.bytes().data()), s.size());
}

json Pt2Archive::config(const ZipEntry& e) const {
  // A config is as large as a pickle of its tensors: bounded as one.
  const std::string t = text(e, options_.limits.max_pickle_bytes);
  json root = parse_strict_json(t, e.name, e.method == 0 ? e.data_offset : 0, where_, 8,
                                options_.limits.max_nodes);
  // PayloadConfig: {"config": {fqn: PayloadMeta}}.
  if (!root.is_object() || root.size() != 1 || !root.contains("config") ||
      !root["config"].is_object())
    fail(ErrorCode::corrupt, e.name + " is not a PayloadConfig ({\"config\": {name: meta}})",
         e.name, e.data_offset);
  return root;
}

std::int64_t Pt2Archive::sym_int(const json& v, const std::string& fqn, const char* what,
                                 const ZipEntry& config) const {
  // schema.SymInt, a union: {"as_int": n} or {"as_expr": {...}}.
  if (v.is_object() && v.size() == 1 && v.contains("as_expr"))
    fail(ErrorCode::unsupported,
         std::string("a symbolic ") + what + " (" + v.dump().substr(0, 80) +
             "); a saved tensor's sizes are numbers",
         fqn, config.data_offset);
  if (!v.is_object() || v.size() != 1 || !v.contains("as_int") ||
      !v["as_int"].is_number_integer() || v["as_int"].get<std::int64_t>() < 0)
    fail(ErrorCode::corrupt,
         std::string(what) + " " + v.dump().substr(0, 80) +
             " is not {\"as_int\": n} with n >= 0 (torch's as_strided takes no negative sizes, "
             "strides or offsets)",
         fqn, config.data_offset);
  return v["as_int"].get<std::int64_t>();
}

View Pt2Archive::view(const json& m, const std::string& fqn, const ZipEntry& config) const {
  static constexpr std::array<std::string_view, 7> kFields = {
      "dtype", "sizes", "requires_grad", "device", "strides", "storage_offset", "layout"};
  if (!m.is_object())
    fail(ErrorCode::corrupt, "tensor_meta " + m.dump().substr(0, 80) + " is not an object", fqn,
         config.data_offset);
  for (const auto& [k, _] : m.items())
    if (std::find(kFields.begin(), kFields.end(), k) == kFields.end())
      fail(ErrorCode::unsupported,
           "tensor_meta field '" + k + "', which this reader does not know (a later schema?)", fqn,
           config.data_offset);
  for (const std::string_view k : kFields)
    if (!m.contains(std::string(k)))
      fail(ErrorCode::corrupt, "tensor_meta lacks '" + std::string(k) + "'", fqn,
           config.data_offset);
  View v;
  const json& dt = m["dtype"];
  const auto d = dt.is_number_integer() ? scalar_type(dt.get<std::int64_t>()) : std::nullopt;
  if (!d)
    fail(ErrorCode::unsupported,
         "tensor_meta dtype " + dt.dump().substr(0, 40) + " is no ScalarType torchport reads", fqn,
         config.data_offset);
  v.dtype = *d;
  if (!m["layout"].is_number_integer() || m["layout"].get<std::int64_t>() != kStrided)
    fail(ErrorCode::unsupported,
         "layout " + m["layout"].dump().substr(0, 40) +
             "; the archive's raw tensors are strided (7)",
         fqn, config.data_offset);
  const json& dev = m["device"];
  if (!dev.is_object() || !dev.contains("type") || !dev["type"].is_string())
    fail(ErrorCode::corrupt, "device " + dev.dump().substr(0, 80) + " is not {\"type\": ...}", fqn,
         config.data_offset);
  if (!m["requires_grad"].is_boolean())
    fail(ErrorCode::corrupt,
         "requires_grad " + m["requires_grad"].dump().substr(0, 40) + " is not a bool", fqn,
         config.data_offset);
  const json& sizes = m["sizes"];
  const json& strides = m["strides"];
  if (!sizes.is_array() || !strides.is_array() || sizes.size() != strides.size())
    fail(ErrorCode::corrupt, "sizes and strides are not two lists of one length", fqn,
         config.data_offset);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    v.sizes.push_back(sym_int(sizes[i], fqn, "size", config));
    v.strides.push_back(sym_int(strides[i], fqn, "stride", config));
  }
  v.offset = sym_int(m["storage_offset"], fqn, "storage offset", config);
  return v;
}

std::shared_ptr<Storage> Pt2Archive::storage(const ZipEntry& blob, DType dtype) const {
  // torch's writer writes the records stored; the machine's byte order is
  // how torch reads raw blobs (checked against `byteorder` in read()).
  if (blob.method == 0)
    return record_storage(zip_.source(), blob.data_offset, blob.size, dtype, false);
  return Storage::deferred(blob.size, [archive = archive_, entry = blob, dtype] {
    const Source inflated = archive->read(entry);
    auto s = record_storage(inflated, 0, inflated.size(), dtype, false);
    (void)s->bytes();
    return s;
  });
}

Value::Pairs Pt2Archive::payloads(const std::string& model, bool constants) {
  const std::string dir = constants ? "data/constants/" : "data/weights/";
  // The older layout: torch.save of the whole dict, handed to the program.
  if (const ZipEntry* legacy = find(dir + model + ".pt")) {
    const TensorCatalog part = load(*legacy);
    if (!part.root().is(Value::Kind::Dict))
      fail(ErrorCode::corrupt,
           legacy->name + " holds " + part.root().repr(2) + ", not a dict of tensors by name");
    return part.root().pairs();
  }
  const std::string config_name =
      dir + model + (constants ? "_constants" : "_weights") + "_config.json";
  const ZipEntry* ce = find(config_name);
  if (ce == nullptr)
    fail(ErrorCode::corrupt,
         "model '" + model + "' has no " + config_name + " (the PT2 archive's loader requires it)");
  list(*ce, PartRole::metadata);
  const json cfg = config(*ce);
  struct Blob {
    std::shared_ptr<Storage> storage;  // null for a pickled payload
    DType dtype = DType::U8;
    std::string first;  // the tensor whose dtype the blob is viewed as
  };
  detail::StringMap<Blob> blobs;  // by path_name
  Value::Pairs out;
  for (const auto& item : cfg["config"].items()) {
    // (named, not bound: clang 14's lambdas cannot capture structured bindings)
    const std::string& fqn = item.key();
    const json& pm = item.value();
    const auto bad = [&](ErrorCode code, const std::string& msg) {
      fail(code, msg, fqn, ce->data_offset);
    };
    static constexpr std::array<std::string_view, 4> kFields = {"path_name", "is_param",
                                                                "use_pickle", "tensor_meta"};
    if (!pm.is_object() || pm.size() != kFields.size() ||
        !std::all_of(kFields.begin(), kFields.end(),
                     [&](std::string_view k) { return pm.contains(std::string(k)); }))
      bad(ErrorCode::corrupt, "payload " + pm.dump().substr(0, 120) +
                                  " is not a PayloadMeta {path_name, is_param, use_pickle, "
                                  "tensor_meta}");
    if (!pm["path_name"].is_string() || !pm["use_pickle"].is_boolean() ||
        !pm["is_param"].is_boolean())
      bad(ErrorCode::corrupt, "path_name is not a string, or use_pickle or is_param not a bool");
    const std::string path = pm["path_name"].get<std::string>();
    // A plain file name in the folder, as torch writes them: a path
    // elsewhere ("../x", "a/b") means what each zip reader makes of it.
    if (path.empty() || path == "." || path == ".." ||
        path.find_first_of(std::string_view("/\\\0", 3)) != std::string::npos)
      bad(ErrorCode::corrupt, "path_name '" + path + "' is not a file name in " + dir);
    const bool custom = constants && path.starts_with("custom_obj_");
    const bool opaque = constants && path.starts_with("opaque_obj_");
    if (constants && !custom && !opaque && !path.starts_with("tensor_"))
      bad(ErrorCode::corrupt, "constant payload '" + path +
                                  "' is none of tensor_, custom_obj_, opaque_obj_ (torch's "
                                  "loader refuses it)");
    const ZipEntry* blob = find(dir + path);
    if (blob == nullptr)
      bad(ErrorCode::corrupt, "payload '" + dir + path + "' is not in the archive");
    if (custom || opaque) {
      // An object, not a tensor: torch 2.14's _load_constants gives a
      // custom_obj_ (a torchbind object, written by torch._C._pickle_save)
      // to torch._C._pickle_load_obj, TorchScript's unpickler, which builds
      // only registered classes and runs their __setstate__; an opaque_obj_
      // to pickle.loads, which imports and calls whatever it names. A scan
      // judges the bytes as a file of their own; open() has no tensor to
      // give.
      if (walker_.lists_parts()) {
        list(*blob, PartRole::member);
        continue;
      }
      bad(ErrorCode::unsupported,
          "constant '" + fqn + "' is an object, not a tensor: " + path +
              (custom ? ", a torchbind object torch rebuilds with TorchScript's unpickler "
                        "(torch._C._pickle_load_obj)"
                      : ", an opaque object torch rebuilds with pickle.loads (which runs the "
                        "code it names)") +
              "; torchport reads no objects (`torchport scan` judges it)");
    }
    const bool pickled = pm["use_pickle"].get<bool>();
    const auto [it, fresh] = blobs.try_emplace(path);
    Blob& b = it->second;
    if (!fresh && pickled != !b.storage)
      bad(ErrorCode::corrupt, "payload '" + path + "' is named both raw and pickled");
    if (pickled) {
      // A whole torch.save archive (a tensor subclass, in torch's writer),
      // which torch's loader reads with torch.load(weights_only=False) for
      // each name that names it. A scan judges it as a file of its own (as
      // that torch.load reads it); open() reads it as torch.load does,
      // under the global policy (a subclass's class is refused by name).
      if (walker_.lists_parts()) {
        list(*blob, PartRole::member, true);
        continue;
      }
      const TensorCatalog one = load(*blob);
      if (!one.root().is(Value::Kind::Tensor))
        bad(ErrorCode::corrupt, blob->name + " holds " + one.root().repr(2) + ", not a tensor");
      out.emplace_back(Value::str(fqn), one.root());
      continue;
    }
    if (pm["tensor_meta"].is_null())
      bad(ErrorCode::corrupt, "a raw payload without tensor_meta (torch's loader refuses it)");
    const View v = view(pm["tensor_meta"], fqn, *ce);
    if (fresh) {
      // A loader asked to load weights from disk torch.loads everything
      // under data/weights/: a scan judges by their content those blobs
      // that torch.load would act on.
      if (walker_.lists_parts())
        list(*blob, !constants && unpicklable(*blob) ? PartRole::member : PartRole::tensor_data);
      if (blob->size % dtype_size(v.dtype) != 0)
        fail(ErrorCode::corrupt,
             "payload '" + path + "' has " + std::to_string(blob->size) +
                 " bytes, not a whole number of " + std::string(dtype_name(v.dtype)) + " elements",
             fqn, blob->data_offset);
      b = Blob{storage(*blob, v.dtype), v.dtype, fqn};
    } else if (b.dtype != v.dtype) {
      // torch views the blob as its first tensor's dtype, whatever this one says.
      bad(ErrorCode::corrupt, "payload '" + path + "' is " + std::string(dtype_name(b.dtype)) +
                                  " for '" + b.first + "' but " + std::string(dtype_name(v.dtype)) +
                                  " here (torch's loader would view it as the first)");
    }
    const bool empty = std::find(v.sizes.begin(), v.sizes.end(), 0) != v.sizes.end();
    if (blob->size == 0 && !empty)
      fail(ErrorCode::corrupt,
           "payload '" + path +
               "' holds no bytes (the weights of a fake tensor, not saved; torch's loader "
               "gives zeros)",
           fqn, blob->data_offset);
    try {
      out.emplace_back(Value::str(fqn),
                       Value::tensor(Tensor(v.dtype, v.sizes, v.strides, v.offset, b.storage)));
    } catch (const Error& e) {
      fail(e.code(), "payload '" + path + "': " + e.message(), fqn, blob->data_offset);
    }
  }
  return out;
}

TensorCatalog Pt2Archive::read() {
  const auto& entries = zip_.entries();
  if (entries.empty()) fail(ErrorCode::not_a_checkpoint, "the zip archive is empty");
  // As torch's reader (PyTorchFileReader) does: the first record's folder
  // names the archive and every record is looked up under it. (torch 2.6's
  // AOTInductor packages, written by Python's zipfile, have none.)
  const std::string& first = entries.front().name;
  const auto slash = first.find('/');
  if (slash != std::string::npos) root_ = first.substr(0, slash + 1);
  for (const ZipEntry& e : entries)
    if (!zip_method_read(e.method, ZipMethods::torch))
      fail(ErrorCode::unsupported,
           "compression method " + std::to_string(e.method) + " (" + zip_method_name(e.method) +
               "): torch's reader (miniz) reads only stored and deflate",
           e.name, e.header_offset);

  // The models, and the records no tensor comes from.
  std::vector<std::string> models;
  bool aoti = false;
  for (const ZipEntry& e : entries) {
    if (!e.name.starts_with(root_)) {
      list(e, PartRole::member);
      continue;
    }
    const std::string rel = e.name.substr(root_.size());
    aoti = aoti || rel.starts_with("data/aotinductor/");
    if (rel.starts_with("models/")) {
      const std::string model =
          rel.ends_with(".json") ? rel.substr(7, rel.size() - 12) : std::string();
      if (model.empty() || model.find('/') != std::string::npos)
        fail(ErrorCode::corrupt,
             "'" + e.name + "' is not models/<model>.json, where the PT2 loader finds programs",
             e.name, e.header_offset);
      models.push_back(model);
    }
    if (is_code(e.name))
      list(e, PartRole::code);
    else if (rel == "archive_format" || rel == "archive_version" || rel == "byteorder" ||
             rel.starts_with(".data/") || rel.starts_with("models/"))
      list(e, PartRole::metadata);
    else if (!rel.starts_with("data/weights/") && !rel.starts_with("data/constants/") &&
             !rel.starts_with("data/sample_inputs/"))
      list(e, PartRole::member);  // extra/ and what no loader names: judged by content
  }
  if (models.empty())
    fail(ErrorCode::unsupported,
         aoti ? "an AOTInductor package without an exported program: its weights are compiled "
                "into shared objects, which torchport does not read"
              : "a PT2 archive without models/<model>.json: it holds no exported program");
  if (root_.empty())
    fail(ErrorCode::corrupt, "a PT2 archive whose first record '" + first +
                                 "' is not in a folder (torch's reader refuses it)");
  const ZipEntry* format = find("archive_format");
  if (format == nullptr || text(*format, 64) != "pt2")
    fail(ErrorCode::corrupt,
         "the archive's folder '" + root_ + "' has no archive_format record saying \"pt2\"");
  const ZipEntry* version = find("archive_version");
  if (version == nullptr)
    fail(ErrorCode::corrupt, "a PT2 archive without archive_version (its loader refuses it)");
  const std::string archive_version = text(*version, 64);
  if (archive_version != "0")
    fail(ErrorCode::unsupported,
         "PT2 archive version '" + archive_version.substr(0, 16) +
             "'; torchport reads version 0, as torch's loader does",
         version->name, version->header_offset);
  if (const ZipEntry* order = find("byteorder")) {
    const std::string o = text(*order, 64);
    if (o != "little")
      fail(ErrorCode::unsupported,
           "byte order '" + o.substr(0, 16) +
               "': torch's PT2 loader reads raw blobs in the machine's order, whatever the "
               "record says",
           order->name, order->header_offset);
  }

  std::map<std::string, std::string> metadata{{"torch_export.layout", "pt2-archive"},
                                              {"torch_export.archive_version", archive_version}};
  std::string names;
  for (const std::string& m : models) names += (names.empty() ? "" : ",") + m;
  metadata["torch_export.models"] = names;

  Value::Pairs all;
  for (const std::string& model : models) {
    // The weights, then the constants, each under its own name; a name in
    // both would make the two readings of the archive differ.
    Value::Pairs mine = payloads(model, false);
    detail::StringSet seen;
    for (const auto& kv : mine)
      if (kv.first.is(Value::Kind::Str)) seen.insert(kv.first.as_str());
    for (auto& [k, v] : payloads(model, true)) {
      if (k.is(Value::Kind::Str) && !seen.insert(k.as_str()).second)
        fail(ErrorCode::ambiguous,
             "'" + k.as_str() + "' of model '" + model + "' is both a weight and a constant",
             k.as_str());
      mine.emplace_back(std::move(k), std::move(v));
    }
    // The program's example inputs: its loader requires and unpickles
    // them; a scan judges their pickle.
    const ZipEntry* inputs = find("data/sample_inputs/" + model + ".pt");
    if (inputs == nullptr)
      fail(ErrorCode::corrupt, "model '" + model + "' has no data/sample_inputs/" + model +
                                   ".pt (the PT2 archive's loader requires it)");
    // torch.load(weights_only=True), then weights_only=False if that fails
    // (serialize.py's deserialize_torch_artifact): judged as a file of its
    // own, against the allow-list.
    if (walker_.lists_parts() && inputs->size > 0) list(*inputs, PartRole::member, true);
    if (models.size() == 1)
      all = std::move(mine);
    else
      all.emplace_back(Value::str(model), Value::dict(std::move(mine)));
  }
  // What no config named: no loader's tensor, but a loader reading weights
  // from disk unpickles it; judged by its content.
  for (const ZipEntry& e : entries) list(e, PartRole::member);
  return TensorCatalog::from_value(Format::torch_export, Value::dict(std::move(all)),
                                   options_.limits, std::move(metadata));
}

}  // namespace

bool is_torch_export(const ZipArchive& zip) {
  return zip.find(std::string(kProgram)) != nullptr ||
         std::any_of(zip.entries().begin(), zip.entries().end(), later_layout);
}

TensorCatalog read_torch_export(const std::shared_ptr<const ZipArchive>& archive,
                                const OpenOptions& options, Walker& walker) {
  const ZipArchive& zip = *archive;
  const std::string& where = zip.source().name();
  // Its archives are torch.save's: an export archive inside one (which
  // torch never writes) could nest as deep as the file is long.
  static thread_local int depth = 0;
  if (depth > 0)
    throw Error(ErrorCode::corrupt,
                "a torch.export archive inside another one's serialized .pt (torch writes "
                "torch.save archives there)",
                {}, std::nullopt, where);
  ++depth;
  struct Leave {
    ~Leave() { --depth; }
  } leave;
  const bool later = std::any_of(zip.entries().begin(), zip.entries().end(), later_layout);
  if (later && zip.find(std::string(kProgram)) != nullptr)
    throw Error(ErrorCode::ambiguous,
                "both layouts of torch.export archives (serialized_exported_program.json and a "
                "PT2 archive's archive_format): torch releases would read different programs",
                {}, std::nullopt, where);
  if (later) return Pt2Archive(archive, options, walker).read();
  const ZipEntry* state = find_either(zip, "serialized_state_dict");
  const ZipEntry* constants = find_either(zip, "serialized_constants");
  const ZipEntry* inputs = find_either(zip, "serialized_example_inputs");
  for (const auto& [e, name] : {std::pair{state, "serialized_state_dict.pt"},
                                {constants, "serialized_constants.pt"},
                                {inputs, "serialized_example_inputs.pt"}})
    if (e == nullptr)
      throw Error(
          ErrorCode::corrupt,
          std::string("a torch.export archive without ") + name + " (torch.export.load refuses it)",
          {}, std::nullopt, where);

  if (walker.lists_parts())
    for (const ZipEntry& e : zip.entries()) {
      Part p{PartRole::member, e.name, e.data_offset, e.compressed_size, e.method, {}};
      if (&e == state || &e == constants) {
        continue;  // read below: their pickles are walked
      } else if (is_code(e.name)) {
        p.role = PartRole::code;
      } else if (e.name == kProgram || e.name == "version") {
        p.role = PartRole::metadata;
      } else {
        // The example inputs (torch.load, weights_only=True and then
        // False: judged as a file of their own), and what torch.export.load
        // does not read (extra_files/*, a .json spelling it passed over):
        // judged by their content.
        p.bytes = [archive, e] { return archive->read(e); };
        p.torch_load = &e == inputs;
      }
      walker.part(std::move(p));
    }

  // torch.export.load (2.6 and 2.14) reads "version" first and refuses a
  // schema whose major number is not its own (8 in both).
  std::map<std::string, std::string> metadata;
  const ZipEntry* version = nullptr;
  for (const ZipEntry& e : zip.entries())
    if (e.name == "version") version = &e;
  if (version == nullptr)
    throw Error(ErrorCode::corrupt,
                "a torch.export archive without its version record (torch.export.load refuses "
                "it)",
                {}, std::nullopt, where);
  {
    const Source text = zip.read(*version);
    std::string s(reinterpret_cast<const char*>(text.bytes().data()),
                  std::min<std::size_t>(text.size(), 16));
    for (char& c : s)
      if (c < 0x20 || c >= 0x7f) c = '?';
    const auto dot = s.find('.');
    if (dot == std::string::npos || s.find('.', dot + 1) != std::string::npos ||
        s.substr(0, dot) != "8")
      throw Error(ErrorCode::unsupported,
                  "schema version '" + s +
                      "'; torch.export.load of torch 2.6 to 2.14 reads only major version 8",
                  "version", version->header_offset, where);
    metadata["torch_export.schema_version"] = s;
  }
  // The weights, then the constants, each under its own name; a name in
  // both would make the two readings of the archive differ.
  Value::Pairs all;
  detail::StringSet names;
  for (const ZipEntry* e : {state, constants}) {
    if (e == nullptr) continue;
    const TensorCatalog part = nested(zip, *e, options, walker);
    const Value& root = part.root();
    if (!root.is(Value::Kind::Dict))
      throw Error(ErrorCode::corrupt,
                  e->name + " holds " + root.repr(2) + ", not a dict of tensors by name", {},
                  std::nullopt, where);
    for (const auto& [k, v] : root.pairs()) {
      if (k.is(Value::Kind::Str) && !names.insert(k.as_str()).second)
        throw Error(ErrorCode::ambiguous, "a name both in the state dict and in the constants",
                    k.repr(1), std::nullopt, where);
      all.emplace_back(k, v);
    }
  }
  return TensorCatalog::from_value(Format::torch_export, Value::dict(std::move(all)),
                                   options.limits, std::move(metadata));
}

}  // namespace torchport::formats
