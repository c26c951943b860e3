// The zip directory, parsed by hand over the mapped bytes, following
// APPNOTE.TXT 6.3.9: 4.3.7 local file header, 4.3.12 central directory
// header, 4.3.14 zip64 end of central directory record, 4.3.15 its locator,
// 4.3.16 end of central directory record, 4.5.3 zip64 extended information.
// Every field is read through a bounds check; see docs/format.md for why
// this is not minizip any more.

#include "io/zip.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include <zlib.h>

#include "io/compression.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/detail/hash.hpp"
#include "torchport/detail/work.hpp"

namespace torchport {
namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kEnd64Sig = 0x06064b50;
constexpr std::uint32_t kLocator64Sig = 0x07064b50;
constexpr std::uint32_t kDescriptorSig = 0x08074b50;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint64_t kEndLen = 22;      // 4.3.16, without the comment
constexpr std::uint64_t kLocatorLen = 20;  // 4.3.15
constexpr std::uint64_t kEnd64Len = 56;    // 4.3.14, without the extensible data
constexpr std::uint64_t kCentralLen = 46;  // 4.3.12, without name, extra, comment
constexpr std::uint64_t kLocalLen = 30;    // 4.3.7, without name and extra
constexpr std::uint32_t kMax32 = 0xFFFFFFFFu;
constexpr std::uint16_t kMax16 = 0xFFFFu;
constexpr std::uint16_t kFlagEncrypted = 1u << 0;
// What miniz refuses to extract as "unsupported encryption": encrypted,
// compressed patch data, strong encryption (APPNOTE 4.4.4 bits 0, 5, 6).
constexpr std::uint16_t kFlagsNotExtracted = kFlagEncrypted | (1u << 5) | (1u << 6);
// Local header values masked (bit 13): miniz refuses the whole archive
// when it reads the central directory (Python's zipfile ignores the bit).
constexpr std::uint16_t kFlagMaskedLocal = 1u << 13;
constexpr std::uint16_t kFlagDescriptor = 1u << 3;  // sizes and CRC follow the data

template <class T>
T le(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The bytes of the file the directory code reads, by file offset: all of a
// contiguous source; of a ranged one (a file read with pread, a remote
// object), the tail miniz searches for the end record, fetched once, and
// any other range (the directory, a zip64 record) fetched when asked for.
class FileBytes {
 public:
  explicit FileBytes(const Source& s) : src_(s), size_(s.size()) {
    if (s.contiguous()) {
      whole_ = s.bytes();
      return;
    }
    // The end record, its comment and the zip64 records, and usually the
    // central directory too: one read.
    constexpr std::uint64_t kTail = kEndLen + kMax16 + kLocatorLen + kEnd64Len + (64u << 10);
    const std::uint64_t n = std::min(size_, kTail);
    pieces_.push_back({size_ - n, s.fetch(size_ - n, n)});
  }
  std::uint64_t size() const noexcept { return size_; }
  // `n` bytes at `offset`, which the caller has checked lie in the file.
  const std::byte* at(std::uint64_t offset, std::uint64_t n) {
    if (src_.contiguous()) return whole_.data() + offset;
    for (const auto& [start, piece] : pieces_)
      if (offset >= start && offset - start + n <= piece.size())
        return piece.bytes().data() + (offset - start);
    pieces_.push_back({offset, src_.fetch(offset, n)});
    return pieces_.back().second.bytes().data();
  }
  std::span<const std::byte> span(std::uint64_t offset, std::uint64_t n) {
    return {at(offset, n), static_cast<std::size_t>(n)};
  }

 private:
  Source src_;
  std::uint64_t size_;
  std::span<const std::byte> whole_;
  std::vector<std::pair<std::uint64_t, Source>> pieces_;
};

// The end of central directory record as miniz (torch's reader) finds it:
// the last signature in the final 64 KiB + 22 bytes with at least 22 bytes
// after it, whether or not its comment fits the file.
std::optional<std::uint64_t> find_end_record(FileBytes& b,
                                             std::uint64_t before = ~std::uint64_t{0}) {
  if (b.size() < kEndLen || before == 0) return std::nullopt;
  const std::uint64_t last = std::min<std::uint64_t>(b.size() - kEndLen, before - 1);
  const std::uint64_t window_start = b.size() - kEndLen > kMax16 ? b.size() - kEndLen - kMax16 : 0;
  const std::byte* w = b.at(window_start, last + 4 - window_start);
  for (std::uint64_t p = last + 1; p-- > window_start;)
    if (le<std::uint32_t>(w + (p - window_start)) == kEndSig) return p;
  return std::nullopt;
}

// Where the central directory is and how many entries it holds.
struct Directory {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t entries = 0;
  std::uint64_t end = 0;  // first byte of the end records (zip64 or not)
};

Directory read_end_records(FileBytes& b, std::uint64_t p, const std::string& where) {
  const std::byte* e = b.at(p, kEndLen);
  const std::uint16_t disk = le<std::uint16_t>(e + 4), cd_disk = le<std::uint16_t>(e + 6);
  const std::uint16_t here = le<std::uint16_t>(e + 8), total = le<std::uint16_t>(e + 10);
  Directory d;
  d.size = le<std::uint32_t>(e + 12);
  d.offset = le<std::uint32_t>(e + 16);
  d.entries = total;
  d.end = p;
  const bool has_locator =
      p >= kLocatorLen && le<std::uint32_t>(b.at(p - kLocatorLen, 4)) == kLocator64Sig;
  if (has_locator) {
    // zip64: the locator says where the zip64 end record is; its fields
    // replace the 16- and 32-bit ones (which writers set to all ones).
    const std::byte* l = b.at(p - kLocatorLen, kLocatorLen);
    const std::uint32_t end64_disk = le<std::uint32_t>(l + 4), disks = le<std::uint32_t>(l + 16);
    const std::uint64_t at = le<std::uint64_t>(l + 8);
    if (end64_disk != 0 || disks > 1)
      throw Error(ErrorCode::unsupported, "multi-disk (split) zip archives are not read", {},
                  p - kLocatorLen, where);
    if (at > p - kLocatorLen || p - kLocatorLen - at < kEnd64Len ||
        le<std::uint32_t>(b.at(at, 4)) != kEnd64Sig)
      throw Error(ErrorCode::corrupt,
                  "the zip64 locator points to no zip64 end-of-central-directory record", {},
                  p - kLocatorLen, where);
    const std::byte* z = b.at(at, kEnd64Len);
    if (le<std::uint32_t>(z + 16) != 0 || le<std::uint32_t>(z + 20) != 0 ||
        le<std::uint64_t>(z + 24) != le<std::uint64_t>(z + 32))
      throw Error(ErrorCode::unsupported, "multi-disk (split) zip archives are not read", {}, at,
                  where);
    d.entries = le<std::uint64_t>(z + 32);
    d.size = le<std::uint64_t>(z + 40);
    d.offset = le<std::uint64_t>(z + 48);
    d.end = at;
  } else {
    if (disk != 0 || cd_disk != 0 || here != total)
      throw Error(ErrorCode::unsupported, "multi-disk (split) zip archives are not read", {}, p,
                  where);
    if (total == kMax16 || d.size == kMax32 || d.offset == kMax32)
      throw Error(ErrorCode::corrupt,
                  "the end record asks for zip64 values but there is no zip64 locator", {}, p,
                  where);
  }
  if (d.offset > d.end || d.size > d.end - d.offset)
    throw Error(ErrorCode::corrupt,
                "the central directory [" + std::to_string(d.offset) + ", +" +
                    std::to_string(d.size) + ") does not lie before its end record at byte " +
                    std::to_string(d.end),
                {}, p, where);
  return d;
}

// One central directory header: the entry, and how long the header is.
// `at` is the header's offset in the file, for messages.
std::uint64_t read_central(std::span<const std::byte> dir, std::uint64_t pos, std::uint64_t at,
                           ZipEntry& e, std::uint16_t& flags, const std::string& where) {
  const std::byte* h = dir.data() + pos;
  flags = le<std::uint16_t>(h + 8);
  e.method = le<std::uint16_t>(h + 10);
  e.crc32 = le<std::uint32_t>(h + 16);
  e.compressed_size = le<std::uint32_t>(h + 20);
  e.size = le<std::uint32_t>(h + 24);
  const std::uint16_t name_len = le<std::uint16_t>(h + 28), extra_len = le<std::uint16_t>(h + 30),
                      comment_len = le<std::uint16_t>(h + 32);
  e.header_offset = le<std::uint32_t>(h + 42);
  const std::uint64_t len = kCentralLen + name_len + extra_len + comment_len;
  if (len > dir.size() - pos)
    throw Error(ErrorCode::corrupt, "central directory header runs past the end of the directory",
                {}, at, where);
  e.name.assign(reinterpret_cast<const char*>(h + kCentralLen), name_len);
  // Sizes and offsets of all ones live in the zip64 extra field, in this
  // order, each present only when its 32-bit field is all ones (4.5.3).
  const bool want_size = e.size == kMax32, want_csize = e.compressed_size == kMax32,
             want_offset = e.header_offset == kMax32;
  if (want_size || want_csize || want_offset) {
    const std::byte* x = h + kCentralLen + name_len;
    std::uint64_t i = 0;
    bool found = false;
    while (!found && i + 4 <= extra_len) {
      const std::uint16_t id = le<std::uint16_t>(x + i), n = le<std::uint16_t>(x + i + 2);
      if (n > extra_len - i - 4)
        throw Error(ErrorCode::corrupt, "an extra field runs past its header", e.name, at, where);
      if (id == kZip64ExtraId) {
        const std::byte* f = x + i + 4;
        std::uint64_t have = n;
        auto take = [&](std::uint64_t& v) {
          if (have < 8)
            throw Error(ErrorCode::corrupt,
                        "the zip64 extra field lacks a size or offset it must hold", e.name, at,
                        where);
          v = le<std::uint64_t>(f);
          f += 8;
          have -= 8;
        };
        if (want_size) take(e.size);
        if (want_csize) take(e.compressed_size);
        if (want_offset) take(e.header_offset);
        found = true;
      }
      i += 4u + n;
    }
    if (!found)
      throw Error(ErrorCode::corrupt, "sizes or offset of all ones but no zip64 extra field",
                  e.name, at, where);
  }
  return len;
}

// Reads local headers: with pread from the file when the source maps one
// (a few bytes per entry, rather than faulting a page of the mapping in
// for each and keeping it resident), else from memory. Headers are visited
// in file order, and one read takes the headers that follow close behind
// (each within kGap of the one before, up to kWindow in all): a file of many
// small records has its headers read a megabyte at a time, not one system
// call each, while the data of large records between headers is not read.
// A ranged source (a remote object) reads the windows `prefetch` names in
// one batch (neighbours coalesced, in parallel) before the walk, so opening
// costs no round trip per entry.
class LocalReader {
 public:
  // `headers`: the local header offsets, ascending.
  LocalReader(const Source& s, std::vector<std::uint64_t> headers)
      : src_(s), file_(s.file().get()), headers_(std::move(headers)) {
    if (s.contiguous()) bytes_ = s.bytes();
  }

  // Reads these windows (ranges inside the file) now, for a ranged source.
  void prefetch(std::vector<std::pair<std::uint64_t, std::uint64_t>> windows) {
    if (src_.contiguous() || windows.empty()) return;
    std::sort(windows.begin(), windows.end());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;
    for (const auto& [at, n] : windows)
      if (!merged.empty() && at <= merged.back().first + merged.back().second)
        merged.back().second =
            std::max(merged.back().first + merged.back().second, at + n) - merged.back().first;
      else
        merged.push_back({at, n});
    std::vector<RangeRead> reads;
    for (const auto& [at, n] : merged) {
      auto& w = windows_[at];
      w.resize(static_cast<std::size_t>(n));
      reads.push_back({at, w});
    }
    src_.read_many(reads);
  }

  // `n` bytes at `offset`, which the caller has checked lie in the file.
  const std::byte* at(std::uint64_t offset, std::uint64_t n) {
    if (!src_.contiguous()) {
      auto it = windows_.upper_bound(offset);
      if (it != windows_.begin()) {
        --it;
        if (offset - it->first + n <= it->second.size())
          return it->second.data() + (offset - it->first);
      }
      constexpr std::uint64_t kWindow = 4096;
      const std::uint64_t len = std::min<std::uint64_t>(std::max(n, kWindow), src_.size() - offset);
      auto& w = windows_[offset];
      w.resize(static_cast<std::size_t>(len));
      src_.read(offset, w);
      return w.data();
    }
    if (file_ == nullptr) return bytes_.data() + offset;
    if (offset >= start_ && offset - start_ + n <= buf_.size())
      return buf_.data() + (offset - start_);
    // A header is its 30 bytes, its name and (torch's padding) an extra
    // field: kHeader covers the usual ones; a longer one is read again.
    constexpr std::uint64_t kMin = 4096, kHeader = 512;
    constexpr std::uint64_t kGap = 16u << 10, kWindow = 1u << 20;
    const std::uint64_t limit = bytes_.size() - offset;
    std::uint64_t len = std::max(n, kMin);
    while (next_ < headers_.size() && headers_[next_] < offset) ++next_;
    for (std::uint64_t i = next_, last = offset; i < headers_.size(); ++i) {
      const std::uint64_t h = headers_[i];
      if (h - last > kGap || h + kHeader - offset > kWindow) break;
      len = std::max(len, h + kHeader - offset);
      last = h;
    }
    len = std::min(len, limit);
    buf_.resize(static_cast<std::size_t>(len));
    if (!file_->read(bytes_.data() + offset, buf_)) return bytes_.data() + offset;
    start_ = offset;
    return buf_.data();
  }

 private:
  Source src_;
  std::span<const std::byte> bytes_;
  const FileBacking* file_;
  std::vector<std::uint64_t> headers_;
  std::size_t next_ = 0;  // the first header at or after the last read
  std::vector<std::byte> buf_;
  std::uint64_t start_ = 0;
  std::map<std::uint64_t, std::vector<std::byte>> windows_;  // ranged sources
};

// Checks an entry's local header against its central one and sets where
// its data begins (the local extra field, torch's padding, is not in the
// central directory).
void read_local(LocalReader& reader, std::uint64_t file_size, ZipEntry& e, std::uint16_t flags,
                const std::string& where) {
  if (e.header_offset > file_size || file_size - e.header_offset < kLocalLen)
    throw Error(ErrorCode::truncated,
                "local header runs past the end of the file; truncated download?", e.name,
                e.header_offset, where);
  const std::byte* h = reader.at(e.header_offset, kLocalLen);
  if (le<std::uint32_t>(h) != kLocalSig)
    throw Error(ErrorCode::corrupt, "no local header signature", e.name, e.header_offset, where);
  const std::uint16_t method = le<std::uint16_t>(h + 8);
  const std::uint32_t crc = le<std::uint32_t>(h + 14), csize = le<std::uint32_t>(h + 18),
                      size = le<std::uint32_t>(h + 22);
  const std::uint16_t name_len = le<std::uint16_t>(h + 26), extra_len = le<std::uint16_t>(h + 28);
  // With bit 3 the sizes and CRC follow the data (torch's writer sets it and
  // leaves zeros here); all ones means the zip64 extra field holds them.
  const bool sizes_here = (flags & kFlagDescriptor) == 0;
  if (method != e.method ||
      (sizes_here && (crc != e.crc32 || (csize != kMax32 && csize != e.compressed_size) ||
                      (size != kMax32 && size != e.size))))
    throw Error(ErrorCode::corrupt,
                "local header is missing or disagrees with the central directory", e.name,
                e.header_offset, where);
  if (name_len != e.name.size())
    throw Error(ErrorCode::corrupt,
                "local header names a different file than the central directory", e.name,
                e.header_offset, where);
  const std::uint64_t header_len = kLocalLen + name_len + extra_len;
  if (file_size - e.header_offset < header_len)
    throw Error(ErrorCode::truncated,
                "local header runs past the end of the file; truncated download?", e.name,
                e.header_offset, where);
  const std::byte* name = reader.at(e.header_offset + kLocalLen, name_len);
  if (std::memcmp(name, e.name.data(), name_len) != 0)
    throw Error(ErrorCode::corrupt,
                "local header names a different file than the central directory", e.name,
                e.header_offset, where);
  e.data_offset = e.header_offset + header_len;
  if (e.compressed_size > file_size - e.data_offset)
    throw Error(ErrorCode::truncated,
                "entry data [" + std::to_string(e.data_offset) + ", +" +
                    std::to_string(e.compressed_size) + ") runs past the end of the " +
                    std::to_string(file_size) + "-byte file; truncated download?",
                e.name, e.data_offset, where);
}

char ascii_lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::size_t hash_name(std::string_view s) {
  // Seeded (a file cannot aim for collisions), over the lower-cased bytes
  // (names are looked up without case, as miniz does); short names (all of
  // torch's) lower-cased on the stack, not in a string of their own.
  char small[128];
  std::string large;
  char* lower = small;
  if (s.size() > sizeof small) {
    large.resize(s.size());
    lower = large.data();
  }
  for (std::size_t i = 0; i < s.size(); ++i) lower[i] = ascii_lower(s[i]);
  return static_cast<std::size_t>(detail::seeded_hash(std::string_view(lower, s.size())));
}

// A data descriptor (APPNOTE 4.3.9) of `e`: optional signature, CRC-32, and
// the sizes in 4 or (zip64) 8 bytes each, agreeing with the directory.
bool is_descriptor(std::span<const std::byte> g, const ZipEntry& e, std::uint16_t flags) noexcept {
  if ((flags & kFlagDescriptor) == 0) return false;
  std::size_t at = 0;
  if (g.size() == 16 || g.size() == 24) {
    if (le<std::uint32_t>(g.data()) != kDescriptorSig) return false;
    at = 4;
  } else if (g.size() != 12 && g.size() != 20) {
    return false;
  }
  if (le<std::uint32_t>(g.data() + at) != e.crc32) return false;
  if (g.size() - at == 8 + 4)
    return le<std::uint32_t>(g.data() + at + 4) == e.compressed_size &&
           le<std::uint32_t>(g.data() + at + 8) == e.size;
  return le<std::uint64_t>(g.data() + at + 4) == e.compressed_size &&
         le<std::uint64_t>(g.data() + at + 12) == e.size;
}

// Earlier end records in the window miniz searches: one that points to
// another well-formed directory is a second reading of the archive (readers
// that take the first record, or the one whose comment fits, see it).
void check_other_end_records(FileBytes& b, std::uint64_t chosen, const Directory& d,
                             const std::string& where) {
  // The comment must reach exactly to the end of the file: readers that
  // want it to (ours did) would search on for an earlier record.
  const std::uint64_t comment = le<std::uint16_t>(b.at(chosen + 20, 2));
  if (chosen + kEndLen + comment != b.size())
    throw Error(
        ErrorCode::ambiguous,
        "the end-of-central-directory record at byte " + std::to_string(chosen) + " declares a " +
            std::to_string(comment) + "-byte comment but " +
            std::to_string(b.size() - chosen - kEndLen) +
            " bytes follow it: readers disagree on which end record (and which directory) counts",
        {}, chosen, where);
  for (auto p = find_end_record(b, chosen); p; p = find_end_record(b, *p)) {
    Directory other;
    try {
      other = read_end_records(b, *p, where);
    } catch (const Error&) {
      continue;  // no directory: nothing another reader could read
    }
    if (other.offset == d.offset && other.size == d.size && other.entries == d.entries) continue;
    const bool starts_like_directory = (other.entries == 0 && other.size == 0) ||
                                       (other.size >= kCentralLen && other.offset <= b.size() - 4 &&
                                        le<std::uint32_t>(b.at(other.offset, 4)) == kCentralSig);
    if (!starts_like_directory) continue;
    throw Error(ErrorCode::ambiguous,
                "two end-of-central-directory records give different directories: miniz (torch) "
                "uses the last, at "
                "byte " +
                    std::to_string(chosen) + " (" + std::to_string(d.entries) +
                    " entries at byte " + std::to_string(d.offset) +
                    "); readers that take the first valid one use the one at byte " +
                    std::to_string(*p) + " (" + std::to_string(other.entries) +
                    " entries at byte " + std::to_string(other.offset) + ")",
                {}, *p, where);
  }
}

}  // namespace

// The whole file's deflated entries together, by their declared sizes
// (inflate_entry holds each to its declared size): at most
// Limits::max_inflate_total_bytes, and past the 16 MiB floor at most
// max_inflate_ratio times the file (the per-entry floor must not add up over
// many small entries).
namespace {
void check_inflate_total(const std::vector<ZipEntry>& entries, std::uint64_t file_size,
                         const Limits& limits, const std::string& where) {
  std::uint64_t total = 0;
  for (const auto& e : entries)
    if (e.method != 0 && !detail::add_ok(total, e.size, total)) total = ~std::uint64_t{0};
  if (total > limits.max_inflate_total_bytes)
    throw Error(ErrorCode::limit_exceeded,
                "deflated entries declare " + std::to_string(total) +
                    " bytes in all, more than Limits::max_inflate_total_bytes = " +
                    std::to_string(limits.max_inflate_total_bytes),
                {}, std::nullopt, where);
  if (limits.max_inflate_ratio == 0) return;
  constexpr std::uint64_t kFloor = 16u << 20;  // as for one entry (compression.cpp)
  std::uint64_t by_ratio;
  if (!detail::mul_ok(file_size, limits.max_inflate_ratio, by_ratio)) by_ratio = ~std::uint64_t{0};
  if (total > std::max(kFloor, by_ratio))
    throw Error(ErrorCode::limit_exceeded,
                "deflated entries declare " + std::to_string(total) + " bytes in all, more than " +
                    "Limits::max_inflate_ratio = " + std::to_string(limits.max_inflate_ratio) +
                    " times the file's " + std::to_string(file_size) +
                    " bytes (past a 16 MiB floor for the whole file; a zip bomb?)",
                {}, std::nullopt, where);
}
}  // namespace

std::vector<ZipLocalEntry> zip_local_entries(std::span<const std::byte> b,
                                             std::uint64_t max_entries) {
  std::vector<ZipLocalEntry> out;
  std::size_t pos = 0;
  while (out.size() < max_entries && pos + kLocalLen <= b.size()) {
    if (le<std::uint32_t>(b.data() + pos) != kLocalSig) {
      ++pos;
      continue;
    }
    const std::byte* h = b.data() + pos;
    const std::uint64_t csize = le<std::uint32_t>(h + 18);
    const std::size_t name_len = le<std::uint16_t>(h + 26), extra_len = le<std::uint16_t>(h + 28);
    const std::size_t data = pos + kLocalLen + name_len + extra_len;
    if (data > b.size()) break;
    ZipLocalEntry e;
    e.name.assign(reinterpret_cast<const char*>(h + kLocalLen), name_len);
    e.flags = le<std::uint16_t>(h + 6);
    e.method = le<std::uint16_t>(h + 8);
    e.offset = data;
    // A size of 0 (a data descriptor follows: torch writes its entries so)
    // or past the end: up to the next local or central header, else the
    // end (a pickle stops at STOP, a compressed stream at its end). To the
    // end every time made a truncated checkpoint of n entries cost n
    // times its size.
    const bool unknown = csize == 0 || csize > b.size() - data;
    std::size_t end = unknown ? b.size() : static_cast<std::size_t>(data + csize);
    if (unknown)
      for (std::size_t k = data; k + 4 <= b.size(); ++k)
        if (b[k] == std::byte{'P'} && b[k + 1] == std::byte{'K'} &&
            (le<std::uint32_t>(b.data() + k) == kLocalSig ||
             le<std::uint32_t>(b.data() + k) == kCentralSig)) {
          end = k;
          break;
        }
    e.data = b.subspan(data, end - data);
    out.push_back(std::move(e));
    pos = end;
  }
  return out;
}

bool looks_like_zip(std::span<const std::byte> b) noexcept {
  if (b.size() < 4) return false;
  const std::uint32_t sig = le<std::uint32_t>(b.data());
  return sig == kLocalSig || sig == kEndSig;  // local header, or an empty archive
}

bool zip_torch_refuses_archive(const ZipEntry& e) noexcept {
  return (e.flags & kFlagMaskedLocal) != 0;
}

ZipArchive ZipArchive::open(const Source& source, const Limits& limits, ZipMethods methods) {
  ZipArchive z;
  z.source_ = source;
  z.limits_ = limits;
  const std::string& where = source.name();
  FileBytes bytes(source);

  const auto found = find_end_record(bytes);
  if (!found)
    throw Error(ErrorCode::not_a_checkpoint,
                "no zip end-of-central-directory record found; not a zip archive or truncated", {},
                std::nullopt, where);
  const Directory d = read_end_records(bytes, *found, where);
  check_other_end_records(bytes, *found, d, where);
  if (d.entries > limits.max_entries)
    throw Error(
        ErrorCode::limit_exceeded,
        "zip directory declares " + std::to_string(d.entries) +
            " entries, more than Limits::max_entries = " + std::to_string(limits.max_entries),
        {}, std::nullopt, where);
  // Every entry takes at least 46 bytes of directory: a count the directory
  // cannot hold is refused before anything is reserved for it.
  if (d.entries > d.size / kCentralLen)
    throw Error(ErrorCode::corrupt,
                "zip central directory ends early: " + std::to_string(d.size) +
                    " bytes cannot hold " + std::to_string(d.entries) + " entries",
                {}, d.offset, where);
  // Python's zipfile shifts every offset by the bytes between the central
  // directory and the end records (data prepended to an archive); miniz
  // does not. The two read other bytes unless there are none.
  if (d.offset + d.size != d.end)
    throw Error(
        ErrorCode::ambiguous,
        std::to_string(d.end - d.offset - d.size) +
            " bytes lie between the central directory and its end record: miniz (torch) reads the "
            "entries at the offsets the directory gives, Python's zipfile shifts them by those "
            "bytes",
        {}, d.offset + d.size, where);
  const auto dir = bytes.span(d.offset, d.size);
  z.entries_.resize(static_cast<std::size_t>(d.entries));
  std::vector<std::uint16_t> flags(z.entries_.size());
  std::uint64_t pos = 0;
  for (std::size_t i = 0; i < z.entries_.size(); ++i) {
    if (dir.size() - pos < kCentralLen || le<std::uint32_t>(dir.data() + pos) != kCentralSig)
      throw Error(ErrorCode::corrupt,
                  "zip central directory ends early after " + std::to_string(i) + " of " +
                      std::to_string(d.entries) + " entries",
                  {}, d.offset + pos, where);
    ZipEntry& e = z.entries_[i];
    pos += read_central(dir, pos, d.offset + pos, e, flags[i], where);
    e.flags = flags[i];
    if (flags[i] & kFlagsNotExtracted)
      throw Error(ErrorCode::unsupported,
                  (flags[i] & kFlagEncrypted)
                      ? "entry is encrypted"
                      : "entry is flagged as patch data or strongly encrypted "
                        "(general purpose bits 5, 6), which torch's reader refuses",
                  e.name, std::nullopt, where);
    if (zip_torch_refuses_archive(e) && methods == ZipMethods::torch)
      throw Error(ErrorCode::unsupported,
                  "entry's local header is flagged as masked (general purpose bit 13, central "
                  "directory encryption), which torch's reader refuses (miniz: unsupported "
                  "encryption)",
                  e.name, std::nullopt, where);
    if (!zip_method_read(e.method, methods))
      throw Error(ErrorCode::unsupported,
                  "compression method " + std::to_string(e.method) + " (" +
                      zip_method_name(e.method) + "): " +
                      (methods == ZipMethods::torch
                           ? "torch's reader (miniz) reads only stored and deflate"
                           : "Python's zipfile here reads stored, deflate, bzip2 and lzma"),
                  e.name, std::nullopt, where);
    if (e.method == 0 && e.compressed_size != e.size)
      throw Error(ErrorCode::corrupt,
                  "stored entry declares " + std::to_string(e.compressed_size) +
                      " compressed but " + std::to_string(e.size) + " uncompressed bytes",
                  e.name, std::nullopt, where);
  }
  // miniz reads as many headers as the end record counts; Python's zipfile
  // reads headers until the directory's size is used up.
  if (pos != dir.size())
    throw Error(ErrorCode::ambiguous,
                "the central directory holds " + std::to_string(dir.size() - pos) +
                    " bytes after its " + std::to_string(d.entries) +
                    " counted entries: miniz (torch) stops at the count, Python's zipfile reads on "
                    "to the size",
                {}, d.offset + pos, where);
  z.index_names();

  // Local headers in file order (reads stay sequential), then: no two
  // entries may share bytes (overlapping entries are a known way to make
  // readers disagree about what an archive holds), and no entry may reach
  // into the central directory.
  std::vector<std::size_t> order(z.entries_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto by_offset = [&](std::size_t a, std::size_t b) {
    return z.entries_[a].header_offset < z.entries_[b].header_offset;
  };
  // Writers list entries in file order: then there is nothing to sort.
  if (!std::is_sorted(order.begin(), order.end(), by_offset))
    std::sort(order.begin(), order.end(), by_offset);
  std::vector<std::uint64_t> headers(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) headers[k] = z.entries_[order[k]].header_offset;
  LocalReader reader(source, std::move(headers));
  if (!source.contiguous()) {
    // Each local header with its name and torch's padding (up to 64 bytes
    // of extra field; a longer one is read when met), and the data
    // descriptor before it.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> windows;
    for (const ZipEntry& e : z.entries_) {
      const std::uint64_t from = e.header_offset >= 24 ? e.header_offset - 24 : 0;
      if (e.header_offset > bytes.size()) continue;
      windows.push_back(
          {from, std::min<std::uint64_t>(bytes.size() - from, e.header_offset - from + kLocalLen +
                                                                  e.name.size() + 128)});
    }
    reader.prefetch(std::move(windows));
  }
  // One pass in file order: an entry's local header, then the gap after its
  // data (a data descriptor), whose read window also holds the next header.
  for (std::size_t k = 0; k < order.size(); ++k) {
    read_local(reader, bytes.size(), z.entries_[order[k]], flags[order[k]], where);
    // Bytes no entry accounts for (before the first local header, between
    // entries beyond a data descriptor, before the directory) are where a
    // streaming reader, or one that trusts other records, finds other entries.
    if (k == 0 && z.entries_[order.front()].header_offset != 0)
      throw Error(
          ErrorCode::ambiguous,
          std::to_string(z.entries_[order.front()].header_offset) +
              " bytes precede the first entry's local header: readers that scan local headers (or "
              "Python's zipfile, for prepended data) see other entries than the directory lists",
          z.entries_[order.front()].name, 0, where);
    const ZipEntry& e = z.entries_[order[k]];
    const std::uint64_t next =
        k + 1 < order.size() ? z.entries_[order[k + 1]].header_offset : d.offset;
    if (e.data_offset + e.compressed_size > next) {
      if (k + 1 == order.size())
        throw Error(ErrorCode::corrupt, "entry data runs into the central directory", e.name,
                    e.data_offset, where);
      throw Error(ErrorCode::corrupt, "entry overlaps '" + e.name + "'",
                  z.entries_[order[k + 1]].name, next, where);
    }
    const std::uint64_t end = e.data_offset + e.compressed_size;
    // The gap is read like a local header (pread, when the file is mapped):
    // touching the mapping here would map the neighbouring tensor data too
    // (the kernel maps a page-cache folio around a fault, up to 2 MiB).
    constexpr std::uint64_t kLongestDescriptor = 24;
    const std::uint64_t gap = next - end;
    if (gap != 0 &&
        (gap > kLongestDescriptor ||
         !is_descriptor({reader.at(end, gap), static_cast<std::size_t>(gap)}, e, flags[order[k]])))
      throw Error(ErrorCode::ambiguous,
                  std::to_string(next - end) +
                      " bytes after the entry's data are no data descriptor of it: " +
                      "readers that scan local headers could find other entries there",
                  e.name, end, where);
  }
  check_inflate_total(z.entries_, bytes.size(), limits, where);
  // The central directory is read once (about 70 bytes an entry): its
  // pages leave the resident set (the page cache keeps them), not to sit
  // beside what the entries become for a file of many small tensors.
  if (source.file() != nullptr && source.contiguous() && d.size > 0)
    source.file()->release(dir.data(), dir.data() + dir.size());
  return z;
}

void ZipArchive::index_names() {
  // Open addressing over entry indices (stored + 1; 0 is an empty slot),
  // at most half full. Indices survive copies of the archive, unlike views.
  // Names are matched as miniz matches them for torch: ASCII case ignored.
  if (entries_.size() >= UINT32_MAX)
    throw Error(ErrorCode::limit_exceeded, "2^32 - 1 zip entries or more");
  std::size_t cap = 16;
  while (cap < 2 * entries_.size()) cap *= 2;
  slots_.assign(cap, 0);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const std::string& name = entries_[i].name;
    for (std::size_t s = hash_name(name) & (cap - 1);; s = (s + 1) & (cap - 1)) {
      if (slots_[s] == 0) {
        slots_[s] = static_cast<std::uint32_t>(i + 1);
        break;
      }
      const ZipEntry& other = entries_[slots_[s] - 1];
      if (zip_same_name(other.name, name))
        throw Error(ErrorCode::ambiguous,
                    other.name == name
                        ? "the zip directory lists '" + name +
                              "' twice: miniz (torch) finds either, Python's zipfile the last"
                        : "the zip names '" + other.name + "' and '" + name +
                              "' differ only in case: torch's reader (miniz) ignores case and "
                              "finds either, "
                              "case-sensitive readers find each",
                    name, entries_[i].header_offset, source_.name());
    }
  }
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  if (slots_.empty()) return nullptr;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t s = hash_name(name) & mask; slots_[s] != 0; s = (s + 1) & mask)
    if (zip_same_name(entries_[slots_[s] - 1].name, name)) return &entries_[slots_[s] - 1];
  return nullptr;
}

