// Compact binary records (.tpb): the fastest to load. A small MessagePack
// header describes the tree; tensor bytes follow raw, each 64-byte aligned,
// so loading maps them in place (zero copy).
//
//   bytes 0-3    "TPB\0"
//   bytes 4-7    u32 LE format version (1)
//   bytes 8-15   u64 LE header length H
//   bytes 16..   H bytes: the MessagePack envelope; each tensor is
//                {"__tensor__": {"dtype": s, "shape": [...], "offset": n}},
//                offset relative to the data start, a multiple of 64
//   then zero padding to a multiple of 64: the data start; tensor bytes at
//   their offsets, zero padding between them.

#include <cstring>
#include <unordered_map>

#include "formats/read/torch_common.hpp"
#include "formats/recorders/record_encode.hpp"
#include "io/byte_reader.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport::record_files {
namespace {

constexpr std::uint64_t kAlign = 64;

std::uint64_t align_up(std::uint64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Tensors in write order with their offsets.
void layout(const Value& v, std::vector<const Tensor*>& order) {
  if (v.is(Value::Kind::Tensor))
    order.push_back(&v.as_tensor());
  else if (v.is(Value::Kind::Dict))
    for (const auto& [k, x] : v.pairs()) layout(x, order);
  else if (v.is(Value::Kind::List) || v.is(Value::Kind::Tuple))
    for (const auto& x : v.items()) layout(x, order);
}

}  // namespace

void write_bin(const Value& top, Sink& sink) {
  std::vector<const Tensor*> order;
  layout(top, order);
  std::unordered_map<const Tensor*, std::uint64_t> offset;
  std::uint64_t at = 0;
  for (const Tensor* t : order) {
    offset[t] = at;
    at = align_up(at + t->nbytes());
  }
  // The header, into memory first: its length comes before it.
  std::vector<std::byte> header;
  Sink hs([&](std::span<const std::byte> b) { header.insert(header.end(), b.begin(), b.end()); });
  write_msgpack(top, hs, [&](const Tensor& t, Sink& out) {
    Value inner = Value::dict();
    inner.insert(Value::str("dtype"), Value::str(std::string(dtype_name(t.dtype()))));
    Value shape = Value::list();
    for (std::int64_t d : t.shape()) shape.append(Value::integer(d));
    inner.insert(Value::str("shape"), shape);
    inner.insert(Value::str("offset"), Value::integer(static_cast<std::int64_t>(offset.at(&t))));
    Value wrapper = Value::dict();
    wrapper.insert(Value::str(std::string(kTensorKey)), inner);
    write_msgpack(wrapper, out, {});
  });
  hs.flush();
  const std::uint32_t version = kRecordFormatVersion;
  const std::uint64_t hlen = header.size();
  sink.write(kBinMagic, 4);
  sink.write(reinterpret_cast<const char*>(&version), 4);
  sink.write(reinterpret_cast<const char*>(&hlen), 8);
  sink.write(header);
  static const std::byte zeros[kAlign] = {};
  std::uint64_t pos = 16 + hlen;
  sink.write(std::span<const std::byte>(zeros, static_cast<std::size_t>(align_up(pos) - pos)));
  std::uint64_t data = 0;
  for (const Tensor* t : order) {
    const Tensor c = t->contiguous();
    sink.write(c.bytes());
    data += c.nbytes();
    sink.write(std::span<const std::byte>(zeros, static_cast<std::size_t>(align_up(data) - data)));
    data = align_up(data);
  }
}

ParsedRecord read_bin(const Source& source, const Limits& limits) {
  ByteReader r(source.bytes(), source.name());
  const auto magic = r.take(4, "magic");
  if (std::memcmp(magic.data(), kBinMagic, 4) != 0)
    throw Error(ErrorCode::not_a_checkpoint, "no TPB magic", {}, 0, source.name());
  const std::uint32_t version = r.u32("format version");
  if (version < 1 || version > kRecordFormatVersion)
    throw Error(ErrorCode::unsupported,
                "compact binary format version " + std::to_string(version) +
                    "; this library reads 1 to " + std::to_string(kRecordFormatVersion) +
                    ": upgrade torchport",
                {}, 4, source.name());
  const std::uint64_t hlen = r.u64("header length");
  if (hlen > limits.max_header_bytes)
    throw Error(ErrorCode::limit_exceeded,
                "header of " + std::to_string(hlen) + " bytes exceeds Limits::max_header_bytes", {},
                8, source.name());
  const auto header = r.take(hlen, "header");
  const std::uint64_t data_start = align_up(16 + hlen);
  if (data_start > source.size())
    throw Error(ErrorCode::truncated, "file ends before its data section", {}, source.size(),
                source.name());
  const std::uint64_t data_size = source.size() - data_start;
  const Value top = read_msgpack(source, header, limits, [&](const Value& inner) {
    const TensorSpec s = tensor_spec(inner);
    const Value* off = inner.find("offset");
    if (off == nullptr || !off->is(Value::Kind::Int) || off->as_int() < 0)
      throw Error(ErrorCode::corrupt, "tensor entry without a valid 'offset'", "offset");
    const auto o = static_cast<std::uint64_t>(off->as_int());
    if (o % kAlign != 0)
      throw Error(ErrorCode::corrupt, "tensor offset " + std::to_string(o) + " is not 64-aligned",
                  "offset");
    if (o > data_size || s.nbytes > data_size - o)
      throw Error(ErrorCode::truncated,
                  "tensor data [" + std::to_string(o) + ", +" + std::to_string(s.nbytes) +
                      ") runs past the " + std::to_string(data_size) +
                      "-byte data section; truncated file?",
                  "offset", data_start + o);
    Shape strides = contiguous_strides(s.shape);
    return Tensor(s.dtype, s.shape, std::move(strides), 0,
                  formats::record_storage(source, data_start + o, s.nbytes, s.dtype, false));
  });
  return open_envelope(top, "torchport-bin", source.name());
}

}  // namespace torchport::record_files
