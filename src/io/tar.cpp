#include "torchport/io/tar.hpp"

#include <cstring>
#include <unordered_set>

#include "torchport/core/error.hpp"

namespace torchport {
namespace {

constexpr std::size_t kBlock = 512;

std::string_view field(const std::byte* h, std::size_t off, std::size_t len) {
  const char* p = reinterpret_cast<const char*>(h) + off;
  std::size_t n = 0;
  while (n < len && p[n] != '\0') ++n;
  return {p, n};
}

// Numeric fields are octal text, or base-256 with the high bit set (GNU).
bool parse_number(const std::byte* h, std::size_t off, std::size_t len, std::uint64_t& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(h) + off;
  out = 0;
  if (p[0] & 0x80u) {
    if (p[0] != 0x80u) return false;  // negative
    for (std::size_t i = 1; i < len; ++i) {
      if (out >> 56) return false;
      out = (out << 8) | p[i];
    }
    return true;
  }
  std::size_t i = 0;
  while (i < len && p[i] == ' ') ++i;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (out >> 61) return false;
    out = out * 8 + (p[i] - '0');
  }
  for (; i < len; ++i)
    if (p[i] != ' ' && p[i] != '\0') return false;
  return true;  // an empty field reads as 0, as GNU tar does
}

bool checksum_ok(const std::byte* h) {
  std::uint64_t stored;
  if (!parse_number(h, 148, 8, stored)) return false;
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  return sum == stored;
}

bool all_zero(const std::byte* h) {
  for (std::size_t i = 0; i < kBlock; ++i)
    if (h[i] != std::byte{0}) return false;
  return true;
}

// PAX records: "<len> <key>=<value>\n".
void parse_pax(std::string_view text, std::string& path, std::uint64_t& size, bool& has_size) {
  while (!text.empty()) {
    const auto sp = text.find(' ');
    if (sp == std::string_view::npos) return;
    std::uint64_t len = 0;
    for (char c : text.substr(0, sp)) {
      if (c < '0' || c > '9' || len > (1u << 30)) return;
      len = len * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (len <= sp + 1 || len > text.size()) return;
    std::string_view rec = text.substr(sp + 1, len - sp - 2);  // without the newline
    const auto eq = rec.find('=');
    if (eq != std::string_view::npos) {
      const auto key = rec.substr(0, eq), value = rec.substr(eq + 1);
      if (key == "path") path = std::string(value);
      if (key == "size") {
        std::uint64_t s = 0;
        bool ok = !value.empty();
        for (char c : value) {
          if (c < '0' || c > '9' || s > (std::uint64_t{1} << 60)) ok = false;
          else s = s * 10 + static_cast<std::uint64_t>(c - '0');
        }
        if (ok) {
          size = s;
          has_size = true;
        }
      }
    }
    text.remove_prefix(static_cast<std::size_t>(len));
  }
}

}  // namespace

bool looks_like_tar(std::span<const std::byte> b) noexcept {
  if (b.size() < kBlock) return false;
  return std::memcmp(b.data() + 257, "ustar", 5) == 0 && checksum_ok(b.data());
}

TarArchive TarArchive::open(const Source& source, const Limits& limits) {
  TarArchive t;
  const auto bytes = source.bytes();
  const std::string& where = source.name();
  std::unordered_set<std::string> names;
  std::uint64_t pos = 0;
  std::string next_path;
  std::uint64_t next_size = 0;
  bool next_has_size = false;
  for (;;) {
    if (bytes.size() - pos < kBlock)
      throw Error(ErrorCode::truncated, "tar archive ends inside a header (no end-of-archive blocks)",
                  {}, pos, where);
    const std::byte* h = bytes.data() + pos;
    if (all_zero(h)) break;  // end of archive
    if (!checksum_ok(h))
      throw Error(pos == 0 ? ErrorCode::not_a_checkpoint : ErrorCode::corrupt, "tar header checksum mismatch",
                  {}, pos, where);
    std::uint64_t size;
    if (!parse_number(h, 124, 12, size))
      throw Error(ErrorCode::corrupt, "tar member size is not a number", {}, pos, where);
    if (next_has_size) size = next_size;
    const char type = static_cast<char>(h[156]);
    const std::uint64_t data = pos + kBlock;
    if (size > bytes.size() - data)
      throw Error(ErrorCode::truncated,
                  "tar member of " + std::to_string(size) + " bytes runs past the end of the file",
                  {}, pos, where);
    std::string name(field(h, 0, 100));
    const std::string_view prefix = field(h, 345, 155);
    if (!prefix.empty() && std::memcmp(h + 257, "ustar\0", 6) == 0) name = std::string(prefix) + "/" + name;
    if (!next_path.empty()) name = next_path;
    const std::string_view content(reinterpret_cast<const char*>(bytes.data() + data),
                                   static_cast<std::size_t>(size));
    if (type == 'x') {
      parse_pax(content, next_path, next_size, next_has_size);
    } else if (type == 'L') {
      next_path = std::string(content.substr(0, content.find('\0')));
    } else if (type == 'g') {
      // global PAX header: nothing we need
    } else {
      if (type == '0' || type == '\0') {
        if (!names.insert(name).second)
          throw Error(ErrorCode::corrupt, "duplicate tar member name", name, pos, where);
        if (t.members_.size() >= limits.max_entries)
          throw Error(ErrorCode::limit_exceeded, "more tar members than Limits::max_entries", {}, pos, where);
        t.members_.push_back({name, data, size});
      }
      next_path.clear();
      next_has_size = false;
    }
    const std::uint64_t padded = (size + kBlock - 1) / kBlock * kBlock;
    pos = data + padded;
    if (pos > bytes.size())
      throw Error(ErrorCode::truncated, "tar archive ends inside a member's padding", {}, pos, where);
  }
  return t;
}

const TarMember* TarArchive::find(std::string_view name) const {
  for (const auto& m : members_)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace torchport
