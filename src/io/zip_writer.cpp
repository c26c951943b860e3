// The zip layout follows APPNOTE.TXT 6.3.9 (sections 4.3.7 local header,
// 4.3.12 central header, 4.3.14-16 zip64 end records, 4.5.3 zip64 extra
// field) and, for the alignment padding, caffe2/serialize/inline_container.cc
// (PyTorchStreamWriter::writeRecord and getPadding): an extra field with id
// 0x4246 ("FB") filled with 'Z' so the data starts at a multiple of 64.

#include "io/zip_writer.hpp"

#include <zlib.h>

#include "torchport/core/error.hpp"

namespace torchport {
namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kEnd64Sig = 0x06064b50;
constexpr std::uint32_t kLocator64Sig = 0x07064b50;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint16_t kPaddingExtraId = 0x4246;  // "FB", torch's padding field
constexpr std::uint16_t kVersion = 20;             // 2.0: stored entries
constexpr std::uint16_t kVersionZip64 = 45;        // 4.5: zip64
constexpr std::uint16_t kMadeByUnix = 0x0300;
constexpr std::uint16_t kFlagUtf8 = 0x0800;
constexpr std::uint16_t kFlagDescriptor = 0x0008;  // CRC-32 and sizes follow the data
constexpr std::uint32_t kDescriptorSig = 0x08074b50;
constexpr std::uint16_t kDosDate = 0x0021;  // 1980-01-01
constexpr std::uint32_t kMax32 = 0xFFFFFFFFu;
constexpr std::uint16_t kMax16 = 0xFFFFu;

// Little-endian field appender.
class Bytes {
 public:
  Bytes& u16(std::uint16_t v) { return le(v, 2); }
  Bytes& u32(std::uint32_t v) { return le(v, 4); }
  Bytes& u64(std::uint64_t v) { return le(v, 8); }
  Bytes& str(std::string_view s) {
    for (char c : s) b_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  Bytes& fill(std::size_t n, char c) {
    b_.insert(b_.end(), n, static_cast<std::byte>(c));
    return *this;
  }
  std::span<const std::byte> span() const { return b_; }
  std::size_t size() const { return b_.size(); }

 private:
  Bytes& le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b_.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
    return *this;
  }
  std::vector<std::byte> b_;
};

std::uint32_t clamp32(std::uint64_t v, bool force) {
  return force || v >= kMax32 ? kMax32 : static_cast<std::uint32_t>(v);
}

bool non_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return true;
  return false;
}

}  // namespace

ZipWriter::ZipWriter(AtomicFile& file, ZipWriterOptions options) : file_(file), options_(options) {
  const std::uint32_t a = options_.alignment;
  if (a == 0 || a > 4096 || (a & (a - 1)) != 0)
    throw Error(ErrorCode::invalid_argument,
                "zip alignment " + std::to_string(a) + " is not a power of two from 1 to 4096");
}

void ZipWriter::check_open(bool want_open, const char* op) const {
  if (finished_)
    throw Error(ErrorCode::invalid_argument, std::string("zip ") + op + " after finish()", {},
                std::nullopt, file_.target().string());
  if (open_ != want_open)
    throw Error(ErrorCode::invalid_argument,
                std::string("zip ") + op +
                    (want_open ? " without an open entry"
                               : " while entry '" + entries_.back().name + "' is open"),
                {}, std::nullopt, file_.target().string());
}

