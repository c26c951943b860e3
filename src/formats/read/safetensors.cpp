// safetensors (https://github.com/huggingface/safetensors, the format
// section of its README, and `validate` in safetensors/src/tensor.rs):
//
//   u64 LE  N                 header length
//   N bytes JSON header       {"name": {"dtype": "F32", "shape": [3, 4],
//                              "data_offsets": [begin, end]}, ...,
//                              "__metadata__": {"k": "v"}}
//   data                      the tensors' bytes, C order, little-endian;
//                             offsets are relative to the data's start
//
// We accept what the reference implementation's `validate` does (offsets
// tile the data region: no holes, no overlaps, no trailing bytes) and
// additionally reject duplicate keys: serde_json (into a HashMap) and
// nlohmann both keep the last one, but other readers keep the first, so a
// file with two entries for one name means different things to different
// tools.

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include "formats/read/readers.hpp"
#include "formats/read/strict_json.hpp"
#include "formats/read/torch_common.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport::formats {
namespace {

using json = nlohmann::ordered_json;

// safetensors dtypes that exist but that torchport has no type for.
constexpr std::array<std::string_view, 4> kUnsupportedDtypes = {"F4", "F6_E2M3", "F6_E3M2",
                                                                "F8_E8M0"};

struct Entry {
  std::string name;
  DType dtype = DType::U8;
  Shape shape;
  std::uint64_t begin = 0, end = 0;
};

class HeaderReader {
 public:
  HeaderReader(std::string_view header, const Source& source, const Limits& limits)
      : header_(header), source_(source), limits_(limits) {}

  std::uint64_t entry_offset(const std::string& name) const {
    return json_key_offset(header_, name, 8).value_or(8);
  }

  [[noreturn]] void fail(ErrorCode code, const std::string& name, const std::string& msg) const {
    throw Error(code, msg, name, entry_offset(name), source_.name());
  }

  std::map<std::string, std::string> metadata(const json& v) const {
    if (!v.is_object())
      fail(ErrorCode::corrupt, "__metadata__",
           "__metadata__ is a " + std::string(v.type_name()) + ", not an object of strings");
    std::map<std::string, std::string> out;
    for (const auto& [k, x] : v.items()) {
      if (!x.is_string())
        fail(ErrorCode::corrupt, "__metadata__",
             "__metadata__ value of '" + k + "' is a " + std::string(x.type_name()) +
                 "; safetensors metadata maps strings to strings");
      out.emplace(k, x.get<std::string>());
    }
    return out;
  }

  std::uint64_t unsigned_field(const std::string& name, const json& v, const char* what) const {
    if (!v.is_number_unsigned())
      fail(ErrorCode::corrupt, name,
           std::string(what) + " " + v.dump() + " is not a non-negative integer");
    return v.get<std::uint64_t>();
  }

  Entry entry(const std::string& name, const json& v) const {
    if (name.size() > limits_.max_name_bytes)
      fail(ErrorCode::limit_exceeded, name.substr(0, 64) + "...",
           "tensor name of " + std::to_string(name.size()) +
               " bytes exceeds Limits::max_name_bytes = " + std::to_string(limits_.max_name_bytes));
    if (!v.is_object())
      fail(
          ErrorCode::corrupt, name,
          "header entry is a " + std::string(v.type_name()) + ", not {dtype, shape, data_offsets}");
    Entry e;
    e.name = name;
    const auto dt = v.find("dtype");
    const auto sh = v.find("shape");
    const auto off = v.find("data_offsets");
    if (dt == v.end() || sh == v.end() || off == v.end())
      fail(ErrorCode::corrupt, name,
           std::string("header entry lacks '") +
               (dt == v.end()   ? "dtype"
                : sh == v.end() ? "shape"
                                : "data_offsets") +
               "'");
    if (!dt->is_string())
      fail(ErrorCode::corrupt, name, "dtype " + dt->dump() + " is not a string");
    const std::string dname = dt->get<std::string>();
    if (auto d = dtype_from_name(dname)) {
      e.dtype = *d;
    } else if (std::find(kUnsupportedDtypes.begin(), kUnsupportedDtypes.end(), dname) !=
               kUnsupportedDtypes.end()) {
      fail(ErrorCode::unsupported, name,
           "dtype " + dname + " (sub-byte and scale formats are not read)");
    } else {
      fail(ErrorCode::corrupt, name, "unknown dtype '" + dname + "'");
    }
    if (!sh->is_array()) fail(ErrorCode::corrupt, name, "shape " + sh->dump() + " is not an array");
    for (const auto& s : *sh) {
      const std::uint64_t n = unsigned_field(name, s, "shape entry");
      if (n > static_cast<std::uint64_t>(INT64_MAX))
        fail(ErrorCode::corrupt, name,
             "shape entry " + std::to_string(n) + " does not fit 63 bits");
      e.shape.push_back(static_cast<std::int64_t>(n));
    }
    if (!off->is_array() || off->size() != 2)
      fail(ErrorCode::corrupt, name, "data_offsets " + off->dump() + " is not [begin, end]");
    e.begin = unsigned_field(name, (*off)[0], "data_offsets begin");
    e.end = unsigned_field(name, (*off)[1], "data_offsets end");
    if (e.end < e.begin)
      fail(ErrorCode::corrupt, name,
           "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
               "] end before they begin");
    // numel * element size, overflow-checked, must be exactly the range.
    std::uint64_t bytes = dtype_size(e.dtype);
    for (std::int64_t s : e.shape)
      if (!detail::mul_ok(bytes, static_cast<std::uint64_t>(s), bytes))
        fail(ErrorCode::corrupt, name,
             std::string(dtype_name(e.dtype)) + shape_to_string(e.shape) +
                 " has more bytes than fit in 64 bits");
    // The strides must fit as well, also for an empty tensor ([0, 2^40, 2^40]).
    try {
      (void)shape_numel(e.shape);
    } catch (const Error& x) {
      fail(ErrorCode::corrupt, name, x.message());
    }
    if (bytes != e.end - e.begin)
      fail(ErrorCode::corrupt, name,
           std::string(dtype_name(e.dtype)) + shape_to_string(e.shape) + " needs " +
               std::to_string(bytes) + " bytes but data_offsets [" + std::to_string(e.begin) +
               ", " + std::to_string(e.end) + "] hold " + std::to_string(e.end - e.begin));
    return e;
  }

