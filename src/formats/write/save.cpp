// save(): one file, or Hugging Face shards plus their index
// (huggingface_hub's split_torch_state_dict_into_shards: tensors go to the
// current shard until the next one would push it past the limit; files
// `<stem>-00001-of-00003<ext>`; index `<name>.index.json` with
// {"metadata": {"total_size": N}, "weight_map": {name: file}} dumped with
// sorted keys and indent 2, as transformers writes it).

#include <cctype>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "formats/catalog/materialize_limit.hpp"
#include "formats/write/writers.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/formats/densify.hpp"
#include "torchport/formats/quantize.hpp"
#include "torchport/formats/record_file.hpp"
#include "torchport/formats/save.hpp"

namespace torchport {
namespace {

namespace fs = std::filesystem;
using formats::DataStreamer;

struct Shard {
  std::vector<NamedTensor> tensors;
  std::uint64_t bytes = 0;
};

// The bytes a tensor adds to a shard: its own for safetensors; its storage's
// the first time the shard sees that storage for pytorch.
std::vector<Shard> split(std::vector<NamedTensor> tensors, SaveFormat format, std::uint64_t max) {
  std::vector<Shard> shards(1);
  std::unordered_set<const Storage*> in_shard;
  for (auto& nt : tensors) {
    const Storage* st = nt.tensor.storage().get();
    auto cost = [&] {
      if (format == SaveFormat::safetensors) return nt.tensor.nbytes();
      return in_shard.count(st) ? std::uint64_t{0} : st->nbytes();
    };
    std::uint64_t c = cost();
    if (max > 0 && !shards.back().tensors.empty() && shards.back().bytes + c > max) {
      shards.emplace_back();
      in_shard.clear();
      c = cost();
    }
    in_shard.insert(st);
    shards.back().bytes += c;
    shards.back().tensors.push_back(std::move(nt));
  }
  return shards;
}

std::uint64_t data_bytes(const std::vector<NamedTensor>& tensors, SaveFormat format) {
  return format == SaveFormat::safetensors ? formats::safetensors_data_bytes(tensors)
                                           : formats::pytorch_data_bytes(tensors);
}

void write_file(std::vector<NamedTensor>& tensors,
                const std::map<std::string, std::string>& metadata, SaveFormat format,
                AtomicFile& out, DataStreamer& data) {
  if (format == SaveFormat::safetensors)
    formats::write_safetensors(tensors, metadata, out, data);
  else
    formats::write_pytorch(tensors, metadata, out, data);
}

std::string shard_name(const fs::path& path, std::size_t i, std::size_t n) {
  char num[32];
  std::snprintf(num, sizeof num, "-%05zu-of-%05zu", i + 1, n);
  return path.stem().string() + num + path.extension().string();
}

// True for "<stem>-NNNNN-of-MMMMM<ext>", a shard name of `path`.
bool is_shard_name(const std::string& name, const fs::path& path) {
  const std::string stem = path.stem().string(), ext = path.extension().string();
  constexpr std::size_t kMiddle = 15;  // "-00001-of-00003"
  if (name.size() != stem.size() + kMiddle + ext.size() || !name.starts_with(stem) ||
      !name.ends_with(ext))
    return false;
  const std::string mid = name.substr(stem.size(), kMiddle);
  for (std::size_t i = 0; i < kMiddle; ++i) {
    const bool digit = (i >= 1 && i <= 5) || i >= 10;
    if (digit ? !std::isdigit(static_cast<unsigned char>(mid[i])) : mid[i] != "-00000-of-00000"[i])
      return false;
  }
  return true;
}

// After a successful save: removes the shards (and index) an earlier save
// of `path` left that the new one does not use, so the directory holds one
// consistent checkpoint (transformers' save_pretrained does the same). Only
// files named exactly as `save` names them are touched; failures to remove
// are ignored (the new checkpoint is complete either way).
void remove_stale(const fs::path& path, const std::vector<fs::path>& written, bool sharded) {
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_shard_name(name, path)) continue;
    bool keep = false;
    for (const auto& w : written) keep = keep || w.filename() == name;
    if (!keep) stale.push_back(it->path());
  }
  for (const auto& f : stale) fs::remove(f, ec);
  if (!sharded) fs::remove(dir / (path.filename().string() + ".index.json"), ec);
}

}  // namespace

namespace {

// Each format's name, and the extensions that ask for it.
struct SaveFormatRow {
  SaveFormat format;
  std::string_view name;
  std::string_view extensions[3];
};
constexpr SaveFormatRow kSaveFormats[] = {
    {SaveFormat::safetensors, "safetensors", {".safetensors"}},
    {SaveFormat::pytorch, "pytorch", {".pt", ".pth", ".bin"}},
    {SaveFormat::torchport_mpk, "torchport-mpk", {".mpk"}},
    {SaveFormat::torchport_mpk_gz, "torchport-mpk.gz", {".mpk.gz"}},
    {SaveFormat::torchport_json, "torchport-json", {".json"}},
    {SaveFormat::torchport_json_gz, "torchport-json.gz", {".json.gz"}},
    {SaveFormat::torchport_bin, "torchport-bin", {".tpb"}},
    {SaveFormat::torchport_bin_gz, "torchport-bin.gz", {".tpb.gz"}},
};

}  // namespace

