// The one decoder: each compression decodes what its own library encodes
// (zlib, libbz2 and liblzma build the inputs here), concatenated streams
// are read as Python's readers read them, damage keeps what decoded before
// it, and every output is bounded (work counted, not timed).

#include <bzlib.h>
#include <lz4frame.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "io/compression.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/work.hpp"

using namespace torchport;

namespace {

using Bytes = std::vector<std::byte>;

Bytes bytes_of(std::string_view s) {
  Bytes b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string text_of(const Bytes& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// wbits: 15 + 16 gzip, 15 zlib, -15 raw deflate.
Bytes deflate_with(const Bytes& in, int wbits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&z, in.size()) + 32);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

Bytes bzip2(const Bytes& in) {
  unsigned n = static_cast<unsigned>(in.size() + in.size() / 100 + 700);
  Bytes out(n);
  EXPECT_EQ(BZ2_bzBuffToBuffCompress(reinterpret_cast<char*>(out.data()), &n,
                                     reinterpret_cast<char*>(const_cast<std::byte*>(in.data())),
                                     static_cast<unsigned>(in.size()), 9, 0, 0),
            BZ_OK);
  out.resize(n);
  return out;
}

// xz, .lzma ("alone") or raw LZMA1 with its 5 property bytes in front.
enum class Lz { xz, alone, raw };
Bytes lzma(const Bytes& in, Lz kind) {
  lzma_stream s = LZMA_STREAM_INIT;
  lzma_options_lzma opt;
  lzma_lzma_preset(&opt, 6);
  lzma_filter filters[2] = {{LZMA_FILTER_LZMA1, &opt}, {LZMA_VLI_UNKNOWN, nullptr}};
  Bytes props;
  if (kind == Lz::xz) {
    EXPECT_EQ(lzma_easy_encoder(&s, 6, LZMA_CHECK_CRC64), LZMA_OK);
  } else if (kind == Lz::alone) {
    EXPECT_EQ(lzma_alone_encoder(&s, &opt), LZMA_OK);
  } else {
    std::uint32_t n = 0;
    EXPECT_EQ(lzma_properties_size(&n, &filters[0]), LZMA_OK);
    props.resize(n);
    EXPECT_EQ(lzma_properties_encode(&filters[0], reinterpret_cast<std::uint8_t*>(props.data())),
              LZMA_OK);
    EXPECT_EQ(lzma_raw_encoder(&s, filters), LZMA_OK);
  }
  Bytes out(in.size() + 1024);
  s.next_in = reinterpret_cast<const std::uint8_t*>(in.data());
  s.avail_in = in.size();
  s.next_out = reinterpret_cast<std::uint8_t*>(out.data());
  s.avail_out = out.size();
  EXPECT_EQ(lzma_code(&s, LZMA_FINISH), LZMA_STREAM_END);
  out.resize(s.total_out);
  lzma_end(&s);
  return concat(props, out);
}

// Zip method 14's data: version 5.2, the properties' size, then them.
Bytes zip_lzma(const Bytes& in) {
  const Bytes raw = lzma(in, Lz::raw);
  Bytes out{std::byte{5}, std::byte{2}, std::byte{5}, std::byte{0}};
  return concat(out, raw);
}

Bytes encode(Compression c, const Bytes& in) {
  switch (c) {
    case Compression::gzip:
      return deflate_with(in, 15 + 16);
    case Compression::zlib:
      return deflate_with(in, 15);
    case Compression::bzip2:
      return bzip2(in);
    case Compression::xz:
      return lzma(in, Lz::xz);
    case Compression::lzma:
      return lzma(in, Lz::alone);
    case Compression::zstd: {
      Bytes out(ZSTD_compressBound(in.size()));
      const std::size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
      out.resize(ZSTD_isError(n) ? 0 : n);
      return out;
    }
    case Compression::lz4: {
      LZ4F_preferences_t prefs{};
      prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
      Bytes out(LZ4F_compressFrameBound(in.size(), &prefs));
      const std::size_t n =
          LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
      out.resize(LZ4F_isError(n) ? 0 : n);
      return out;
    }
  }
  return {};
}

Bytes payload(std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  return b;
}

constexpr Compression kAll[] = {Compression::gzip, Compression::zlib, Compression::bzip2,
                                Compression::xz,   Compression::lzma, Compression::zstd,
                                Compression::lz4};

Decompressed run(Compression c, const Bytes& in, std::uint64_t max = 1u << 26) {
  return decompress(c, in, max, "the test's bound", "test");
}

}  // namespace

TEST(Compression, EachDecodesItsOwnLibrarysOutputAndIsSniffed) {
  const Bytes data = payload(300000);
  for (Compression c : kAll) {
    const Bytes z = encode(c, data);
    EXPECT_EQ(sniff_compression(z), c) << compression_name(c);
    const Decompressed d = run(c, z);
    EXPECT_FALSE(d.error) << compression_name(c) << ": " << d.error->what();
    EXPECT_EQ(d.bytes, data) << compression_name(c);
    EXPECT_EQ(d.consumed, z.size()) << compression_name(c);
  }
  // A zstd frame's magic alone is a frame cut short.
  const Bytes zstd{std::byte{0x28}, std::byte{0xb5}, std::byte{0x2f}, std::byte{0xfd}};
  EXPECT_EQ(sniff_compression(zstd), Compression::zstd);
  const Decompressed d = run(Compression::zstd, zstd);
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code(), ErrorCode::truncated) << d.error->what();
}