 private:
  std::string_view header_;
  const Source& source_;
  const Limits& limits_;
};

}  // namespace

TensorCatalog read_safetensors(const Source& source, const OpenOptions& options, Walker& walker) {
  const Limits& limits = options.limits;
  const std::string& where = source.name();
  const auto bytes = source.bytes();
  if (bytes.size() < 8)
    throw Error(ErrorCode::truncated,
                "file of " + std::to_string(bytes.size()) +
                    " bytes is shorter than the 8-byte safetensors header length",
                {}, 0, where);
  std::uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  if (n > limits.max_header_bytes)
    throw Error(
        ErrorCode::limit_exceeded,
        "safetensors header of " + std::to_string(n) +
            " bytes exceeds Limits::max_header_bytes = " + std::to_string(limits.max_header_bytes),
        {}, 0, where);
  if (n > bytes.size() - 8)
    throw Error(ErrorCode::truncated,
                "safetensors header declares " + std::to_string(n) +
                    " bytes but the file has only " + std::to_string(bytes.size() - 8) +
                    " after the length; truncated download?",
                {}, 0, where);
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8,
                                static_cast<std::size_t>(n));
  if (header.empty() || header.front() != '{')
    throw Error(ErrorCode::corrupt, "safetensors header does not start with '{'", {}, 8, where);

  // Top object (1), tensor entry (2), shape / offsets array (3).
  // Each entry is checked as it is parsed and its JSON dropped: the header
  // is never held as one tree of every entry.
  const HeaderReader reader(header, source, limits);
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries;
  parse_strict_json_members(header, "safetensors header", 8, where, 3, limits.max_nodes,
                            [&](const std::string& k, json&& v) {
                              if (k == "__metadata__") {
                                metadata = reader.metadata(v);
                                return;
                              }
                              if (entries.size() >= limits.max_tensors)
                                throw Error(ErrorCode::limit_exceeded,
                                            "more tensors than Limits::max_tensors = " +
                                                std::to_string(limits.max_tensors),
                                            {}, 8, where);
                              entries.push_back(reader.entry(k, v));
                            });

  // The offsets must tile the data region exactly (safetensors' validate).
  const std::uint64_t data_start = 8 + n;
  const std::uint64_t data_size = bytes.size() - data_start;
  // No pickle anywhere: a JSON header, then raw tensor bytes.
  if (walker.lists_parts()) {
    walker.part({PartRole::metadata, "header", 8, n, 0, {}});
    walker.part({PartRole::tensor_data, "data", data_start, data_size, 0, {}});
  }
  std::vector<const Entry*> order;
  order.reserve(entries.size());
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t expected = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    if (e->end > data_size)
      throw Error(ErrorCode::truncated,
                  "data_offsets [" + std::to_string(e->begin) + ", " + std::to_string(e->end) +
                      "] run past the " + std::to_string(data_size) +
                      "-byte data region; truncated download?",
                  e->name, data_start + e->begin, where);
    if (e->begin < expected)
      throw Error(ErrorCode::corrupt,
                  "data_offsets [" + std::to_string(e->begin) + ", " + std::to_string(e->end) +
                      "] overlap '" + prev->name + "' [" + std::to_string(prev->begin) + ", " +
                      std::to_string(prev->end) + "]",
                  e->name, data_start + e->begin, where);
    if (e->begin > expected)
      throw Error(ErrorCode::corrupt,
                  std::to_string(e->begin - expected) +
                      " unused bytes before this tensor's data_offsets [" +
                      std::to_string(e->begin) + ", " + std::to_string(e->end) + "] (after " +
                      (prev ? "'" + prev->name + "'" : std::string("the header")) +
                      "); safetensors data must be contiguous",
                  e->name, data_start + expected, where);
    expected = e->end;
    prev = e;
  }
  if (expected != data_size)
    throw Error(ErrorCode::corrupt,
                std::to_string(data_size - expected) + " trailing bytes after the last tensor" +
                    (prev ? " ('" + prev->name + "')" : std::string()) +
                    "; appended data or a wrong header?",
                {}, data_start + expected, where);

  std::vector<NamedTensor> tensors;
  tensors.reserve(entries.size());
  for (auto& e : entries) {
    auto storage = record_storage(source, data_start + e.begin, e.end - e.begin, e.dtype, false);
    Shape strides = contiguous_strides(e.shape);
    tensors.push_back({std::move(e.name), Tensor(e.dtype, std::move(e.shape), std::move(strides), 0,
                                                 std::move(storage))});
  }
  return TensorCatalog::from_tensors("safetensors", std::move(tensors), std::move(metadata));
}

}  // namespace torchport::formats
