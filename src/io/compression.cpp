// Every decompression torchport does: one decoder over zlib (gzip, zlib,
// raw deflate), libbz2, liblzma (xz, .lzma, zip's LZMA), libzstd
// (Zstandard frames) and liblz4 (LZ4 frames), driven by one loop that
// bounds the output before producing it.

#include "io/compression.hpp"

#include <bzlib.h>
#include <lz4frame.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "torchport/core/error.hpp"
#include "torchport/detail/work.hpp"

namespace torchport {

namespace {

constexpr std::uint64_t kRatioFloor = 16u << 20;  // max_inflate_ratio applies past this
constexpr std::size_t kChunk = std::size_t{1} << 20;
constexpr std::size_t kMinRoom = 1024;
constexpr std::size_t kMaxCall = std::size_t{1} << 30;  // zlib and libbz2 count in 32 bits

bool starts(std::span<const std::byte> b, std::initializer_list<unsigned> magic) {
  if (b.size() < magic.size()) return false;
  std::size_t i = 0;
  for (unsigned m : magic)
    if (static_cast<unsigned>(b[i++]) != m) return false;
  return true;
}

// The streams the decoder reads: the file formats, and zip's raw ones.
enum class Codec { gzip, zlib, deflate, bzip2, xz, lzma_alone, lzma_raw, zstd, lz4 };

enum class Status { ok, end, error };

// One compressed stream. `step` decodes from `in` into `out`, advancing
// both; `reset` starts the next concatenated stream.
class Decoder {
 public:
  Decoder(Codec codec, std::span<const std::byte> lzma_props = {})
      : codec_(codec), props_(lzma_props.begin(), lzma_props.end()) {
    start();
  }
  ~Decoder() { stop(); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  void reset() {
    // zlib's and libzstd's own resets keep the state and window they
    // allocated: a file of 100,000 tiny members must not cost an allocation
    // each.
    if (started_ && (codec_ == Codec::gzip || codec_ == Codec::zlib || codec_ == Codec::deflate) &&
        inflateReset(&z_) == Z_OK) {
      message_.clear();
      return;
    }
    if (started_ && codec_ == Codec::zstd &&
        !ZSTD_isError(ZSTD_DCtx_reset(zs_, ZSTD_reset_session_only))) {
      message_.clear();
      return;
    }
    if (started_ && codec_ == Codec::lz4) {
      LZ4F_resetDecompressionContext(lz_);
      message_.clear();
      return;
    }
    stop();
    start();
  }
  const std::string& message() const noexcept { return message_; }
  /// Whether the last failure was the decoder's memory limit: the stream
  /// is one (its header was read), but asks for more than we give.
  bool over_limit() const noexcept { return over_limit_; }

  Status step(std::span<const std::byte>& in, std::span<std::byte>& out) {
    if (!started_) return Status::error;
    const std::size_t in_n = std::min(in.size(), kMaxCall), out_n = std::min(out.size(), kMaxCall);
    std::size_t in_left = in_n, out_left = out_n;
    Status st = Status::ok;
    switch (codec_) {
      case Codec::gzip:
      case Codec::zlib:
      case Codec::deflate: {
        z_.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
        z_.avail_in = static_cast<uInt>(in_n);
        z_.next_out = reinterpret_cast<Bytef*>(out.data());
        z_.avail_out = static_cast<uInt>(out_n);
        const int rc = inflate(&z_, Z_NO_FLUSH);
        in_left = z_.avail_in;
        out_left = z_.avail_out;
        if (rc == Z_STREAM_END)
          st = Status::end;
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
          st = fail(z_.msg ? z_.msg : "zlib error");
        break;
      }
      case Codec::bzip2: {
        b_.next_in = reinterpret_cast<char*>(const_cast<std::byte*>(in.data()));
        b_.avail_in = static_cast<unsigned>(in_n);
        b_.next_out = reinterpret_cast<char*>(out.data());
        b_.avail_out = static_cast<unsigned>(out_n);
        const int rc = BZ2_bzDecompress(&b_);
        in_left = b_.avail_in;
        out_left = b_.avail_out;
        if (rc == BZ_STREAM_END)
          st = Status::end;
        else if (rc != BZ_OK)
          st = fail(rc == BZ_DATA_ERROR_MAGIC ? "no bzip2 stream here"
                    : rc == BZ_MEM_ERROR      ? "bzip2: out of memory"
                                              : "bzip2 data is damaged");
        break;
      }
      case Codec::xz:
      case Codec::lzma_alone:
      case Codec::lzma_raw: {
        l_.next_in = reinterpret_cast<const std::uint8_t*>(in.data());
        l_.avail_in = in_n;
        l_.next_out = reinterpret_cast<std::uint8_t*>(out.data());
        l_.avail_out = out_n;
        // All the input is there: LZMA_FINISH lets the decoder see its end.
        const lzma_ret rc = lzma_code(&l_, LZMA_FINISH);
        in_left = l_.avail_in;
        out_left = l_.avail_out;
        if (rc == LZMA_STREAM_END)
          st = Status::end;
        else if (rc != LZMA_OK && rc != LZMA_BUF_ERROR)
          st = fail(lzma_text(rc)), over_limit_ = rc == LZMA_MEMLIMIT_ERROR;
        break;
      }
      case Codec::zstd: {
        ZSTD_inBuffer zi{in.data(), in_n, 0};
        ZSTD_outBuffer zo{out.data(), out_n, 0};
        // 0 once a frame is decoded and flushed (skippable frames are
        // stepped over inside a call, as zstandard's reader does).
        const std::size_t rc = ZSTD_decompressStream(zs_, &zo, &zi);
        in_left = in_n - zi.pos;
        out_left = out_n - zo.pos;
        if (ZSTD_isError(rc))
          st = fail(std::string("zstd: ") + ZSTD_getErrorName(rc));
        else if (rc == 0)
          st = Status::end;
        break;
      }
      case Codec::lz4: {
        std::size_t src_n = in_n, dst_n = out_n;
        // 0 once a frame is decoded (or a skippable frame stepped over:
        // python-lz4's decompressor, which joblib reads through, ends a
        // frame there too and starts the next on what follows).
        const std::size_t rc = LZ4F_decompress(lz_, out.data(), &dst_n, in.data(), &src_n, nullptr);
        in_left = in_n - src_n;
        out_left = out_n - dst_n;
        if (LZ4F_isError(rc))
          st = fail(std::string("lz4: ") + LZ4F_getErrorName(rc));
        else if (rc == 0)
          st = Status::end;
        break;
      }
    }
    in = in.subspan(in_n - in_left);
    out = out.subspan(out_n - out_left);
    return st;
  }

 private:
  Status fail(std::string m) {
    message_ = std::move(m);
    return Status::error;
  }
  static const char* lzma_text(lzma_ret rc) {
    switch (rc) {
      case LZMA_FORMAT_ERROR:
        return "no xz or lzma stream here";
      case LZMA_OPTIONS_ERROR:
        return "lzma options torchport's liblzma does not read";
      case LZMA_DATA_ERROR:
        return "lzma data is damaged";
      case LZMA_MEM_ERROR:
        return "lzma: out of memory";
      case LZMA_MEMLIMIT_ERROR:
        return "the lzma stream asks for more than 512 MiB of decoder memory (its dictionary): "
               "refused";
      default:
        return "lzma error";
    }
  }
  void start() {
    message_.clear();
    over_limit_ = false;
    switch (codec_) {
      case Codec::gzip:
      case Codec::zlib:
      case Codec::deflate:
        z_ = z_stream{};
        started_ = inflateInit2(&z_, codec_ == Codec::gzip   ? 16 + MAX_WBITS
                                     : codec_ == Codec::zlib ? MAX_WBITS
                                                             : -MAX_WBITS) == Z_OK;
        break;
      case Codec::bzip2:
        b_ = bz_stream{};
        started_ = BZ2_bzDecompressInit(&b_, 0, 0) == BZ_OK;
        break;
      case Codec::xz:
      case Codec::lzma_alone:
      case Codec::lzma_raw: {
        l_ = LZMA_STREAM_INIT;
        // The decoder's memory is bounded as zstd's window is: a header
        // may ask for a dictionary of up to 4 GiB, which liblzma would
        // allocate. 512 MiB is eight times what `xz -9` uses (64 MiB);
        // a stream asking for more is refused, not given the memory.
        // (A raw LZMA1 stream, a zip member's, names its dictionary in the
        // member's properties: checked the same way.)
        constexpr std::uint64_t kMemLimit = std::uint64_t{512} << 20;
        lzma_ret rc;
        if (codec_ == Codec::xz) {
          rc = lzma_stream_decoder(&l_, kMemLimit, 0);
        } else if (codec_ == Codec::lzma_alone) {
          rc = lzma_alone_decoder(&l_, kMemLimit);
        } else {
          lzma_filter filters[2] = {{LZMA_FILTER_LZMA1, nullptr}, {LZMA_VLI_UNKNOWN, nullptr}};
          rc = lzma_properties_decode(&filters[0], nullptr,
                                      reinterpret_cast<const std::uint8_t*>(props_.data()),
                                      props_.size());
          if (rc == LZMA_OK && lzma_raw_decoder_memusage(filters) > kMemLimit)
            rc = LZMA_MEMLIMIT_ERROR;
          if (rc == LZMA_OK) rc = lzma_raw_decoder(&l_, filters);
          std::free(filters[0].options);
        }
        started_ = rc == LZMA_OK;
        if (!started_) message_ = lzma_text(rc), over_limit_ = rc == LZMA_MEMLIMIT_ERROR;
        break;
      }
      case Codec::zstd:
        // The decoder's window stays at libzstd's default bound (2^27
        // bytes): a frame asking for more is refused, not given the memory.
        zs_ = ZSTD_createDStream();
        started_ = zs_ != nullptr && !ZSTD_isError(ZSTD_initDStream(zs_));
        break;
      case Codec::lz4:
        // Blocks are at most 4 MiB (the frame's block size field): the
        // context's buffers are bounded by the format.
        started_ = !LZ4F_isError(LZ4F_createDecompressionContext(&lz_, LZ4F_VERSION));
        break;
    }
    if (!started_ && message_.empty()) message_ = "the decoder cannot start";
  }
  void stop() {
    if (!started_) return;
    switch (codec_) {
      case Codec::gzip:
      case Codec::zlib:
      case Codec::deflate:
        inflateEnd(&z_);
        break;
      case Codec::bzip2:
        BZ2_bzDecompressEnd(&b_);
        break;
      case Codec::zstd:
        ZSTD_freeDStream(zs_);
        zs_ = nullptr;
        break;
      case Codec::lz4:
        LZ4F_freeDecompressionContext(lz_);
        lz_ = nullptr;
        break;
      default:
        lzma_end(&l_);
        break;
    }
    started_ = false;
  }

  Codec codec_;
  std::vector<std::byte> props_;
  bool started_ = false;
  std::string message_;
  bool over_limit_ = false;
  z_stream z_{};
  bz_stream b_{};
  lzma_stream l_ = LZMA_STREAM_INIT;
  ZSTD_DStream* zs_ = nullptr;
  LZ4F_dctx* lz_ = nullptr;
};

// Decodes one stream of `in` onto the end of `out`, at most up to
// `max_bytes` of output in all. Returns how it stopped (end of stream,
// error, input used up, output bound) and how much input it read.
struct Run {
  enum { end, error, input_ended, bound, over_limit } how = end;
  std::uint64_t consumed = 0;
  std::string message;
};

Run decode_one(Decoder& d, std::span<const std::byte> in, std::vector<std::byte>& out,
               std::uint64_t max_bytes) {
  Run r;
  const std::size_t in_size = in.size();
  const std::size_t start = out.size();
  for (;;) {
    if (out.size() >= max_bytes) {
      // One byte more tells a stream that is done from one that wants to
      // go on past the bound.
      std::byte probe{};
      std::span<std::byte> p(&probe, 1);
      const Status st = d.step(in, p);
      r.consumed = in_size - in.size();
      if (p.empty()) {
        r.how = Run::bound;
      } else if (st == Status::end) {
        r.how = Run::end;
      } else if (st == Status::error) {
        r.how = d.over_limit() ? Run::over_limit : Run::error;
        r.message = d.message();
      } else {
        r.how = in.empty() ? Run::input_ended : Run::bound;
      }
      return r;
    }
    const std::size_t at = out.size();
    // Room to write grows with this stream's output (resize zero-fills
    // it): a fixed 1 MiB made a file of many tiny streams cost a MiB of
    // memset each, and room sized by all the output so far, quadratic work.
    const std::size_t want = std::clamp<std::size_t>(at - start, kMinRoom, kChunk);
    const std::size_t room =
        static_cast<std::size_t>(std::min<std::uint64_t>(want, max_bytes - at));
    out.resize(at + room);
    detail::count(detail::work().bytes_zero_filled, room);
    std::span<std::byte> o(out.data() + at, room);
    const std::size_t in_before = in.size();
    const Status st = d.step(in, o);
    out.resize(at + room - o.size());
    r.consumed = in_size - in.size();
    if (st == Status::end) return r;
    if (st == Status::error) {
      r.how = d.over_limit() ? Run::over_limit : Run::error;
      r.message = d.message();
      return r;
    }
    // No progress with room to write: the decoder needs input there is not.
    if (o.size() == room && in.size() == in_before) {
      r.how = Run::input_ended;
      return r;
    }
  }
}

bool all_zero(std::span<const std::byte> b) {
  return std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; });
}

Codec codec_of(Compression c) {
  switch (c) {
    case Compression::gzip:
      return Codec::gzip;
    case Compression::zlib:
      return Codec::zlib;
    case Compression::bzip2:
      return Codec::bzip2;
    case Compression::xz:
      return Codec::xz;
    case Compression::zstd:
      return Codec::zstd;
    case Compression::lz4:
      return Codec::lz4;
    case Compression::lzma:
      break;
  }
  return Codec::lzma_alone;
}

// Zip's LZMA (method 14, APPNOTE 5.8.8): a version (2 bytes), the size of
// the properties (2 bytes), the properties, then raw LZMA1 data.
std::optional<std::pair<std::span<const std::byte>, std::span<const std::byte>>> split_zip_lzma(
    std::span<const std::byte> in) {
  if (in.size() < 4) return std::nullopt;
  const std::size_t n = static_cast<std::size_t>(in[2]) | (static_cast<std::size_t>(in[3]) << 8);
  if (in.size() - 4 < n) return std::nullopt;
  return std::make_pair(in.subspan(4, n), in.subspan(4 + n));
}

}  // namespace