// zstd as the zstandard module's reader reads it (torch's DCP stream.zstd
// transform): frames back to back are one output, skippable frames are
// stepped over, bytes after a frame that start none are an error, and a
// frame that is no zstd (a damaged header) is refused as such.
TEST(Compression, ZstdFramesAreReadAsZstandardReadsThem) {
  const Bytes a = bytes_of("first frame;"), b = bytes_of("second frame");
  const Bytes skippable{std::byte{0x50}, std::byte{0x2a}, std::byte{0x4d}, std::byte{0x18},
                        std::byte{3},    std::byte{0},    std::byte{0},    std::byte{0},
                        std::byte{'x'},  std::byte{'y'},  std::byte{'z'}};
  const Decompressed two =
      run(Compression::zstd,
          concat(concat(encode(Compression::zstd, a), skippable), encode(Compression::zstd, b)));
  ASSERT_FALSE(two.error) << two.error->what();
  EXPECT_EQ(text_of(two.bytes), "first frame;second frame");
  const Decompressed trailing =
      run(Compression::zstd, concat(encode(Compression::zstd, a), bytes_of("NOT A FRAME")));
  ASSERT_TRUE(trailing.error);
  EXPECT_EQ(trailing.error->code(), ErrorCode::corrupt) << trailing.error->what();
  EXPECT_NE(std::string(trailing.error->what()).find("zstd"), std::string::npos);
  EXPECT_EQ(text_of(trailing.bytes), "first frame;");
  Bytes damaged = encode(Compression::zstd, payload(5000));
  damaged[4] = std::byte{0xff};  // a frame header descriptor with reserved bits set
  const Decompressed bad = run(Compression::zstd, damaged);
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->code(), ErrorCode::corrupt) << bad.error->what();
}

// LZ4 as python-lz4's LZ4FrameFile reads it (joblib's compress='lz4'):
// frames back to back are one output, a skippable frame ends one frame and
// the next starts after it, bytes after a frame that start none are an
// error (its reader has no trailing error to ignore), a damaged content
// checksum is refused. A file that opens with skippable frames is sniffed
// by the frame after them.
TEST(Compression, Lz4FramesAreReadAsPythonLz4ReadsThem) {
  const Bytes a = bytes_of("first frame;"), b = bytes_of("second frame");
  const Bytes skippable{std::byte{0x5a}, std::byte{0x2a}, std::byte{0x4d}, std::byte{0x18},
                        std::byte{3},    std::byte{0},    std::byte{0},    std::byte{0},
                        std::byte{'x'},  std::byte{'y'},  std::byte{'z'}};
  const Decompressed two =
      run(Compression::lz4,
          concat(concat(encode(Compression::lz4, a), skippable), encode(Compression::lz4, b)));
  ASSERT_FALSE(two.error) << two.error->what();
  EXPECT_EQ(text_of(two.bytes), "first frame;second frame");
  EXPECT_EQ(sniff_compression(concat(skippable, encode(Compression::lz4, a))), Compression::lz4);
  EXPECT_EQ(sniff_compression(concat(skippable, encode(Compression::zstd, a))), Compression::zstd);
  EXPECT_EQ(sniff_compression(concat(skippable, bytes_of("no frame after it"))), std::nullopt);
  const Decompressed trailing =
      run(Compression::lz4, concat(encode(Compression::lz4, a), bytes_of("NOT A FRAME")));
  ASSERT_TRUE(trailing.error);
  EXPECT_EQ(trailing.error->code(), ErrorCode::corrupt) << trailing.error->what();
  EXPECT_EQ(text_of(trailing.bytes), "first frame;");
  Bytes damaged = encode(Compression::lz4, payload(5000));
  damaged[damaged.size() - 1] ^= std::byte{0xff};  // the content checksum
  const Decompressed bad = run(Compression::lz4, damaged);
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->code(), ErrorCode::corrupt) << bad.error->what();
}

