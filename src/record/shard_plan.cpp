#include "torchport/record/shard_plan.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport {
namespace detail {

// One compiled pattern; read-only once compiled (each match gets its own
// match data), so copies of a plan share it across threads.
struct ShardRegex {
  pcre2_code* code = nullptr;
  ~ShardRegex() { pcre2_code_free(code); }
};

}  // namespace detail

namespace {

std::shared_ptr<const detail::ShardRegex> compile(std::string_view pattern) {
  int rc = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &rc, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    const int n = pcre2_get_error_message(rc, buf, sizeof buf);
    throw Error(ErrorCode::invalid_argument,
                "invalid regular expression '" + std::string(pattern) + "' at offset " +
                    std::to_string(offset) + ": " +
                    (n < 0 ? "PCRE2 error " + std::to_string(rc)
                           : std::string(reinterpret_cast<char*>(buf))));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // the interpreter runs where JIT is unavailable
  auto r = std::make_shared<detail::ShardRegex>();
  r->code = code;
  return r;
}

bool found(const detail::ShardRegex& re, std::string_view s) {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re.code, nullptr);
  if (md == nullptr) throw Error(ErrorCode::limit_exceeded, "out of memory matching a shard rule");
  const int rc =
      pcre2_match(re.code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  if (rc >= 0) return true;
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  throw Error(ErrorCode::invalid_argument,
              "matching a shard rule failed (PCRE2 error " + std::to_string(rc) + ")",
              std::string(s));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string join_counts(const std::vector<std::int64_t>& v) {
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : "+") + std::to_string(x);
  return s;
}

std::string rule_text(const ShardPlan::Rule& r) {
  std::string s = r.pattern + " -> " + std::string(shard_kind_name(r.kind));
  if (r.kind == ShardKind::replicate) return s;
  s += "(" + std::to_string(r.dim);
  if (!r.split.heads.empty()) s += ", heads=" + join_counts(r.split.heads);
  if (!r.split.kv_heads.empty()) s += ", kv_heads=" + join_counts(r.split.kv_heads);
  if (r.split.parts != 1) s += ", parts=" + std::to_string(r.split.parts);
  return s + ")";
}

void check_split(const ShardSplit& s) {
  for (auto v : {&s.heads, &s.kv_heads})
    for (auto n : *v)
      if (n <= 0)
        throw Error(ErrorCode::invalid_argument,
                    "a head count must be positive, not " + std::to_string(n));
  if (s.parts <= 0)
    throw Error(ErrorCode::invalid_argument,
                "parts must be positive, not " + std::to_string(s.parts));
  if (s.parts != 1 && (!s.heads.empty() || !s.kv_heads.empty()))
    throw Error(ErrorCode::invalid_argument,
                "parts and heads cannot be combined: list fused heads as heads=N+M");
}

std::int64_t parse_int(std::string_view s, std::string_view what) {
  s = trim(s);
  std::int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw Error(ErrorCode::invalid_argument,
                std::string(what) + " '" + std::string(s) + "' is not an integer");
  return v;
}

std::vector<std::int64_t> parse_counts(std::string_view s, std::string_view what) {
  std::vector<std::int64_t> out;
  for (;;) {
    const auto plus = s.find('+');
    out.push_back(parse_int(s.substr(0, plus), what));
    if (plus == std::string_view::npos) return out;
    s.remove_prefix(plus + 1);
  }
}

}  // namespace

std::string_view shard_kind_name(ShardKind kind) noexcept {
  switch (kind) {
    case ShardKind::column:
      return "column";
    case ShardKind::row:
      return "row";
    case ShardKind::replicate:
      break;
  }
  return "replicate";
}

Shape ShardSlice::shape(std::span<const std::int64_t> whole) const {
  Shape s(whole.begin(), whole.end());
  if (kind == ShardKind::replicate || dim < 0 || static_cast<std::size_t>(dim) >= s.size())
    return s;
  std::int64_t n = 0;
  for (const auto& r : ranges) n += r.length;
  s[static_cast<std::size_t>(dim)] = n;
  return s;
}

