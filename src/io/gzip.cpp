#include "torchport/io/gzip.hpp"

#include <zlib.h>
#include <algorithm>

#include "torchport/core/error.hpp"
#include "torchport/detail/work.hpp"

namespace torchport {

bool looks_like_gzip(std::span<const std::byte> b) noexcept {
  return b.size() >= 2 && b[0] == std::byte{0x1f} && b[1] == std::byte{0x8b};
}

namespace {

constexpr std::uint64_t kRatioFloor = 16u << 20;  // max_inflate_ratio applies past this

std::vector<std::byte> inflate_gzip(std::span<const std::byte> in, std::uint64_t max_bytes,
                                    const std::string& limit, const std::string& what);

}  // namespace

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

std::vector<std::byte> gunzip(std::span<const std::byte> in, const Limits& limits,
                              const std::string& what) {
  return inflate_gzip(in, inflate_cap(in.size(), limits), inflate_cap_reason(in.size(), limits),
                      what);
}

std::vector<std::byte> gunzip(std::span<const std::byte> in, std::uint64_t max_bytes,
                              const std::string& what) {
  return inflate_gzip(in, max_bytes, "Limits::max_inflate_bytes = " + std::to_string(max_bytes),
                      what);
}

namespace {

std::vector<std::byte> inflate_gzip(std::span<const std::byte> in, std::uint64_t max_bytes,
                                    const std::string& limit, const std::string& what) {
  std::vector<std::byte> out;
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK)
    throw Error(ErrorCode::io, "zlib inflateInit2 failed", {}, std::nullopt, what);
  constexpr std::size_t kChunk = 1u << 20;
  std::size_t in_pos = 0;
  int rc = Z_OK;
  for (;;) {
    if (zs.avail_in == 0 && in_pos < in.size()) {
      const std::size_t n = std::min<std::size_t>(in.size() - in_pos, 1u << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + in_pos));
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    if (out.size() >= max_bytes) {
      inflateEnd(&zs);
      throw Error(ErrorCode::limit_exceeded, "gzip stream inflates past " + limit, {}, std::nullopt,
                  what);
    }
    const std::size_t room =
        static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, max_bytes - out.size()));
    const std::size_t at = out.size();
    out.resize(at + room);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    zs.avail_out = static_cast<uInt>(room);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(at + room - zs.avail_out);
    if (rc == Z_STREAM_END) {
      // Another member may follow (gzip allows concatenation).
      if (zs.avail_in == 0 && in_pos >= in.size()) break;
      if (inflateReset(&zs) != Z_OK) break;
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_pos >= in.size()) {
      inflateEnd(&zs);
      throw Error(ErrorCode::truncated,
                  "gzip stream ends early after " + std::to_string(out.size()) + " bytes", {},
                  std::nullopt, what);
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      inflateEnd(&zs);
      throw Error(ErrorCode::corrupt,
                  std::string("gzip stream is damaged: ") + (zs.msg ? zs.msg : "zlib error"), {},
                  std::nullopt, what);
    }
  }
  inflateEnd(&zs);
  detail::count(detail::work().bytes_inflated, out.size());
  return out;
}

}  // namespace

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
