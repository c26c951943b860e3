// The report's suggestions: "did you mean" for a missing field (the unused
// keys closest to its path), and, for an optional field left empty while
// unused keys end like it, the remap rule that would fill it.

#include "record/suggest.hpp"

#include <algorithm>

namespace torchport::detail {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t prev = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string_view>& parts, std::size_t from, std::size_t to) {
  std::string s;
  for (std::size_t i = from; i < to; ++i) {
    if (i > from) s += '.';
    s += parts[i];
  }
  return s;
}

// `s` as a PCRE2 pattern matching itself.
std::string regex_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

// The unused keys closest to a missing field's path: small edit distance, or
// the same last two segments under another prefix.
std::vector<std::string> suggestions(const std::string& path,
                                     const std::vector<std::string>& unused) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  const auto tail = [](std::string_view s) {
    const auto last = s.rfind('.');
    if (last == std::string_view::npos) return s;
    const auto prev = s.rfind('.', last - 1);
    return prev == std::string_view::npos ? s : s.substr(prev + 1);
  };
  const std::size_t budget = std::max<std::size_t>(3, path.size() / 3);
  for (const auto& u : unused) {
    std::size_t d = edit_distance(path, u);
    if (d > budget && tail(u) == tail(path)) d = budget;  // same leaf, other prefix
    if (d <= budget) scored.emplace_back(d, u);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

// The dotted components of a key.
std::vector<std::string_view> components(std::string_view key) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t dot = key.find('.', at);
    out.push_back(
        key.substr(at, dot == std::string_view::npos ? std::string_view::npos : dot - at));
    if (dot == std::string_view::npos) return out;
    at = dot + 1;
  }
}

// An optional field left empty while unused keys end like it: the unused
// keys sharing the most trailing components with the field's path (at
// least two, or all of a one-component path), a key's last one or two
// components dropped when it names the field's children (an optional
// module). The rule suggested renames the best one's differing prefix.
// `parts[i]` is `components(unused[i])`, split once for every field.
std::optional<LoadReport::Warning> look_alike(
    const std::string& field, const std::vector<std::string>& unused,
    const std::vector<std::vector<std::string_view>>& parts) {
  const auto f = components(field);
  const std::size_t need = std::min<std::size_t>(2, f.size());
  struct Best {
    std::size_t common = 0, dropped = 0;
    const std::string* key = nullptr;
    std::vector<std::string_view> parts;
  } best;
  std::vector<const std::string*> similar;
  for (std::size_t u = 0; u < unused.size(); ++u) {
    const std::string& key = unused[u];
    const auto& k = parts[u];
    for (std::size_t drop = 0; drop <= 2 && drop < k.size(); ++drop) {
      const std::size_t m = k.size() - drop;
      std::size_t c = 0;
      while (c < m && c < f.size() && k[m - 1 - c] == f[f.size() - 1 - c]) ++c;
      if (c < need || (c == m && c == f.size())) continue;  // too little in common, or the field
      if (c > best.common || (c == best.common && drop < best.dropped)) {
        if (c > best.common) similar.clear();
        best = {c, drop, &key, {k.begin(), k.begin() + static_cast<std::ptrdiff_t>(m)}};
      }
      if (c == best.common && (similar.empty() || similar.back() != &key)) similar.push_back(&key);
      break;
    }
  }
  if (best.key == nullptr) return std::nullopt;
  LoadReport::Warning w;
  w.path = field;
  for (std::size_t i = 0; i < similar.size() && i < 5; ++i) w.similar.push_back(*similar[i]);
  const std::string key_prefix = join(best.parts, 0, best.parts.size() - best.common);
  const std::string field_prefix = join(f, 0, f.size() - best.common);
  if (!key_prefix.empty()) {
    w.remap_pattern = "^" + regex_escape(key_prefix) + "\\.(.*)$";
    w.remap_replacement = field_prefix.empty() ? "$1" : field_prefix + ".$1";
    for (const auto& key : unused) w.remap_covers += key.starts_with(key_prefix + ".");
  } else {  // the key is a suffix of the field's path: rename it alone
    const auto k = components(*best.key);
    w.remap_pattern = "^" + regex_escape(*best.key) + "$";
    w.remap_replacement = field;
    if (best.dropped > 0) w.remap_replacement += "." + join(k, k.size() - best.dropped, k.size());
    w.remap_covers = 1;
  }
  w.message = "the optional field '" + field + "' was left empty, but the file's unused '" +
              *best.key + "' ends like it";
  if (w.remap_covers > 1)
    w.message +=
        " (" + std::to_string(w.remap_covers) + " unused keys start with '" + key_prefix + ".')";
  w.message += "; a forgotten remap rule? LoadArgs::remap(\"" + w.remap_pattern + "\", \"" +
               w.remap_replacement + "\")";
  return w;
}

}  // namespace torchport::detail
