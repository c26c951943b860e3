#pragma once
// Shared by the record formats: the envelope every file carries, the tensor
// marker, and a buffered byte sink.

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "torchport/core/value.hpp"
#include "torchport/formats/record_file.hpp"

namespace torchport::record_files {

/// The key that marks a tensor: {"__tensor__": {"dtype": ..., "shape": [...], ...}}.
inline constexpr std::string_view kTensorKey = "__tensor__";
/// The key that marks a bytes value: {"__bytes__": bin} in MessagePack
/// (a bare bin is tensor data), {"__bytes__": "base64"} in JSON.
inline constexpr std::string_view kBytesKey = "__bytes__";

/// Where encoded bytes go, buffered (a file, a gzip stream, memory).
class Sink {
 public:
  using Out = std::function<void(std::span<const std::byte>)>;
  explicit Sink(Out out) : out_(std::move(out)) { buf_.reserve(kSize); }
  ~Sink() = default;
  void write(const char* p, std::size_t n) {
    write(std::span<const std::byte>(reinterpret_cast<const std::byte*>(p), n));
  }
  void write(std::span<const std::byte> b);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void flush();
  std::uint64_t written() const noexcept { return written_; }

 private:
  static constexpr std::size_t kSize = 1u << 16;
  Out out_;
  std::vector<std::byte> buf_;
  std::uint64_t written_ = 0;
};

/// `tree` in the forms every record format holds natively (dicts with
/// string keys, lists, None, bools, ints, finite floats, strings, bytes,
/// tensors), the other kinds a checkpoint's values hold written as one-key
/// marker dicts, as tensors are:
///   {"__tuple__": [...]}                a tuple (an optimizer's betas)
///   {"__ordered_dict__": {...}}         a collections.OrderedDict (a state_dict;
///                                       inside "__dict__" around its pairs)
///   {"__dict__": [[key, value], ...]}   a dict with a key that is no string
///                                       (an optimizer's state: {0: ...})
///   {"__object__": {"class": [module, name], "args": [...], "state": ...}}
///                                       an object (argparse.Namespace)
///   {"__global__": [module, name]}      a global reference (torch.float32)
///   {"__set__": [...]}, {"__complex__": [re, im]}, {"__int__": [byte, ...]}
///                                       (a wide int, little-endian two's complement)
///   {"__float__": "nan" | "inf" | "-inf"}
/// \throws Error(invalid_argument) for a tensor used as a dict key.
Value to_record_tree(const Value& tree, const std::string& path = "");
/// The inverse of `to_record_tree` on a decoded record (shared subtrees
/// unchanged when no marker lies under them).
/// \throws Error(corrupt) for a malformed marker.
Value from_record_tree(const Value& tree);

/// The envelope's fields, for a format name.
Value envelope(std::string_view format, const RecordMetadata& metadata, Value record);

/// Parses the envelope of a decoded file. \throws Error naming what is wrong.
ParsedRecord open_envelope(const Value& top, std::string_view expected_format,
                           const std::string& where);

/// Bytes of the MessagePack encoding of `v`; tensors are written by
/// `tensor(t, sink)` (which writes the whole {"__tensor__": ...} map).
void write_msgpack(const Value& v, Sink& sink,
                   const std::function<void(const Tensor&, Sink&)>& tensor);

/// Decodes one MessagePack value from `bytes` (at `base` in `source`).
/// Maps {"__tensor__": inner} become tensors through `make_tensor(inner)`;
/// bin values become U8 tensors viewing `source` (no copy).
Value read_msgpack(const Source& source, std::span<const std::byte> bytes, const Limits& limits,
                   const std::function<Tensor(const Value& inner)>& make_tensor);

/// A tensor entry's dtype and shape, checked, and the bytes they imply.
struct TensorSpec {
  DType dtype = DType::F32;
  Shape shape;
  std::uint64_t nbytes = 0;
};
TensorSpec tensor_spec(const Value& inner);

// The three formats.
void write_mpk(const Value& top, Sink& sink);
ParsedRecord read_mpk(const Source& source, const Limits& limits);
void write_json(const Value& top, Sink& sink);
ParsedRecord read_json(const Source& source, const Limits& limits);
void write_bin(const Value& top, Sink& sink);
ParsedRecord read_bin(const Source& source, const Limits& limits);

/// Magic of the compact binary format.
inline constexpr char kBinMagic[4] = {'T', 'P', 'B', '\0'};

}  // namespace torchport::record_files
