#pragma once
/// \file
/// A bounds-checked little-endian cursor over bytes.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace torchport {

/// Reads fixed-width little-endian fields and length-prefixed runs from a
/// span, checking every length against the bytes left before touching them.
/// Errors are `Error(truncated)` naming the field, the byte offset (relative
/// to `base`, so offsets match the enclosing file) and the shortfall.
class ByteReader {
 public:
  /// \param bytes  the bytes to read; not copied, so they must outlive the reader
  /// \param what   name used in messages ("data.pkl", "safetensors header")
  /// \param base   offset of `bytes[0]` in the enclosing file
  ByteReader(std::span<const std::byte> bytes, std::string what, std::uint64_t base = 0)
      : bytes_(bytes), what_(std::move(what)), base_(base) {}

  std::uint64_t pos() const noexcept { return pos_; }  ///< offset of the cursor in the span
  /// Offset of the cursor in the enclosing file.
  std::uint64_t file_offset() const noexcept { return base_ + pos_; }
  std::uint64_t size() const noexcept { return bytes_.size(); }  ///< length of the span
  /// Bytes after the cursor.
  std::uint64_t remaining() const noexcept { return bytes_.size() - pos_; }
  bool at_end() const noexcept { return pos_ == bytes_.size(); }  ///< true when no bytes remain
  const std::string& what() const noexcept { return what_; }      ///< the name used in messages
  /// The whole span, wherever the cursor is.
  std::span<const std::byte> all() const noexcept { return bytes_; }

  /// \name Fixed-width fields
  /// Read the next field and advance past it: little-endian integers, and
  /// `f64_be` a big-endian IEEE double (pickle's BINFLOAT). `field` names the
  /// field in messages. \throws Error(truncated) when too few bytes remain.
  ///@{

  /// One byte.
  std::uint8_t u8(std::string_view field = "byte") {
    return static_cast<std::uint8_t>(take(1, field)[0]);
  }
  std::uint16_t u16(std::string_view field = "u16") {
    return load<std::uint16_t>(field);
  }  ///< 2 bytes
  std::uint32_t u32(std::string_view field = "u32") {
    return load<std::uint32_t>(field);
  }  ///< 4 bytes
  std::uint64_t u64(std::string_view field = "u64") {
    return load<std::uint64_t>(field);
  }  ///< 8 bytes
  std::int32_t i32(std::string_view field = "i32") {
    return load<std::int32_t>(field);
  }  ///< 4 bytes
  std::int64_t i64(std::string_view field = "i64") {
    return load<std::int64_t>(field);
  }                                               ///< 8 bytes
  double f64_be(std::string_view field = "f64");  ///< 8 bytes, big-endian binary64
  ///@}

  /// The next `n` bytes. \throws Error(truncated).
  std::span<const std::byte> take(std::uint64_t n, std::string_view field) {
    // Inline: the pickle VM takes a few bytes per opcode.
    if (n > remaining()) fail_truncated(n, field);
    auto out = bytes_.subspan(static_cast<std::size_t>(pos_), static_cast<std::size_t>(n));
    pos_ += n;
    return out;
  }
  /// The next `n` bytes as text.
  std::string_view take_str(std::uint64_t n, std::string_view field) {
    auto b = take(n, field);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  /// Bytes up to (not including) the next '\n', which is consumed.
  std::string_view line(std::string_view field);
  /// Advances past the next `n` bytes. \throws Error(truncated).
  void skip(std::uint64_t n, std::string_view field) { take(n, field); }
  /// Moves to absolute position `p` (within the span).
  void seek(std::uint64_t p);

  /// Throws Error(truncated) saying that `field` needs `need` bytes where
  /// `remaining()` are left, at the cursor's file offset.
  [[noreturn]] void fail_truncated(std::uint64_t need, std::string_view field) const;

 private:
  template <class T>
  T load(std::string_view field) {
    T v;
    std::memcpy(&v, take(sizeof(T), field).data(), sizeof(T));
    static_assert(std::endian::native == std::endian::little,
                  "torchport assumes a little-endian host");
    return v;
  }

  std::span<const std::byte> bytes_;
  std::uint64_t pos_ = 0;
  std::string what_;
  std::uint64_t base_ = 0;
};

}  // namespace torchport
