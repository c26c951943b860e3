// Protocol 0 and 1 forms of the opcodes torch files use, against Python's
// own unpickler: tests/fixtures/make_pickle_semantics.py wrote each input
// with Python's unpickler's reading of it (as a protocol 2 pickle) or the
// error Python gives. The VM must read the same object, or refuse.

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "pickle/unpickler.hpp"
#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"

using namespace torchport;
using torchport::test::fixture;

namespace {

std::string base64_decode(const std::string& in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  unsigned buf = 0;
  int bits = 0;
  for (char c : in) {
    const int v = val(c);
    if (v < 0) continue;
    buf = (buf << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buf >> bits) & 0xffu);
    }
  }
  return out;
}

Value load(const std::string& bytes) {
  ByteReader r(std::as_bytes(std::span(bytes.data(), bytes.size())), "test");
  return pickle::unpickle(r, Limits{});
}

// Inputs Python reads that the VM refuses on purpose: a lone surrogate
// (UTF-8 cannot hold it).
const std::set<std::string> kRefusedOnPurpose = {"unicode_surrogate"};

TEST(Protocol01, EveryCaseReadsAsPythonReadsIt) {
  const auto cases = test::read_json(fixture("pickle_semantics/opcodes.json"));
  ASSERT_GT(cases.size(), 70u);
  std::size_t read = 0, refused = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const std::string input = base64_decode(c["input"].get<std::string>());
    if (c.contains("error") || kRefusedOnPurpose.count(name)) {
      EXPECT_THROW(load(input), Error)
          << (c.contains("error") ? c["error"].get<std::string>() : "");
      ++refused;
      continue;
    }
    Value want;
    ASSERT_NO_THROW(want = load(base64_decode(c["same_as"].get<std::string>())));
    Value got;
    ASSERT_NO_THROW(got = load(input));
    EXPECT_EQ(got.repr(100000), want.repr(100000));
    ++read;
  }
  EXPECT_GT(read, 50u);
  EXPECT_GT(refused, 10u);
}