std::string_view compression_name(Compression c) noexcept {
  switch (c) {
    case Compression::gzip:
      return "gzip";
    case Compression::zlib:
      return "zlib";
    case Compression::bzip2:
      return "bz2";
    case Compression::xz:
      return "xz";
    case Compression::lzma:
      return "lzma";
    case Compression::zstd:
      return "zstd";
    case Compression::lz4:
      return "lz4";
  }
  return "?";
}

bool looks_like_gzip(std::span<const std::byte> b) noexcept {
  return starts(b, {0x1f, 0x8b});
}

std::optional<Compression> sniff_compression(std::span<const std::byte> b) noexcept {
  // Strong magics first: the weak ones are what other data may start with.
  if (looks_like_gzip(b)) return Compression::gzip;
  if (starts(b, {0xfd, '7', 'z', 'X', 'Z', 0x00})) return Compression::xz;
  if (starts(b, {0x28, 0xb5, 0x2f, 0xfd})) return Compression::zstd;
  // joblib's LZ4 prefix: an LZ4 frame's magic (0x184D2204, little-endian).
  if (starts(b, {0x04, 0x22, 0x4d, 0x18})) return Compression::lz4;
  // Skippable frames (0x184D2A50-5F, little-endian) open both Zstandard
  // and LZ4 data: the first frame after them tells which. (zstandard's
  // reader, pandas' '.zst', steps over them; joblib's prefix check does
  // not, and reads such a file as a pickle, which the scan judges too.)
  for (std::size_t at = 0, n = 0; n < 64 && b.size() - at >= 8; ++n) {
    const auto u = [&](std::size_t i) { return static_cast<std::uint32_t>(b[at + i]); };
    if ((u(0) & 0xf0) != 0x50 || u(1) != 0x2a || u(2) != 0x4d || u(3) != 0x18) {
      if (n == 0) break;
      if (starts(b.subspan(at), {0x28, 0xb5, 0x2f, 0xfd})) return Compression::zstd;
      if (starts(b.subspan(at), {0x04, 0x22, 0x4d, 0x18})) return Compression::lz4;
      break;
    }
    const std::uint64_t size = u(4) | (u(5) << 8) | (u(6) << 16) | (std::uint64_t{u(7)} << 24);
    if (size > b.size() - at - 8) break;
    at += 8 + static_cast<std::size_t>(size);
  }
  // "BZh" and a block size digit, then a block's or the end's magic.
  if (starts(b, {'B', 'Z', 'h'}) && b.size() >= 10 && b[3] >= std::byte{'1'} &&
      b[3] <= std::byte{'9'} &&
      (starts(b.subspan(4), {0x31, 0x41, 0x59, 0x26, 0x53, 0x59}) ||
       starts(b.subspan(4), {0x17, 0x72, 0x45, 0x38, 0x50, 0x90})))
    return Compression::bzip2;
  // zlib: CM 8 with a 32 KiB window (78), and the header's check bits.
  if (b.size() >= 2 && b[0] == std::byte{0x78} &&
      ((0x78u << 8) | static_cast<unsigned>(b[1])) % 31 == 0 &&
      (static_cast<unsigned>(b[1]) & 0x20) == 0)
    return Compression::zlib;
  // .lzma ("LZMA alone"), as liblzma's auto decoder (Python's lzma.open
  // and LZMAFile by default: pandas' '.xz', joblib's 5d 00 prefix) takes
  // it: a properties byte with lc + lp <= 4, a dictionary size of 2^n or
  // 2^n + 2^(n-1) (or 0, or all ones), an uncompressed size unknown or
  // below 2^38. (Any properties byte: pandas opens by the file's name.)
  if (b.size() >= 13 && static_cast<unsigned>(b[0]) <= 224) {
    const unsigned props = static_cast<unsigned>(b[0]);
    const unsigned lc = props % 9, lp = (props % 45) / 9;
    std::uint32_t dict = 0;
    for (int i = 4; i >= 1; --i) dict = (dict << 8) | static_cast<std::uint32_t>(b[i]);
    std::uint32_t d = dict - 1;
    d |= d >> 2;
    d |= d >> 3;
    d |= d >> 4;
    d |= d >> 8;
    d |= d >> 16;
    ++d;
    std::uint64_t size = 0;
    for (int i = 12; i >= 5; --i) size = (size << 8) | static_cast<std::uint64_t>(b[i]);
    if (lc + lp <= 4 && (d == dict || dict == UINT32_MAX) &&
        (size == UINT64_MAX || size < (std::uint64_t{1} << 38)))
      return Compression::lzma;
  }
  return std::nullopt;
}

