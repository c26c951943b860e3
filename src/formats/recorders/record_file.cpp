#include "torchport/formats/record_file.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "formats/catalog/materialize_limit.hpp"
#include "formats/recorders/record_encode.hpp"
#include "io/compression.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/formats/densify.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/io/atomic_file.hpp"
#include "torchport/version.hpp"

namespace torchport {
namespace {

// A record file's layout, and whether a gzip stream wraps it.
enum class Layout { mpk, json, bin };
struct RecordLayout {
  Layout layout;
  bool gzip;
};

RecordLayout record_layout(SaveFormat f) {
  switch (f) {
    case SaveFormat::torchport_mpk:
      return {Layout::mpk, false};
    case SaveFormat::torchport_mpk_gz:
      return {Layout::mpk, true};
    case SaveFormat::torchport_json:
      return {Layout::json, false};
    case SaveFormat::torchport_json_gz:
      return {Layout::json, true};
    case SaveFormat::torchport_bin:
      return {Layout::bin, false};
    case SaveFormat::torchport_bin_gz:
      return {Layout::bin, true};
    case SaveFormat::safetensors:
    case SaveFormat::pytorch:
      break;
  }
  throw Error(ErrorCode::invalid_argument,
              "a record is written in one of torchport's record layouts, not " +
                  std::string(save_format_name(f)));
}

bool contains(std::span<const std::byte> b, std::string_view needle, std::size_t within) {
  const std::string_view hay(reinterpret_cast<const char*>(b.data()), std::min(b.size(), within));
  return hay.find(needle) != std::string_view::npos;
}

std::optional<Layout> sniff(std::span<const std::byte> b) {
  if (b.size() >= 4 && std::memcmp(b.data(), record_files::kBinMagic, 4) == 0) return Layout::bin;
  if (!b.empty()) {
    const auto c = std::to_integer<unsigned>(b[0]);
    if ((c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf)
      if (contains(b, "torchport-mpk", 64)) return Layout::mpk;
    std::size_t i = 0;
    while (i < b.size() && std::isspace(std::to_integer<int>(b[i]))) ++i;
    if (i < b.size() && b[i] == std::byte{'{'} && contains(b, "\"torchport-json\"", 256))
      return Layout::json;
  }
  return std::nullopt;
}

void encode(const Value& tree, const Recorder& recorder, const RecordMetadata& metadata,
            const std::function<void(std::span<const std::byte>)>& out) {
  const RecordLayout l = record_layout(recorder.format);
  RecordMetadata m = metadata;
  if (m.library.empty()) m.library = kVersion;
  // The envelope names the layout without ".gz": a gzipped record holds one.
  std::string_view name = save_format_name(recorder.format);
  if (l.gzip) name.remove_suffix(3);
  const Value top = record_files::envelope(name, m, record_files::to_record_tree(tree));
  std::unique_ptr<GzipWriter> gz;
  if (l.gzip) gz = std::make_unique<GzipWriter>(out);
  record_files::Sink sink(
      gz ? record_files::Sink::Out([&](std::span<const std::byte> b) { gz->write(b); }) : out);
  switch (l.layout) {
    case Layout::mpk:
      record_files::write_mpk(top, sink);
      break;
    case Layout::json:
      record_files::write_json(top, sink);
      break;
    case Layout::bin:
      record_files::write_bin(top, sink);
      break;
  }
  sink.flush();
  if (gz) gz->finish();
}

}  // namespace

std::string recorder_name(const Recorder& r) {
  return std::string(save_format_name(r.format));
}

std::optional<Recorder> recorder_for_path(const std::filesystem::path& path) {
  const auto f = save_format_for_path(path);
  if (!f || !is_record(*f)) return std::nullopt;
  return Recorder{*f};
}

void write_record(const Value& tree, const std::filesystem::path& path, const Recorder& recorder,
                  const RecordMetadata& metadata) {
  (void)record_layout(recorder.format);  // refused before the file is made
  AtomicFile file(path);
  encode(tree, recorder, metadata, [&](std::span<const std::byte> b) { file.write(b); });
  file.commit();
}

void write_record(const TensorCatalog& catalog, const std::filesystem::path& path,
                  const Recorder& recorder, const Limits& limits, bool whole_object) {
  (void)record_layout(recorder.format);
  refuse_meta(catalog, "a torchport record");
  // A record has no views: each tensor is written whole.
  std::uint64_t whole = 0, distinct = 0;
  std::unordered_set<const Storage*> seen;
  for (const auto& t : catalog.tensors()) {
    whole = detail::add_ok(whole, t.tensor.nbytes(), whole) ? whole : ~std::uint64_t{0};
    if (seen.insert(t.tensor.storage().get()).second) distinct += t.tensor.storage()->nbytes();
  }
  formats::check_materialized(
      whole, distinct, limits,
      "tensors written whole (records have no views; a .pt file keeps them)", path.string());
  Value flat = Value::dict();
  if (whole_object)
    flat = catalog.root();
  else
    for (const auto& t : catalog.tensors())
      flat.insert(Value::str(t.name), Value::tensor(t.tensor));
  RecordMetadata m;
  m.precision = "keep";
  // Ours are rewritten, but for the layout the tensors are in and, for a
  // record of a module, where PyTorch's layout differs
  // (torchport::kPyTorchLayoutKey), which torchport convert needs to write
  // a .pt from this record too.
  for (const auto& [k, v] : catalog.metadata())
    if (!k.starts_with("torchport.") || k == "torchport.layout" || k == "torchport.pytorch_layout")
      m.extra[k] = v;
  const bool ours = has_torchport_layout(catalog.format());
  if (!ours) m.extra["torchport.layout"] = "pytorch";
  write_record(flat, path, recorder, m);
}

std::vector<std::byte> record_to_bytes(const Value& tree, const Recorder& recorder,
                                       const RecordMetadata& metadata) {
  std::vector<std::byte> out;
  encode(tree, recorder, metadata,
         [&](std::span<const std::byte> b) { out.insert(out.end(), b.begin(), b.end()); });
  return out;
}

bool looks_like_record(std::span<const std::byte> b) {
  if (looks_like_gzip(b)) return true;  // decided after inflating
  return sniff(b).has_value();
}

bool looks_like_record(const Source& source) {
  return looks_like_record(source.head(4096).bytes());
}

ParsedRecord read_record(const Source& ranged, const Limits& limits) {
  // Our records are parsed whole (a gzip stream must be; the others are
  // small beside the checkpoints they come from).
  const Source source = ranged.whole(limits.max_whole_read_bytes, "Limits::max_whole_read_bytes",
                                     "a torchport record");
  Source inner = source;
  bool gzipped = false;
  if (looks_like_gzip(source.bytes())) {
    inner = Source::from_buffer(gunzip(source.bytes(), limits, source.name()), source.name());
    gzipped = true;
  }
  const auto format = sniff(inner.bytes());
  if (!format)
    throw Error(ErrorCode::not_a_checkpoint,
                gzipped ? "a gzip stream that holds no torchport record" : "not a torchport record",
                {}, std::nullopt, source.name());
  ParsedRecord r;
  switch (*format) {
    case Layout::mpk:
      r = record_files::read_mpk(inner, limits);
      break;
    case Layout::json:
      r = record_files::read_json(inner, limits);
      break;
    case Layout::bin:
      r = record_files::read_bin(inner, limits);
      break;
  }
  if (gzipped) r.format += ".gz";
  try {
    r.tree = record_files::from_record_tree(r.tree);  // a checkpoint's values, as written
  } catch (const Error& e) {
    throw Error(e.code(), e.message(), e.key(), e.offset(), source.name());
  }
  return r;
}

}  // namespace torchport
