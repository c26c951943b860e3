// The tar format of the first torch releases, as torch/serialization.py's
// `legacy_load` still reads it: a tar archive with members
//   sys_info  pickle({little_endian, ...})
//   storages  pickle(n), then n times: pickle((key, location, StorageType)),
//             int64 element count, raw bytes; then pickle([(view_key,
//             root_key, offset, numel), ...])
//   tensors   pickle(n), then n times: pickle((key, storage_key, type)),
//             int32 ndim, 4 bytes padding, ndim int64 sizes, ndim int64
//             strides, int64 storage offset
//   pickle    the object; persistent ids are storage/tensor keys, or
//             (ModuleClass, source_file, source) tuples.

#include <cstring>
#include <functional>
#include <unordered_map>

#include "formats/catalog/materialize_limit.hpp"
#include "formats/read/readers.hpp"
#include "formats/read/torch_common.hpp"
#include "io/byte_reader.hpp"
#include "io/tar.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport::formats {
namespace {

std::string key_text(const Value& v) {
  if (v.is(Value::Kind::Str)) return v.as_str();
  if (v.is(Value::Kind::Bytes)) return v.as_bytes();
  if (v.is(Value::Kind::Int)) return std::to_string(v.as_int());
  throw Error(ErrorCode::corrupt, "key " + v.repr(3) + " is neither a string nor an integer");
}

const Value& item(const Value& tuple, std::size_t i, std::size_t n, const char* what) {
  if (!tuple.is(Value::Kind::Tuple) || tuple.size() != n)
    throw Error(ErrorCode::corrupt, std::string(what) + " is " + tuple.repr(4) + ", not a " +
                                        std::to_string(n) + "-tuple");
  return tuple.items()[i];
}

std::uint64_t count(const Value& v, const char* what) {
  if (!v.is(Value::Kind::Int) || v.as_int() < 0)
    throw Error(ErrorCode::corrupt, std::string(what) + " is " + v.repr(2) + ", not a count");
  return static_cast<std::uint64_t>(v.as_int());
}

}  // namespace