bool is_record(SaveFormat format) noexcept {
  return format != SaveFormat::safetensors && format != SaveFormat::pytorch;
}

std::string_view save_format_name(SaveFormat format) noexcept {
  for (const SaveFormatRow& r : kSaveFormats)
    if (r.format == format) return r.name;
  return "?";
}

std::string_view save_format_extension(SaveFormat format) noexcept {
  for (const SaveFormatRow& r : kSaveFormats)
    if (r.format == format) return r.extensions[0];
  return "";
}

std::optional<SaveFormat> parse_save_format(std::string_view name) noexcept {
  if (name == "pt" || name == "torch") return SaveFormat::pytorch;
  for (const SaveFormatRow& r : kSaveFormats)
    if (r.name == name) return r.format;
  return std::nullopt;
}

std::optional<SaveFormat> save_format_for_path(const fs::path& path) {
  const std::string name = path.filename().string();
  // The longest extension first: "x.mpk.gz" is a gzipped record, not ".gz".
  std::optional<SaveFormat> best;
  std::size_t best_size = 0;
  for (const SaveFormatRow& r : kSaveFormats)
    for (const std::string_view ext : r.extensions)
      if (!ext.empty() && ext.size() > best_size && name.size() > ext.size() &&
          name.ends_with(ext)) {
        best = r.format;
        best_size = ext.size();
      }
  return best;
}

namespace {

// The tensors and metadata of `catalog`, checked for `format`; the
// catalogue is dropped (its root holds the tensors too), so each tensor
// dies as soon as the writer is done with it.
std::vector<NamedTensor> tensors_to_write(TensorCatalog& catalog, SaveFormat format,
                                          std::map<std::string, std::string>& metadata,
                                          const SaveOptions& options, const std::string& where) {
  if (format == SaveFormat::safetensors) refuse_quantized(catalog, "safetensors");
  if (format == SaveFormat::safetensors) refuse_sparse(catalog, "safetensors");
  if (format == SaveFormat::safetensors) refuse_meta(catalog, "safetensors");
  std::vector<NamedTensor> tensors = catalog.tensors();
  metadata = catalog.metadata();
  catalog = TensorCatalog();

  if (format == SaveFormat::safetensors) {
    // No views in safetensors: every view is written whole.
    std::uint64_t whole = 0, distinct = 0;
    std::unordered_set<const Storage*> seen;
    for (const auto& nt : tensors) {
      whole = detail::add_ok(whole, nt.tensor.nbytes(), whole) ? whole : ~std::uint64_t{0};
      if (seen.insert(nt.tensor.storage().get()).second) distinct += nt.tensor.storage()->nbytes();
    }
    formats::check_materialized(
        whole, distinct, options.limits,
        "tensors written whole (safetensors has no views; a .pt file keeps them)", where);
  }
  return tensors;
}

}  // namespace

