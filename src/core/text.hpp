#pragma once
// Text helpers the value printers share (repr and JSON); internal to the
// library.

#include <cstddef>
#include <string_view>

namespace torchport::detail {

// The longest prefix of `s` of at most `n` bytes that does not split a
// UTF-8 sequence.
inline std::size_t utf8_prefix(std::string_view s, std::size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return n;
}

}  // namespace torchport::detail