void ZipWriter::begin_entry(std::string_view name, std::uint64_t size) {
  check_open(false, "begin_entry");
  if (name.empty() || name.size() > kMax16)
    throw Error(ErrorCode::invalid_argument,
                "zip entry name of " + std::to_string(name.size()) + " bytes (1 to 65535 allowed)");
  if (!names_.emplace(name).second)
    throw Error(ErrorCode::invalid_argument, "duplicate zip entry name", std::string(name),
                std::nullopt, file_.target().string());
  Entry e;
  e.name = std::string(name);
  e.header_offset = file_.size();
  e.size = size;
  e.utf8 = non_ascii(name);
  // torch's layout: a zip64 field of the sizes when the size needs it and
  // of the header offset when that does (inline_container.cc getPadding
  // counts exactly these); ours otherwise: the sizes, when they need it.
  const bool torch = options_.torch_layout;
  const bool big_size = options_.force_zip64 || size >= kMax32;
  const bool big_offset = torch && e.header_offset >= kMax32;
  const bool zip64 = big_size || big_offset;
  e.descriptor = torch && size > 0;
  e.zip64_descriptor = e.descriptor && zip64;

  const std::uint64_t zip64_len = zip64 ? 4 + (big_size ? 16 : 0) + (big_offset ? 8 : 0) : 0;
  const std::uint64_t align = options_.alignment;
  // Where the data would start with an empty padding field; pad up to the
  // alignment (torch always writes the field, even when it is empty).
  const std::uint64_t unpadded = e.header_offset + 30 + name.size() + zip64_len + 4;
  const std::uint64_t pad = (align - unpadded % align) % align;

  // With a data descriptor the CRC-32 and sizes follow the data and are
  // zero here (miniz writes zeros, zip64 or not).
  const std::uint32_t local_size = e.descriptor ? 0
                                   : big_size   ? kMax32
                                                : static_cast<std::uint32_t>(size);
  Bytes h;
  h.u32(kLocalSig)
      .u16(zip64 ? kVersionZip64 : kVersion)
      .u16(static_cast<std::uint16_t>((e.utf8 ? kFlagUtf8 : 0) |
                                      (e.descriptor ? kFlagDescriptor : 0)))
      .u16(0)  // stored
      .u16(0)  // time
      .u16(kDosDate)
      .u32(0)  // CRC-32, patched by end_entry (or in the data descriptor)
      .u32(local_size)
      .u32(local_size)
      .u16(static_cast<std::uint16_t>(name.size()))
      .u16(static_cast<std::uint16_t>(zip64_len + 4 + pad))
      .str(name);
  if (zip64) {
    h.u16(kZip64ExtraId).u16(static_cast<std::uint16_t>(zip64_len - 4));
    if (big_size) h.u64(size).u64(size);
    if (big_offset) h.u64(e.header_offset);
  }
  h.u16(kPaddingExtraId)
      .u16(static_cast<std::uint16_t>(pad))
      .fill(static_cast<std::size_t>(pad), 'Z');
  file_.write(h.span());

  entries_.push_back(std::move(e));
  open_ = true;
  data_start_ = file_.size();
  written_ = 0;
  crc_ = static_cast<std::uint32_t>(crc32_z(0, nullptr, 0));
}

void ZipWriter::write(std::span<const std::byte> data) {
  check_open(true, "write");
  const Entry& e = entries_.back();
  if (data.size() > e.size - written_)
    throw Error(ErrorCode::invalid_argument,
                "zip entry declared " + std::to_string(e.size) + " bytes, but " +
                    std::to_string(written_ + data.size()) + " were written",
                e.name, std::nullopt, file_.target().string());
  if (data.empty()) return;
  crc_ = static_cast<std::uint32_t>(
      crc32_z(crc_, reinterpret_cast<const Bytef*>(data.data()), data.size()));
  file_.write(data);
  written_ += data.size();
}

void ZipWriter::end_entry() {
  check_open(true, "end_entry");
  Entry& e = entries_.back();
  if (written_ != e.size)
    throw Error(ErrorCode::invalid_argument,
                "zip entry declared " + std::to_string(e.size) + " bytes, but only " +
                    std::to_string(written_) + " were written",
                e.name, std::nullopt, file_.target().string());
  e.crc = crc_;
  Bytes c;
  if (e.descriptor) {  // APPNOTE 4.3.9, with the optional signature, as miniz writes it
    c.u32(kDescriptorSig).u32(crc_);
    if (e.zip64_descriptor)
      c.u64(e.size).u64(e.size);
    else
      c.u32(static_cast<std::uint32_t>(e.size)).u32(static_cast<std::uint32_t>(e.size));
    file_.write(c.span());
  } else {
    c.u32(crc_);
    file_.write_at(e.header_offset + 14, c.span());
  }
  open_ = false;
}

