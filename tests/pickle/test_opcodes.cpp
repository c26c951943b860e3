// The opcode table (src/pickle/opcodes.hpp) against CPython's pickletools,
// and the one argument decoder the VM, its pre-scan and the scanner share.

#include <set>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "pickle/opcodes.hpp"
#include "pickle/unpickler.hpp"
#include "torchport/core/error.hpp"

using namespace std::string_literals;
using namespace torchport;
using pickle::Arg;

namespace {

// pickletools.opcodes of CPython 3.11 (protocols 0 to 5): the byte, the
// name, `proto` and the argument descriptor's name ("" for none).
struct Expected {
  std::uint8_t code;
  std::string_view name;
  int protocol;
  std::string_view arg;
};
constexpr Expected kPickletools[] = {
    {0x49, "INT", 0, "decimalnl_short"},
    {0x4a, "BININT", 1, "int4"},
    {0x4b, "BININT1", 1, "uint1"},
    {0x4d, "BININT2", 1, "uint2"},
    {0x4c, "LONG", 0, "decimalnl_long"},
    {0x8a, "LONG1", 2, "long1"},
    {0x8b, "LONG4", 2, "long4"},
    {0x53, "STRING", 0, "stringnl"},
    {0x54, "BINSTRING", 1, "string4"},
    {0x55, "SHORT_BINSTRING", 1, "string1"},
    {0x42, "BINBYTES", 3, "bytes4"},
    {0x43, "SHORT_BINBYTES", 3, "bytes1"},
    {0x8e, "BINBYTES8", 4, "bytes8"},
    {0x96, "BYTEARRAY8", 5, "bytearray8"},
    {0x97, "NEXT_BUFFER", 5, ""},
    {0x98, "READONLY_BUFFER", 5, ""},
    {0x4e, "NONE", 0, ""},
    {0x88, "NEWTRUE", 2, ""},
    {0x89, "NEWFALSE", 2, ""},
    {0x56, "UNICODE", 0, "unicodestringnl"},
    {0x8c, "SHORT_BINUNICODE", 4, "unicodestring1"},
    {0x58, "BINUNICODE", 1, "unicodestring4"},
    {0x8d, "BINUNICODE8", 4, "unicodestring8"},
    {0x46, "FLOAT", 0, "floatnl"},
    {0x47, "BINFLOAT", 1, "float8"},
    {0x5d, "EMPTY_LIST", 1, ""},
    {0x61, "APPEND", 0, ""},
    {0x65, "APPENDS", 1, ""},
    {0x6c, "LIST", 0, ""},
    {0x29, "EMPTY_TUPLE", 1, ""},
    {0x74, "TUPLE", 0, ""},
    {0x85, "TUPLE1", 2, ""},
    {0x86, "TUPLE2", 2, ""},
    {0x87, "TUPLE3", 2, ""},
    {0x7d, "EMPTY_DICT", 1, ""},
    {0x64, "DICT", 0, ""},
    {0x73, "SETITEM", 0, ""},
    {0x75, "SETITEMS", 1, ""},
    {0x8f, "EMPTY_SET", 4, ""},
    {0x90, "ADDITEMS", 4, ""},
    {0x91, "FROZENSET", 4, ""},
    {0x30, "POP", 0, ""},
    {0x32, "DUP", 0, ""},
    {0x28, "MARK", 0, ""},
    {0x31, "POP_MARK", 1, ""},
    {0x67, "GET", 0, "decimalnl_short"},
    {0x68, "BINGET", 1, "uint1"},
    {0x6a, "LONG_BINGET", 1, "uint4"},
    {0x70, "PUT", 0, "decimalnl_short"},
    {0x71, "BINPUT", 1, "uint1"},
    {0x72, "LONG_BINPUT", 1, "uint4"},
    {0x94, "MEMOIZE", 4, ""},
    {0x82, "EXT1", 2, "uint1"},
    {0x83, "EXT2", 2, "uint2"},
    {0x84, "EXT4", 2, "int4"},
    {0x63, "GLOBAL", 0, "stringnl_noescape_pair"},
    {0x93, "STACK_GLOBAL", 4, ""},
    {0x52, "REDUCE", 0, ""},
    {0x62, "BUILD", 0, ""},
    {0x69, "INST", 0, "stringnl_noescape_pair"},
    {0x6f, "OBJ", 1, ""},
    {0x81, "NEWOBJ", 2, ""},
    {0x92, "NEWOBJ_EX", 4, ""},
    {0x80, "PROTO", 2, "uint1"},
    {0x2e, "STOP", 0, ""},
    {0x95, "FRAME", 4, "uint8"},
    {0x50, "PERSID", 0, "stringnl_noescape"},
    {0x51, "BINPERSID", 1, ""},
};

// The layout each pickletools argument descriptor has (its `n`: a width, a
// line, or a length of 1, 4 signed, 4 or 8 bytes before the data).
Arg layout(std::string_view descriptor) {
  if (descriptor.empty()) return Arg::none;
  if (descriptor == "uint1") return Arg::u8;
  if (descriptor == "uint2") return Arg::u16;
  if (descriptor == "int4") return Arg::i32;
  if (descriptor == "uint4") return Arg::u32;
  if (descriptor == "uint8") return Arg::u64;
  if (descriptor == "float8") return Arg::f64_be;
  if (descriptor == "stringnl_noescape_pair") return Arg::lines2;
  if (descriptor.ends_with("nl") || descriptor.ends_with("nl_short") ||
      descriptor.ends_with("nl_long") || descriptor.ends_with("nl_noescape"))
    return Arg::line;
  if (descriptor.ends_with("1")) return Arg::run_u8;
  if (descriptor == "long4" || descriptor == "string4") return Arg::run_i32;
  if (descriptor.ends_with("4")) return Arg::run_u32;
  if (descriptor.ends_with("8")) return Arg::run_u64;
  ADD_FAILURE() << "no layout for " << descriptor;
  return Arg::none;
}

TEST(Opcodes, TableIsPickletools) {
  ASSERT_EQ(pickle::kOpcodes.size(), std::size(kPickletools));
  std::set<std::uint8_t> seen;
  for (const Expected& e : kPickletools) {
    SCOPED_TRACE(std::string(e.name));
    EXPECT_TRUE(seen.insert(e.code).second) << "listed twice";
    const pickle::OpInfo* op = pickle::opcode_info(e.code);
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(op->code, e.code);
    EXPECT_EQ(op->name, e.name);
    EXPECT_EQ(op->protocol, e.protocol);
    EXPECT_EQ(op->arg, layout(e.arg)) << e.arg;
    EXPECT_EQ(pickle::opcode_name(e.code), e.name);
  }
}

TEST(Opcodes, EveryByteHasAtMostOneRow) {
  std::size_t opcodes = 0;
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<std::uint8_t>(b);
    const pickle::OpInfo* op = pickle::opcode_info(byte);
    if (op == nullptr) {
      EXPECT_EQ(pickle::opcode_name(byte), "") << b;
      continue;
    }
    ++opcodes;
    EXPECT_EQ(op->code, byte);
    EXPECT_LE(op->protocol, 5);
  }
  EXPECT_EQ(opcodes, 68u);
  for (const pickle::OpInfo& row : pickle::kOpcodes) EXPECT_EQ(pickle::opcode_info(row.code), &row);
}

