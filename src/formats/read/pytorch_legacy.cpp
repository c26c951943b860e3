// The legacy format (torch.save with _use_new_zipfile_serialization=False;
// the default before 1.6). torch/serialization.py `_legacy_save` writes five
// things back to back:
//   pickle(MAGIC_NUMBER) pickle(PROTOCOL_VERSION) pickle(sys_info)
//   pickle(obj)            -- storages as persistent ids
//   pickle(sorted storage keys)
//   for each key: int64 element count (native order), then the raw bytes.
// A file that is one plain pickle (no magic number) is read as format
// "pickle": its object, with no storages to refer to.

#include <algorithm>
#include <array>
#include <functional>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "formats/catalog/materialize_limit.hpp"
#include "formats/read/readers.hpp"
#include "formats/read/torch_common.hpp"
#include "io/byte_reader.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport::formats {
namespace {

// What ByteReader says when a field runs past the end of the file.
[[noreturn]] void past_end(const Source& source, std::uint64_t at, std::uint64_t need,
                           const std::string& field) {
  throw Error(ErrorCode::truncated,
              field + " needs " + std::to_string(need) + " bytes but only " +
                  std::to_string(source.size() - at) + " remain",
              {}, at, source.name());
}

// 0x1950a86a20f9469cfc6c, little-endian, as pickle's LONG1 stores it.
constexpr unsigned char kMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr std::int64_t kProtocolVersion = 1001;

bool is_magic(const Value& v) {
  if (!v.is(Value::Kind::BigInt)) return false;
  const std::string& b = v.as_bytes();
  return b.size() == sizeof kMagic &&
         std::equal(b.begin(), b.end(), std::begin(kMagic),
                    [](char c, unsigned char m) { return static_cast<unsigned char>(c) == m; });
}

struct Record {
  DType dtype;
  std::uint64_t numel;
  int packed_bits = 0;       // QUInt4x2Storage (4), QUInt2x4Storage (2)
  std::uint64_t offset = 0;  // of the first data byte
  bool located = false;
};

// What follows the last thing the reader read: a loader that reads pickle
// after pickle would go on there.
void rest_of_stream(const Source& source, std::uint64_t at, Walker& walker) {
  if (!walker.lists_parts() || at >= source.size()) return;
  const std::uint64_t n = source.size() - at;
  walker.part({PartRole::stream, "after the last pickle", at, n, 0,
               [source, at, n] { return source.fetch(at, n); }});
}

// Reads the file; its pickles lie in `prefix` (its first bytes: all of a
// contiguous source). The storages' records follow the pickles: where each
// lies follows from the sizes the object declares, and only their 8-byte
// element counts are read, all in one batch.
TensorCatalog read_legacy(const Source& source, const Source& prefix, const OpenOptions& options,
                          Walker& walker, bool& pickles_done) {
  ByteReader r(prefix.bytes(), source.name());
  const Value magic = run_pickle(walker, "pickle", r, options);
  if (!is_magic(magic)) {
    // Not torch's magic number: a plain pickle. It may not refer to storages.
    rest_of_stream(source, r.pos(), walker);
    return TensorCatalog::from_value(Format::pickle, rebuild_tensors(magic, source.name()),
                                     options.limits);
  }
  const Value protocol = run_pickle(walker, "legacy:protocol_version", r, options);
  if (!protocol.is(Value::Kind::Int) || protocol.as_int() != kProtocolVersion)
    // torch.load: RuntimeError("Invalid protocol version"); 1001 is the only one.
    throw Error(ErrorCode::corrupt,
                "legacy protocol version " + protocol.repr() + " (1001 is read)", {},
                r.file_offset(), source.name());
  const Value sys_info = run_pickle(walker, "legacy:sys_info", r, options);
  bool big_endian = false;
  if (const Value* le = sys_info.find("little_endian"); le && le->is(Value::Kind::Bool))
    big_endian = !le->as_bool();

  // Pass 1: learn which storages the object declares (their dtypes tell how
  // to step over the data records) and where the object's pickle ends.
  const std::uint64_t object_start = r.pos();
  detail::StringMap<Record> records;
  // As torch's persistent_load: the first reference to a root key makes its
  // storage (dtype and size); later references get that storage whatever
  // they declare. Views share torch's one table of keys with the roots;
  // a view key that is also a root key is refused.
  detail::StringSet view_keys;
  auto declare = [&](const Value& pid, std::uint64_t) -> Value {
    if (pid.is(Value::Kind::Tuple) && pid.size() >= 2 && pid.items()[0].is(Value::Kind::Str) &&
        pid.items()[0].as_str() == "module")
      return pid.items()[1];  // a module class saved with its source: inert
    const StorageRef ref = parse_storage_ref(pid);
    if (view_keys.count(ref.key))
      throw Error(ErrorCode::unsupported,
                  "storage key '" + ref.key + "' names both a storage and a storage view");
    records.emplace(ref.key, Record{ref.dtype, ref.numel, ref.packed_bits});
    if (ref.view) {
      if (records.count(ref.view->key))
        throw Error(ErrorCode::unsupported,
                    "storage key '" + ref.view->key + "' names both a storage and a storage view");
      view_keys.insert(ref.view->key);
    }
    return Value();
  };
  run_pickle(walker, "legacy:object", r, options, declare);
  const std::uint64_t object_end = r.pos();

  const Value keys = run_pickle(walker, "legacy:storage_keys", r, options);
  pickles_done = true;
  if (!keys.is(Value::Kind::List))
    throw Error(ErrorCode::corrupt, "storage key list is a " + std::string(keys.kind_name()), {},
                r.file_offset(), source.name());
  // Where each record lies: its count, then its bytes.
  struct Count {
    std::string key;
    std::uint64_t at;
    std::array<std::byte, 8> bytes;
  };
  std::vector<Count> counts;
  std::uint64_t at = r.file_offset();
  for (const Value& k : keys.items()) {
    const std::string key = k.is(Value::Kind::Str) ? k.as_str() : k.repr();
    auto it = records.find(key);
    if (it == records.end())
      throw Error(ErrorCode::corrupt,
                  "storage '" + key + "' has data but the object never refers to it", {}, at,
                  source.name());
    if (it->second.located)
      throw Error(ErrorCode::corrupt, "storage '" + key + "' has two data records", {}, at,
                  source.name());
    if (source.size() - at < 8) past_end(source, at, 8, "storage element count");
    counts.push_back({key, at, {}});
    std::uint64_t bytes;
    if (!detail::mul_ok(it->second.numel, dtype_size(it->second.dtype), bytes))
      throw Error(ErrorCode::corrupt, "storage size overflows", {}, at, source.name());
    it->second.offset = at + 8;
    it->second.located = true;
    if (walker.lists_parts())
      walker.part({PartRole::tensor_data, "storage '" + key + "'", at + 8, bytes, 0, {}});
    if (bytes > source.size() - (at + 8))
      past_end(source, at + 8, bytes, "storage '" + key + "' data");
    at += 8 + bytes;
  }
  // The counts, read with pread from a mapped file (touching the mapping
  // would fault in, and count as resident, the pages around every record:
  // 90 MB for ResNet-152, where open() needs 8 bytes from each), in one
  // batch from a remote one.
  std::vector<RangeRead> reads;
  reads.reserve(counts.size());
  for (Count& c : counts) reads.push_back({c.at, c.bytes});
  source.read_many(reads);
  for (const Count& c : counts) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
      v = (v << 8) | static_cast<std::uint64_t>(c.bytes[static_cast<std::size_t>(i)]);
    const Record& rec = records.find(c.key)->second;
    if (v != rec.numel)
      throw Error(ErrorCode::corrupt,
                  "storage '" + c.key + "' is declared with " + std::to_string(rec.numel) +
                      " elements but its record holds " + std::to_string(v),
                  {}, c.at, source.name());
  }
  rest_of_stream(source, at, walker);
  for (const auto& [key, rec] : records)
    if (!rec.located)
      throw Error(
          ErrorCode::truncated,
          "storage '" + key + "' is used by the object but has no data record; truncated file?", {},
          r.file_offset(), source.name());