bool weak_magic(Compression c) noexcept {
  return c == Compression::zlib || c == Compression::lzma;
}

Decompressed decompress(Compression c, std::span<const std::byte> in, std::uint64_t max_bytes,
                        const std::string& limit, const std::string& what) {
  Decompressed r;
  const std::string name(compression_name(c));
  const Codec codec = codec_of(c);
  Decoder d(codec);
  std::uint64_t pos = 0;
  for (std::size_t stream = 0;; ++stream) {
    const std::size_t before = r.bytes.size();
    const Run run = decode_one(d, in.subspan(static_cast<std::size_t>(pos)), r.bytes, max_bytes);
    const std::uint64_t at = pos;
    pos += run.consumed;
    r.consumed = pos;
    if (run.how == Run::bound) {
      r.error =
          Error(ErrorCode::limit_exceeded, name + " data decompresses past " + limit, {}, at, what);
      break;
    }
    if (run.how == Run::over_limit) {
      r.error =
          Error(ErrorCode::limit_exceeded,
                name + " stream " + std::to_string(stream + 1) + ": " + run.message, {}, at, what);
      break;
    }
    if (run.how == Run::error || run.how == Run::input_ended) {
      // Bytes after a complete stream that start no stream: Python's
      // readers stop there (gzip's raises, having returned the data before,
      // and so does zstandard's reader, which torch's DCP uses).
      // (python-lz4's frame reader raises too: its DecompressReader has no
      // trailing error to ignore.)
      if (stream > 0 && r.bytes.size() == before && c != Compression::gzip &&
          c != Compression::zstd && c != Compression::lz4)
        break;
      r.error = Error(run.how == Run::error ? ErrorCode::corrupt : ErrorCode::truncated,
                      run.how == Run::error
                          ? name + " stream is damaged: " + run.message + " (stream " +
                                std::to_string(stream + 1) + ", after " +
                                std::to_string(r.bytes.size()) + " bytes of output)"
                          : name + " stream ends early after " + std::to_string(r.bytes.size()) +
                                " bytes of output (stream " + std::to_string(stream + 1) + ")",
                      {}, pos, what);
      break;
    }
    // The end of a stream: another may follow.
    const auto rest = in.subspan(static_cast<std::size_t>(pos));
    if (rest.empty() || (c == Compression::gzip && all_zero(rest))) break;
    d.reset();
  }
  detail::count(detail::work().bytes_inflated, r.bytes.size());
  return r;
}

