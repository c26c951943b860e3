#include "torchport/record/remap.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

#include "torchport/core/error.hpp"

namespace torchport {
namespace detail {

// One compiled pattern. pcre2_code (and its JIT code) is read-only once
// compiled, so one object serves any number of threads as long as each
// match gets its own match data.
struct CompiledRegex {
  pcre2_code* code = nullptr;
  std::string pattern;
  ~CompiledRegex() { pcre2_code_free(code); }
};

}  // namespace detail

namespace {

std::string pcre2_message(int rc) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(rc, buf, sizeof buf);
  return n < 0 ? "PCRE2 error " + std::to_string(rc)
               : std::string(reinterpret_cast<const char*>(buf));
}

std::shared_ptr<const detail::CompiledRegex> compile(std::string_view pattern) {
  int rc = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &rc, &offset, nullptr);
  if (code == nullptr)
    throw Error(ErrorCode::invalid_argument, "invalid regular expression '" + std::string(pattern) +
                                                 "' at offset " + std::to_string(offset) + ": " +
                                                 pcre2_message(rc));
  // JIT makes matching several times faster; where it is unavailable the
  // interpreter runs instead, so a failure here is not an error.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto r = std::make_shared<detail::CompiledRegex>();
  r->code = code;
  r->pattern = std::string(pattern);
  return r;
}

[[noreturn]] void bad_reference(const detail::CompiledRegex& re, std::string_view replacement,
                                const std::string& why) {
  throw Error(ErrorCode::invalid_argument, "replacement '" + std::string(replacement) +
                                               "' for pattern '" + re.pattern + "': " + why);
}

// Checks every `$` reference of a replacement against the groups of the
// pattern, so a typo fails when the rule is added rather than on the first
// key it matches (PCRE2 itself only reports it at substitution time).
void check_replacement(const detail::CompiledRegex& re, std::string_view r) {
  std::uint32_t groups = 0;
  pcre2_pattern_info(re.code, PCRE2_INFO_CAPTURECOUNT, &groups);
  auto check_group = [&](std::string_view ref) {
    if (ref.empty()) bad_reference(re, r, "empty group reference '${}'");
    if (ref[0] == '*') return;  // ${*MARK}: a control verb name
    if (std::isdigit(static_cast<unsigned char>(ref[0]))) {
      for (char c : ref)
        if (!std::isdigit(static_cast<unsigned char>(c)))
          bad_reference(re, r,
                        "group reference '" + std::string(ref) + "' is not a number or a name");
      const unsigned long n = ref.size() > 6 ? ~0ul : std::stoul(std::string(ref));
      if (n > groups)
        bad_reference(re, r,
                      "refers to group " + std::string(ref) + " but the pattern has " +
                          std::to_string(groups) + " capturing group" + (groups == 1 ? "" : "s"));
      return;
    }
    const std::string name(ref);
    const int n =
        pcre2_substring_number_from_name(re.code, reinterpret_cast<PCRE2_SPTR>(name.c_str()));
    if (n < 0 && n != PCRE2_ERROR_NOUNIQUESUBSTRING)
      bad_reference(re, r, "refers to group '" + name + "', which the pattern does not name");
  };
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r[i] != '$') continue;
    if (i + 1 == r.size()) bad_reference(re, r, "ends with a lone '$' (write '$$' for a dollar)");
    const char c = r[i + 1];
    if (c == '$') {
      ++i;
    } else if (c == '{') {
      const std::size_t close = r.find('}', i + 2);
      if (close == std::string_view::npos) bad_reference(re, r, "'${' without a closing '}'");
      check_group(r.substr(i + 2, close - i - 2));
      i = close;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i + 1;
      while (j < r.size() && std::isdigit(static_cast<unsigned char>(r[j]))) ++j;
      check_group(r.substr(i + 1, j - i - 1));
      i = j - 1;
    } else if (c == '*' || std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i + 2;
      while (j < r.size() && (std::isalnum(static_cast<unsigned char>(r[j])) || r[j] == '_')) ++j;
      check_group(r.substr(i + 1, j - i - 1));
      i = j - 1;
    } else {
      bad_reference(re, r, std::string("'$' followed by '") + c + "' (write '$$' for a dollar)");
    }
  }
}