  // Pass 2: the object again, now with real storages.
  detail::StringMap<Value> made;
  std::uint64_t distinct_bytes = 0, view_bytes = 0;  // for Limits::max_materialized_bytes
  for (const auto& [key, rec] : records) distinct_bytes += rec.numel * dtype_size(rec.dtype);
  auto resolve = [&](const Value& pid, std::uint64_t) -> Value {
    if (pid.is(Value::Kind::Tuple) && pid.size() >= 2 && pid.items()[0].is(Value::Kind::Str) &&
        pid.items()[0].as_str() == "module")
      return pid.items()[1];
    const StorageRef ref = parse_storage_ref(pid);
    const Record& rec = records.at(ref.key);
    const std::size_t es = dtype_size(rec.dtype);
    auto root = made.find(ref.key);
    if (root == made.end())
      root = made.emplace(ref.key, storage_value(rec.dtype, rec.numel,
                                                 record_storage(source, rec.offset, rec.numel * es,
                                                                rec.dtype, big_endian),
                                                 rec.packed_bits))
                 .first;
    if (!ref.view) return root->second;
    // A storage view (torch < 0.4): a slice of the root's bytes, typed by
    // the reference that first names it (offset and size in its elements).
    const auto& v = *ref.view;
    if (auto it = made.find(v.key); it != made.end()) return it->second;
    const std::uint64_t root_bytes = rec.numel * es, ves = dtype_size(ref.dtype);
    std::uint64_t begin = 0, bytes = 0;
    if (!detail::mul_ok(v.offset, ves, begin) || !detail::mul_ok(v.size, ves, bytes) ||
        begin > root_bytes || bytes > root_bytes - begin)
      throw Error(ErrorCode::corrupt, "storage view '" + v.key + "' [" + std::to_string(v.offset) +
                                          ", +" + std::to_string(v.size) + ") of " +
                                          std::string(dtype_name(ref.dtype)) +
                                          " lies outside its root '" + ref.key + "' of " +
                                          std::to_string(root_bytes) + " bytes");
    view_bytes += bytes;
    check_materialized(view_bytes, distinct_bytes, options.limits, "storage views", source.name());
    return made
        .emplace(v.key, storage_value(ref.dtype, v.size,
                                      record_storage(source, rec.offset + begin, bytes, ref.dtype,
                                                     big_endian)))
        .first->second;
  };
  ByteReader again(prefix.bytes().subspan(0, static_cast<std::size_t>(object_end)), source.name());
  again.seek(object_start);
  Value root = run_torch_pickle(walker, "legacy:object", again, options, resolve);
  return TensorCatalog::from_value(Format::pytorch_legacy, std::move(root), options.limits);
}

}  // namespace

TensorCatalog read_pytorch_legacy(const Source& source, const OpenOptions& options,
                                  Walker& walker) {
  bool pickles_done = false;
  if (source.contiguous()) return read_legacy(source, source, options, walker, pickles_done);
  // A ranged source (a remote file): the pickles come first, and their end
  // is known only by running them. They are run over a prefix that doubles
  // while they run past it (the walker hears a retried pickle again; a load
  // only checks it twice); the storages' bytes are read when used.
  std::uint64_t n = std::min<std::uint64_t>(source.size(), 256u << 10);
  for (;;) {
    const Source prefix = source.fetch(0, n);
    try {
      return read_legacy(source, prefix, options, walker, pickles_done);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::truncated || pickles_done || n == source.size() ||
          n > options.limits.max_pickle_bytes * 5)
        throw;
    }
    n = std::min(source.size(), n * 4);
  }
}

// A loader that reads pickle after pickle (pickle.load in a loop) from
// the first byte, whatever the reader made of them.
void sweep_pickle_stream(const Source& source, const OpenOptions&, Walker& walker) {
  Part p{PartRole::stream, "pickle", 0, source.size(), 0, [source] { return source; }};
  p.swept = true;
  walker.part(std::move(p));
}

}  // namespace torchport::formats
