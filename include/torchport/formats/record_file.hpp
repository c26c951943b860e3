#pragma once
/// \file
/// Our own record files: named MessagePack (`.mpk`), pretty JSON (`.json`)
/// and a compact binary (`.tpb`), each optionally gzipped, in files or in
/// memory: reading and writing value trees and catalogues.
///
/// \code
/// torchport::write_record(torchport::open("model.pt"), "model.tpb", torchport::CompactBin{});
/// auto catalog = torchport::open("model.tpb");   // open() reads every record format
/// \endcode
///
/// This is part of the `read` component (no dependency beyond zlib).
/// Saving and loading typed modules in these formats (`save_record`) is in
/// `torchport/record/files.hpp`. Byte layouts are in docs/format.md.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/limits.hpp"
#include "torchport/core/value.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/io/source.hpp"

namespace torchport {

/// A record layout to write: one of `SaveFormat`'s `torchport_*` values
/// (the writers refuse the others with Error(invalid_argument)). The
/// subtypes name each, as Burn's recorders do.
struct Recorder {
  SaveFormat format = SaveFormat::torchport_mpk;  ///< the layout, maybe gzipped
};
/// Named MessagePack (`.mpk`).
struct NamedMpk : Recorder {
  NamedMpk() : Recorder{SaveFormat::torchport_mpk} {}
};
/// Named MessagePack, gzipped (`.mpk.gz`).
struct NamedMpkGz : Recorder {
  NamedMpkGz() : Recorder{SaveFormat::torchport_mpk_gz} {}
};
/// Pretty JSON (`.json`).
struct PrettyJson : Recorder {
  PrettyJson() : Recorder{SaveFormat::torchport_json} {}
};
/// Pretty JSON, gzipped (`.json.gz`).
struct PrettyJsonGz : Recorder {
  PrettyJsonGz() : Recorder{SaveFormat::torchport_json_gz} {}
};
/// The compact binary format (`.tpb`).
struct CompactBin : Recorder {
  CompactBin() : Recorder{SaveFormat::torchport_bin} {}
};
/// The compact binary format, gzipped (`.tpb.gz`).
struct CompactBinGz : Recorder {
  CompactBinGz() : Recorder{SaveFormat::torchport_bin_gz} {}
};

/// "torchport-mpk", "torchport-json", "torchport-bin" (the format names
/// files carry and catalogues report; ".gz" appended when gzipped):
/// `save_format_name(r.format)`.
std::string recorder_name(const Recorder& r);
/// The recorder a path's extension asks for (`.mpk`, `.mpk.gz`, `.json`,
/// `.json.gz`, `.tpb`, `.tpb.gz`), if any.
std::optional<Recorder> recorder_for_path(const std::filesystem::path& path);

/// What every record file carries besides the record.
struct RecordMetadata {
  std::string library;                       ///< the torchport version that wrote it
  std::string precision;                     ///< "full", "half", "double" or "keep"
  std::string type;                          ///< the module's type name ("" for an untyped record)
  std::map<std::string, std::string> extra;  ///< user metadata (string values)
};

/// The version of each format this library writes and reads up to.
inline constexpr int kRecordFormatVersion = 1;

/// Writes `tree` atomically to `path`: the file appears whole or not at
/// all. A record holds any value tree a checkpoint does: dicts, lists,
/// scalars, strings, bytes and tensors natively, and as marked entries
/// (docs/format.md) dicts with other keys than strings (an optimizer's
/// state), objects (argparse.Namespace, with their state), global
/// references, tuples, sets, complex numbers, wide integers and non-finite
/// floats; `open()` gives them back as they were.
/// \throws Error(invalid_argument) for a tensor used as a dict key,
/// Error(io) when writing fails.
void write_record(const Value& tree, const std::filesystem::path& path, const Recorder& recorder,
                  const RecordMetadata& metadata);
/// Writes the tensors of any catalogue as a record: a flat dict of name ->
/// tensor, with the catalogue's string metadata. A catalogue read from a
/// PyTorch or safetensors file keeps PyTorch's layout and the record says
/// so (`torchport.layout` = "pytorch"), so loading it into a module applies
/// the PyTorch adapter, as loading the original file would. A record has no
/// views, so each tensor is written whole: past `limits.max_materialized_ratio`
/// times the distinct storage bytes plus `limits.max_materialized_bytes`, it
/// throws Error(limit_exceeded) naming the limit.
///
/// With `whole_object`, the record holds the catalogue's whole object
/// (`catalog.root()`: a training checkpoint's epoch, args and optimizer
/// state where they were, its tensors among them) instead of the flat dict
/// of tensors.
void write_record(const TensorCatalog& catalog, const std::filesystem::path& path,
                  const Recorder& recorder, const Limits& limits = {}, bool whole_object = false);
/// The same, into memory.
std::vector<std::byte> record_to_bytes(const Value& tree, const Recorder& recorder,
                                       const RecordMetadata& metadata);

/// A record read back.
struct ParsedRecord {
  Value tree;               ///< the record as written (dicts, lists, scalars, tensors)
  std::string format;       ///< as `recorder_name`
  int version = 0;          ///< the file's format version (at most `kRecordFormatVersion`)
  RecordMetadata metadata;  ///< who wrote it, at which precision, for which type
};
/// Reads a record (any of our formats, gzipped or not) from `source`.
/// Tensors of the compact binary format (and aligned ones of MessagePack)
/// are zero-copy views of `source`.
/// \throws Error(not_a_checkpoint | corrupt | truncated | unsupported | limit_exceeded).
ParsedRecord read_record(const Source& source, const Limits& limits = {});
/// True when `source` starts like one of our records (gzipped ones included).
bool looks_like_record(const Source& source);
/// The same, from a file's first bytes.
bool looks_like_record(std::span<const std::byte> head);

}  // namespace torchport
