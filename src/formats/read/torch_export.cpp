// torch.export archives (.pt2), as torch 2.6's torch.export.save writes
// them (torch/export/__init__.py, torch/_export/serde/serialize.py): a zip
// (Python's zipfile, stored) of
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
// The catalogue is the state dict's tensors, then the constants', under
// their own names (torch.export.load(path).state_dict and .constants). The
// program is never run or interpreted; the example inputs are no weights
// (a scan judges their pickle, as torch.export.load unpickles it). The PT2
// archive of later torch releases and AOTInductor packages
// (`archive_format`, data/weights/, compiled shared objects) are refused by
// name; a scan lists their shared objects as code.

#include <algorithm>
#include <map>
#include <unordered_set>

#include "formats/read/readers.hpp"
#include "torchport/core/error.hpp"

namespace torchport::formats {
namespace {

constexpr std::string_view kProgram = "serialized_exported_program.json";

// The entry named `name`, or its older ".json" spelling that torch 2.6
// still reads (the same torch.save bytes).
const ZipEntry* find_either(const ZipArchive& zip, const std::string& stem) {
  if (const ZipEntry* e = zip.find(stem + ".pt")) return e;
  return zip.find(stem + ".json");
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
         name.find("/aotinductor/") != std::string::npos;
}

TensorCatalog nested(const ZipArchive& zip, const ZipEntry& e, const OpenOptions& options,
                     Walker& walker) {
  const Source inner = zip.read(e);
  OpenOptions o = options;
  o.format.clear();
  walker.enter(e.name);
  try {
    TensorCatalog cat = read_pytorch_zip(inner, o, walker);
    walker.leave();
    return cat;
  } catch (const Error& x) {
    walker.leave();
    throw Error(x.code(), e.name + ": " + x.message(), x.key(), x.offset(), zip.source().name());
  }
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
  if (walker.lists_parts())
    for (const ZipEntry& e : zip.entries()) {
      Part p{PartRole::member, e.name, e.data_offset, e.compressed_size, e.method, {}};
      if (is_code(e.name)) {
        p.role = PartRole::code;
      } else if (e.name == kProgram || e.name == "version" || later_layout(e)) {
        p.role = PartRole::metadata;
      } else if (e.name.ends_with(".pt") || e.name.starts_with("serialized_")) {
        continue;  // read below: their pickles are walked
      } else {
        p.bytes = [archive, e] { return archive->read(e); };
      }
      walker.part(std::move(p));
    }
  for (const ZipEntry& e : zip.entries())
    if (later_layout(e))
      throw Error(ErrorCode::unsupported,
                  "a PT2 archive of a later torch, or an AOTInductor package ('" + e.name +
                      "'); torchport reads the archives torch 2.6's torch.export.save writes",
                  e.name, e.header_offset, where);
  const ZipEntry* state = find_either(zip, "serialized_state_dict");
  const ZipEntry* constants = find_either(zip, "serialized_constants");
  if (state == nullptr)
    throw Error(ErrorCode::corrupt,
                "a torch.export archive without serialized_state_dict.pt (torch.export.load "
                "refuses it)",
                {}, std::nullopt, where);

  std::map<std::string, std::string> metadata;
  if (const ZipEntry* v = zip.find("version")) {
    const Source text = zip.read(*v);
    std::string s(reinterpret_cast<const char*>(text.bytes().data()),
                  std::min<std::size_t>(text.size(), 16));
    for (char& c : s)
      if (c < 0x20 || c >= 0x7f) c = '?';
    metadata["torch_export.schema_version"] = s;
  }
  // The weights, then the constants, each under its own name; a name in
  // both would make the two readings of the archive differ.
  Value::Pairs all;
  std::unordered_set<std::string> names;
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
  // torch.export.load unpickles the example inputs too: a scan judges them.
  if (walker.lists_parts())
    if (const ZipEntry* ex = find_either(zip, "serialized_example_inputs"); ex && ex->size > 0)
      (void)nested(zip, *ex, options, walker);
  return TensorCatalog::from_value("torch-export", Value::dict(std::move(all)), options.limits,
                                   std::move(metadata));
}

}  // namespace torchport::formats
