// The error paths of the opcode argument decoder (opcodes.hpp), and the
// opcode names.

#include "pickle/opcodes.hpp"

#include <string>

#include "pickle/unpickler.hpp"
#include "torchport/core/error.hpp"

namespace torchport::pickle {
namespace detail_ops {

void truncated(const ByteReader& r, const OpInfo& op, std::string_view field, std::uint64_t need) {
  std::string label(op.name);
  if (!field.empty()) label += " " + std::string(field);
  r.fail_truncated(need, label);
}

void negative_length(const ByteReader& r, const OpInfo& op, std::uint64_t at, std::int64_t n) {
  throw Error(ErrorCode::corrupt,
              std::string(op.name) + " with negative length " + std::to_string(n), {}, at,
              r.what());
}

void run_too_long(const ByteReader& r, const OpInfo& op, std::uint64_t at, std::uint64_t n,
                  std::uint64_t max_run) {
  if (n > max_run)
    throw Error(ErrorCode::limit_exceeded,
                "exceeds Limits::max_string_bytes = " + std::to_string(max_run) +
                    "; raise it if this file is trusted",
                {}, at, r.what());
  throw Error(ErrorCode::truncated,
              std::string(op.name) + " declares " + std::to_string(n) + " bytes but only " +
                  std::to_string(r.remaining()) + " remain",
              {}, at, r.what());
}

}  // namespace detail_ops

std::string_view opcode_name(std::uint8_t op) noexcept {
  const OpInfo* info = opcode_info(op);
  return info == nullptr ? std::string_view{} : info->name;
}

}  // namespace torchport::pickle