bool zip_method_read(std::uint16_t method, ZipMethods methods) noexcept {
  if (method == 0 || method == 8) return true;
  return methods == ZipMethods::python && (method == 12 || method == 14);
}

std::string zip_method_name(std::uint16_t method) {
  switch (method) {
    case 0:
      return "stored";
    case 8:
      return "deflate";
    case 12:
      return "bzip2";
    case 14:
      return "lzma";
    case 93:
      return "zstd";
    default:
      return "method " + std::to_string(method);
  }
}

namespace {

std::optional<Decoder> zip_decoder(std::uint16_t method, std::span<const std::byte>& in,
                                   std::string& why) {
  switch (method) {
    case 8:
      return std::optional<Decoder>(std::in_place, Codec::deflate);
    case 12:
      return std::optional<Decoder>(std::in_place, Codec::bzip2);
    case 14: {
      const auto parts = split_zip_lzma(in);
      if (!parts) {
        why = "the LZMA header (version, properties) is cut short";
        return std::nullopt;
      }
      in = parts->second;
      return std::optional<Decoder>(std::in_place, Codec::lzma_raw, parts->first);
    }
    default:
      why = "zip " + zip_method_name(method) + " data is not one torchport decodes";
      return std::nullopt;
  }
}

}  // namespace

void decompress_zip_entry(std::uint16_t method, std::span<const std::byte> in,
                          std::span<std::byte> out, const std::string& entry, std::uint64_t offset,
                          const std::string& what) {
  std::string why;
  std::optional<Decoder> d = zip_decoder(method, in, why);
  if (!d) throw Error(ErrorCode::corrupt, why, entry, offset, what);
  const std::size_t size = out.size();
  std::span<std::byte> left = out;
  Status st = Status::ok;
  while (!left.empty()) {
    const std::size_t room = left.size(), in_before = in.size();
    st = d->step(in, left);
    if (st != Status::ok || (left.size() == room && in.size() == in_before)) break;
  }
  const std::size_t produced = size - left.size();
  if (st == Status::ok && left.empty()) {
    // Filled: the stream must end here, not want to write more.
    std::byte probe{};
    std::span<std::byte> p(&probe, 1);
    st = d->step(in, p);
    if (p.empty())
      throw Error(ErrorCode::corrupt,
                  zip_method_name(method) + " data " + (method == 8 ? "inflates" : "decodes") +
                      " past its declared " + std::to_string(size) + " bytes",
                  entry, offset, what);
    // Deflate and bzip2 streams mark their end; zip's LZMA need not.
    if (method == 14 && st == Status::ok) st = Status::end;
  }
  detail::count(detail::work().bytes_inflated, produced);
  if (st != Status::end || produced != size)
    throw Error(ErrorCode::corrupt,
                zip_method_name(method) + " data is damaged or truncated: decoded " +
                    std::to_string(produced) + " of " + std::to_string(size) + " declared bytes" +
                    (d->message().empty() ? std::string() : " (" + d->message() + ")"),
                entry, offset, what);
}