void ZipArchive::release_directory() noexcept {
  std::vector<ZipEntry>().swap(entries_);
  std::vector<std::uint32_t>().swap(slots_);
}

namespace {

std::shared_ptr<Storage> inflate_entry(const Source& src, const ZipEntry& e, const Limits& limits) {
  // Checked before anything is allocated: the declared size bounds the
  // output (a stream that wants to write more is refused as it decodes).
  if (e.size > inflate_cap(e.compressed_size, limits))
    throw Error(ErrorCode::limit_exceeded,
                "compressed entry declares " + std::to_string(e.size) + " bytes, more than " +
                    inflate_cap_reason(e.compressed_size, limits),
                e.name, e.data_offset, src.name());
  auto out = Storage::allocate(e.size);
  auto dst = out->mutable_bytes();
  const Source in = src.fetch(e.data_offset, e.compressed_size);
  decompress_zip_entry(e.method, in.bytes(), dst, e.name, e.data_offset, src.name());
  const auto crc = crc32_z(0, reinterpret_cast<const Bytef*>(dst.data()), dst.size());
  if (crc != e.crc32)
    throw Error(ErrorCode::corrupt, "CRC-32 mismatch after decompressing", e.name, e.data_offset,
                src.name());
  return out;
}

}  // namespace

std::shared_ptr<Storage> ZipArchive::storage(const ZipEntry& e) const {
  if (e.method == 0) return source_.storage(e.data_offset, e.size);
  Source src = source_;
  Limits limits = limits_;
  ZipEntry entry = e;
  return Storage::deferred(e.size,
                           [src, limits, entry] { return inflate_entry(src, entry, limits); });
}

Source ZipArchive::read(const ZipEntry& e) const {
  if (e.method == 0) {
    Source s = source_.fetch(e.data_offset, e.size);
    return s.slice(0, s.size(), e.name);
  }
  return Source::from_storage(inflate_entry(source_, e, limits_), e.name);
}

void ZipArchive::verify_crc(const ZipEntry& e) const {
  auto st = storage(e);
  const auto b = st->bytes();
  const auto crc = crc32_z(0, reinterpret_cast<const Bytef*>(b.data()), b.size());
  if (crc != e.crc32)
    throw Error(ErrorCode::corrupt, "CRC-32 mismatch: the entry's data was altered or damaged",
                e.name, e.data_offset, source_.name());
}

bool zip_same_name(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

}  // namespace torchport
