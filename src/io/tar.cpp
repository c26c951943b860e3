// Tar, as CPython's Lib/tarfile.py (3.11) reads it, because that is what
// torch.load runs on every file that is not a zip. The functions below
// follow tarfile's: nti() for numeric fields, calc_chksums() for the
// checksum, TarInfo.frombuf / fromtarfile / _proc_member / _proc_gnulong /
// _proc_pax / _apply_pax_info for a member, TarFile.next() for where the
// archive ends, TarFile.getmember() for a name. Where tarfile does
// something we do not reproduce (sparse members, negative sizes, headers
// nested without end) the archive is refused; see docs/format.md.

#include "io/tar.hpp"

#include <cstring>
#include <map>
#include <optional>

#include "torchport/core/error.hpp"

namespace torchport {
namespace {

constexpr std::uint64_t kBlock = 512;
constexpr int kMaxNesting = 64;  // long-name / pax headers before one member

// Python's str.isspace() on ASCII, which str.strip() and int() strip.
bool py_space(unsigned char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

// A number tarfile read: value when it fits 63 bits, else `huge`.
struct Number {
  bool negative = false;
  bool huge = false;
  std::uint64_t magnitude = 0;
};

// Python's int(text, base) after strip(): an optional sign, for base 8 an
// optional "0o" prefix, digits with single underscores between them (and
// one after the prefix). False where Python raises ValueError.
bool py_int(std::string_view t, unsigned base, Number& out) {
  while (!t.empty() && py_space(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && py_space(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  out = {};
  std::size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) out.negative = t[i++] == '-';
  bool underscore_ok = false;  // an underscore may come next
  if (base == 8 && i + 1 < t.size() && t[i] == '0' && (t[i + 1] == 'o' || t[i + 1] == 'O')) {
    i += 2;
    underscore_ok = true;
  }
  bool digits = false;
  for (; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '_') {
      if (!underscore_ok) return false;
      underscore_ok = false;
      continue;
    }
    const unsigned d = static_cast<unsigned>(c - '0');
    if (c < '0' || d >= base) return false;
    if (out.magnitude > ((std::uint64_t{1} << 63) - 1 - d) / base)
      out.huge = true;
    else
      out.magnitude = out.magnitude * base + d;
    digits = true;
    underscore_ok = true;
  }
  // A trailing underscore, or none of the digits, is a ValueError.
  if (!digits || (t.back() == '_')) return false;
  if (out.huge) out.magnitude = 0;
  return true;
}

std::string_view bytes_view(const std::byte* p, std::size_t n) {
  return {reinterpret_cast<const char*>(p), n};
}

// nts(): up to the first NUL.
std::string nts(const std::byte* p, std::size_t n) {
  const std::string_view s = bytes_view(p, n);
  return std::string(s.substr(0, s.find('\0')));
}

// nti(): base-256 after 0x80 (positive) or 0xff (negative), else octal text.
bool nti(const std::byte* p, std::size_t n, Number& out) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  out = {};
  if (u[0] == 0x80 || u[0] == 0xff) {
    for (std::size_t i = 1; i < n; ++i) {
      if (out.magnitude >> 55) out.huge = true;
      out.magnitude = (out.magnitude << 8) | u[i];
    }
    if (u[0] == 0xff) {
      // -(256 ** (n - 1) - value): negative whatever the value; exact for
      // the 8-byte fields (the checksum), the sign alone for wider ones.
      out.negative = true;
      out.huge = false;
      out.magnitude = n - 1 <= 7 ? (std::uint64_t{1} << (8 * (n - 1))) - out.magnitude : 1;
    }
    if (out.huge) out.magnitude = 0;
    return true;
  }
  const std::string text = nts(p, n);
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) return false;  // decoded as strict ASCII
  std::string_view t = text;
  while (!t.empty() && py_space(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && py_space(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  if (t.empty()) return true;  // int("0", 8)
  return py_int(t, 8, out);
}

bool checksum_ok(const std::byte* h, const Number& stored) {
  // calc_chksums(): 256 for the checksum field as spaces, plus every other
  // byte read unsigned, or signed (Sun and NeXT tars).
  std::int64_t unsigned_sum = 256, signed_sum = 256;
  for (std::uint64_t i = 0; i < kBlock; ++i) {
    if (i >= 148 && i < 156) continue;
    const auto b = static_cast<unsigned char>(h[i]);
    unsigned_sum += b;
    signed_sum += static_cast<signed char>(b);
  }
  if (stored.huge) return false;
  const std::int64_t v = stored.negative ? -static_cast<std::int64_t>(stored.magnitude)
                                         : static_cast<std::int64_t>(stored.magnitude);
  return v == unsigned_sum || v == signed_sum;
}

bool all_zero(const std::byte* p, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i)
    if (p[i] != std::byte{0}) return false;
  return true;
}

bool is_regular(char t) {
  return t == '0' || t == '\0' || t == '7' || t == 'S';
}
bool is_supported(char t) {
  return std::strchr("01234567LKS", t) != nullptr || t == '\0';
}
bool skips_data(char t) {
  return is_regular(t) || !is_supported(t);
}

std::uint64_t block(std::uint64_t n) {
  const std::uint64_t r = n % kBlock;
  return r == 0 ? n : n + (kBlock - r);
}

void rstrip_slashes(std::string& s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
}

using Pax = std::map<std::string, std::string>;

// How reading one member (TarInfo.fromtarfile) ends.
enum class Outcome {
  member,      // a member; `next` is where the next header starts
  empty,       // EmptyHeaderError: no bytes left
  truncated,   // TruncatedHeaderError: fewer than 512 bytes left
  eof,         // EOFHeaderError: a block of zeros
  invalid,     // InvalidHeaderError
  subsequent,  // SubsequentHeaderError: a long-name or pax header without a valid member after it
  refuse,      // something we do not reproduce: `code` and `why`
};

struct Read {
  Outcome outcome = Outcome::member;
  TarMember member;
  std::uint64_t next = 0;
  std::string why;
  std::uint64_t at = 0;  // where `why` happened
  ErrorCode code = ErrorCode::corrupt;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> b) : b_(b) {}

  Pax global;            // tarfile.pax_headers: global pax headers seen so far
  bool clipped = false;  // a read reached the end of the bytes

  Read member(std::uint64_t pos, int depth = 0) {
    Read r;
    r.at = pos;
    if (depth > kMaxNesting)
      return refuse(r, ErrorCode::unsupported, "more than 64 long-name or pax headers in a row");
    if (pos >= b_.size() || b_.size() - pos < kBlock) clipped = true;
    if (pos >= b_.size()) return end(r, Outcome::empty, "empty header");
    if (b_.size() - pos < kBlock) return end(r, Outcome::truncated, "truncated header");
    const std::byte* h = b_.data() + pos;
    if (all_zero(h, kBlock)) return end(r, Outcome::eof, "end of file header");
    Number chk, mode, uid, gid, size, mtime, devmajor, devminor;
    if (!nti(h + 148, 8, chk)) return end(r, Outcome::invalid, "invalid header (checksum field)");
    if (!checksum_ok(h, chk)) return end(r, Outcome::invalid, "bad checksum");
    if (!nti(h + 100, 8, mode) || !nti(h + 108, 8, uid) || !nti(h + 116, 8, gid) ||
        !nti(h + 124, 12, size) || !nti(h + 136, 12, mtime) || !nti(h + 329, 8, devmajor) ||
        !nti(h + 337, 8, devminor))
      return end(r, Outcome::invalid, "invalid header (a numeric field)");
    TarMember& m = r.member;
    m.name = nts(h, 100);
    m.type = static_cast<char>(h[156]);
    m.linkname = nts(h + 157, 100);
    m.header_offset = pos;
    const std::string prefix = nts(h + 345, 155);
    if (m.type == '\0' && !m.name.empty() && m.name.back() == '/') m.type = '5';  // V7 directory
    if (m.type == 'S') return refuse(r, ErrorCode::unsupported, "a GNU sparse member");
    if (m.type == '5') rstrip_slashes(m.name);
    if (!prefix.empty() && m.type != 'L' && m.type != 'K') m.name = prefix + "/" + m.name;
    const std::uint64_t data = pos + kBlock;

    if (m.type == 'L' || m.type == 'K' || m.type == 'x' || m.type == 'X' || m.type == 'g') {
      if (size.negative)
        return refuse(r, ErrorCode::corrupt, "a long-name or pax header of negative size");
      const std::uint64_t want = size.huge ? b_.size() : block(size.magnitude);
      if (want > b_.size() - data) clipped = true;
      const std::uint64_t after = want > b_.size() - data ? b_.size() : data + want;
      const std::span<const std::byte> buf = b_.subspan(data, after - data);
      if (m.type == 'L' || m.type == 'K') return gnulong(r, buf, after, depth);
      return pax(r, buf, after, depth);
    }
    // _proc_builtin: regular and unknown types are followed by their data.
    if (size.negative && skips_data(m.type))
      return refuse(r, ErrorCode::corrupt,
                    "a member of negative size (tarfile would read headers backwards)");
    m.size = size.huge ? ~std::uint64_t{0} : size.magnitude;
    m.data_offset = data;
    r.next = skips_data(m.type)
                 ? (size.huge || m.size > ~std::uint64_t{0} - data - kBlock ? ~std::uint64_t{0}
                                                                            : data + block(m.size))
                 : data;
    if (auto why = apply_pax(m, global); !why.empty())
      return refuse(r, ErrorCode::unsupported, why);
    if (m.type == '5') rstrip_slashes(m.name);
    return r;
  }

 private:
  Read end(Read& r, Outcome o, std::string why) {
    r.outcome = o;
    r.why = std::move(why);
    return r;
  }
  Read refuse(Read& r, ErrorCode code, std::string why) {
    r.outcome = Outcome::refuse;
    r.code = code;
    r.why = std::move(why);
    return r;
  }

  // The member after a long-name or pax header: its errors become
  // SubsequentHeaderError (which tarfile raises as ReadError).
  Read subsequent(std::uint64_t pos, int depth) {
    Read n = member(pos, depth + 1);
    if (n.outcome == Outcome::empty || n.outcome == Outcome::truncated ||
        n.outcome == Outcome::eof || n.outcome == Outcome::invalid)
      n.outcome = Outcome::subsequent;
    return n;
  }

  Read gnulong(Read& r, std::span<const std::byte> buf, std::uint64_t after, int depth) {
    const char type = r.member.type;
    const std::uint64_t at = r.member.header_offset;
    Read n = subsequent(after, depth);
    if (n.outcome != Outcome::member) return n;
    n.member.header_offset = at;
    if (type == 'L') {
      n.member.name = nts(buf.data(), buf.size());
    } else {
      n.member.linkname = nts(buf.data(), buf.size());
    }
    if (n.member.type == '5' && !n.member.name.empty() && n.member.name.back() == '/')
      n.member.name.pop_back();
    return n;
  }

  Read pax(Read& r, std::span<const std::byte> buf, std::uint64_t after, int depth) {
    const char type = r.member.type;
    const std::uint64_t at = r.member.header_offset;
    Pax local = global;
    Pax& headers = type == 'g' ? global : local;
    // Records "%d %s=%s\n", until the buffer ends or a NUL starts a record.
    std::uint64_t pos = 0;
    const std::string_view text = bytes_view(buf.data(), buf.size());
    while (pos < text.size() && text[pos] != '\0') {
      std::uint64_t digits = 0;
      while (digits < 20 && pos + digits < text.size() && text[pos + digits] >= '0' &&
             text[pos + digits] <= '9')
        ++digits;
      if (digits == 0 || pos + digits >= text.size() || text[pos + digits] != ' ')
        return end(r, Outcome::invalid, "invalid pax header (record length)");
      std::uint64_t length = 0;
      bool big = false;
      for (std::uint64_t i = 0; i < digits; ++i) {
        if (length > (std::uint64_t{1} << 58)) big = true;
        length = length * 10 + static_cast<std::uint64_t>(text[pos + i] - '0');
      }
      if (big || length < 5 || length > text.size() - pos)
        return end(r, Outcome::invalid, "invalid pax header (record length)");
      const std::uint64_t last = pos + length - 1;
      const std::uint64_t kv_start = pos + digits + 1;
      const std::string_view kv =
          kv_start <= last ? text.substr(kv_start, last - kv_start) : std::string_view{};
      const auto eq = kv.find('=');
      if (eq == std::string_view::npos || eq == 0 || text[last] != '\n')
        return end(r, Outcome::invalid, "invalid pax header (record framing)");
      headers[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
      pos += length;
    }
    Read n = subsequent(after, depth);
    if (n.outcome != Outcome::member) return n;
    for (const auto& [k, v] : headers)
      if (k.starts_with("GNU.sparse."))
        return refuse(n, ErrorCode::unsupported, "a GNU sparse member (pax GNU.sparse.* records)");
    if (type == 'x' || type == 'X') {
      if (auto why = apply_pax(n.member, local); !why.empty())
        return refuse(n, ErrorCode::unsupported, why);
      n.member.header_offset = at;
      if (local.contains("size")) {
        if (!skips_data(n.member.type))
          n.next = n.member.data_offset;
        else if (n.member.size > ~std::uint64_t{0} - n.member.data_offset - kBlock)
          n.next = ~std::uint64_t{0};
        else
          n.next = n.member.data_offset + block(n.member.size);
      }
    }
    return n;
  }

  // _apply_pax_info(): path, linkpath and size replace the header's.
  static std::string apply_pax(TarMember& m, const Pax& pax) {
    for (const auto& [k, v] : pax) {
      if (k.starts_with("GNU.sparse.")) return "a GNU sparse member (pax GNU.sparse.* records)";
      if (k == "path") {
        m.name = v;
        rstrip_slashes(m.name);
      } else if (k == "linkpath") {
        m.linkname = v;
      } else if (k == "size") {
        Number n;
        if (!py_int(v, 10, n)) n = {};  // ValueError: tarfile uses 0
        if (n.negative && n.magnitude != 0) return "a pax size that is negative";
        m.size = n.huge ? ~std::uint64_t{0} : n.magnitude;
      }
    }
    return {};
  }

  std::span<const std::byte> b_;
};

}  // namespace

bool TarMember::is_file() const noexcept {
  return skips_data(type) && type != 'S';
}

TarOpen probe_tar(std::span<const std::byte> bytes) noexcept {
  bool more = false;
  return probe_tar(bytes, bytes.size(), more);
}

TarOpen probe_tar(std::span<const std::byte> head, std::uint64_t file_size,
                  bool& need_more) noexcept {
  need_more = false;
  try {
    Reader reader(head);
    const Read r = reader.member(0);
    need_more = reader.clipped && head.size() < file_size;
    if (r.outcome == Outcome::eof) return TarOpen::empty;
    if (r.outcome == Outcome::member || r.outcome == Outcome::refuse) return TarOpen::opened;
    return TarOpen::refused;
  } catch (...) {
    return TarOpen::opened;  // out of memory: claim it, and let open() say what is wrong
  }
}

bool looks_like_tar(std::span<const std::byte> bytes) noexcept {
  return probe_tar(bytes) != TarOpen::refused;
}

TarArchive TarArchive::open(const Source& file, const Limits& limits) {
  TarArchive t;
  const Source source =
      file.whole(limits.max_whole_read_bytes, "Limits::max_whole_read_bytes", "a tar archive");
  const auto bytes = source.bytes();
  t.size_ = bytes.size();
  t.where_ = source.name();
  const std::string& where = t.where_;
  Reader reader(bytes);
  std::uint64_t pos = 0;
  std::uint64_t tell = 0;  // where tarfile's file position is after the last header it read
  for (;;) {
    // TarFile.next(): skipping past the end of the file is a ReadError.
    if (pos != tell && pos > bytes.size())
      throw Error(ErrorCode::truncated,
                  "a tar member's data runs past the end of the file (tarfile: unexpected end of "
                  "data; torch "
                  "would then read the file as a legacy pickle)",
                  t.members_.empty() ? std::string() : t.members_.back().name, tell, where);
    Read r = reader.member(pos);
    if (r.outcome == Outcome::refuse)
      throw Error(r.code, "tar: " + r.why, r.member.name, r.at, where);
    if (r.outcome == Outcome::subsequent)
      throw Error(pos == 0 ? ErrorCode::not_a_checkpoint : ErrorCode::corrupt,
                  "a tar long-name or pax header is not followed by a valid header (" + r.why +
                      "; tarfile raises ReadError" +
                      (pos == 0 ? ")" : ", and torch would read the file as a legacy pickle)"),
                  {}, pos, where);
    if (r.outcome != Outcome::member) {
      if (pos == 0 && r.outcome != Outcome::eof)
        throw Error(ErrorCode::not_a_checkpoint, "not a tar archive: " + r.why, {}, 0, where);
      // The archive ends here. tarfile reads no further; tar readers that
      // skip zero blocks or bad headers would, so only zeros may follow.
      if (!all_zero(bytes.data() + pos, bytes.size() - pos))
        throw Error(ErrorCode::ambiguous,
                    "tarfile ends the archive at byte " + std::to_string(pos) + " (" + r.why +
                        ") but non-zero bytes follow; readers that skip zero blocks or bad headers "
                        "would read them "
                        "as more members",
                    {}, pos, where);
      break;
    }
    if (t.members_.size() >= limits.max_entries)
      throw Error(
          ErrorCode::limit_exceeded,
          "more tar members than Limits::max_entries = " + std::to_string(limits.max_entries), {},
          pos, where);
    const std::uint64_t data = r.member.data_offset;
    t.members_.push_back(std::move(r.member));
    tell = data;
    pos = r.next;
  }
  return t;
}

const TarMember* TarArchive::resolve(std::string_view name) const {
  for (auto it = members_.rbegin(); it != members_.rend(); ++it)
    if (it->name == name) return &*it;
  return nullptr;
}

const TarMember* TarArchive::find(std::string_view name) const {
  const TarMember* m = resolve(name);
  if (m == nullptr || !m->is_file() || m->data_offset > size_ || m->size > size_ - m->data_offset)
    return nullptr;
  return m;
}

const TarMember& TarArchive::file(std::string_view name) const {
  const TarMember* m = resolve(name);
  const std::string n(name);
  if (m == nullptr)
    throw Error(ErrorCode::corrupt, "tar checkpoint without a '" + n + "' member", {}, std::nullopt,
                where_);
  if (!m->is_file()) {
    std::string what = m->type == '1' ? "a hard link to '" + m->linkname + "'"
                       : m->type == '2'
                           ? "a symbolic link to '" + m->linkname +
                                 "' (torch would follow it, possibly out of the archive)"
                       : m->type == '5' ? std::string("a directory")
                                        : "a member of type '" + std::string(1, m->type) + "'";
    throw Error(ErrorCode::unsupported,
                "the last tar member named '" + n + "' (the one tarfile extracts) is " + what +
                    ", not a file",
                n, m->header_offset, where_);
  }
  if (m->data_offset > size_ || m->size > size_ - m->data_offset)
    throw Error(ErrorCode::truncated,
                "tar member of " + std::to_string(m->size) +
                    " bytes runs past the end of the file (tarfile: unexpected end of data; torch "
                    "would then read the "
                    "file as a legacy pickle)",
                n, m->header_offset, where_);
  return *m;
}

}  // namespace torchport
