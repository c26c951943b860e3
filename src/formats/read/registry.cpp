// The registry of readers and the format names.

#include "formats/read/registry.hpp"

#include <cstring>
#include <map>

#include "formats/read/readers.hpp"
#include "torchport/formats/record_file.hpp"
#include "torchport/io/tar.hpp"
#include "torchport/io/zip.hpp"

namespace torchport {
namespace {

bool starts_with(std::span<const std::byte> b, std::string_view s) noexcept {
  return b.size() >= s.size() && std::memcmp(b.data(), s.data(), s.size()) == 0;
}

// torch's _is_zipfile: the first four bytes are a local header's signature.
// (An empty archive's end record is taken too, to say it is empty.)
bool sniff_zip(const Source& s) noexcept {
  return starts_with(s.bytes(), "PK\x03\x04") || starts_with(s.bytes(), "PK\x05\x06");
}

bool sniff_tar(const Source& s) noexcept {
  return looks_like_tar(s.bytes());
}

// Pickle protocols 2+ start with PROTO; 0 and 1 with one of the opcodes
// that can open a stream (STOP cannot: an empty stack).
bool sniff_pickle(const Source& s) noexcept {
  const auto b = s.bytes();
  if (b.size() < 2) return false;
  const auto c = static_cast<unsigned char>(b[0]);
  if (c == 0x80) return static_cast<unsigned char>(b[1]) <= 5;
  return c != 0 && std::strchr("(]})NcKJMIFLSVXTUG", c) != nullptr;
}

bool sniff_safetensors(const Source& s) noexcept {
  const auto b = s.bytes();
  if (b.size() < 10) return false;
  std::uint64_t n;
  std::memcpy(&n, b.data(), 8);
  return n >= 2 && n <= b.size() - 8 && static_cast<char>(b[8]) == '{';
}

bool sniff_npy(const Source& s) noexcept {
  return starts_with(s.bytes(), "\x93NUMPY");
}

bool sniff_record(const Source& s) noexcept {
  try {
    return looks_like_record(s);
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
  return TensorCatalog::from_value(r.format, std::move(r.tree), options.limits, std::move(meta));
}

using open_detail::Reader;

// torch.load's order: zip (TorchScript inside it), tar, legacy pickle; then ours.
constexpr Reader kReaders[] = {
    {Format::pytorch_zip, "pytorch-zip", sniff_zip, formats::read_pytorch_zip},
    {Format::torchscript, "torchscript", nullptr, formats::read_pytorch_zip},
    {Format::pytorch_tar, "pytorch-tar", sniff_tar, formats::read_pytorch_tar},
    {Format::pytorch_legacy, "pytorch-legacy", sniff_pickle, formats::read_pytorch_legacy},
    {Format::pickle, "pickle", nullptr, formats::read_pytorch_legacy},
    {Format::safetensors, "safetensors", sniff_safetensors, formats::read_safetensors},
    {Format::numpy, "numpy", sniff_npy, formats::read_numpy},
    {Format::sharded_safetensors, "sharded-safetensors", nullptr, nullptr},
    {Format::sharded_pytorch, "sharded-pytorch", nullptr, nullptr},
    {Format::dcp, "dcp", nullptr, nullptr},
    {Format::torch_export, "torch-export", nullptr, formats::read_pytorch_zip},
    {Format::torchport_record, "torchport", sniff_record, read_record_catalog},
    {Format::value, "value", nullptr, nullptr},
};

}  // namespace

namespace open_detail {

std::span<const Reader> readers() noexcept {
  return kReaders;
}

const Reader& reader(Format format) noexcept {
  for (const Reader& r : kReaders)
    if (r.format == format) return r;
  return kReaders[0];  // unreachable: every Format has a row
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

bool is_sharded(Format format) noexcept {
  return format == Format::sharded_safetensors || format == Format::sharded_pytorch;
}

bool has_torchport_layout(std::string_view catalog_format) noexcept {
  const auto f = parse_format(catalog_format);
  return f == Format::torchport_record || f == Format::value;
}

std::optional<Format> sniff(const Source& source) noexcept {
  // torch's containers first, in its order; then the formats torch does not
  // read, the structured ones before the pickle (whose first byte alone is
  // a weak sign). open() refuses files more than one reader accepts.
  for (Format f : {Format::pytorch_zip, Format::pytorch_tar, Format::safetensors, Format::numpy,
                   Format::torchport_record, Format::pytorch_legacy})
    if (open_detail::reader(f).sniff(source)) return f;
  return std::nullopt;
}

}  // namespace torchport