void ZipWriter::add_entry(std::string_view name, std::span<const std::byte> data) {
  begin_entry(name, data.size());
  write(data);
  end_entry();
}

void ZipWriter::finish() {
  check_open(false, "finish");
  const bool force = options_.force_zip64;
  const std::uint64_t cd_offset = file_.size();
  for (const Entry& e : entries_) {
    const bool big_size = force || e.size >= kMax32;
    const bool big_offset = force || e.header_offset >= kMax32;
    Bytes extra;
    if (big_size || big_offset) {
      const std::uint16_t n =
          static_cast<std::uint16_t>((big_size ? 16 : 0) + (big_offset ? 8 : 0));
      extra.u16(kZip64ExtraId).u16(n);
      if (big_size) extra.u64(e.size).u64(e.size);  // uncompressed, then compressed
      if (big_offset) extra.u64(e.header_offset);
    }
    const bool zip64 = extra.size() > 0;
    Bytes h;
    h.u32(kCentralSig)
        .u16(kMadeByUnix | kVersionZip64)
        .u16(zip64 ? kVersionZip64 : kVersion)
        .u16(static_cast<std::uint16_t>((e.utf8 ? kFlagUtf8 : 0) |
                                        (e.descriptor ? kFlagDescriptor : 0)))
        .u16(0)
        .u16(0)
        .u16(kDosDate)
        .u32(e.crc)
        .u32(clamp32(e.size, big_size))
        .u32(clamp32(e.size, big_size))
        .u16(static_cast<std::uint16_t>(e.name.size()))
        .u16(static_cast<std::uint16_t>(extra.size()))
        .u16(0)                             // comment
        .u16(0)                             // disk
        .u16(0)                             // internal attributes
        .u32(std::uint32_t{0100644} << 16)  // regular file, rw-r--r--
        .u32(clamp32(e.header_offset, big_offset))
        .str(e.name);
    file_.write(h.span());
    file_.write(extra.span());
  }
  const std::uint64_t cd_size = file_.size() - cd_offset;
  const std::uint64_t n = entries_.size();
  const bool zip64_end = force || n >= kMax16 || cd_size >= kMax32 || cd_offset >= kMax32;
  Bytes end;
  if (zip64_end) {
    const std::uint64_t end64_offset = file_.size();
    end.u32(kEnd64Sig)
        .u64(44)  // size of the rest of this record
        .u16(kMadeByUnix | kVersionZip64)
        .u16(kVersionZip64)
        .u32(0)
        .u32(0)
        .u64(n)
        .u64(n)
        .u64(cd_size)
        .u64(cd_offset);
    end.u32(kLocator64Sig).u32(0).u64(end64_offset).u32(1);
  }
  const std::uint16_t n16 = n >= kMax16 ? kMax16 : static_cast<std::uint16_t>(n);
  end.u32(kEndSig)
      .u16(0)
      .u16(0)
      .u16(n16)
      .u16(n16)
      .u32(clamp32(cd_size, false))
      .u32(clamp32(cd_offset, false))
      .u16(0);
  file_.write(end.span());
  finished_ = true;
}

std::uint32_t ZipWriter::combined_crc32() const noexcept {
  uLong crc = crc32_z(0, nullptr, 0);
  for (const Entry& e : entries_) crc = crc32_combine64(crc, e.crc, static_cast<z_off64_t>(e.size));
  return static_cast<std::uint32_t>(crc);
}

}  // namespace torchport