TensorCatalog read_pytorch_tar(const Source& file, const OpenOptions& options, Walker& walker) {
  // The tar format (torch < 0.4, long gone) is read whole: a file read by
  // ranges (a remote one) is fetched, within Limits::max_whole_read_bytes.
  const Source source = file.whole(options.limits.max_whole_read_bytes,
                                   "Limits::max_whole_read_bytes", "the tar format");
  // torch's legacy_load: tarfile.open, then extract('storages'),
  // extract('tensors'), extractfile('pickle'): each the last member of its
  // name, which must be a file. torch never reads 'sys_info' (below, it is
  // read only to refuse files that say their bytes are big-endian).
  const TarArchive tar = TarArchive::open(source, options.limits);
  // Every member, before anything is checked; the four torch reads are
  // walked below, as they are read (the last of each name: an earlier one
  // is a member like any other).
  const bool parts = walker.lists_parts();
  if (parts)
    for (const TarMember& m : tar.members()) {
      if (!m.is_file()) continue;
      const TarMember* last = tar.find(m.name);
      const bool read = last == &m && (m.name == "storages" || m.name == "tensors" ||
                                       m.name == "pickle" || m.name == "sys_info");
      const std::uint64_t at = m.data_offset, n = m.size;
      walker.part({read ? PartRole::read : PartRole::member, m.name, at, n, 0,
                   [source, at, n, name = m.name] {
                     return source.slice(at, n, source.name() + ":" + name);
                   }});
    }
  // What a stream member holds after the reader's last read of it.
  const auto rest = [&](const Source& member, const ByteReader& r) {
    if (!parts || r.at_end()) return;
    const std::uint64_t at = r.pos(), n = r.remaining();
    walker.part({PartRole::stream, member.name() + " (after what torch reads)", r.file_offset(), n,
                 0, [member, at, n] { return member.slice(at, n, member.name()); }});
  };
  auto member = [&](const char* name) {
    const TarMember& m = tar.file(name);
    return source.slice(m.data_offset, m.size, source.name() + ":" + name);
  };
  const Source storages_src = member("storages");
  const Source tensors_src = member("tensors");
  const Source pickle_src = member("pickle");
  const auto base = [&](const Source& s) {
    return static_cast<std::uint64_t>(s.bytes().data() - source.bytes().data());
  };

  // torch reads the storages in the machine's (little-endian) order whatever
  // sys_info says; a file that says otherwise gives torch swapped bytes.
  constexpr bool big_endian = false;
  if (const TarMember* m = tar.find("sys_info")) {
    const Source sys_info_src = source.slice(m->data_offset, m->size, source.name() + ":sys_info");
    ByteReader si(sys_info_src.bytes(), sys_info_src.name(), base(sys_info_src));
    const Value sys_info = run_pickle(walker, "tar:sys_info", si, options);
    rest(sys_info_src, si);
    if (const Value* le = sys_info.find("little_endian");
        le && le->is(Value::Kind::Bool) && !le->as_bool())
      throw Error(ErrorCode::ambiguous,
                  "sys_info says the storages are big-endian, but torch reads them little-endian "
                  "regardless: "
                  "the two readings give different values",
                  "sys_info", m->data_offset, source.name());
  }

  detail::StringMap<Value> objects;  // storages and tensors by key
  ByteReader sr(storages_src.bytes(), storages_src.name(), base(storages_src));
  const std::uint64_t n_storages =
      count(run_pickle(walker, "tar:storages:count", sr, options), "storage count");
  if (n_storages > options.limits.max_tensors)
    throw Error(ErrorCode::limit_exceeded, "more storages than Limits::max_tensors", {},
                sr.file_offset(), sr.what());
  std::uint64_t distinct_bytes = 0, view_bytes = 0;  // for Limits::max_materialized_bytes
  for (std::uint64_t i = 0; i < n_storages; ++i) {
    const Value args = run_pickle(walker, "tar:storages:header", sr, options);
    const std::string key = key_text(item(args, 0, 3, "storage header"));
    const DType dtype = storage_class_dtype(item(args, 2, 3, "storage header"));
    const std::uint64_t at = sr.file_offset();
    const std::uint64_t numel = sr.u64("storage element count");
    std::uint64_t bytes;
    if (!detail::mul_ok(numel, dtype_size(dtype), bytes))
      throw Error(ErrorCode::corrupt, "storage size overflows", key, at, sr.what());
    const std::uint64_t data = sr.file_offset();
    if (parts) walker.part({PartRole::tensor_data, "storage '" + key + "'", data, bytes, 0, {}});
    sr.skip(bytes, "storage data");
    distinct_bytes += bytes;  // bounded by the file's size
    if (!objects
             .emplace(key, storage_value(dtype, numel,
                                         record_storage(source, data, bytes, dtype, big_endian)))
             .second)
      throw Error(ErrorCode::corrupt, "storage key appears twice", key, at, sr.what());
  }
  const Value views = run_pickle(walker, "tar:storages:views", sr, options);
  rest(storages_src, sr);
  if (!views.is(Value::Kind::List))
    throw Error(ErrorCode::corrupt, "storage view list is a " + std::string(views.kind_name()), {},
                sr.file_offset(), sr.what());
  for (const Value& v : views.items()) {
    const std::string target = key_text(item(v, 0, 4, "storage view"));
    const std::string root = key_text(item(v, 1, 4, "storage view"));
    const std::uint64_t offset = count(item(v, 2, 4, "storage view"), "view offset");
    const std::uint64_t numel = count(item(v, 3, 4, "storage view"), "view size");
    auto it = objects.find(root);
    if (it == objects.end() || !it->second.is(Value::Kind::Tensor))
      throw Error(ErrorCode::corrupt, "storage view of unknown storage '" + root + "'", target);
    const Tensor& st = it->second.as_tensor();
    const auto total = static_cast<std::uint64_t>(st.numel());
    if (offset > total || numel > total - offset)
      throw Error(ErrorCode::corrupt, "storage view lies outside its root storage", target);
    const std::size_t es = dtype_size(st.dtype());
    const auto root_bytes = st.storage();
    view_bytes += numel * es;  // numel <= total: no overflow
    check_materialized(view_bytes, distinct_bytes, options.limits, "storage views", source.name());
    auto slice = Storage::deferred(numel * es, [root_bytes, offset, numel, es] {
      auto out = Storage::allocate(numel * es);
      auto src = root_bytes->bytes().subspan(offset * es, numel * es);
      if (!src.empty()) std::memcpy(out->mutable_bytes().data(), src.data(), src.size());
      return out;
    });
    objects[target] = storage_value(st.dtype(), numel, std::move(slice));
  }

  ByteReader tr(tensors_src.bytes(), tensors_src.name(), base(tensors_src));
  const std::uint64_t n_tensors =
      count(run_pickle(walker, "tar:tensors:count", tr, options), "tensor count");
  if (n_tensors > options.limits.max_tensors)
    throw Error(ErrorCode::limit_exceeded, "more tensors than Limits::max_tensors", {},
                tr.file_offset(), tr.what());
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    const Value args = run_pickle(walker, "tar:tensors:header", tr, options);
    const std::string key = key_text(item(args, 0, 3, "tensor header"));
    const std::string storage_key = key_text(item(args, 1, 3, "tensor header"));
    auto it = objects.find(storage_key);
    if (it == objects.end() || !it->second.is(Value::Kind::Tensor))
      throw Error(ErrorCode::corrupt, "tensor refers to unknown storage '" + storage_key + "'",
                  key);
    const Tensor st = it->second.as_tensor();
    const std::uint64_t at = tr.file_offset();
    const std::int32_t ndim = tr.i32("tensor ndim");
    tr.skip(4, "ndim padding");
    if (ndim < 0 || ndim > 64)
      throw Error(ErrorCode::corrupt, "tensor has " + std::to_string(ndim) + " dimensions", key, at,
                  tr.what());
    Shape sizes(static_cast<std::size_t>(ndim)), strides(static_cast<std::size_t>(ndim));
    for (auto& s : sizes) s = tr.i64("tensor size");
    for (auto& s : strides) s = tr.i64("tensor stride");
    const std::int64_t offset = tr.i64("tensor storage offset");
    try {
      objects[key] = Value::tensor(
          Tensor(st.dtype(), std::move(sizes), std::move(strides), offset, st.storage()));
    } catch (const Error& e) {
      throw Error(e.code(), e.message(), key, at, tr.what());
    }
  }
  rest(tensors_src, tr);

  ByteReader pr(pickle_src.bytes(), pickle_src.name(), base(pickle_src));
  auto resolve = [&](const Value& pid, std::uint64_t) -> Value {
    if (pid.is(Value::Kind::Tuple)) {  // (ModuleClass, source_file, source): inert
      if (pid.size() == 0) throw Error(ErrorCode::corrupt, "empty persistent id");
      return pid.items()[0];
    }
    const std::string key = key_text(pid);
    auto it = objects.find(key);
    if (it == objects.end())
      throw Error(ErrorCode::corrupt,
                  "the pickle refers to '" + key + "', which the archive does not hold");
    return it->second;
  };
  Value root = run_torch_pickle(walker, "tar:pickle", pr, options, resolve);
  rest(pickle_src, pr);
  return TensorCatalog::from_value(Format::pytorch_tar, std::move(root), options.limits);
}

}  // namespace torchport::formats
