#pragma once
// SHA-256, for comparing tensor bytes with the hashes the fixture script wrote.

#include <cstddef>
#include <span>
#include <string>

namespace torchport::test {

/// Lower-case hex SHA-256 of `bytes`.
std::string sha256_hex(std::span<const std::byte> bytes);

}  // namespace torchport::test
