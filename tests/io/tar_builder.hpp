#pragma once
// Tar archives built block by block for the tests: every header field can
// be set to what a writer (or an attacker) might put there.

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace torchport::test {

/// One tar header and the data after it.
struct TarSpec {
  std::string name;
  std::string data{};
  char type = '0';
  std::string linkname{};
  std::string magic = std::string(
      "ustar\0"
      "00",
      8);                                       ///< bytes 257..264 ("" for V7)
  std::string prefix{};                         ///< ustar prefix (bytes 345..499)
  bool signed_checksum = false;                 ///< write the checksum summed over signed bytes
  std::optional<std::string> size_field{};      ///< the 12 size bytes as given
  std::optional<std::string> checksum_field{};  ///< the 8 checksum bytes as given
  std::optional<std::uint64_t> size{};          ///< the size written (default: data.size())
  bool pad = true;                              ///< pad the data to 512 bytes
};

inline void put_field(std::vector<std::byte>& h, std::size_t at, std::string_view s) {
  std::memcpy(h.data() + at, s.data(), s.size());
}

inline std::string octal(std::uint64_t v, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llo", width - 1, static_cast<unsigned long long>(v));
  return std::string(buf) + std::string(1, '\0');
}

/// The 512-byte header of `s`.
inline std::vector<std::byte> tar_header(const TarSpec& s) {
  std::vector<std::byte> h(512, std::byte{0});
  put_field(h, 0, s.name.substr(0, 100));
  put_field(h, 100, octal(0644, 8));
  put_field(h, 108, octal(0, 8));
  put_field(h, 116, octal(0, 8));
  put_field(h, 124, s.size_field.value_or(octal(s.size.value_or(s.data.size()), 12)));
  put_field(h, 136, octal(0, 12));
  h[156] = static_cast<std::byte>(s.type);
  put_field(h, 157, s.linkname.substr(0, 100));
  put_field(h, 257, s.magic);
  put_field(h, 345, s.prefix.substr(0, 155));
  if (s.checksum_field) {
    put_field(h, 148, *s.checksum_field);
    return h;
  }
  long sum = 0;
  for (std::size_t i = 0; i < 512; ++i) {
    const auto b = static_cast<unsigned char>(h[i]);
    const long v =
        (i >= 148 && i < 156) ? ' ' : (s.signed_checksum ? static_cast<signed char>(b) : b);
    sum += v;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06lo", sum);
  put_field(h, 148, std::string(buf) + std::string("\0 ", 2));
  return h;
}

/// Appends `s`'s header and its data (padded to a block).
inline void tar_add(std::vector<std::byte>& out, const TarSpec& s) {
  const auto h = tar_header(s);
  out.insert(out.end(), h.begin(), h.end());
  for (char c : s.data) out.push_back(static_cast<std::byte>(c));
  if (s.pad)
    while (out.size() % 512 != 0) out.push_back(std::byte{0});
}

/// Appends the two zero blocks that end an archive.
inline void tar_end(std::vector<std::byte>& out) {
  out.insert(out.end(), 1024, std::byte{0});
}

/// A pax record "<len> key=value\n".
inline std::string pax_record(const std::string& key, const std::string& value) {
  const std::string body = " " + key + "=" + value + "\n";
  std::size_t len = body.size() + 1;
  while (std::to_string(len).size() + body.size() != len) ++len;
  return std::to_string(len) + body;
}

/// Builds an archive of `specs` ending with the zero blocks.
inline std::vector<std::byte> tar_of(const std::vector<TarSpec>& specs, bool end = true) {
  std::vector<std::byte> out;
  for (const auto& s : specs) tar_add(out, s);
  if (end) tar_end(out);
  return out;
}

}  // namespace torchport::test