Decompressed decompress_zip_data(std::uint16_t method, std::span<const std::byte> in,
                                 std::uint64_t max_bytes, const std::string& what) {
  Decompressed r;
  std::string why;
  const std::size_t whole = in.size();
  std::optional<Decoder> d = zip_decoder(method, in, why);
  if (!d) {
    r.error = Error(method == 14 ? ErrorCode::truncated : ErrorCode::unsupported, why, {}, 0, what);
    return r;
  }
  const Run run = decode_one(*d, in, r.bytes, max_bytes);
  r.consumed = whole - in.size() + run.consumed;
  detail::count(detail::work().bytes_inflated, r.bytes.size());
  // Data that runs to the end of what was given without an end is what a
  // lenient view gets when it does not know the entry's size: what decoded
  // is all there is.
  if (run.how == Run::error)
    r.error =
        Error(ErrorCode::corrupt, zip_method_name(method) + " data is damaged: " + run.message, {},
              r.consumed, what);
  else if (run.how == Run::bound)
    r.error = Error(
        ErrorCode::limit_exceeded,
        zip_method_name(method) + " data decodes past " + std::to_string(max_bytes) + " bytes", {},
        r.consumed, what);
  else if (run.how == Run::input_ended && method != 14)
    r.error = Error(ErrorCode::truncated,
                    zip_method_name(method) + " data ends early after " +
                        std::to_string(r.bytes.size()) + " bytes of output",
                    {}, r.consumed, what);
  return r;
}