SaveResult save(TensorCatalog catalog, const fs::path& path, SaveFormat format,
                const SaveOptions& options) try {
  if (is_record(format)) {
    // A record: one file, as write_record writes a catalogue.
    SaveResult result;
    for (const auto& t : catalog.tensors())
      if (!detail::add_ok(result.tensor_bytes, t.tensor.nbytes(), result.tensor_bytes))
        result.tensor_bytes = ~std::uint64_t{0};
    if (options.max_shard_size != 0 && result.tensor_bytes > options.max_shard_size)
      throw Error(ErrorCode::invalid_argument,
                  "a torchport record is one file: its tensors cannot be split into shards", {},
                  std::nullopt, path.string());
    write_record(catalog, path, Recorder{format}, options.limits, options.keep_tree);
    std::error_code ec;
    result.file_bytes = fs::file_size(path, ec);
    result.files.push_back(path);
    if (options.progress) options.progress(result.tensor_bytes, result.tensor_bytes);
    return result;
  }
  if (options.keep_tree && format == SaveFormat::pytorch) {
    // The whole object: one file (a tree has no shards), its tensors where
    // the tree holds them.
    const Value root = catalog.root();
    const std::uint64_t total = data_bytes(catalog.tensors(), format);
    if (options.max_shard_size != 0 && total > options.max_shard_size)
      throw Error(ErrorCode::invalid_argument,
                  "a checkpoint written with its values is one file: its tensors cannot be "
                  "split into shards",
                  {}, std::nullopt, path.string());
    catalog = TensorCatalog();
    DataStreamer data(options, total);
    AtomicFile out(path);
    formats::write_pytorch_tree(root, options.allow, options.profiles, out, data);
    SaveResult result;
    result.tensor_bytes = total;
    result.file_bytes = out.size();
    out.commit();
    result.files.push_back(path);
    remove_stale(path, result.files, false);
    return result;
  }
  std::map<std::string, std::string> metadata;
  std::vector<NamedTensor> tensors =
      tensors_to_write(catalog, format, metadata, options, path.string());
  std::vector<Shard> shards = split(std::move(tensors), format, options.max_shard_size);
  std::uint64_t total = 0;
  for (const auto& s : shards) total += data_bytes(s.tensors, format);
  DataStreamer data(options, total);
  SaveResult result;
  result.tensor_bytes = total;

  if (shards.size() == 1) {
    AtomicFile out(path);
    write_file(shards.front().tensors, metadata, format, out, data);
    result.file_bytes = out.size();
    out.commit();
    result.files.push_back(path);
    remove_stale(path, result.files, false);
    return result;
  }

  // Shards, then the index; all committed only once everything is written.
  std::vector<AtomicFile> files;
  files.reserve(shards.size() + 1);
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_name(path, i, shards.size());
    for (const auto& nt : shards[i].tensors) weight_map[nt.name] = name;
    files.emplace_back(path.parent_path() / name);
    write_file(shards[i].tensors, metadata, format, files.back(), data);
    result.file_bytes += files.back().size();
    result.files.push_back(path.parent_path() / name);
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}},
                          {"weight_map", std::move(weight_map)}};
  const std::string text = index.dump(2) + "\n";
  result.index = path.parent_path() / (path.filename().string() + ".index.json");
  files.emplace_back(result.index);
  files.back().write(std::as_bytes(std::span<const char>(text.data(), text.size())));
  result.file_bytes += text.size();
  for (auto& f : files) f.commit();
  remove_stale(path, result.files, true);
  return result;
} catch (...) {
  rethrow_as_error("save", path.string());  // no bare std:: exception leaves the library
}

SaveResult save_stream(TensorCatalog catalog, int fd, const std::string& name, SaveFormat format,
                       const SaveOptions& options) try {
  if (format == SaveFormat::pytorch)
    throw Error(ErrorCode::unsupported,
                "a PyTorch file cannot be streamed: its zip entries are patched once written "
                "(sizes and CRC-32 in each local header); write it to a file, or stream "
                "safetensors",
                {}, std::nullopt, name);
  if (is_record(format))
    throw Error(ErrorCode::unsupported,
                "a torchport record is written to a file (" +
                    std::string(save_format_name(format)) + "): stream safetensors",
                {}, std::nullopt, name);
  if (options.max_shard_size != 0)
    throw Error(ErrorCode::invalid_argument, "a stream is one file: it cannot be sharded", {},
                std::nullopt, name);
  std::map<std::string, std::string> metadata;
  std::vector<NamedTensor> tensors = tensors_to_write(catalog, format, metadata, options, name);
  DataStreamer data(options, data_bytes(tensors, format));
  SaveResult result;
  result.tensor_bytes = data.total();
  AtomicFile out = AtomicFile::stream(fd, name);
  write_file(tensors, metadata, format, out, data);
  result.file_bytes = out.size();
  out.commit();
  result.files.push_back(name);
  return result;
} catch (...) {
  rethrow_as_error("save", name);  // no bare std:: exception leaves the library
}

std::uint64_t parse_byte_size(std::string_view text) {
  auto bad = [&](const std::string& why) -> Error {
    return Error(ErrorCode::invalid_argument,
                 "size '" + std::string(text) + "' " + why +
                     " (write e.g. 5GB, 500MB, 2GiB or a number of bytes)");
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const std::string number(text.substr(0, i));
  std::string unit;
  for (char c : text.substr(i))
    if (c != ' ') unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (number.empty() || number == "." || number.find('.') != number.rfind('.'))
    throw bad("has no number");
  static const std::pair<const char*, double> kUnits[] = {{"", 1.0},
                                                          {"b", 1.0},
                                                          {"kb", 1e3},
                                                          {"mb", 1e6},
                                                          {"gb", 1e9},
                                                          {"tb", 1e12},
                                                          {"k", 1e3},
                                                          {"m", 1e6},
                                                          {"g", 1e9},
                                                          {"t", 1e12},
                                                          {"kib", 1024.0},
                                                          {"mib", 1048576.0},
                                                          {"gib", 1073741824.0},
                                                          {"tib", 1099511627776.0}};
  double scale = 0;
  for (const auto& [u, s] : kUnits)
    if (unit == u) scale = s;
  if (scale == 0) throw bad("has an unknown unit");
  const double v = std::strtod(number.c_str(), nullptr) * scale;
  if (!(v >= 1.0)) throw bad("is less than one byte");
  if (v >= 9.2e18) throw bad("is too large");
  return static_cast<std::uint64_t>(std::llround(v));
}

}  // namespace torchport