TEST(Opcodes, TheVmRefusesExtensionsAndBuffers) {
  std::set<std::string_view> refused;
  for (const pickle::OpInfo& row : pickle::kOpcodes)
    if (row.refused) refused.insert(row.name);
  EXPECT_EQ(refused,
            (std::set<std::string_view>{"EXT1", "EXT2", "EXT4", "NEXT_BUFFER", "READONLY_BUFFER"}));
}

// A decoded argument that owns its text (an Operand's views point into the
// bytes, which the callers pass as temporaries).
struct Decoded {
  std::uint64_t number = 0;
  std::int64_t signed_number = 0;
  double real = 0;
  std::string text, second;
};

// Decodes the argument of `bytes`' first opcode; `rest` is what is left.
Decoded decode(const std::string& bytes, std::uint64_t* rest = nullptr,
               std::uint64_t max_run = ~std::uint64_t{0}) {
  ByteReader r({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "test.pkl");
  const pickle::OpInfo* op = pickle::opcode_info(r.u8("opcode"));
  if (op == nullptr) throw Error(ErrorCode::corrupt, "not an opcode");
  const pickle::Operand a = pickle::read_operand(r, *op, max_run);
  if (rest) *rest = r.remaining();
  return {a.number, a.signed_number, a.real, std::string(a.text), std::string(a.second)};
}

void refused(const std::string& bytes, ErrorCode code, const std::string& text,
             std::uint64_t offset, std::uint64_t max_run = ~std::uint64_t{0}) {
  try {
    decode(bytes, nullptr, max_run);
    ADD_FAILURE() << "decoded; wanted " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(e.message().find(text), std::string::npos) << e.what();
    EXPECT_EQ(e.offset(), offset) << e.what();
    EXPECT_EQ(e.where(), "test.pkl");
  }
}

TEST(Opcodes, EachLayoutDecodes) {
  std::uint64_t rest = 0;
  EXPECT_EQ(decode("K\xfe."s, &rest).number, 0xfeu);
  EXPECT_EQ(rest, 1u);
  EXPECT_EQ(decode("M\x34\x12"s).number, 0x1234u);
  EXPECT_EQ(decode("J\xfe\xff\xff\xff"s).signed_number, -2);
  EXPECT_EQ(decode("j\x01\x00\x00\x80"s).number, 0x80000001u);
  EXPECT_EQ(decode("\x95\x08\x07\x06\x05\x04\x03\x02\x01"s).number, 0x0102030405060708u);
  EXPECT_DOUBLE_EQ(decode("G\x40\x04\x00\x00\x00\x00\x00\x00"s).real, 2.5);
  EXPECT_EQ(decode("I42\n."s, &rest).text, "42");
  EXPECT_EQ(rest, 1u);
  const Decoded g = decode("ctorch\nSize\n."s, &rest);
  EXPECT_EQ(g.text, "torch");
  EXPECT_EQ(g.second, "Size");
  EXPECT_EQ(rest, 1u);
  EXPECT_EQ(decode("\x8c\x03"
                   "abc."s,
                   &rest)
                .text,
            "abc");
  EXPECT_EQ(rest, 1u);
  EXPECT_EQ(decode("T\x02\x00\x00\x00hi"s).text, "hi");
  EXPECT_EQ(decode("X\x02\x00\x00\x00hi"s).text, "hi");
  EXPECT_EQ(decode("\x8e\x02\x00\x00\x00\x00\x00\x00\x00hi"s).text, "hi");
  EXPECT_EQ(decode("N."s, &rest).text, "");
  EXPECT_EQ(rest, 1u);
}

TEST(Opcodes, ErrorsNameTheField) {
  refused("K"s, ErrorCode::truncated, "BININT1 needs 1 bytes", 1);
  refused("cos\nsystem"s, ErrorCode::truncated, "GLOBAL name needs", 4);
  refused("I42"s, ErrorCode::truncated, "INT needs 3 bytes", 1);
  refused("X\x10\x00"s, ErrorCode::truncated, "BINUNICODE length needs 4 bytes", 1);
  // A run's checks are said at the opcode, as the VM says its own.
  refused(
      "X\x10\x00\x00\x00"
      "abc"s,
      ErrorCode::truncated, "BINUNICODE declares 16 bytes", 0);
  refused("\x8b\xff\xff\xff\xff"s, ErrorCode::corrupt, "LONG4 with negative length -1", 0);
  refused("T\xfe\xff\xff\xff"s, ErrorCode::corrupt, "BINSTRING with negative length -2", 0);
  refused("C\x05hello"s, ErrorCode::limit_exceeded, "Limits::max_string_bytes = 4", 0, 4);
}

Value run(const std::string& bytes, pickle::Stats* stats = nullptr) {
  ByteReader r({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "test.pkl");
  return pickle::unpickle(r, {}, {}, stats);
}

TEST(Opcodes, TheVmRefusesBeforeTheArgument) {
  // EXT1 with its argument missing: refused (and counted) as an extension,
  // not reported as truncated.
  pickle::Stats stats;
  try {
    run("\x80\x02\x82"s, &stats);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported) << e.what();
    EXPECT_NE(e.message().find("EXT1 refers to the copyreg extension registry"), std::string::npos);
    EXPECT_EQ(e.offset(), 2u);
  }
  EXPECT_EQ(stats.extensions, 1u);
  EXPECT_EQ(stats.opcodes[0x82], 1u);
}

TEST(Opcodes, TheVmReadsEveryLayout) {
  // One opcode of each layout the VM runs, through read_operand.
  const Value v =
      run("\x80\x04(I7\nK\x01M\x02\x01J\xfd\xff\xff\xff\x8a\x01\xff\x8b\x01\x00\x00\x00\x05"
          "G\x40\x04\x00\x00\x00\x00\x00\x00U\x01sT\x01\x00\x00\x00t\x8c\x01uX\x01\x00\x00\x00v"
          "\x8d\x01\x00\x00\x00\x00\x00\x00\x00wC\x01"
          "bB\x01\x00\x00\x00"
          "c\x8e\x01\x00\x00\x00\x00\x00\x00\x00"
          "d\x96\x01\x00\x00\x00\x00\x00\x00\x00"
          "eq\x00h\x00r\x01\x00\x00\x00j\x01\x00\x00\x00p2\ng2\nS'x'\nVy\nF0.5\nl."s);
  ASSERT_TRUE(v.is(Value::Kind::List));
  EXPECT_EQ(v.repr(32),
            "[7, 1, 258, -3, -1, 5, 2.5, 's', 't', 'u', 'v', 'w', b'b', b'c', b'd', b'e', b'e', "
            "b'e', b'e', 'x', 'y', 0.5]");
}

}  // namespace
