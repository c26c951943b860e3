// open(): which reader reads a file, decided once, as torch.load decides it
// for the formats torch reads (zip by its first four bytes, then a tar as
// Python's tarfile opens it, then the legacy pickle), and refused as
// ambiguous wherever two readers would both read the bytes.

#include "torchport/formats/open.hpp"

#include <cctype>
#include <cstring>
#include <optional>
#include <vector>

#include "formats/read/readers.hpp"
#include "formats/read/registry.hpp"
#include "io/tar.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/format.hpp"

namespace torchport {
namespace {

using open_detail::Reader;

bool starts_with(std::span<const std::byte> b, std::string_view s) {
  return b.size() >= s.size() && std::memcmp(b.data(), s.data(), s.size()) == 0;
}

std::string hint_for(std::span<const std::byte> b, std::uint64_t size) {
  if (starts_with(b, "version https://git-lfs"))
    return "; this is a Git LFS pointer, not the file: run `git lfs pull`";
  if (starts_with(b, "<!DOCTYPE") || starts_with(b, "<html") || starts_with(b, "<HTML"))
    return "; this is an HTML page, a failed download?";
  if (size == 0) return "; the file is empty";
  // No byte of the file is quoted: it is not a checkpoint, and may be any
  // file at all (a shard index can name one).
  return " (" + std::to_string(size) + " bytes)";
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
      return std::string(catalog->format_name()) + " (" + std::to_string(catalog->size()) +
             " tensors)";
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

TensorCatalog read_sniffed(const Source& given, const OpenOptions& options,
                           formats::Walker& walker) {
  Source source = given;
  // A ranged source (a remote file) is sniffed on its first bytes, read once.
  Source head = open_detail::sniff_head(source);
  bool need_more = false;
  TarOpen tar = probe_tar(head.bytes(), source.size(), need_more);
  if (need_more) {
    // The first member's long-name or pax headers run past the head:
    // whether tarfile opens the file is told by the whole of it.
    source = source.whole(options.limits.max_whole_read_bytes, "Limits::max_whole_read_bytes",
                          "telling whether a file with a tar header longer than 64 KiB is a tar");
    head = source;
    tar = probe_tar(source.bytes());
  }
  const auto bytes = head.bytes();
  const std::uint64_t size = source.size();
  const Reader& zip = open_detail::reader(Format::pytorch_zip);
  if (zip.sniff(bytes, size)) {
    if (tar != TarOpen::refused)
      ambiguous(source, "a zip archive (torch.load reads it so)",
                "a tar archive (Python's tarfile opens it)",
                "tar readers would read other members than torch does");
    return zip.read(source, options, walker);
  }
  std::vector<const Reader*> others;
  for (Format f : kOthers)
    if (const Reader& r = open_detail::reader(f); r.sniff(bytes, size)) others.push_back(&r);

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
            hint_for(bytes, size),
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
    if (t.catalog && t.catalog->format() == Format::pickle) continue;
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

TensorCatalog read_as_torch_load(const Source& source, const OpenOptions& options, Walker& walker) {
  // torch.load on a file object without a fileno() (torch.export.load
  // hands it io.BytesIO) never tries tarfile (_should_read_directly): a zip
  // by its first four bytes, else the legacy pickle, whatever else the
  // bytes may be.
  const Format format = torch_load_format(source);
  TensorCatalog cat = open_detail::reader(format).read(source, options, walker);
  if (format != Format::pytorch_zip) return cat;
  // A zip is torch.save's archive to torch.load: one the registry tells as
  // numpy's (every member an .npy) torch fails on, having no data.pkl.
  if (cat.format() == Format::numpy)
    throw Error(ErrorCode::corrupt,
                "numpy's .npz archive where torch.load reads a torch.save archive (torch finds "
                "no data.pkl in it)",
                {}, std::nullopt, source.name());
  return cat;
}

Format torch_load_format(const Source& source) {
  const Reader& zip = open_detail::reader(Format::pytorch_zip);
  return zip.sniff(open_detail::sniff_head(source).bytes(), source.size()) ? Format::pytorch_zip
                                                                           : Format::pytorch_legacy;
}

TensorCatalog walk(const Source& source, const OpenOptions& options, Walker& walker) {
  if (!options.format) return read_sniffed(source, options, walker);
  const Reader& r = open_detail::reader(*options.format);
  if (r.read == nullptr)
    throw Error(ErrorCode::invalid_argument,
                "format '" + std::string(r.name) +
                    (read_from_path(*options.format)
                         ? "' is read from a path (an *.index.json, a folder), not from bytes"
                         : "' is not read from a file"),
                {}, std::nullopt, source.name());
  TensorCatalog cat = r.read(source, options, walker);
  // One reader serves several rows (a zip reader tells TorchScript, an
  // .npz and a .pt2 apart; the legacy reader a plain pickle): what it
  // found must be the format asked for, or one torch reads the same way.
  const Format asked = *options.format, found = cat.format();
  const bool same = found == asked ||
                    (asked == Format::pytorch_zip && found == Format::torchscript) ||
                    (asked == Format::pytorch_legacy && found == Format::pickle) ||
                    (asked == Format::pickle && found == Format::pytorch_legacy);
  if (!same)
    throw Error(ErrorCode::not_a_checkpoint,
                "not " + std::string(format_name(asked)) + " as asked: the file is " +
                    std::string(cat.format_name()) + " (" + std::to_string(cat.size()) +
                    " tensors)",
                {}, std::nullopt, source.name());
  return cat;
}

namespace {

// A URL without its query and fragment (where a presigned URL keeps its
// signature) and without user information: what messages may show.
std::string url_path(const std::string& url) {
  return url.substr(0, std::min(url.find('?'), url.find('#')));
}

// `folder` (ending in '/') joined with a plain file name, percent-encoded.
std::string join_url(const std::string& folder, const std::string& name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = folder;
  for (const unsigned char c : name) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

TensorCatalog read_url(const std::string& url, const OpenOptions& options, Walker& walker) {
  if (!options.remote)
    throw Error(ErrorCode::unsupported,
                "a URL: reading remote checkpoints needs the torchport::remote component (link "
                "it and set OpenOptions::remote = torchport::remote::opener(); the torchport tool "
                "does)",
                {}, std::nullopt, url_path(url));
  const RemoteOpener& remote = *options.remote;
  const std::string path = url_path(url);
  if (url.size() != path.size() &&
      (path.ends_with("/") || path.ends_with(".index.json") || path.ends_with("/.metadata")))
    throw Error(ErrorCode::unsupported,
                "a folder or index URL with a query: the files it names are opened beside it, "
                "where a query (a presigned URL's signature) would not apply",
                {}, std::nullopt, path);
  const std::string folder = path.substr(0, path.rfind('/') + 1);
  const auto open_in = [&](const std::string& name) {
    return remote.open(join_url(folder, name), options.limits);
  };
  OpenOptions o = options;
  o.format.reset();
  if (path.ends_with(".index.json"))
    return read_shard_index(remote.open(url, options.limits), open_in, o, walker);
  if (path.ends_with("/.metadata")) return read_dcp_files(open_in, path, o, walker);
  if (!path.ends_with("/")) return walk(remote.open(url, options.limits), options, walker);
  // A folder: what is in it cannot be listed, so the names its readers
  // look for are asked for: a DCP's .metadata, a shard index, a weights file.
  if (remote.exists(join_url(folder, ".metadata"), options.limits))
    return read_dcp_files(open_in, path + ".metadata", o, walker);
  for (const char* index : {"model.safetensors.index.json", "pytorch_model.bin.index.json"})
    if (remote.exists(join_url(folder, index), options.limits))
      return read_shard_index(open_in(index), open_in, o, walker);
  std::vector<std::string> picks;
  for (const auto& [first, second] :
       {std::pair{"model.safetensors", "pytorch_model.bin"},
        std::pair{"adapter_model.safetensors", "adapter_model.bin"},
        std::pair{"diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.bin"}})
    for (const char* name : {first, second})
      if (remote.exists(join_url(folder, name), options.limits)) {
        picks.push_back(name);
        break;
      }
  if (picks.size() > 1)
    throw Error(ErrorCode::ambiguous,
                "the folder holds the weights of " + std::to_string(picks.size()) +
                    " libraries' layouts (" + picks[0] + ", " + picks[1] +
                    "): which one a loader reads depends on the library; open the file you mean",
                {}, std::nullopt, path);
  if (picks.empty())
    throw Error(ErrorCode::not_a_checkpoint,
                "the folder URL has no .metadata (a distributed checkpoint), no "
                "model.safetensors.index.json or pytorch_model.bin.index.json and no "
                "model.safetensors, pytorch_model.bin or adapter or diffusers weights; open the "
                "file or index you mean",
                {}, std::nullopt, path);
  TensorCatalog cat = walk(open_in(picks.front()), o, walker);
  cat.set_metadata("torchport.folder_file", picks.front());
  return cat;
}

TensorCatalog walk_sharded(const std::filesystem::path& path, const OpenOptions& options,
                           Walker& walker) {
  const std::optional<Format> format = options.format ? options.format : path_format(path);
  switch (format.value_or(Format::sharded_safetensors)) {
    case Format::dcp:
      return read_dcp(path, options, walker);
    case Format::dcp_safetensors:
      return read_dcp_safetensors(path, options, walker);
    default:
      return read_sharded(path, options, walker);
  }
}

}  // namespace formats

TensorCatalog open(const Source& source, const OpenOptions& options) try {
  formats::LoadWalker walker(options);
  return formats::walk(source, options, walker);
} catch (...) {
  rethrow_as_error("open", source.name());  // no bare std:: exception leaves the library
}

TensorCatalog open(const std::filesystem::path& path, const OpenOptions& options) try {
  if (is_url(path.string())) {
    formats::LoadWalker walker(options);
    return formats::read_url(path.string(), options, walker);
  }
  // What the path holds decides its reader (registry.cpp): a folder or an
  // index is read from the path, a file from its bytes.
  const auto format = options.format ? options.format : formats::path_format(path);
  formats::LoadWalker walker(options);
  if (format && formats::read_from_path(*format))
    return formats::walk_sharded(path, options, walker);
  return formats::walk(Source::map_file(path, options.map), options, walker);
} catch (...) {
  rethrow_as_error("open", path.string());  // no bare std:: exception leaves the library
}

}  // namespace torchport
