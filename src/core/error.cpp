#include "torchport/core/error.hpp"

#include <new>

namespace torchport {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::io:
      return "io";
    case ErrorCode::not_a_checkpoint:
      return "not_a_checkpoint";
    case ErrorCode::truncated:
      return "truncated";
    case ErrorCode::corrupt:
      return "corrupt";
    case ErrorCode::unsupported:
      return "unsupported";
    case ErrorCode::limit_exceeded:
      return "limit_exceeded";
    case ErrorCode::unsafe_global:
      return "unsafe_global";
    case ErrorCode::missing_key:
      return "missing_key";
    case ErrorCode::unused_key:
      return "unused_key";
    case ErrorCode::shape_mismatch:
      return "shape_mismatch";
    case ErrorCode::dtype_mismatch:
      return "dtype_mismatch";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::ambiguous:
      return "ambiguous";
    case ErrorCode::internal:
      return "internal";
  }
  return "unknown";
}

Error::Error(ErrorCode code, std::string message, std::string key,
             std::optional<std::uint64_t> offset, std::string where)
    : std::runtime_error(compose(code, message, key, offset, where)),
      code_(code),
      message_(std::move(message)),
      key_(std::move(key)),
      offset_(offset),
      where_(std::move(where)) {}

std::string Error::compose(ErrorCode code, const std::string& message, const std::string& key,
                           const std::optional<std::uint64_t>& offset, const std::string& where) {
  std::string out = "[";
  out += error_code_name(code);
  out += "] ";
  if (!where.empty()) out += where + ": ";
  if (!key.empty()) out += "'" + key + "': ";
  out += message;
  if (offset) out += " (byte " + std::to_string(*offset) + ")";
  return out;
}

Error Error::in(std::string_view outer) const {
  std::string w = where_.empty() ? std::string(outer) : std::string(outer) + ": " + where_;
  return Error(code_, message_, key_, offset_, std::move(w));
}

Error Error::at_key(std::string_view key) const {
  if (!key_.empty()) return *this;
  return Error(code_, message_, std::string(key), offset_, where_);
}

void rethrow_as_error(std::string_view context, std::string_view where) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::limit_exceeded,
                "out of memory while " + std::string(context) +
                    " (the allocator refused a request; lower the limits in Limits for untrusted "
                    "files, or give "
                    "the process more memory)",
                {}, std::nullopt, std::string(where));
  } catch (const std::exception& e) {
    throw Error(ErrorCode::internal,
                "unexpected failure while " + std::string(context) + " (" + e.what() +
                    "); a fault of torchport, please report it",
                {}, std::nullopt, std::string(where));
  } catch (...) {
    throw Error(ErrorCode::internal,
                "unexpected failure while " + std::string(context) +
                    "; a fault of torchport, please report it",
                {}, std::nullopt, std::string(where));
  }
}

}  // namespace torchport
