// Writes safetensors (the layout of safetensors/src/tensor.rs
// `serialize_to_file`): the JSON header padded with spaces to a multiple of
// 8, then the data in header order, the tensors in the catalogue's order.
// The reference writer sorts them by dtype (so that each is aligned); we
// keep the order torch.save kept, which readers that list tensors by their
// data (torchport's, safetensors >= 0.6's load_file) give back. Unaligned
// data is valid safetensors (0.4.5 and 0.8.0 read it; the spec asks for no
// alignment): a reader that maps tensors in place copies those few. On
// torchvision's models none is unaligned in F32; converted to BF16, only
// BatchNorm's I64 num_batches_tracked can be (6 of EfficientNet-B0's 360
// tensors, 48 bytes; 31 of RegNetY-400MF's 384, 248 bytes). An F4 tensor's
// shape is written as safetensors 0.8.0 writes it: its last dimension in
// 4-bit values, twice torch's.

#include <algorithm>
#include <charconv>
#include <map>
#include <string>

#include "formats/write/writers.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/detail/utf8.hpp"

namespace torchport::formats {
namespace {

// Dtypes torchport has that the safetensors spec does not define.
bool safetensors_has(DType d) {
  return d != DType::C32 && d != DType::C128 && d != DType::BC32 && d != DType::F8_E4M3FNUZ &&
         d != DType::F8_E5M2FNUZ && !is_bits(d);
}

// `s` (valid UTF-8, checked before) as a JSON string.
void json_string(std::string& out, std::string_view s) {
  out += '"';
  std::size_t plain = 0;  // the start of the run of bytes kept as they are
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c != '"' && c != '\\' && c >= 0x20) continue;
    out.append(s.substr(plain, i - plain));
    plain = i + 1;
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  out.append(s.substr(plain));
  out += '"';
}

void json_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

std::uint64_t safetensors_data_bytes(const std::vector<NamedTensor>& tensors) {
  std::uint64_t n = 0;
  for (const auto& t : tensors) n += t.tensor.nbytes();
  return n;
}

void write_safetensors(std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata, AtomicFile& out,
                       DataStreamer& data) {
  for (const auto& [name, t] : tensors) {
    if (!t.defined())
      throw Error(ErrorCode::invalid_argument, "undefined tensor", name, std::nullopt,
                  out.target().string());
    check_name(name, "safetensors");
    if (name == "__metadata__")
      throw Error(
          ErrorCode::invalid_argument,
          "a tensor named '__metadata__' collides with the safetensors metadata entry; rename it",
          name, std::nullopt, out.target().string());
    if (!safetensors_has(t.dtype()))
      throw Error(ErrorCode::unsupported,
                  "safetensors has no dtype for " + std::string(dtype_torch_name(t.dtype())) +
                      "; write PyTorch format instead (--format pytorch)",
                  name, std::nullopt, out.target().string());
    // safetensors counts F4 in 4-bit values along the last dimension (twice
    // torch's); a 0-d tensor has no dimension to count them in, and
    // safetensors refuses it too ("does not end up at a byte boundary").
    if (t.dtype() == DType::F4 && t.dim() == 0)
      throw Error(ErrorCode::unsupported,
                  "a 0-d float4_e2m1fn_x2 tensor: safetensors' F4 counts 4-bit values along the "
                  "last dimension, which a 0-d tensor has not; write PyTorch format instead "
                  "(--format pytorch)",
                  name, std::nullopt, out.target().string());
  }
  for (const auto& [k, v] : metadata)
    if (!detail::is_utf8(k) || !detail::is_utf8(v))
      throw Error(ErrorCode::invalid_argument, "metadata entry is not valid UTF-8", k, std::nullopt,
                  out.target().string());

  // The header, written straight out (a JSON object with a key lookup per
  // insert made this quadratic in the tensor count): __metadata__ first,
  // then the tensors in data order, the catalogue's.
  std::map<std::string, std::string> meta = metadata;
  // transformers refuses safetensors files without format metadata.
  meta.emplace("format", "pt");
  std::string text = "{\"__metadata__\":{";
  for (const auto& [k, v] : meta) {
    if (text.back() != '{') text += ',';
    json_string(text, k);
    text += ':';
    json_string(text, v);
  }
  text += '}';
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    std::uint64_t end;
    if (!detail::add_ok(offset, t.nbytes(), end))
      throw Error(ErrorCode::limit_exceeded, "checkpoint larger than 2^64 bytes", name);
    text += ',';
    json_string(text, name);
    text += ":{\"dtype\":\"";
    text += dtype_name(t.dtype());
    text += "\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape().size(); ++d) {
      if (d != 0) text += ',';
      auto n = static_cast<std::uint64_t>(t.shape()[d]);
      if (t.dtype() == DType::F4 && d + 1 == t.shape().size()) n *= 2;  // 4-bit values
      json_uint(text, n);
    }
    text += "],\"data_offsets\":[";
    json_uint(text, offset);
    text += ',';
    json_uint(text, end);
    text += "]}";
    offset = end;
  }
  text += '}';
  text.append((8 - text.size() % 8) % 8, ' ');

  std::byte len[8];
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::byte>((n >> (8 * i)) & 0xFF);
  out.write(len);
  out.write(std::as_bytes(std::span<const char>(text.data(), text.size())));
  const ByteSink sink = [&out](std::span<const std::byte> b) { out.write(b); };
  for (auto& nt : tensors) {
    try {
      data.write_tensor(nt.tensor, sink);
    } catch (const Error& e) {
      throw e.at_key(nt.name);
    }
    nt.tensor = Tensor();  // release it (and whatever it made) now
  }
  tensors.clear();
}

}  // namespace torchport::formats
