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
// `F4` (float4_e2m1fn_x2) shapes count 4-bit values, two a byte: torch's
// shape is the file's with its last dimension halved (safetensors 0.8.0's
// torch loader), and that is the shape listed.
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

// safetensors dtypes (0.8.0's) that torch has no dtype for: its torch
// loader refuses them too.
constexpr std::array<std::string_view, 2> kUnsupportedDtypes = {"F6_E2M3", "F6_E3M2"};

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
           "dtype " + dname + " (a 6-bit float: torch has no dtype for it, not read)");
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
    // F4 counts 4-bit values (safetensors 0.8.0): they must fill whole bytes.
    if (e.dtype == DType::F4) {
      if (bytes % 2 != 0)
        fail(ErrorCode::corrupt, name,
             "F4" + shape_to_string(e.shape) +
                 " holds an odd number of 4-bit values, which does not end at a byte boundary "
                 "(safetensors refuses such a header)");
      bytes /= 2;
    }
    if (bytes != e.end - e.begin)
      fail(ErrorCode::corrupt, name,
           std::string(dtype_name(e.dtype)) + shape_to_string(e.shape) + " needs " +
               std::to_string(bytes) + " bytes but data_offsets [" + std::to_string(e.begin) +
               ", " + std::to_string(e.end) + "] hold " + std::to_string(e.end - e.begin));
    // As safetensors' torch loader maps it: torch.float4_e2m1fn_x2 holds two
    // values a byte, so torch's last dimension is half the file's, which
    // must be even ("f4_x2 dtype requires that the last dim be divisible by
    // 2 in torch").
    if (e.dtype == DType::F4) {
      if (e.shape.empty() || e.shape.back() % 2 != 0)
        fail(ErrorCode::unsupported, name,
             "F4" + shape_to_string(e.shape) +
                 ": torch.float4_e2m1fn_x2 packs two values a byte along the last dimension, "
                 "which must be even (safetensors' torch loader refuses it too)");
      e.shape.back() /= 2;
    }
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
  // The length and the header: a view of a mapped file, one read of a
  // remote one (its first bytes, which sniffing read too).
  const std::uint64_t file_size = source.size();
  if (file_size < 8)
    throw Error(ErrorCode::truncated,
                "file of " + std::to_string(file_size) +
                    " bytes is shorter than the 8-byte safetensors header length",
                {}, 0, where);
  std::uint64_t n;
  std::memcpy(&n, source.head(8).bytes().data(), 8);
  if (n > limits.max_header_bytes)
    throw Error(
        ErrorCode::limit_exceeded,
        "safetensors header of " + std::to_string(n) +
            " bytes exceeds Limits::max_header_bytes = " + std::to_string(limits.max_header_bytes),
        {}, 0, where);
  if (n > file_size - 8)
    throw Error(ErrorCode::truncated,
                "safetensors header declares " + std::to_string(n) +
                    " bytes but the file has only " + std::to_string(file_size - 8) +
                    " after the length; truncated download?",
                {}, 0, where);
  const Source header_bytes = source.fetch(8, n);
  const std::string_view header(reinterpret_cast<const char*>(header_bytes.bytes().data()),
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
  const std::uint64_t data_size = file_size - data_start;
  // No pickle anywhere: a JSON header, then raw tensor bytes.
  if (walker.lists_parts()) {
    walker.part({PartRole::metadata, "header", 8, n, 0, {}});
    walker.part({PartRole::tensor_data, "data", data_start, data_size, 0, {}});
  }
  // The tensors in the order of their data, which is also how they are
  // listed: what safetensors' load_file (0.6 and later) and torch.load of a
  // .safetensors (2.13 and later hand it to safetensors) give, and the order
  // a writer laid them out in. Ties (empty tensors at one offset) keep the
  // header's order.
  std::vector<Entry*> order;
  order.reserve(entries.size());
  for (auto& e : entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
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
  for (Entry* p : order) {
    Entry& e = *p;
    auto storage = record_storage(source, data_start + e.begin, e.end - e.begin, e.dtype, false);
    Shape strides = contiguous_strides(e.shape);
    tensors.push_back({std::move(e.name), Tensor(e.dtype, std::move(e.shape), std::move(strides), 0,
                                                 std::move(storage))});
  }
  return TensorCatalog::from_tensors(Format::safetensors, std::move(tensors), std::move(metadata));
}

}  // namespace torchport::formats