TEST(Protocol01, MagicNumberHasOneFormWhateverTheOpcode) {
  // torch's legacy magic number as protocol 1 writes it (LONG with Python
  // 2's 'L') and as protocol 2 does (LONG1 of 10 bytes).
  const Value p1 = load("L119547037146038801333356L\n.");
  const Value p2 = load(std::string("\x80\x02\x8a\x0al\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15));
  ASSERT_TRUE(p1.is(Value::Kind::BigInt));
  EXPECT_EQ(p1.as_bytes(), p2.as_bytes());
  EXPECT_EQ(p1.as_bytes().size(), 10u);
  // LONG1 with a sign byte it does not need reads as the same number.
  const Value padded =
      load(std::string("\x80\x02\x8a\x0bl\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x00.", 16));
  EXPECT_EQ(padded.as_bytes(), p2.as_bytes());
  // ... and one that fits in 64 bits is an int.
  EXPECT_EQ(load(std::string("\x80\x02\x8a\x09\x05\x00\x00\x00\x00\x00\x00\x00\x00.", 14)).as_int(),
            5);
  EXPECT_EQ(load("L-5L\n.").as_int(), -5);
}

TEST(Protocol01, DecimalFormsFollowTheCUnpickler) {
  // INT goes through strtol(base 0) first: C's octal and hex, and a
  // two-character line giving 0 or 1 is a bool.
  EXPECT_EQ(load("I010\n.").as_int(), 8);
  EXPECT_EQ(load("I0x10\n.").as_int(), 16);
  EXPECT_EQ(load("I 12\n.").as_int(), 12);
  EXPECT_EQ(load("I12 \n.").as_int(), 12);
  EXPECT_EQ(load("I1_0\n.").as_int(), 10);
  EXPECT_TRUE(load("I-0\n.").is(Value::Kind::Bool));
  EXPECT_TRUE(load("I+1\n.").as_bool());
  EXPECT_EQ(load("I000\n.").as_int(), 0);
  EXPECT_THROW(load("I1__0\n."), Error);
  EXPECT_THROW(load("I012345678901234567890\n."), Error);  // octal stops at 8, then no leading zero
  // LONG: PyLong_FromString(base 0) after one 'L'.
  EXPECT_THROW(load("L010\n."), Error);
  EXPECT_EQ(load("L0x10L\n.").as_int(), 16);
  EXPECT_THROW(load("L5LL\n."), Error);
  // PUT and GET: base 10.
  EXPECT_THROW(load("(lp1L\n."), Error);
  EXPECT_EQ(load("(lp07\nI1\nag7\n0g7\n.").size(), 1u);
  // FLOAT: the whole line, no whitespace.
  EXPECT_THROW(load("F 1.5\n."), Error);
  EXPECT_EQ(load("F+2.5\n.").as_float(), 2.5);
  EXPECT_EQ(load("F1e-400\n.").as_float(), 0.0);
  EXPECT_THROW(load("F1e400\n."), Error);
  EXPECT_THROW(load("Fnan(1)\n."), Error);
}

TEST(Protocol01, BuildOnATensorNeedsTensorSemantics) {
  // A tensor value appears only through the readers' hooks; without a
  // BUILD hook, BUILD on one is refused instead of ignored.
  const std::string pkl = "cm\nf\n)R}b.";
  ByteReader r(std::as_bytes(std::span(pkl.data(), pkl.size())), "test");
  pickle::CallHook hook = [](const Global&, const Value&, std::uint64_t) -> std::optional<Value> {
    return Value::tensor(Tensor::zeros(DType::F32, {2}));
  };
  try {
    pickle::unpickle(r, Limits{}, {}, nullptr, hook);
    FAIL() << "BUILD on a tensor was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("BUILD on a tensor"), std::string::npos) << e.what();
  }
}

TEST(Protocol01, BuildChangesTheTensorEverywhereItIsHeld) {
  // t = f(); memo[0] = t; BUILD(t, state); [t, memo[0]]: both the new tensor.
  const std::string pkl = "(cm\nf\n)Rp0\nI7\nbg0\nl.";
  ByteReader r(std::as_bytes(std::span(pkl.data(), pkl.size())), "test");
  pickle::CallHook hook = [](const Global&, const Value&, std::uint64_t) -> std::optional<Value> {
    return Value::tensor(Tensor::zeros(DType::F32, {2}));
  };
  int calls = 0;
  pickle::BuildHook build = [&](const Value& target, const Value& state, std::uint64_t) {
    ++calls;
    EXPECT_EQ(target.as_tensor().shape(), (Shape{2}));
    EXPECT_EQ(state.as_int(), 7);
    return Tensor::zeros(DType::F64, {3});
  };
  const Value v = pickle::unpickle(r, Limits{}, {}, nullptr, hook, build);
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(v.size(), 2u);
  for (const auto& t : v.items()) {
    EXPECT_EQ(t.as_tensor().dtype(), DType::F64);
    EXPECT_EQ(t.as_tensor().shape(), (Shape{3}));
  }
}

TEST(Protocol01, NewobjExKeywordsAreRefused) {
  // cls.__new__(cls, *args, **kwargs): the keywords would change the object.
  const std::string with = std::string(
      "\x80\x04\x8c\x01m\x8c\x01"
      "C\x93)}\x8c\x01k\x4b\x01s\x92.",
      19);
  EXPECT_THROW(load(with), Error);
  const std::string without = std::string(
      "\x80\x04\x8c\x01m\x8c\x01"
      "C\x93)}\x92.",
      13);
  EXPECT_TRUE(load(without).is(Value::Kind::Object));
}

TEST(Protocol01, TorchLayoutsAndSparseRebuildsAreNotDangerous) {
  // torch's weights_only unpickler allows them; reading sparse tensors is
  // refused as unsupported by the readers, never as an unsafe global.
  using pickle::GlobalClass;
  EXPECT_EQ(pickle::classify_global("torch.serialization", "_get_layout"), GlobalClass::allowed);
  EXPECT_EQ(pickle::classify_global("torch._utils", "_rebuild_sparse_tensor"),
            GlobalClass::allowed);
  EXPECT_EQ(pickle::classify_global("torch._utils", "_rebuild_sparse_csr_tensor"),
            GlobalClass::allowed);
  EXPECT_EQ(pickle::classify_global("torch._utils", "_rebuild_qtensor"), GlobalClass::allowed);
  EXPECT_EQ(pickle::classify_global("torch", "per_tensor_affine"), GlobalClass::allowed);
  EXPECT_EQ(pickle::classify_global("torch.cuda", "FloatStorage"), GlobalClass::allowed);
  EXPECT_EQ(pickle::classify_global("torch.storage", "UntypedStorage"), GlobalClass::allowed);
  EXPECT_EQ(pickle::classify_global("collections", "Counter"), GlobalClass::allowed);
  // The rest of torch.serialization stays dangerous.
  EXPECT_EQ(pickle::classify_global("torch.serialization", "load"), GlobalClass::dangerous);
  EXPECT_EQ(pickle::classify_global("torch.serialization", "_load"), GlobalClass::dangerous);
}

}  // namespace
