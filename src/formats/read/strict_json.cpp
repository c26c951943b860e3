#include "formats/read/strict_json.hpp"

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"

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

namespace {

using json = nlohmann::ordered_json;

// Builds the value from nlohmann's SAX events. nlohmann's own DOM builder
// inserts each key into an ordered_json object with a linear search for an
// existing one, which makes an object of n keys cost n^2/2 string
// comparisons (a header of 200,000 tensors took minutes); here duplicates
// are found with a hash set per open object and members are appended.
class StrictBuilder : public nlohmann::json_sax<json> {
 public:
  StrictBuilder(std::string_view text, std::string_view what, std::uint64_t base,
                const std::string& where, int max_depth, std::uint64_t max_values)
      : text_(text),
        what_(what),
        base_(base),
        where_(where),
        max_depth_(max_depth),
        max_values_(max_values) {}

  // Streams the top object's members to `member` instead of keeping them.
  std::function<void(const std::string&, json&&)> member;

  json result;

  bool null() override { return add(json(nullptr)); }
  bool boolean(bool v) override { return add(json(v)); }
  bool number_integer(number_integer_t v) override { return add(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return add(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return add(json(v)); }
  bool string(string_t& v) override { return add(json(std::move(v))); }
  bool binary(binary_t& v) override { return add(json::binary(std::move(v))); }
  bool start_object(std::size_t) override {
    open(json::object());
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (seen_before(k)) {
      std::optional<std::uint64_t> at;
      if (auto first = json_key_offset(text_, k, 0))
        at = json_key_offset(text_, k, base_, static_cast<std::size_t>(*first) + 1);
      throw Error(ErrorCode::corrupt,
                  std::string(what_) + " names key '" + k +
                      "' twice in one object; JSON readers disagree on which one counts "
                      "(tampered or badly generated file?)",
                  k, at, where_);
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    stack_.pop_back();
    emit_if_complete();
    return true;
  }
  bool start_array(std::size_t) override {
    open(json::array());
    return true;
  }
  bool end_array() override {
    stack_.pop_back();
    emit_if_complete();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    std::string msg = e.what();
    if (const auto close = msg.find("] ");
        msg.starts_with("[json.exception") && close != std::string::npos)
      msg.erase(0, close + 2);
    throw Error(ErrorCode::corrupt, std::string(what_) + " is not valid JSON: " + msg, {},
                base_ + (position > 0 ? position - 1 : 0), where_);
  }

 private:
  // Puts `v` where the next value goes; returns its address.
  json* place(json&& v) {
    if (++values_ > max_values_)
      throw Error(ErrorCode::limit_exceeded,
                  std::string(what_) + " holds more than " + std::to_string(max_values_) +
                      " values (Limits::max_nodes)",
                  {}, base_, where_);
    if (stack_.empty()) {
      result = std::move(v);
      return &result;
    }
    if (member && stack_.size() == 1) {  // a member of the streamed top object
      if (!stack_.front()->is_object())
        throw Error(ErrorCode::corrupt, std::string(what_) + " is not a JSON object", {}, base_,
                    where_);
      pending_key_ = std::move(key_);
      pending_ = std::move(v);
      pending_open_ = true;
      return &pending_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      auto& a = top.get_ref<json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    // The base vector's append: the key is known to be new. Its elements'
    // keys are const, so the vector's own growth would copy each member,
    // values and all (a safetensors entry is an object of arrays); grown
    // here, keys are copied and values moved.
    auto& members = static_cast<json::object_t::Container&>(top.get_ref<json::object_t&>());
    if (members.size() == members.capacity()) {
      json::object_t::Container grown;
      grown.reserve(std::max<std::size_t>(4, 2 * members.size()));
      for (auto& m : members) grown.emplace_back(m.first, std::move(m.second));
      members.swap(grown);
    }
    members.emplace_back(std::move(key_), std::move(v));
    return &members.back().second;
  }
  bool add(json&& v) {
    place(std::move(v));
    emit_if_complete();
    return true;
  }
  // Hands the streamed member over once nothing of it is open any more.
  void emit_if_complete() {
    if (!member || !pending_open_ || stack_.size() != 1) return;
    pending_open_ = false;
    member(pending_key_, std::move(pending_));
    pending_ = json();
  }
  void open(json&& container) {
    if (static_cast<int>(stack_.size()) >= max_depth_)
      throw Error(ErrorCode::corrupt,
                  std::string(what_) + " nests deeper than " + std::to_string(max_depth_) +
                      " levels; a valid one never does",
                  {}, base_, where_);
    // Ancestors stay put: only the innermost open container grows.
    stack_.push_back(place(std::move(container)));
  }

  // Whether the innermost open object already has the key `k`. Small
  // objects (a safetensors entry has three keys) are searched in place; an
  // object past kLinear keys gets a hash set of them, so that a header of
  // n tensors stays linear without a set (and its allocations) per entry.
  bool seen_before(const std::string& k) {
    constexpr std::size_t kLinear = 16;
    const auto& members =
        static_cast<const json::object_t::Container&>(stack_.back()->get_ref<json::object_t&>());
    detail::StringSet& seen = keys_.back();
    if (member && stack_.size() == 1) return !seen.insert(k).second;  // members not kept
    if (members.size() < kLinear) {
      for (const auto& m : members)
        if (m.first == k) return true;
      return false;
    }
    if (seen.empty())
      for (const auto& m : members) seen.insert(m.first);
    return !seen.insert(k).second;
  }

  std::string_view text_;
  std::string_view what_;
  std::uint64_t base_;
  const std::string& where_;
  int max_depth_;
  std::uint64_t max_values_;
  std::uint64_t values_ = 0;
  std::vector<json*> stack_;
  std::vector<detail::StringSet> keys_;
  std::string key_;
  std::string pending_key_;
  json pending_;
  bool pending_open_ = false;
};

}  // namespace

void parse_strict_json_members(
    std::string_view text, std::string_view what, std::uint64_t base, const std::string& where,
    int max_depth, std::uint64_t max_values,
    const std::function<void(const std::string& key, nlohmann::ordered_json&& value)>& member) {
  StrictBuilder b(text, what, base, where, max_depth, max_values);
  b.member = member;
  json::sax_parse(text.begin(), text.end(), &b, nlohmann::detail::input_format_t::json,
                  /*strict=*/true,
                  /*ignore_comments=*/false);
  if (!b.result.is_object())
    throw Error(ErrorCode::corrupt, std::string(what) + " is not a JSON object", {}, base, where);
}

nlohmann::ordered_json parse_strict_json(std::string_view text, std::string_view what,
                                         std::uint64_t base, const std::string& where,
                                         int max_depth, std::uint64_t max_values) {
  StrictBuilder b(text, what, base, where, max_depth, max_values);
  json::sax_parse(text.begin(), text.end(), &b, nlohmann::detail::input_format_t::json,
                  /*strict=*/true,
                  /*ignore_comments=*/false);
  return std::move(b.result);
}

}  // namespace torchport::formats
