#pragma once
// JSON parsing for untrusted headers and indexes: nlohmann's SAX parser with
// a builder that rejects duplicate keys (nlohmann keeps the last one, so a
// file could say two things about one tensor) and bounds the nesting depth.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace torchport::formats {

/// Parses `text` (which starts at byte `base` of the file `where`) into an
/// order-preserving JSON value, in time linear in its size.
/// \throws Error(corrupt) on a syntax error (with the byte offset), on a key
/// repeated in one object (naming it, with the offset of the repetition), or
/// when containers nest deeper than `max_depth`; Error(limit_exceeded) past
/// `max_values` values (each costs a JSON node in memory).
nlohmann::ordered_json parse_strict_json(std::string_view text, std::string_view what,
                                         std::uint64_t base, const std::string& where,
                                         int max_depth, std::uint64_t max_values);

/// As `parse_strict_json` for a `text` that is one object, but hands each
/// member of that object to `member` as soon as it is complete and keeps
/// none: a header of n entries never holds n JSON trees at once. Members
/// arrive in file order, so `member` may see (and refuse) some before a
/// later syntax error is found. \throws as `parse_strict_json`, and
/// Error(corrupt) when `text` is not an object.
void parse_strict_json_members(
    std::string_view text, std::string_view what, std::uint64_t base, const std::string& where,
    int max_depth, std::uint64_t max_values,
    const std::function<void(const std::string& key, nlohmann::ordered_json&& value)>& member);

/// File offset of the first `"key"` at or after `from` in `text`, written
/// the way a JSON encoder writes it (no escapes beyond the required ones),
/// or nullopt. For pointing error messages at a header entry.
std::optional<std::uint64_t> json_key_offset(std::string_view text, std::string_view key,
                                             std::uint64_t base, std::size_t from = 0);

}  // namespace torchport::formats
