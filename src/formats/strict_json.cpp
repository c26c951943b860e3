#include "strict_json.hpp"

#include <unordered_set>
#include <vector>

#include "torchport/core/error.hpp"

namespace torchport::formats {

std::optional<std::uint64_t> json_key_offset(std::string_view text, std::string_view key,
                                             std::uint64_t base, std::size_t from) {
  std::string quoted;
  try {
    quoted = nlohmann::json(std::string(key)).dump();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // not UTF-8: cannot appear as written
  }
  const std::size_t pos = text.find(quoted, from);
  if (pos == std::string_view::npos) return std::nullopt;
  return base + pos;
}

nlohmann::ordered_json parse_strict_json(std::string_view text, std::string_view what,
                                         std::uint64_t base, const std::string& where,
                                         int max_depth) {
  using json = nlohmann::ordered_json;
  std::vector<std::unordered_set<std::string>> keys;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= max_depth)
          throw Error(ErrorCode::corrupt,
                      std::string(what) + " nests deeper than " + std::to_string(max_depth) +
                          " levels; a valid one never does",
                      {}, base, where);
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (!keys.empty() && !keys.back().insert(k).second) {
          // Point at the second occurrence when it can be found verbatim.
          std::optional<std::uint64_t> at;
          if (auto first = json_key_offset(text, k, 0))
            at = json_key_offset(text, k, base, static_cast<std::size_t>(*first) + 1);
          throw Error(ErrorCode::corrupt,
                      std::string(what) + " names key '" + k +
                          "' twice in one object; JSON readers disagree on which one counts "
                          "(tampered or badly generated file?)",
                      k, at, where);
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    if (const auto close = msg.find("] "); msg.starts_with("[json.exception") && close != std::string::npos)
      msg.erase(0, close + 2);
    throw Error(ErrorCode::corrupt, std::string(what) + " is not valid JSON: " + msg, {},
                base + (e.byte > 0 ? e.byte - 1 : 0), where);
  }
}

}  // namespace torchport::formats
