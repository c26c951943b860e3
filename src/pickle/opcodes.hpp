#pragma once
// The pickle opcodes, in one table: each opcode's byte, name (pickletools'),
// argument layout, the protocol that introduced it, and whether the VM
// refuses it. `read_operand` decodes an opcode's argument from that table;
// the VM, its memo pre-scan, `opcode_name` and the scanner's opcode walk
// (formats/scan.cpp) all read arguments through it, so an opcode's layout is
// written down once. Internal to the library.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>

#include "io/byte_reader.hpp"

namespace torchport::pickle {

// Opcode bytes, with pickle.py's names.
namespace ops {
enum Code : std::uint8_t {
  // protocol 0
  MARK = '(',
  STOP = '.',
  POP = '0',
  DUP = '2',
  FLOAT = 'F',
  INT = 'I',
  LONG = 'L',
  NONE = 'N',
  PERSID = 'P',
  REDUCE = 'R',
  STRING = 'S',
  UNICODE = 'V',
  APPEND = 'a',
  BUILD = 'b',
  GLOBAL = 'c',
  DICT = 'd',
  GET = 'g',
  INST = 'i',
  LIST = 'l',
  PUT = 'p',
  SETITEM = 's',
  TUPLE = 't',
  // protocol 1
  POP_MARK = '1',
  BINFLOAT = 'G',
  BININT = 'J',
  BININT1 = 'K',
  BININT2 = 'M',
  BINPERSID = 'Q',
  BINSTRING = 'T',
  SHORT_BINSTRING = 'U',
  BINUNICODE = 'X',
  EMPTY_LIST = ']',
  EMPTY_DICT = '}',
  EMPTY_TUPLE = ')',
  APPENDS = 'e',
  BINGET = 'h',
  LONG_BINGET = 'j',
  OBJ = 'o',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  SETITEMS = 'u',
  // protocol 2
  PROTO = 0x80,
  NEWOBJ = 0x81,
  EXT1 = 0x82,
  EXT2 = 0x83,
  EXT4 = 0x84,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  LONG4 = 0x8b,
  // protocol 3
  BINBYTES = 'B',
  SHORT_BINBYTES = 'C',
  // protocol 4
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e,
  EMPTY_SET = 0x8f,
  ADDITEMS = 0x90,
  FROZENSET = 0x91,
  NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95,
  // protocol 5
  BYTEARRAY8 = 0x96,
  NEXT_BUFFER = 0x97,
  READONLY_BUFFER = 0x98,
};
}  // namespace ops

// How an opcode's argument is laid out after the opcode byte: pickletools'
// argument descriptors, grouped by how their bytes are read.
enum class Arg : std::uint8_t {
  none,
  u8,       // 1 byte (uint1)
  u16,      // 2 bytes, little-endian (uint2)
  i32,      // 4 bytes, little-endian, signed (int4)
  u32,      // 4 bytes, little-endian (uint4)
  u64,      // 8 bytes, little-endian (uint8)
  f64_be,   // 8 bytes, a big-endian IEEE double (float8)
  line,     // bytes up to a '\n', which is consumed (decimalnl_short, decimalnl_long,
            // floatnl, stringnl, unicodestringnl, stringnl_noescape)
  lines2,   // two such lines, a module and a name (stringnl_noescape_pair)
  run_u8,   // a 1-byte length, then that many bytes (long1, string1, bytes1, unicodestring1)
  run_i32,  // a signed 4-byte length, never negative, then the bytes (long4, string4)
  run_u32,  // a 4-byte length, then the bytes (bytes4, unicodestring4)
  run_u64,  // an 8-byte length, then the bytes (bytes8, unicodestring8, bytearray8)
};

// The bytes a fixed-width argument takes, or a run's length prefix; 0 for
// none and for the text lines, whose width only their '\n' tells.
constexpr unsigned fixed_width(Arg a) {
  switch (a) {
    case Arg::u8:
    case Arg::run_u8:
      return 1;
    case Arg::u16:
      return 2;
    case Arg::i32:
    case Arg::u32:
    case Arg::run_i32:
    case Arg::run_u32:
      return 4;
    case Arg::u64:
    case Arg::f64_be:
    case Arg::run_u64:
      return 8;
    case Arg::none:
    case Arg::line:
    case Arg::lines2:
      return 0;
  }
  return 0;
}

// A length prefix followed by that many bytes.
constexpr bool is_run(Arg a) {
  return a == Arg::run_u8 || a == Arg::run_i32 || a == Arg::run_u32 || a == Arg::run_u64;
}

// One opcode.
struct OpInfo {
  std::uint8_t code;      // the opcode byte
  std::string_view name;  // pickletools' name ("BINUNICODE")
  Arg arg;                // its argument's layout
  std::uint8_t protocol;  // the protocol that introduced it (pickletools' `proto`)
  // The VM refuses it before reading its argument: the copyreg extension
  // registry (EXT1/2/4) and out-of-band buffers (NEXT_BUFFER,
  // READONLY_BUFFER) name things that are not in the file.
  bool refused = false;
};

// Every opcode of pickle protocols 0 to 5, in pickletools' order.
inline constexpr std::array<OpInfo, 68> kOpcodes = {{
    {ops::INT, "INT", Arg::line, 0},
    {ops::BININT, "BININT", Arg::i32, 1},
    {ops::BININT1, "BININT1", Arg::u8, 1},
    {ops::BININT2, "BININT2", Arg::u16, 1},
    {ops::LONG, "LONG", Arg::line, 0},
    {ops::LONG1, "LONG1", Arg::run_u8, 2},
    {ops::LONG4, "LONG4", Arg::run_i32, 2},
    {ops::STRING, "STRING", Arg::line, 0},
    {ops::BINSTRING, "BINSTRING", Arg::run_i32, 1},
    {ops::SHORT_BINSTRING, "SHORT_BINSTRING", Arg::run_u8, 1},
    {ops::BINBYTES, "BINBYTES", Arg::run_u32, 3},
    {ops::SHORT_BINBYTES, "SHORT_BINBYTES", Arg::run_u8, 3},
    {ops::BINBYTES8, "BINBYTES8", Arg::run_u64, 4},
    {ops::BYTEARRAY8, "BYTEARRAY8", Arg::run_u64, 5},
    {ops::NEXT_BUFFER, "NEXT_BUFFER", Arg::none, 5, true},
    {ops::READONLY_BUFFER, "READONLY_BUFFER", Arg::none, 5, true},
    {ops::NONE, "NONE", Arg::none, 0},
    {ops::NEWTRUE, "NEWTRUE", Arg::none, 2},
    {ops::NEWFALSE, "NEWFALSE", Arg::none, 2},
    {ops::UNICODE, "UNICODE", Arg::line, 0},
    {ops::SHORT_BINUNICODE, "SHORT_BINUNICODE", Arg::run_u8, 4},
    {ops::BINUNICODE, "BINUNICODE", Arg::run_u32, 1},
    {ops::BINUNICODE8, "BINUNICODE8", Arg::run_u64, 4},
    {ops::FLOAT, "FLOAT", Arg::line, 0},
    {ops::BINFLOAT, "BINFLOAT", Arg::f64_be, 1},
    {ops::EMPTY_LIST, "EMPTY_LIST", Arg::none, 1},
    {ops::APPEND, "APPEND", Arg::none, 0},
    {ops::APPENDS, "APPENDS", Arg::none, 1},
    {ops::LIST, "LIST", Arg::none, 0},
    {ops::EMPTY_TUPLE, "EMPTY_TUPLE", Arg::none, 1},
    {ops::TUPLE, "TUPLE", Arg::none, 0},
    {ops::TUPLE1, "TUPLE1", Arg::none, 2},
    {ops::TUPLE2, "TUPLE2", Arg::none, 2},
    {ops::TUPLE3, "TUPLE3", Arg::none, 2},
    {ops::EMPTY_DICT, "EMPTY_DICT", Arg::none, 1},
    {ops::DICT, "DICT", Arg::none, 0},
    {ops::SETITEM, "SETITEM", Arg::none, 0},
    {ops::SETITEMS, "SETITEMS", Arg::none, 1},
    {ops::EMPTY_SET, "EMPTY_SET", Arg::none, 4},
    {ops::ADDITEMS, "ADDITEMS", Arg::none, 4},
    {ops::FROZENSET, "FROZENSET", Arg::none, 4},
    {ops::POP, "POP", Arg::none, 0},
    {ops::DUP, "DUP", Arg::none, 0},
    {ops::MARK, "MARK", Arg::none, 0},
    {ops::POP_MARK, "POP_MARK", Arg::none, 1},
    {ops::GET, "GET", Arg::line, 0},
    {ops::BINGET, "BINGET", Arg::u8, 1},
    {ops::LONG_BINGET, "LONG_BINGET", Arg::u32, 1},
    {ops::PUT, "PUT", Arg::line, 0},
    {ops::BINPUT, "BINPUT", Arg::u8, 1},
    {ops::LONG_BINPUT, "LONG_BINPUT", Arg::u32, 1},
    {ops::MEMOIZE, "MEMOIZE", Arg::none, 4},
    {ops::EXT1, "EXT1", Arg::u8, 2, true},
    {ops::EXT2, "EXT2", Arg::u16, 2, true},
    {ops::EXT4, "EXT4", Arg::i32, 2, true},
    {ops::GLOBAL, "GLOBAL", Arg::lines2, 0},
    {ops::STACK_GLOBAL, "STACK_GLOBAL", Arg::none, 4},
    {ops::REDUCE, "REDUCE", Arg::none, 0},
    {ops::BUILD, "BUILD", Arg::none, 0},
    {ops::INST, "INST", Arg::lines2, 0},
    {ops::OBJ, "OBJ", Arg::none, 1},
    {ops::NEWOBJ, "NEWOBJ", Arg::none, 2},
    {ops::NEWOBJ_EX, "NEWOBJ_EX", Arg::none, 4},
    {ops::PROTO, "PROTO", Arg::u8, 2},
    {ops::STOP, "STOP", Arg::none, 0},
    {ops::FRAME, "FRAME", Arg::u64, 4},
    {ops::PERSID, "PERSID", Arg::line, 0},
    {ops::BINPERSID, "BINPERSID", Arg::none, 1},
}};

namespace detail_ops {
// Position + 1 in kOpcodes of each byte's opcode, 0 for a byte that is none.
inline constexpr std::array<std::uint8_t, 256> kIndex = [] {
  std::array<std::uint8_t, 256> index{};
  for (std::size_t i = 0; i < kOpcodes.size(); ++i)
    index[kOpcodes[i].code] = static_cast<std::uint8_t>(i + 1);
  return index;
}();
// True when no byte appears twice in the table.
constexpr bool distinct_codes() {
  std::size_t found = 0;
  for (std::uint8_t i : kIndex) found += i != 0;
  return found == kOpcodes.size();
}
static_assert(distinct_codes(), "an opcode byte appears twice in kOpcodes");
}  // namespace detail_ops

// The table row of opcode byte `code`, or nullptr for a byte that is no opcode.
constexpr const OpInfo* opcode_info(std::uint8_t code) noexcept {
  const std::uint8_t i = detail_ops::kIndex[code];
  return i == 0 ? nullptr : &kOpcodes[i - 1];
}

// An opcode's decoded argument; which members are set depends on `Arg`.
struct Operand {
  std::uint64_t number = 0;        // u8, u16, u32, u64
  std::int64_t signed_number = 0;  // i32
  double real = 0;                 // f64_be
  std::string_view text;           // line; lines2's first line; a run's bytes
  std::string_view second;         // lines2's second line
};

namespace detail_ops {
// The error paths of read_operand, out of line (opcodes.cpp). `field` is
// added to the opcode's name in the message ("BINUNICODE length").
[[noreturn]] void truncated(const ByteReader& r, const OpInfo& op, std::string_view field,
                            std::uint64_t need);
// These two are said at the opcode's offset `at`, as the VM's own checks.
[[noreturn]] void negative_length(const ByteReader& r, const OpInfo& op, std::uint64_t at,
                                  std::int64_t n);
[[noreturn]] void run_too_long(const ByteReader& r, const OpInfo& op, std::uint64_t at,
                               std::uint64_t n, std::uint64_t max_run);

// A fixed-width little-endian field of `Width` bytes (a constant, so the
// copy is one load, not a call to memcpy: the VM reads one per opcode).
template <std::size_t Width>
std::uint64_t fixed(ByteReader& r, const OpInfo& op, std::string_view field) {
  if (r.remaining() < Width) truncated(r, op, field, Width);
  std::uint64_t v = 0;
  std::memcpy(&v, r.take(Width, op.name).data(), Width);
  return v;
}
inline std::string_view line(ByteReader& r, const OpInfo& op, std::string_view field) {
  const auto rest = r.all().subspan(static_cast<std::size_t>(r.pos()));
  const void* nl = std::memchr(rest.data(), '\n', rest.size());
  if (nl == nullptr) truncated(r, op, field, r.remaining() + 1);
  const auto n = static_cast<std::uint64_t>(static_cast<const std::byte*>(nl) - rest.data());
  const std::string_view s = r.take_str(n, op.name);
  r.skip(1, op.name);
  return s;
}
inline std::string_view run(ByteReader& r, const OpInfo& op, std::uint64_t at, std::uint64_t n,
                            std::uint64_t max_run) {
  if (n > max_run || n > r.remaining()) run_too_long(r, op, at, n, max_run);
  return r.take_str(n, op.name);
}
}  // namespace detail_ops

// Reads the argument of opcode `op` from `r`, positioned just after the
// opcode byte (which it read), and leaves `r` after the argument. A
// length-prefixed run longer than `max_run` bytes (the VM passes
// Limits::max_string_bytes) is refused.
//
// Errors: Error(truncated) when the argument runs past the end (its field
// named: "BININT1", "GLOBAL name", "BINUNICODE length"; a run's "BINUNICODE
// declares 16 bytes but only 3 remain"), Error(corrupt) for a negative
// signed length, Error(limit_exceeded) past `max_run`. A run's length
// checks are said at the opcode's offset, a missing field where it is
// missing; each names `r.what()`.
// Inlined where it is called (the VM, once an opcode): as a call, its
// entry, exit and 56-byte result cost more than the decoding.
[[gnu::always_inline]] inline Operand read_operand(
    ByteReader& r, const OpInfo& op,
    std::uint64_t max_run = std::numeric_limits<std::uint64_t>::max()) {
  using namespace detail_ops;
  const std::uint64_t at = r.file_offset() - 1;  // the opcode byte's
  Operand a;
  switch (op.arg) {
    case Arg::none:
      break;
    case Arg::u8:
      a.number = fixed<1>(r, op, {});
      break;
    case Arg::u16:
      a.number = fixed<2>(r, op, {});
      break;
    case Arg::i32:
      a.signed_number = static_cast<std::int32_t>(static_cast<std::uint32_t>(fixed<4>(r, op, {})));
      break;
    case Arg::u32:
      a.number = fixed<4>(r, op, {});
      break;
    case Arg::u64:
      a.number = fixed<8>(r, op, {});
      break;
    case Arg::f64_be: {
      const std::uint64_t bits = __builtin_bswap64(fixed<8>(r, op, {}));
      std::memcpy(&a.real, &bits, sizeof bits);
      break;
    }
    case Arg::line:
      a.text = line(r, op, {});
      break;
    case Arg::lines2:
      a.text = line(r, op, "module");
      a.second = line(r, op, "name");
      break;
    case Arg::run_u8:
      a.number = fixed<1>(r, op, "length");
      a.text = run(r, op, at, a.number, max_run);
      break;
    case Arg::run_i32: {
      const auto n =
          static_cast<std::int32_t>(static_cast<std::uint32_t>(fixed<4>(r, op, "length")));
      if (n < 0) negative_length(r, op, at, n);
      a.number = static_cast<std::uint64_t>(n);
      a.text = run(r, op, at, a.number, max_run);
      break;
    }
    case Arg::run_u32:
      a.number = fixed<4>(r, op, "length");
      a.text = run(r, op, at, a.number, max_run);
      break;
    case Arg::run_u64:
      a.number = fixed<8>(r, op, "length");
      a.text = run(r, op, at, a.number, max_run);
      break;
  }
  return a;
}

}  // namespace torchport::pickle
