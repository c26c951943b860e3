#include "torchport/io/zip.hpp"

#include <algorithm>
#include <cstring>

#include <minizip/unzip.h>
#include <zlib.h>

#include "torchport/core/error.hpp"
#include "torchport/io/byte_reader.hpp"

namespace torchport {
namespace {

// minizip reads through these callbacks, so it only ever sees our bounds-
// checked view of the mapped file, never the file system.
struct MemoryStream {
  std::span<const std::byte> bytes;
  std::uint64_t pos = 0;
};

voidpf ZCALLBACK mem_open(voidpf opaque, const void*, int) { return opaque; }

uLong ZCALLBACK mem_read(voidpf, voidpf stream, void* buf, uLong size) {
  auto* s = static_cast<MemoryStream*>(stream);
  if (s->pos >= s->bytes.size()) return 0;
  const std::uint64_t n = std::min<std::uint64_t>(size, s->bytes.size() - s->pos);
  std::memcpy(buf, s->bytes.data() + s->pos, static_cast<std::size_t>(n));
  s->pos += n;
  return static_cast<uLong>(n);
}

uLong ZCALLBACK mem_write(voidpf, voidpf, const void*, uLong) { return 0; }

ZPOS64_T ZCALLBACK mem_tell(voidpf, voidpf stream) { return static_cast<MemoryStream*>(stream)->pos; }

long ZCALLBACK mem_seek(voidpf, voidpf stream, ZPOS64_T offset, int origin) {
  auto* s = static_cast<MemoryStream*>(stream);
  std::uint64_t base;
  switch (origin) {
    case ZLIB_FILEFUNC_SEEK_SET: base = 0; break;
    case ZLIB_FILEFUNC_SEEK_CUR: base = s->pos; break;
    case ZLIB_FILEFUNC_SEEK_END: base = s->bytes.size(); break;
    default: return -1;
  }
  if (offset > s->bytes.size() || base > s->bytes.size() - offset) return -1;
  s->pos = base + offset;
  return 0;
}

int ZCALLBACK mem_close(voidpf, voidpf) { return 0; }
int ZCALLBACK mem_error(voidpf, voidpf) { return 0; }

struct UnzCloser {
  void operator()(unzFile f) const noexcept { unzClose(f); }
};

constexpr std::uint32_t kLocalSig = 0x04034b50;

}  // namespace

bool looks_like_zip(std::span<const std::byte> b) noexcept {
  if (b.size() < 4) return false;
  std::uint32_t sig;
  std::memcpy(&sig, b.data(), 4);
  return sig == kLocalSig || sig == 0x06054b50;  // local header, or an empty archive
}

ZipArchive ZipArchive::open(const Source& source, const Limits& limits) {
  ZipArchive z;
  z.source_ = source;
  z.limits_ = limits;
  const std::string& where = source.name();

  MemoryStream stream{source.bytes(), 0};
  zlib_filefunc64_def io{};
  io.zopen64_file = mem_open;
  io.zread_file = mem_read;
  io.zwrite_file = mem_write;
  io.ztell64_file = mem_tell;
  io.zseek64_file = mem_seek;
  io.zclose_file = mem_close;
  io.zerror_file = mem_error;
  io.opaque = &stream;
  std::unique_ptr<void, UnzCloser> uf(unzOpen2_64("", &io));
  if (!uf)
    throw Error(ErrorCode::not_a_checkpoint,
                "no zip end-of-central-directory record found; not a zip archive or truncated",
                {}, std::nullopt, where);

  unz_global_info64 gi{};
  if (unzGetGlobalInfo64(uf.get(), &gi) != UNZ_OK)
    throw Error(ErrorCode::corrupt, "unreadable zip directory", {}, std::nullopt, where);
  if (gi.number_entry > limits.max_entries)
    throw Error(ErrorCode::limit_exceeded,
                "zip directory declares " + std::to_string(gi.number_entry) +
                    " entries, more than Limits::max_entries = " + std::to_string(limits.max_entries),
                {}, std::nullopt, where);
  z.entries_.reserve(static_cast<std::size_t>(gi.number_entry));

  std::vector<char> name(65536);
  int rc = gi.number_entry == 0 ? UNZ_END_OF_LIST_OF_FILE : unzGoToFirstFile(uf.get());
  while (rc == UNZ_OK) {
    unz_file_info64 fi{};
    if (unzGetCurrentFileInfo64(uf.get(), &fi, name.data(), name.size(), nullptr, 0, nullptr, 0) !=
        UNZ_OK)
      throw Error(ErrorCode::corrupt,
                  "unreadable central directory entry " + std::to_string(z.entries_.size()), {},
                  unzGetOffset64(uf.get()), where);
    ZipEntry e;
    e.name.assign(name.data(), fi.size_filename);
    e.method = static_cast<std::uint16_t>(fi.compression_method);
    e.compressed_size = fi.compressed_size;
    e.size = fi.uncompressed_size;
    e.crc32 = static_cast<std::uint32_t>(fi.crc);
    if (fi.flag & 1u)
      throw Error(ErrorCode::unsupported, "entry is encrypted", e.name, std::nullopt, where);
    if (e.method != 0 && e.method != Z_DEFLATED)
      throw Error(ErrorCode::unsupported,
                  "compression method " + std::to_string(e.method) +
                      " (only stored and deflate are read)",
                  e.name, std::nullopt, where);
    if (e.method == 0 && e.compressed_size != e.size)
      throw Error(ErrorCode::corrupt,
                  "stored entry declares " + std::to_string(e.compressed_size) +
                      " compressed but " + std::to_string(e.size) + " uncompressed bytes",
                  e.name, std::nullopt, where);
    // Open in raw mode: minizip parses the local header (checking it against
    // the central one) and tells where the data starts, without inflating.
    int method = 0, level = 0;
    if (unzOpenCurrentFile2(uf.get(), &method, &level, 1) != UNZ_OK)
      throw Error(ErrorCode::corrupt,
                  "local header is missing or disagrees with the central directory", e.name,
                  std::nullopt, where);
    e.data_offset = unzGetCurrentFileZStreamPos64(uf.get());
    const int extra = unzGetLocalExtrafield(uf.get(), nullptr, 0);
    unzCloseCurrentFile(uf.get());
    const std::uint64_t header_len = 30 + fi.size_filename + static_cast<std::uint64_t>(std::max(extra, 0));
    if (extra < 0 || e.data_offset < header_len)
      throw Error(ErrorCode::corrupt, "local header is malformed", e.name, e.data_offset, where);
    e.header_offset = e.data_offset - header_len;
    // minizip compares the name's length only; compare the bytes too.
    ByteReader lh(source.bytes(), where);
    lh.seek(e.header_offset);
    if (lh.u32("local header signature") != kLocalSig)
      throw Error(ErrorCode::corrupt, "no local header signature", e.name, e.header_offset, where);
    lh.seek(e.header_offset + 30);
    if (lh.take_str(fi.size_filename, "local file name") != e.name)
      throw Error(ErrorCode::corrupt, "local header names a different file than the central directory",
                  e.name, e.header_offset, where);
    if (e.compressed_size > source.size() || e.data_offset > source.size() - e.compressed_size)
      throw Error(ErrorCode::truncated,
                  "entry data [" + std::to_string(e.data_offset) + ", +" +
                      std::to_string(e.compressed_size) + ") runs past the end of the " +
                      std::to_string(source.size()) + "-byte file; truncated download?",
                  e.name, e.data_offset, where);
    if (!z.by_name_.emplace(e.name, z.entries_.size()).second)
      throw Error(ErrorCode::corrupt, "duplicate entry name in the zip directory", e.name,
                  e.header_offset, where);
    if (z.entries_.size() >= limits.max_entries)
      throw Error(ErrorCode::limit_exceeded, "more zip entries than Limits::max_entries", {},
                  std::nullopt, where);
    z.entries_.push_back(std::move(e));
    rc = unzGoToNextFile(uf.get());
  }
  if (rc != UNZ_END_OF_LIST_OF_FILE)
    throw Error(ErrorCode::corrupt,
                "zip central directory ends early after " + std::to_string(z.entries_.size()) +
                    " of " + std::to_string(gi.number_entry) + " entries",
                {}, std::nullopt, where);

  // No two entries may share bytes (overlapping entries are a known way to
  // make readers disagree about what an archive holds).
  std::vector<const ZipEntry*> order;
  order.reserve(z.entries_.size());
  for (const auto& e : z.entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->header_offset < b->header_offset; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const ZipEntry& prev = *order[i - 1];
    if (prev.data_offset + prev.compressed_size > order[i]->header_offset)
      throw Error(ErrorCode::corrupt, "entry overlaps '" + prev.name + "'", order[i]->name,
                  order[i]->header_offset, where);
  }
  return z;
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

namespace {

std::shared_ptr<Storage> inflate_entry(const Source& src, const ZipEntry& e, const Limits& limits) {
  if (e.size > limits.max_inflate_bytes)
    throw Error(ErrorCode::limit_exceeded,
                "deflated entry declares " + std::to_string(e.size) +
                    " bytes, more than Limits::max_inflate_bytes = " +
                    std::to_string(limits.max_inflate_bytes),
                e.name, e.data_offset, src.name());
  auto out = Storage::allocate(e.size);
  auto dst = out->mutable_bytes();
  const auto in = src.bytes().subspan(static_cast<std::size_t>(e.data_offset),
                                      static_cast<std::size_t>(e.compressed_size));
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
    throw Error(ErrorCode::io, "zlib inflateInit2 failed", e.name, std::nullopt, src.name());
  // zlib counts in uInt, so feed and drain at most 1 GiB per call. Once the
  // declared size is filled, a one-byte probe tells whether the stream
  // wanted to write more (a zip bomb lying about its size).
  constexpr std::uint64_t kChunk = 1u << 30;
  std::uint64_t in_pos = 0, out_pos = 0;
  Bytef probe = 0;
  bool probing = false;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (zs.avail_in == 0 && in_pos < in.size()) {
      const std::uint64_t n = std::min<std::uint64_t>(kChunk, in.size() - in_pos);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + in_pos));
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    if (zs.avail_out == 0) {
      if (out_pos < dst.size()) {
        const std::uint64_t n = std::min<std::uint64_t>(kChunk, dst.size() - out_pos);
        zs.next_out = reinterpret_cast<Bytef*>(dst.data() + out_pos);
        zs.avail_out = static_cast<uInt>(n);
        out_pos += n;
      } else {
        zs.next_out = &probe;
        zs.avail_out = 1;
        probing = true;
      }
    }
    rc = inflate(&zs, Z_NO_FLUSH);
    if (probing && zs.avail_out == 0) {
      inflateEnd(&zs);
      throw Error(ErrorCode::corrupt,
                  "deflated data inflates past its declared " + std::to_string(e.size) + " bytes",
                  e.name, e.data_offset, src.name());
    }
  }
  const std::uint64_t produced = probing ? out_pos : out_pos - zs.avail_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || produced != e.size)
    throw Error(ErrorCode::corrupt,
                "deflated data is damaged or truncated: inflated " + std::to_string(produced) +
                    " of " + std::to_string(e.size) + " declared bytes",
                e.name, e.data_offset, src.name());
  const auto crc = crc32_z(0, reinterpret_cast<const Bytef*>(dst.data()), dst.size());
  if (crc != e.crc32)
    throw Error(ErrorCode::corrupt, "CRC-32 mismatch after inflating", e.name, e.data_offset,
                src.name());
  return out;
}

}  // namespace

std::shared_ptr<Storage> ZipArchive::storage(const ZipEntry& e) const {
  if (e.method == 0) return source_.storage(e.data_offset, e.size);
  Source src = source_;
  Limits limits = limits_;
  ZipEntry entry = e;
  return Storage::deferred(e.size, [src, limits, entry] { return inflate_entry(src, entry, limits); });
}

Source ZipArchive::read(const ZipEntry& e) const {
  if (e.method == 0) return source_.slice(e.data_offset, e.size, e.name);
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

}  // namespace torchport
