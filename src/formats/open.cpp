#include "torchport/formats/open.hpp"

#include <cctype>
#include <cstring>

#include "readers.hpp"
#include "torchport/core/error.hpp"
#include "torchport/io/tar.hpp"
#include "torchport/io/zip.hpp"
#include "torchport/recorders/recorder.hpp"

namespace torchport {
namespace {

bool starts_with(std::span<const std::byte> b, std::string_view s) {
  return b.size() >= s.size() && std::memcmp(b.data(), s.data(), s.size()) == 0;
}

// Pickle protocols 2+ start with PROTO; 0 and 1 with one of a few opcodes
// that can open a stream.
bool looks_like_pickle(std::span<const std::byte> b) {
  if (b.size() < 2) return false;
  const auto c = static_cast<unsigned char>(b[0]);
  if (c == 0x80) return static_cast<unsigned char>(b[1]) <= 5;
  return std::strchr("(]}).NcKJMIFLSVXTUG", c) != nullptr && c != 0;
}

bool looks_like_safetensors(std::span<const std::byte> b) {
  if (b.size() < 10) return false;
  std::uint64_t n;
  std::memcpy(&n, b.data(), 8);
  return n >= 2 && n <= b.size() - 8 && static_cast<char>(b[8]) == '{';
}

std::string hint_for(std::span<const std::byte> b) {
  if (starts_with(b, "version https://git-lfs")) return "; this is a Git LFS pointer, not the file: run `git lfs pull`";
  if (starts_with(b, "<!DOCTYPE") || starts_with(b, "<html") || starts_with(b, "<HTML"))
    return "; this is an HTML page, a failed download?";
  if (starts_with(b, "\x1f\x8b")) return "; this is gzip-compressed: decompress it first";
  if (b.empty()) return "; the file is empty";
  // No byte of the file is quoted: it is not a checkpoint, and may be any
  // file at all (a shard index can name one).
  return " (" + std::to_string(b.size()) + " bytes)";
}

}  // namespace

std::string sniff_format(const Source& source) {
  const auto b = source.bytes();
  if (looks_like_zip(b)) return "pytorch-zip";
  if (looks_like_tar(b)) return "pytorch-tar";
  if (looks_like_safetensors(b)) return "safetensors";
  if (looks_like_record(source)) return "torchport";
  if (looks_like_pickle(b)) return "pytorch-legacy";
  return "";
}

TensorCatalog open(const Source& source, const OpenOptions& options) try {
  const std::string format = options.format.empty() ? sniff_format(source) : options.format;
  if (format == "pytorch-zip" || format == "torchscript") return formats::read_pytorch_zip(source, options);
  if (format == "pytorch-tar") return formats::read_pytorch_tar(source, options);
  if (format == "pytorch-legacy" || format == "pickle") return formats::read_pytorch_legacy(source, options);
  if (format == "safetensors") return formats::read_safetensors(source, options);
  if (format.starts_with("torchport")) {
    ParsedRecord r = read_record(source, options.limits);
    std::map<std::string, std::string> meta = r.metadata.extra;
    meta["torchport.version"] = std::to_string(r.version);
    meta["torchport.library"] = r.metadata.library;
    meta["torchport.precision"] = r.metadata.precision;
    meta["torchport.type"] = r.metadata.type;
    return TensorCatalog::from_value(r.format, std::move(r.tree), options.limits, std::move(meta));
  }
  if (format.starts_with("sharded"))
    throw Error(ErrorCode::invalid_argument,
                "format '" + format + "' is read from a path (an *.index.json or its directory), not from bytes",
                {}, std::nullopt, source.name());
  if (!options.format.empty())
    throw Error(ErrorCode::invalid_argument, "unknown format '" + options.format + "'");
  throw Error(ErrorCode::not_a_checkpoint,
              "not a checkpoint torchport reads: neither a zip, tar, pickle nor safetensors file" +
                  hint_for(source.bytes()),
              {}, std::nullopt, source.name());
} catch (...) {
  rethrow_as_error("open", source.name());  // no bare std:: exception leaves the library
}

TensorCatalog open(const std::filesystem::path& path, const OpenOptions& options) try {
  if ((options.format.empty() && formats::is_sharded_path(path)) ||
      options.format == "sharded-safetensors" || options.format == "sharded-pytorch")
    return formats::read_sharded(path, options);
  return open(Source::map_file(path, options.map), options);
} catch (...) {
  rethrow_as_error("open", path.string());  // no bare std:: exception leaves the library
}

}  // namespace torchport
