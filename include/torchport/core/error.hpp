#pragma once
/// \file
/// The one error type of the library.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace torchport {

/// What went wrong, coarse enough to branch on.
enum class ErrorCode {
  io,                ///< the OS refused: open, map, read, write, rename
  not_a_checkpoint,  ///< the bytes are no format we read
  truncated,         ///< the input ends before a structure it declares
  corrupt,           ///< the input contradicts itself or the format
  unsupported,       ///< valid input using a feature we do not implement
  limit_exceeded,    ///< a resource limit of `Limits` would be crossed
  unsafe_global,     ///< a pickle references a global that would run code
  missing_key,       ///< a key a consumer needs is absent
  unused_key,        ///< a key nobody consumed (strict loading)
  shape_mismatch,    ///< a tensor's shape differs from the one expected
  dtype_mismatch,    ///< a value cannot be converted to the dtype expected
  invalid_argument,  ///< the caller's argument is wrong (bad regex, bad dtype name)
  ambiguous,         ///< torch's readers and ours could read the input differently: refused
  internal,          ///< a fault of torchport itself (an unexpected exception); please report it
};

/// Lower-case name of a code ("truncated", "unsafe_global").
std::string_view error_code_name(ErrorCode code) noexcept;

/// The library's exception: a code, a message, and where it happened.
///
/// `what()` reads like
/// `[open] model.pt: 'fc.weight': storage 'data/3' has 2048 bytes but the view
/// needs 4096; truncated download? (byte 81920)`.
class Error : public std::runtime_error {
 public:
  /// \param code    the kind of failure
  /// \param message what and why, with the numbers and a hint where one helps
  /// \param key     the key path the failure concerns ("layer1.0.conv1.weight"), if any
  /// \param offset  the byte offset in the input, if any
  /// \param where   the file or record ("model.pt", "archive/data.pkl"), if any
  Error(ErrorCode code, std::string message, std::string key = {},
        std::optional<std::uint64_t> offset = std::nullopt, std::string where = {});

  ErrorCode code() const noexcept { return code_; }  ///< the kind of failure
  /// The message alone, without the code, place, key and offset `what()` adds.
  const std::string& message() const noexcept { return message_; }
  const std::string& key() const noexcept { return key_; }  ///< the key path, or empty
  /// The byte offset in the input, if known.
  const std::optional<std::uint64_t>& offset() const noexcept { return offset_; }
  const std::string& where() const noexcept { return where_; }  ///< the file or record, or empty

  /// A copy with `where` set when it was empty (or prefixed with `outer:` when
  /// it was not), so layers can add context while an error travels up.
  Error in(std::string_view outer) const;
  /// A copy with the key path set when it was empty.
  Error at_key(std::string_view key) const;

 private:
  static std::string compose(ErrorCode code, const std::string& message, const std::string& key,
                             const std::optional<std::uint64_t>& offset, const std::string& where);

  ErrorCode code_;
  std::string message_;
  std::string key_;
  std::optional<std::uint64_t> offset_;
  std::string where_;
};

/// Turns the exception being handled into an `Error` and throws it: an
/// `Error` unchanged, `std::bad_alloc` as `limit_exceeded` ("out of memory
/// while <context>"), any other exception as `internal` naming its message.
/// The API entry points (open, load, save, scan, convert) call it from
/// `catch (...)`, so no bare `std::` exception leaves the library.
/// \param context what was being done ("open", "save")
/// \param where   the file, if any
[[noreturn]] void rethrow_as_error(std::string_view context, std::string_view where = {});

}  // namespace torchport