ShardPlan::ShardPlan() = default;
ShardPlan::~ShardPlan() = default;
ShardPlan::ShardPlan(const ShardPlan&) = default;
ShardPlan& ShardPlan::operator=(const ShardPlan&) = default;
ShardPlan::ShardPlan(ShardPlan&&) noexcept = default;
ShardPlan& ShardPlan::operator=(ShardPlan&&) noexcept = default;

ShardPlan& ShardPlan::push(Rule rule) {
  check_split(rule.split);
  auto re = compile(rule.pattern);
  rule.text = rule_text(rule);
  rules_.push_back(std::move(rule));
  regexes_.push_back(std::move(re));
  return *this;
}

ShardPlan& ShardPlan::column(std::string_view pattern, std::int64_t dim, ShardSplit split) {
  return push(Rule{std::string(pattern), ShardKind::column, dim, std::move(split), {}});
}

ShardPlan& ShardPlan::row(std::string_view pattern, std::int64_t dim, ShardSplit split) {
  return push(Rule{std::string(pattern), ShardKind::row, dim, std::move(split), {}});
}

ShardPlan& ShardPlan::replicate(std::string_view pattern) {
  return push(Rule{std::string(pattern), ShardKind::replicate, 0, {}, {}});
}

ShardPlan& ShardPlan::add(std::string_view line) {
  const auto arrow = line.rfind("->");
  if (arrow == std::string_view::npos)
    throw Error(ErrorCode::invalid_argument,
                "a shard rule is 'REGEX -> column(DIM) | row(DIM) | replicate', not '" +
                    std::string(line) + "'");
  const std::string_view pattern = trim(line.substr(0, arrow));
  std::string_view action = trim(line.substr(arrow + 2));
  if (pattern.empty())
    throw Error(ErrorCode::invalid_argument,
                "a shard rule without a pattern: '" + std::string(line) + "'");
  if (action == "replicate") return replicate(pattern);
  ShardKind kind;
  if (action.starts_with("column")) {
    kind = ShardKind::column;
    action.remove_prefix(6);
  } else if (action.starts_with("row")) {
    kind = ShardKind::row;
    action.remove_prefix(3);
  } else {
    throw Error(ErrorCode::invalid_argument,
                "unknown shard action '" + std::string(action) +
                    "': expected column(DIM, ...), row(DIM, ...) or replicate");
  }
  std::int64_t dim = kind == ShardKind::column ? 0 : 1;
  ShardSplit split;
  action = trim(action);
  if (!action.empty()) {
    if (action.front() != '(' || action.back() != ')')
      throw Error(ErrorCode::invalid_argument,
                  "shard action '" + std::string(trim(line.substr(arrow + 2))) +
                      "': options go in parentheses, as column(0, heads=32)");
    std::string_view args = action.substr(1, action.size() - 2);
    bool first = true;
    while (!trim(args).empty()) {
      const auto comma = args.find(',');
      const std::string_view arg = trim(args.substr(0, comma));
      args = comma == std::string_view::npos ? std::string_view{} : args.substr(comma + 1);
      const auto eq = arg.find('=');
      if (eq == std::string_view::npos) {
        if (!first)
          throw Error(ErrorCode::invalid_argument,
                      "shard option '" + std::string(arg) + "' is not NAME=VALUE");
        dim = parse_int(arg, "dimension");
      } else {
        const std::string_view key = trim(arg.substr(0, eq)), value = arg.substr(eq + 1);
        if (key == "heads")
          split.heads = parse_counts(value, "heads");
        else if (key == "kv_heads")
          split.kv_heads = parse_counts(value, "kv_heads");
        else if (key == "parts")
          split.parts = parse_int(value, "parts");
        else if (key == "dim")
          dim = parse_int(value, "dim");
        else
          throw Error(ErrorCode::invalid_argument, "unknown shard option '" + std::string(key) +
                                                       "': expected heads, kv_heads, parts or dim");
      }
      first = false;
    }
  }
  return push(Rule{std::string(pattern), kind, dim, std::move(split), {}});
}