// .lzma as liblzma's auto decoder (Python's lzma.open, pandas' '.xz')
// takes it: any properties byte with lc + lp <= 4 and a dictionary of 2^n
// or 2^n + 2^(n-1) bytes, not only the 5d 00 00 80 00 xz-utils writes.
TEST(Compression, LzmaAloneIsSniffedAsLiblzmaTakesIt) {
  Bytes z = encode(Compression::lzma, payload(1000));
  ASSERT_EQ(sniff_compression(z), Compression::lzma);
  z[1] = std::byte{0};
  z[2] = std::byte{0};
  z[3] = std::byte{0x30};  // 3 MiB: 2^21 + 2^20
  z[4] = std::byte{0};
  EXPECT_EQ(sniff_compression(z), Compression::lzma);
  const Decompressed d = run(Compression::lzma, z);
  EXPECT_FALSE(d.error) << d.error->what();
  z[3] = std::byte{0x50};  // 5 MiB: no such dictionary
  EXPECT_EQ(sniff_compression(z), std::nullopt);
  z[3] = std::byte{0x30};
  z[0] = std::byte{44};  // lc 8, lp 4
  EXPECT_EQ(sniff_compression(z), std::nullopt);
}

TEST(Compression, WeakMagicsAreOnlyGuesses) {
  EXPECT_TRUE(weak_magic(Compression::zlib));
  EXPECT_TRUE(weak_magic(Compression::lzma));
  EXPECT_FALSE(weak_magic(Compression::gzip));
  // Text and pickles are no compression.
  EXPECT_EQ(sniff_compression(bytes_of("License: Apache-2.0")), std::nullopt);
  EXPECT_EQ(sniff_compression(bytes_of("\x80\x02}q\x00.")), std::nullopt);
  EXPECT_EQ(sniff_compression(bytes_of("BZh9 is not bzip2 without a block magic")), std::nullopt);
  // "x^" is a valid zlib header that is no stream: decoding says so, at once.
  const Bytes fake = bytes_of("x^ this is not deflate data at all");
  EXPECT_EQ(sniff_compression(fake), Compression::zlib);
  const Decompressed d = run(Compression::zlib, fake);
  ASSERT_TRUE(d.error);
  EXPECT_TRUE(d.bytes.empty());
}

TEST(Compression, ConcatenatedStreamsAreReadAsPythonReadsThem) {
  const Bytes a = bytes_of("first stream;"), b = bytes_of("second stream");
  for (Compression c : kAll) {
    if (c == Compression::lzma) continue;  // .lzma has no concatenation
    const Decompressed d = run(c, concat(encode(c, a), encode(c, b)));
    EXPECT_FALSE(d.error) << compression_name(c);
    EXPECT_EQ(text_of(d.bytes), "first stream;second stream") << compression_name(c);
  }
  // After a complete stream, bytes that start none end the data (Python's
  // bz2, lzma and joblib's zlib readers stop there); gzip's reader raises,
  // except for zero padding (and zstandard's raises: below).
  const Bytes garbage = bytes_of("not a stream");
  for (Compression c : {Compression::zlib, Compression::bzip2, Compression::xz}) {
    const Decompressed d = run(c, concat(encode(c, a), garbage));
    EXPECT_FALSE(d.error) << compression_name(c);
    EXPECT_EQ(text_of(d.bytes), "first stream;") << compression_name(c);
  }
  const Decompressed g = run(Compression::gzip, concat(encode(Compression::gzip, a), garbage));
  ASSERT_TRUE(g.error);
  EXPECT_EQ(text_of(g.bytes), "first stream;");
  const Decompressed z =
      run(Compression::gzip, concat(encode(Compression::gzip, a), Bytes(512, std::byte{0})));
  EXPECT_FALSE(z.error);
}

// Many tiny streams cost their bytes, not a buffer each: the output room
// made ready per stream is bounded by a constant, and grows with the
// stream's own output, not with everything decoded before it (1 MiB a
// stream before, then the whole output so far: quadratic).
TEST(Compression, ManyTinyStreamsCostTheirBytes) {
  for (const std::size_t n : {1000u, 4000u, 16000u}) {
    const Bytes one = encode(Compression::gzip, {std::byte{'N'}});
    Bytes file;
    for (std::size_t i = 0; i < n; ++i) file.insert(file.end(), one.begin(), one.end());
    detail::work().reset();
    const Decompressed d = run(Compression::gzip, file);
    ASSERT_FALSE(d.error) << d.error->what();
    EXPECT_EQ(d.bytes.size(), n);
    EXPECT_LE(detail::work().bytes_zero_filled.load(), n * 2048) << n << " streams";
  }
  // One large stream: room grows geometrically, so at most about twice its size.
  const Bytes big = payload(3u << 20);
  detail::work().reset();
  const Decompressed d = run(Compression::gzip, encode(Compression::gzip, big));
  ASSERT_FALSE(d.error);
  EXPECT_EQ(d.bytes, big);
  EXPECT_LE(detail::work().bytes_zero_filled.load(), 2 * big.size() + (1u << 20));
}