std::uint64_t inflate_cap(std::uint64_t compressed, const Limits& limits) noexcept {
  std::uint64_t cap = limits.max_inflate_bytes;
  if (limits.max_inflate_ratio != 0) {
    std::uint64_t by_ratio;
    if (__builtin_mul_overflow(compressed, limits.max_inflate_ratio, &by_ratio))
      by_ratio = ~std::uint64_t{0};
    cap = std::min(cap, std::max(kRatioFloor, by_ratio));
  }
  return cap;
}

std::string inflate_cap_reason(std::uint64_t compressed, const Limits& limits) {
  const std::uint64_t cap = inflate_cap(compressed, limits);
  if (cap == limits.max_inflate_bytes) return "Limits::max_inflate_bytes = " + std::to_string(cap);
  return "Limits::max_inflate_ratio = " + std::to_string(limits.max_inflate_ratio) + " (" +
         std::to_string(cap) + " bytes from " + std::to_string(compressed) +
         " compressed; a zip bomb?)";
}

namespace {

std::vector<std::byte> gunzip_or_throw(std::span<const std::byte> in, std::uint64_t max_bytes,
                                       const std::string& limit, const std::string& what) {
  Decompressed d = decompress(Compression::gzip, in, max_bytes, limit, what);
  if (d.error) throw *d.error;
  return std::move(d.bytes);
}

}  // namespace