ShardPlan ShardPlan::parse(std::string_view text, std::string_view name) {
  ShardPlan plan;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    try {
      plan.add(line);
    } catch (const Error& e) {
      throw Error(e.code(), e.message() + " (line " + std::to_string(line_no) + ")", e.key(),
                  std::nullopt, std::string(name));
    }
  }
  return plan;
}

ShardPlan ShardPlan::read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::io, "cannot read the shard plan: it is a directory", {}, std::nullopt,
                path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorCode::io, std::string("cannot open the shard plan: ") + std::strerror(errno),
                {}, std::nullopt, path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path.filename().string());
}

const ShardPlan::Rule* ShardPlan::match(std::string_view name) const {
  for (std::size_t i = 0; i < rules_.size(); ++i)
    if (found(*regexes_[i], name)) return &rules_[i];
  return nullptr;
}

ShardSlice ShardPlan::resolve(std::string_view name, std::span<const std::int64_t> shape, int rank,
                              int world) const {
  if (world < 1 || rank < 0 || rank >= world)
    throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(rank) + " of " +
                                                 std::to_string(world) +
                                                 ": need 0 <= rank < world");
  ShardSlice out;
  const Rule* rule = match(name);
  if (rule == nullptr) return out;
  out.rule = rule->text;
  if (rule->kind == ShardKind::replicate) return out;
  const auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::invalid_argument,
                why + ": cannot split " + shape_to_string(shape) + " over " +
                    std::to_string(world) + " ranks by rule '" + rule->text + "'",
                std::string(name));
  };
  const auto nd = static_cast<std::int64_t>(shape.size());
  if (rule->dim < -nd || rule->dim >= nd)
    fail("the tensor has no dimension " + std::to_string(rule->dim));
  const std::int64_t d = rule->dim < 0 ? rule->dim + nd : rule->dim;
  const std::int64_t size = shape[static_cast<std::size_t>(d)];
  out.kind = rule->kind;
  out.dim = d;
  const ShardSplit& sp = rule->split;
  const std::int64_t w = world, r = rank;
  if (!sp.heads.empty() || !sp.kv_heads.empty()) {
    std::int64_t heads = 0;
    for (auto v : {&sp.heads, &sp.kv_heads})
      for (auto n : *v)
        if (!detail::add_ok(heads, n, heads)) fail("head counts overflow");
    if (size % heads != 0)
      fail("dimension " + std::to_string(d) + " of size " + std::to_string(size) + " is not " +
           std::to_string(heads) + " heads of equal size");
    const std::int64_t hd = size / heads;
    std::int64_t at = 0;
    auto segment = [&](std::int64_t count, bool kv) {
      if (count % w == 0) {
        const std::int64_t per = count / w;
        out.ranges.push_back({at + r * per * hd, per * hd});
      } else if (kv && w % count == 0) {
        out.ranges.push_back({at + (r * count / w) * hd, hd});
        out.duplicated = true;
      } else {
        fail(std::to_string(count) + (kv ? " key/value heads" : " heads") +
             " do not divide among " + std::to_string(w) + " ranks" +
             (kv ? " (nor do the ranks divide among them)" : ""));
      }
      at += count * hd;
    };
    for (auto n : sp.heads) segment(n, false);
    for (auto n : sp.kv_heads) segment(n, true);
  } else {
    if (size % sp.parts != 0)
      fail("dimension " + std::to_string(d) + " of size " + std::to_string(size) + " is not " +
           std::to_string(sp.parts) + " equal parts");
    const std::int64_t part = size / sp.parts;
    if (part % w != 0)
      fail("dimension " + std::to_string(d) + " of size " + std::to_string(part) +
           (sp.parts > 1 ? " per part" : "") + " does not divide evenly");
    const std::int64_t per = part / w;
    for (std::int64_t p = 0; p < sp.parts; ++p) out.ranges.push_back({p * part + r * per, per});
  }
  // Adjacent ranges (one rank, or consecutive segments) read as one.
  std::vector<SliceRange> merged;
  for (const auto& x : out.ranges) {
    if (!merged.empty() && merged.back().start + merged.back().length == x.start)
      merged.back().length += x.length;
    else
      merged.push_back(x);
  }
  out.ranges = std::move(merged);
  return out;
}

}  // namespace torchport
