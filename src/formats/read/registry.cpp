// The registry of readers and the format names.

#include "formats/read/registry.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "formats/read/readers.hpp"
#include "formats/read/shards.hpp"
#include "io/tar.hpp"
#include "io/zip.hpp"
#include "torchport/formats/record_file.hpp"

namespace torchport {
namespace {

bool starts_with(std::span<const std::byte> b, std::string_view s) noexcept {
  return b.size() >= s.size() && std::memcmp(b.data(), s.data(), s.size()) == 0;
}

// torch's _is_zipfile: the first four bytes are a local header's signature.
// (An empty archive's end record is taken too, to say it is empty.)
bool sniff_zip(std::span<const std::byte> b, std::uint64_t) noexcept {
  return starts_with(b, "PK\x03\x04") || starts_with(b, "PK\x05\x06");
}

bool sniff_tar(std::span<const std::byte> b, std::uint64_t size) noexcept {
  bool more = false;
  // A head too short to tell is claimed: open() reads on (read_sniffed).
  return probe_tar(b, size, more) != TarOpen::refused || more;
}

// Pickle protocols 2+ start with PROTO; 0 and 1 with one of the opcodes
// that can open a stream (STOP cannot: an empty stack).
bool sniff_pickle(std::span<const std::byte> b, std::uint64_t) noexcept {
  if (b.size() < 2) return false;
  const auto c = static_cast<unsigned char>(b[0]);
  if (c == 0x80) return static_cast<unsigned char>(b[1]) <= 5;
  return c != 0 && std::strchr("(]})NcKJMIFLSVXTUG", c) != nullptr;
}

bool sniff_safetensors(std::span<const std::byte> b, std::uint64_t size) noexcept {
  if (b.size() < 10 || size < 10) return false;
  std::uint64_t n;
  std::memcpy(&n, b.data(), 8);
  return n >= 2 && n <= size - 8 && static_cast<char>(b[8]) == '{';
}

bool sniff_npy(std::span<const std::byte> b, std::uint64_t) noexcept {
  return starts_with(b, "\x93NUMPY");
}

bool sniff_record(std::span<const std::byte> b, std::uint64_t) noexcept {
  try {
    return looks_like_record(b);
  } catch (...) {
    return false;
  }
}

TensorCatalog read_record_catalog(const Source& source, const OpenOptions& options,
                                  formats::Walker& walker) {
  // Our records hold no pickle: a header and tensor bytes.
  if (walker.lists_parts())
    walker.part({formats::PartRole::metadata, "record", 0, source.size(), 0, {}});
  ParsedRecord r = read_record(source, options.limits);
  std::map<std::string, std::string> meta = r.metadata.extra;
  meta["torchport.version"] = std::to_string(r.version);
  meta["torchport.library"] = r.metadata.library;
  meta["torchport.precision"] = r.metadata.precision;
  meta["torchport.type"] = r.metadata.type;
  TensorCatalog cat = TensorCatalog::from_value(Format::torchport_record, std::move(r.tree),
                                                options.limits, std::move(meta));
  cat.set_format_name(std::move(r.format));  // the record's layout: "torchport-mpk.gz"
  return cat;
}

using open_detail::Reader;

// torch.load's order: zip (TorchScript inside it), tar, legacy pickle; then ours.
constexpr Reader kReaders[] = {
    {Format::pytorch_zip, "pytorch-zip", sniff_zip, formats::read_pytorch_zip, formats::sweep_zip},
    {Format::torchscript, "torchscript", nullptr, formats::read_pytorch_zip, formats::sweep_zip},
    {Format::pytorch_tar, "pytorch-tar", sniff_tar, formats::read_pytorch_tar},
    {Format::pytorch_legacy, "pytorch-legacy", sniff_pickle, formats::read_pytorch_legacy,
     formats::sweep_pickle_stream},
    {Format::pickle, "pickle", nullptr, formats::read_pytorch_legacy, formats::sweep_pickle_stream},
    {Format::safetensors, "safetensors", sniff_safetensors, formats::read_safetensors},
    {Format::numpy, "numpy", sniff_npy, formats::read_numpy},
    {Format::sharded_safetensors, "sharded-safetensors", nullptr, nullptr},
    {Format::sharded_pytorch, "sharded-pytorch", nullptr, nullptr},
    {Format::dcp, "dcp", nullptr, nullptr},
    {Format::dcp_safetensors, "dcp-safetensors", nullptr, nullptr},
    {Format::torch_export, "torch-export", nullptr, formats::read_pytorch_zip},
    {Format::torchport_record, "torchport", sniff_record, read_record_catalog},
    {Format::value, "value", nullptr, nullptr},
    {Format::state_dict, "state-dict", nullptr, nullptr},
};

}  // namespace

namespace open_detail {

Source sniff_head(const Source& source) {
  return source.contiguous() ? source : source.head(kSniffBytes);
}

std::span<const Reader> readers() noexcept {
  return kReaders;
}

const Reader& reader(Format format) noexcept {
  for (const Reader& r : kReaders)
    if (r.format == format) return r;
  return kReaders[0];  // unreachable: every Format has a row
}

ZipKind zip_kind(const ZipArchive& zip) {
  if (formats::is_npz(zip)) return ZipKind::npz;
  if (formats::is_torch_export(zip)) return ZipKind::torch_export;
  return ZipKind::torch;
}

bool torch_archive(std::span<const std::byte> bytes) noexcept {
  return looks_like_zip(bytes) || looks_like_tar(bytes);
}

std::optional<Wrapping> wrapping(std::span<const std::byte> b) noexcept {
  const auto wrap = [](Compression c, std::size_t at, std::string_view label) {
    return Wrapping{c, at, label, compression_name(c), weak_magic(c)};
  };
  if (const auto c = sniff_compression(b)) return wrap(*c, 0, {});
  // joblib's format before 0.10 (joblib.load still reads it:
  // numpy_pickle_compat.read_zfile): "ZF", the inflated size in 19
  // characters of hex (an optional space after them), then zlib data,
  // whose pickle joblib runs.
  if (b.size() < 23 || b[0] != std::byte{'Z'} || b[1] != std::byte{'F'}) return std::nullopt;
  for (const std::size_t at : {std::size_t{21}, std::size_t{22}})
    if (sniff_compression(b.subspan(at)) == Compression::zlib)
      return wrap(Compression::zlib, at, "joblib-zfile");
  return std::nullopt;
}

formats::PartBytes unwrap(const Source& source, const Wrapping& w, std::uint64_t cap,
                          const std::string& cap_text) {
  Decompressed d =
      decompress(w.compression, source.bytes().subspan(w.at), cap, cap_text, source.name());
  return {Source::from_buffer(std::move(d.bytes), source.name() + "!" + std::string(w.name)),
          std::move(d.error), std::string(w.name) + " data"};
}

}  // namespace open_detail

std::string_view format_name(Format format) noexcept {
  return open_detail::reader(format).name;
}

std::optional<Format> parse_format(std::string_view name) noexcept {
  for (const Reader& r : kReaders)
    if (r.name == name) return r.format;
  if (name.ends_with(".gz")) name.remove_suffix(3);
  if (name == "torchport-mpk" || name == "torchport-json" || name == "torchport-bin")
    return Format::torchport_record;
  return std::nullopt;
}

Format format_from_name(std::string_view name) {
  if (const auto f = parse_format(name)) return *f;
  std::string names;
  for (const Reader& r : kReaders) names += (names.empty() ? "" : ", ") + std::string(r.name);
  throw Error(ErrorCode::invalid_argument,
              "unknown format '" + std::string(name) + "' (the formats: " + names +
                  ", or a record's layout: torchport-mpk, torchport-json, torchport-bin, each "
                  "maybe .gz)");
}

namespace formats {

namespace fs = std::filesystem;

void sweep(const Source& source, Format format, const OpenOptions& options, Walker& walker) {
  if (const auto f = open_detail::reader(format).sweep; f && walker.lists_parts())
    f(source, options, walker);
}

namespace {

constexpr std::string_view kIndexSuffix = ".index.json";

bool is_index_name(const std::string& name) {
  return name.size() > kIndexSuffix.size() && name.ends_with(kIndexSuffix);
}

// A safetensors file whose __metadata__ says where its tensors lie in
// global ones: a shard of torch's HuggingFaceStorageWriter (_hf_utils.
// CUSTOM_METADATA_KEY). Its header is parsed by the safetensors reader;
// a file whose real path leaves the folder is not read at all.
bool has_sharding_info(const fs::path& root, const fs::path& file) {
  try {
    OpenOptions o;
    LoadWalker walker(o);
    const TensorCatalog cat =
        read_safetensors(Source::map_file(resolve_inside(root, file), o.map), o, walker);
    return cat.metadata().count("DCP_SHARDING_INFO") != 0;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

bool is_dcp_path(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fs::is_regular_file(path / ".metadata", ec);
  return path.filename() == ".metadata" && fs::is_regular_file(path, ec);
}

std::optional<Format> path_format(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    const std::string name = path.filename().string();
    if (name == ".metadata" && fs::is_regular_file(path, ec)) return Format::dcp;
    if (is_index_name(name)) return Format::sharded_safetensors;
    return std::nullopt;
  }
  bool metadata = false;
  std::string index;
  std::vector<fs::path> safetensors;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code fec;
    if (!it->is_regular_file(fec)) continue;
    if (name == ".metadata") metadata = true;
    if (is_index_name(name)) index = name;
    if (name.ends_with(".safetensors")) safetensors.push_back(it->path());
  }
  if (metadata && !index.empty())
    throw Error(ErrorCode::ambiguous,
                "the folder holds both a distributed checkpoint's .metadata (torch's "
                "FileSystemReader reads the files it names) and '" +
                    index +
                    "' (transformers reads the shards it names); refusing to pick one: open the "
                    ".metadata or the index",
                {}, std::nullopt, path.string());
  if (metadata) return Format::dcp;
  if (index.empty() && !safetensors.empty()) {
    std::sort(safetensors.begin(), safetensors.end());
    const fs::path root = shard_root(path);
    for (const fs::path& f : safetensors)
      if (has_sharding_info(root, f)) return Format::dcp_safetensors;
  }
  return Format::sharded_safetensors;
}

bool read_from_path(Format format) noexcept {
  return is_sharded(format) || format == Format::dcp || format == Format::dcp_safetensors;
}

}  // namespace formats

bool is_sharded(Format format) noexcept {
  return format == Format::sharded_safetensors || format == Format::sharded_pytorch;
}

bool has_torchport_layout(Format format) noexcept {
  return format == Format::torchport_record || format == Format::value;
}

std::optional<Format> sniff(const Source& source) noexcept {
  // torch's containers first, in its order; then the formats torch does not
  // read, the structured ones before the pickle (whose first byte alone is
  // a weak sign). open() refuses files more than one reader accepts.
  Source head;
  try {
    head = open_detail::sniff_head(source);
  } catch (...) {
    return std::nullopt;  // unreadable: no format
  }
  for (Format f : {Format::pytorch_zip, Format::pytorch_tar, Format::safetensors, Format::numpy,
                   Format::torchport_record, Format::pytorch_legacy})
    if (open_detail::reader(f).sniff(head.bytes(), source.size())) return f;
  return std::nullopt;
}

}  // namespace torchport