std::vector<std::byte> gunzip(std::span<const std::byte> in, const Limits& limits,
                              const std::string& what) {
  return gunzip_or_throw(in, inflate_cap(in.size(), limits), inflate_cap_reason(in.size(), limits),
                         what);
}

std::vector<std::byte> gunzip(std::span<const std::byte> in, std::uint64_t max_bytes,
                              const std::string& what) {
  return gunzip_or_throw(in, max_bytes, "Limits::max_inflate_bytes = " + std::to_string(max_bytes),
                         what);
}

struct GzipWriter::State {
  z_stream zs{};
  Sink sink;
  std::vector<std::byte> buf = std::vector<std::byte>(1u << 20);
  bool finished = false;

  void run(int flush) {
    int rc;
    do {
      zs.next_out = reinterpret_cast<Bytef*>(buf.data());
      zs.avail_out = static_cast<uInt>(buf.size());
      rc = deflate(&zs, flush);
      const std::size_t n = buf.size() - zs.avail_out;
      if (n) sink(std::span<const std::byte>(buf.data(), n));
    } while (zs.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  }
};

GzipWriter::GzipWriter(Sink sink, int level) : s_(std::make_unique<State>()) {
  s_->sink = std::move(sink);
  if (deflateInit2(&s_->zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error(ErrorCode::io, "zlib deflateInit2 failed");
}

GzipWriter::~GzipWriter() {
  deflateEnd(&s_->zs);
}

void GzipWriter::write(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const std::size_t n = std::min<std::size_t>(bytes.size(), 1u << 30);
    s_->zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(bytes.data()));
    s_->zs.avail_in = static_cast<uInt>(n);
    s_->run(Z_NO_FLUSH);
    bytes = bytes.subspan(n);
  }
}

void GzipWriter::finish() {
  if (s_->finished) return;
  s_->zs.next_in = nullptr;
  s_->zs.avail_in = 0;
  s_->run(Z_FINISH);
  s_->finished = true;
}

}  // namespace torchport