bool search(const detail::CompiledRegex& re, std::string_view key) {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(re.code, nullptr), &pcre2_match_data_free);
  if (!md) throw Error(ErrorCode::limit_exceeded, "out of memory matching '" + re.pattern + "'");
  const int rc = pcre2_match(re.code, reinterpret_cast<PCRE2_SPTR>(key.data()), key.size(), 0, 0,
                             md.get(), nullptr);
  if (rc >= 0) return true;
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  throw Error(ErrorCode::invalid_argument,
              "matching '" + re.pattern + "' failed: " + pcre2_message(rc), std::string(key));
}

}  // namespace

KeyRemap::KeyRemap() = default;
KeyRemap::~KeyRemap() = default;
KeyRemap::KeyRemap(const KeyRemap&) = default;
KeyRemap& KeyRemap::operator=(const KeyRemap&) = default;
KeyRemap::KeyRemap(KeyRemap&&) noexcept = default;
KeyRemap& KeyRemap::operator=(KeyRemap&&) noexcept = default;

KeyRemap& KeyRemap::add(std::string_view pattern, std::string_view replacement) {
  auto re = compile(pattern);
  check_replacement(*re, replacement);
  rules_.push_back({std::move(re), std::string(replacement)});
  return *this;
}

std::string KeyRemap::apply(std::string_view key) const {
  std::string cur(key);
  std::string out;
  for (const Rule& rule : rules_) {
    const pcre2_code* code = rule.regex->code;
    PCRE2_SIZE len = std::max<std::size_t>(cur.size() * 2 + rule.replacement.size() + 16, 64);
    for (int attempt = 0; attempt < 2; ++attempt) {
      out.resize(len);
      PCRE2_SIZE out_len = len;
      // A null match data makes pcre2_substitute use its own, per call.
      const int rc = pcre2_substitute(
          code, reinterpret_cast<PCRE2_SPTR>(cur.data()), cur.size(), 0,
          PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH, nullptr, nullptr,
          reinterpret_cast<PCRE2_SPTR>(rule.replacement.data()), rule.replacement.size(),
          reinterpret_cast<PCRE2_UCHAR*>(out.data()), &out_len);
      if (rc == PCRE2_ERROR_NOMEMORY && attempt == 0) {
        len = out_len;  // the length needed, thanks to OVERFLOW_LENGTH
        continue;
      }
      if (rc < 0)
        throw Error(ErrorCode::invalid_argument,
                    "renaming with '" + rule.regex->pattern + "' -> '" + rule.replacement +
                        "' failed: " + pcre2_message(rc),
                    cur);
      out.resize(out_len);
      break;
    }
    cur.swap(out);
  }
  return cur;
}

KeyFilter::KeyFilter() = default;
KeyFilter::~KeyFilter() = default;
KeyFilter::KeyFilter(const KeyFilter&) = default;
KeyFilter& KeyFilter::operator=(const KeyFilter&) = default;
KeyFilter::KeyFilter(KeyFilter&&) noexcept = default;
KeyFilter& KeyFilter::operator=(KeyFilter&&) noexcept = default;

KeyFilter& KeyFilter::include(std::string_view re) {
  includes_.push_back(compile(re));
  return *this;
}

KeyFilter& KeyFilter::exclude(std::string_view re) {
  excludes_.push_back(compile(re));
  return *this;
}

bool KeyFilter::accepts(std::string_view key) const {
  bool in = includes_.empty();
  for (const auto& re : includes_)
    if (!in && search(*re, key)) in = true;
  if (!in) return false;
  for (const auto& re : excludes_)
    if (search(*re, key)) return false;
  return true;
}

}  // namespace torchport