TEST(Compression, DamageKeepsWhatDecodedBeforeIt) {
  const Bytes data = payload(200000);
  for (Compression c : kAll) {
    Bytes z = encode(c, data);
    // Cut: truncated, with a prefix of the data (bzip2 decodes per block,
    // so it may have none).
    const Bytes cut(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(z.size() * 3 / 4));
    const Decompressed d = run(c, cut);
    ASSERT_TRUE(d.error) << compression_name(c);
    EXPECT_EQ(d.error->code(), ErrorCode::truncated)
        << compression_name(c) << ": " << d.error->what();
    EXPECT_LT(d.bytes.size(), data.size());
    EXPECT_TRUE(std::equal(d.bytes.begin(), d.bytes.end(), data.begin())) << compression_name(c);
  }
  // gzip cut in its trailer: the whole payload decoded, and still an error.
  const Bytes z = encode(Compression::gzip, data);
  const Decompressed d = run(Compression::gzip, Bytes(z.begin(), z.end() - 3));
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code(), ErrorCode::truncated);
  EXPECT_EQ(d.bytes, data);
}

TEST(Compression, OutputIsBoundedBeforeItIsProduced) {
  // 16 MiB of zeros compress to almost nothing: a bomb.
  const Bytes zeros(16u << 20, std::byte{0});
  for (Compression c : kAll) {
    const Bytes z = encode(c, zeros);
    detail::work().reset();
    const Decompressed d = run(c, z, 1u << 20);
    ASSERT_TRUE(d.error) << compression_name(c);
    EXPECT_EQ(d.error->code(), ErrorCode::limit_exceeded) << compression_name(c);
    EXPECT_NE(std::string(d.error->what()).find("the test's bound"), std::string::npos);
    EXPECT_EQ(d.bytes.size(), 1u << 20);
    EXPECT_EQ(detail::work().bytes_inflated.load(), 1u << 20) << compression_name(c);
  }
  // Exactly the bound is not past it.
  const Bytes small = payload(4096);
  for (Compression c : kAll) {
    const Decompressed d = run(c, encode(c, small), small.size());
    EXPECT_FALSE(d.error) << compression_name(c) << ": " << d.error->what();
    EXPECT_EQ(d.bytes, small);
  }
}

TEST(Compression, ZipEntriesFillTheirDeclaredSizeExactly) {
  const Bytes data = payload(100000);
  const std::pair<std::uint16_t, Bytes> cases[] = {
      {8, deflate_with(data, -15)}, {12, bzip2(data)}, {14, zip_lzma(data)}};
  for (const auto& [method, z] : cases) {
    Bytes out(data.size());
    decompress_zip_entry(method, z, out, "entry", 0, "test.zip");
    EXPECT_EQ(out, data) << zip_method_name(method);
    // A declared size too small or too large is damage, not a guess.
    Bytes small(data.size() - 1), large(data.size() + 1);
    EXPECT_THROW(decompress_zip_entry(method, z, small, "entry", 0, "test.zip"), Error);
    EXPECT_THROW(decompress_zip_entry(method, z, large, "entry", 0, "test.zip"), Error);
    // Without a size (a scan's view of local headers): all of it.
    const Decompressed d = decompress_zip_data(method, z, 1u << 24, "test.zip");
    EXPECT_FALSE(d.error) << zip_method_name(method);
    EXPECT_EQ(d.bytes, data);
  }
  EXPECT_TRUE(zip_method_read(12, ZipMethods::python));
  EXPECT_FALSE(zip_method_read(12, ZipMethods::torch));
  EXPECT_FALSE(zip_method_read(93, ZipMethods::python));
  Bytes out(4);
  EXPECT_THROW(decompress_zip_entry(93, bytes_of("zstd"), out, "entry", 0, "test.zip"), Error);
  const Decompressed d = decompress_zip_data(93, bytes_of("zstd"), 16, "test.zip");
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code(), ErrorCode::unsupported);
}

TEST(Compression, GunzipThrowsWhatDecompressReports) {
  const Bytes z = encode(Compression::gzip, payload(1000));
  EXPECT_EQ(gunzip(z, 1u << 20, "t.gz").size(), 1000u);
  try {
    (void)gunzip(Bytes(z.begin(), z.begin() + 20), 1u << 20, "t.gz");
    FAIL() << "a cut gzip stream was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::truncated);
    EXPECT_NE(std::string(e.what()).find("t.gz"), std::string::npos);
  }
}
