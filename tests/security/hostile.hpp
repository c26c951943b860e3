#pragma once
// Hand-made hostile and broken inputs, built in memory: a pickle writer with
// full control over the opcodes, zip and tar writers with full control over
// their headers, and the catalogue of cases every hardening test runs
// (test_hostile measures each in a child process, test_scan checks that
// scan() flags each).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace torchport::test {

/// A pickle, opcode by opcode (as tests/fixtures/make_fixtures.py's `P`).
class Pk {
 public:
  explicit Pk(int proto = 2);
  Pk& raw(std::string_view bytes);
  Pk& op(char c) { return raw(std::string_view(&c, 1)); }
  Pk& glob(std::string_view module, std::string_view name);        ///< GLOBAL
  Pk& stack_glob(std::string_view module, std::string_view name);  ///< two strings, STACK_GLOBAL
  Pk& s(std::string_view text);                                    ///< BINUNICODE
  Pk& i(std::int64_t v);                                           ///< BININT1, BININT or LONG1
  Pk& u32(std::uint32_t v);                                        ///< 4 raw little-endian bytes
  Pk& u64(std::uint64_t v);                                        ///< 8 raw little-endian bytes
  Pk& mark() { return op('('); }
  Pk& tuple() { return op('t'); }
  Pk& reduce() { return op('R'); }
  Pk& setitems() { return op('u'); }
  Pk& ordered_dict();
  Pk& ints(const std::vector<std::int64_t>& values);  ///< a tuple of ints
  /// A persistent id ('storage', torch.<cls>, key, 'cpu', numel) and BINPERSID.
  Pk& storage(std::string_view cls, std::string_view key, std::int64_t numel);
  /// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()).
  Pk& tensor_v2(std::string_view cls, std::string_view key, std::int64_t numel, std::int64_t offset,
                const std::vector<std::int64_t>& size, const std::vector<std::int64_t>& stride);
  /// `module.name(arg)` by GLOBAL, MARK, string, TUPLE, REDUCE.
  Pk& call(std::string_view module, std::string_view name, std::string_view arg = "echo pwned");
  /// Appends STOP and returns the bytes.
  std::string stop();
  const std::string& bytes() const { return b_; }

 private:
  std::string b_;
};

/// A state dict {"w": F32 tensor of 4 elements over storage "0"}.
std::string good_state_pickle();
/// The legacy format's three header pickles (magic, protocol 1001, sys_info).
std::string legacy_head();

/// One zip member, written as given (sizes and names may lie on purpose).
struct ZipMember {
  std::string name;
  std::string data;                 ///< uncompressed
  int method = 0;                   ///< 0 stored, 8 deflated
  std::int64_t declared_size = -1;  ///< the uncompressed size to write (-1: the true one)
  std::string local_name;           ///< the local header's name ("" : the same)
  std::int64_t crc = -1;            ///< -1: the true CRC-32
  std::int64_t offset = -1;         ///< point the central header here and write no local header
  std::string raw_compressed;       ///< when set, written instead of deflating `data`
};
/// A zip archive of `members` (no zip64).
std::string zip_archive(const std::vector<ZipMember>& members);
/// archive/data.pkl = `pkl`, plus archive/data/<key> records.
std::string torch_zip(const std::string& pkl,
                      const std::vector<std::pair<std::string, std::string>>& records = {},
                      const std::string& prefix = "archive/");
/// raw deflate of `data` (no zlib header), level 9.
std::string deflate_raw(const std::string& data);

/// A ustar archive of (name, data) members.
std::string tar_archive(const std::vector<std::pair<std::string, std::string>>& members);

/// What `open()` must do with a hostile input.
struct HostileCase {
  std::string name;
  std::string bytes;
  std::string code;     ///< the error code name, or "ok" when it must load
  std::string message;  ///< a substring of the message ("" : any)
  std::string scan;     ///< the scan verdict expected
};

/// Every hostile and broken input of the hardening tests.
std::vector<HostileCase> hostile_cases();

}  // namespace torchport::test
