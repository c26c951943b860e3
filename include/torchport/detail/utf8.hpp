#pragma once
// UTF-8 as Python decodes it (internal to the library): the one check every
// layer uses, for pickle strings, GLOBAL names, names in JSON headers and
// names a writer puts in a file.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace torchport::detail {

/// True when `s` is well-formed UTF-8 as Python's strict decoder requires:
/// no overlong forms, no code point past U+10FFFF, and no encoded surrogate
/// (U+D800..U+DFFF) unless `surrogatepass` (the "surrogatepass" error
/// handler, with which Python 3 pickles decode BINUNICODE).
inline bool is_utf8(std::string_view s, bool surrogatepass = false) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1, cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2, cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3, cp = c & 0x07u;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0u) != 0x80u) return false;
      cp = (cp << 6) | (d & 0x3fu);
    }
    if ((n == 2 && (cp < 0x800 || (!surrogatepass && cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
      return false;
    i += n + 1;
  }
  return true;
}

/// The longest prefix of `s` of at most `n` bytes that does not split a
/// UTF-8 sequence.
inline std::size_t utf8_prefix(std::string_view s, std::size_t n) noexcept {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return n;
}

}  // namespace torchport::detail
