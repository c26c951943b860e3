// open(): which reader reads a file, decided once, as torch.load decides it
// for the formats torch reads (zip by its first four bytes, then a tar as
// Python's tarfile opens it, then the legacy pickle), and refused as
// ambiguous wherever two readers would both read the bytes.

#include "torchport/formats/open.hpp"

#include <cstring>
#include <optional>
#include <vector>

#include "formats/read/readers.hpp"
#include "formats/read/registry.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/io/tar.hpp"

namespace torchport {
namespace {

using open_detail::Reader;

bool starts_with(std::span<const std::byte> b, std::string_view s) {
  return b.size() >= s.size() && std::memcmp(b.data(), s.data(), s.size()) == 0;
}

std::string hint_for(std::span<const std::byte> b) {
  if (starts_with(b, "version https://git-lfs"))
    return "; this is a Git LFS pointer, not the file: run `git lfs pull`";
  if (starts_with(b, "<!DOCTYPE") || starts_with(b, "<html") || starts_with(b, "<HTML"))
    return "; this is an HTML page, a failed download?";
  if (b.empty()) return "; the file is empty";
  // No byte of the file is quoted: it is not a checkpoint, and may be any
  // file at all (a shard index can name one).
  return " (" + std::to_string(b.size()) + " bytes)";
}

// One reader tried on the bytes: what it read, or the error that says it
// does not read them.
struct Trial {
  const Reader* reader = nullptr;
  std::optional<TensorCatalog> catalog;
  std::optional<Error> error;
  // The reader takes the bytes as its format: it read them, or failed past
  // the point of recognising them (a dangerous global, a feature we do not
  // read). Errors any bytes can give a reader that tries them (a length past
  // a limit, a structure that does not hold) are no reading.
  bool accepted() const {
    if (catalog) return true;
    const ErrorCode c = error->code();
    return c == ErrorCode::unsafe_global || c == ErrorCode::unsupported;
  }
  std::string reading() const {
    if (catalog)
      return std::string(catalog->format()) + " (" + std::to_string(catalog->size()) + " tensors)";
    return std::string(reader->name) + " (" + std::string(error_code_name(error->code())) + ")";
  }
};

Trial attempt(const Reader& r, const Source& source, const OpenOptions& options,
              formats::Walker& walker) {
  Trial t;
  t.reader = &r;
  try {
    t.catalog = r.read(source, options, walker);
  } catch (const Error& e) {
    t.error = e;
  }
  return t;
}

[[noreturn]] void ambiguous(const Source& source, const std::string& a, const std::string& b,
                            const std::string& why) {
  throw Error(
      ErrorCode::ambiguous,
      "the file reads both as " + a + " and as " + b + ": " + why + "; refusing to pick one", {},
      std::nullopt, source.name());
}

// The formats torch does not read, in the order `sniff` prefers them.
constexpr Format kOthers[] = {Format::safetensors, Format::numpy, Format::torchport_record,
                              Format::pytorch_legacy};

TensorCatalog read_sniffed(const Source& source, const OpenOptions& options,
                           formats::Walker& walker) {
  const auto bytes = source.bytes();
  const Reader& zip = open_detail::reader(Format::pytorch_zip);
  const TarOpen tar = probe_tar(bytes);
  if (zip.sniff(source)) {
    if (tar != TarOpen::refused)
      ambiguous(source, "a zip archive (torch.load reads it so)",
                "a tar archive (Python's tarfile opens it)",
                "tar readers would read other members than torch does");
    return zip.read(source, options, walker);
  }
  std::vector<const Reader*> others;
  for (Format f : kOthers)
    if (const Reader& r = open_detail::reader(f); r.sniff(source)) others.push_back(&r);

  if (tar != TarOpen::refused) {
    // torch.load reads any file Python's tarfile opens as a tar: a file our
    // other readers also take is read differently by torch and by us.
    OpenOptions o = options;
    o.allow_unknown_globals = true;
    for (const Reader* r : others)
      if (Trial t = attempt(*r, source, o, walker); t.accepted())
        ambiguous(source,
                  "a tar archive (Python's tarfile opens it, so torch.load reads it as one)",
                  t.reading(), "torch would read the tar's members, torchport the other format");
    return open_detail::reader(Format::pytorch_tar).read(source, options, walker);
  }
  if (others.empty())
    throw Error(
        ErrorCode::not_a_checkpoint,
        "not a checkpoint torchport reads: neither a zip, tar, pickle nor safetensors file" +
            hint_for(bytes),
        {}, std::nullopt, source.name());
  if (others.size() == 1) return others.front()->read(source, options, walker);

  // Several first-byte matches (a safetensors header length whose low byte
  // is a pickle opcode, say): each reader tries; two that read it are two
  // readings of one file.
  std::vector<Trial> trials;
  for (const Reader* r : others) trials.push_back(attempt(*r, source, options, walker));
  const Trial* chosen = nullptr;
  for (const Trial& t : trials) {
    if (!t.accepted()) continue;
    if (chosen == nullptr) {
      chosen = &t;
      continue;
    }
    // A plain pickle (no torch magic) is no format torch reads: a structured
    // format that reads the bytes wins over it. torch's legacy pickle does not.
    if (t.catalog && parse_format(t.catalog->format()) == Format::pickle) continue;
    ambiguous(source, chosen->reading(), t.reading(),
              t.reader->format == Format::pytorch_legacy ? "torch.load reads the legacy pickle"
                                                         : "readers disagree");
  }
  if (chosen == nullptr) chosen = &trials.front();
  if (chosen->catalog) return *chosen->catalog;
  throw *chosen->error;
}

}  // namespace

std::string sniff_format(const Source& source) {
  const auto f = sniff(source);
  return f ? std::string(format_name(*f)) : std::string();
}

namespace formats {

TensorCatalog walk(const Source& source, const OpenOptions& options, Walker& walker) {
  if (options.format.empty()) return read_sniffed(source, options, walker);
  const auto format = parse_format(options.format);
  if (!format) throw Error(ErrorCode::invalid_argument, "unknown format '" + options.format + "'");
  const Reader& r = open_detail::reader(*format);
  if (r.read == nullptr)
    throw Error(ErrorCode::invalid_argument,
                "format '" + options.format +
                    (is_sharded(*format) || *format == Format::dcp
                         ? "' is read from a path (an *.index.json, a folder), not from bytes"
                         : "' is not read from a file"),
                {}, std::nullopt, source.name());
  return r.read(source, options, walker);
}

TensorCatalog walk_sharded(const std::filesystem::path& path, const OpenOptions& options,
                           Walker& walker) {
  if (is_dcp_path(path)) return read_dcp(path, options, walker);
  return read_sharded(path, options, walker);
}

}  // namespace formats

TensorCatalog open(const Source& source, const OpenOptions& options) try {
  formats::LoadWalker walker(options);
  return formats::walk(source, options, walker);
} catch (...) {
  rethrow_as_error("open", source.name());  // no bare std:: exception leaves the library
}

TensorCatalog open(const std::filesystem::path& path, const OpenOptions& options) try {
  const auto format = options.format.empty() ? std::nullopt : parse_format(options.format);
  formats::LoadWalker walker(options);
  if (options.format.empty() ? formats::is_dcp_path(path) : options.format == "dcp")
    return formats::read_dcp(path, options, walker);
  if ((options.format.empty() && formats::is_sharded_path(path)) || (format && is_sharded(*format)))
    return formats::read_sharded(path, options, walker);
  return formats::walk(Source::map_file(path, options.map), options, walker);
} catch (...) {
  rethrow_as_error("open", path.string());  // no bare std:: exception leaves the library
}

}  // namespace torchport
