// The pickle VM on hand-made opcode streams: what it builds, what it refuses,
// and the limits that bound it.

#include <string>

using namespace std::string_literals;

#include <gtest/gtest.h>

#include "pickle/unpickler.hpp"
#include "torchport/core/error.hpp"

using namespace torchport;

namespace {

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

Value run(const std::string& bytes, const Limits& limits = {}, pickle::Stats* stats = nullptr) {
  ByteReader r(as_bytes(bytes), "test.pkl");
  return pickle::unpickle(r, limits, {}, stats);
}

// Expects `bytes` to be refused with `code` and a message containing `text`.
void refused(const std::string& bytes, ErrorCode code, const std::string& text,
             const Limits& limits = {}) {
  try {
    run(bytes, limits);
    FAIL() << "accepted; wanted " << error_code_name(code) << ": " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    EXPECT_TRUE(e.offset().has_value()) << e.what();
  }
}

std::string u32(std::uint32_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 4);
}
std::string u64(std::uint64_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 8);
}
std::string str(const std::string& s) {
  return "X" + u32(static_cast<std::uint32_t>(s.size())) + s;
}

TEST(Unpickler, Scalars) {
  EXPECT_TRUE(run("\x80\x02N.").is_none());
  EXPECT_EQ(run("\x80\x02\x88.").as_bool(), true);
  EXPECT_EQ(run("\x80\x02K\x07.").as_int(), 7);
  EXPECT_EQ(run("\x80\x02M\x34\x12.").as_int(), 0x1234);
  EXPECT_EQ(run(std::string("\x80\x02J\xfe\xff\xff\xff.", 8)).as_int(), -2);
  EXPECT_EQ(run(std::string("\x80\x02\x8a\x02\xff\x7f.", 7)).as_int(), 0x7fff);
  EXPECT_EQ(run(std::string("\x80\x02\x8a\x01\xff.", 6)).as_int(), -1);
  EXPECT_EQ(run("I42\n.").as_int(), 42);
  EXPECT_EQ(run("I01\n.").as_bool(), true);
  EXPECT_EQ(run("L-99L\n.").as_int(), -99);
  EXPECT_DOUBLE_EQ(run("F2.5\n.").as_float(), 2.5);
  EXPECT_DOUBLE_EQ(run(std::string("G\x40\x04\x00\x00\x00\x00\x00\x00.", 10)).as_float(), 2.5);
  EXPECT_EQ(run("\x80\x04\x8c\x03"
                "abc\x94.")
                .as_str(),
            "abc");
  EXPECT_EQ(run("\x80\x03"
                "C\x02hi.")
                .as_bytes(),
            "hi");
  EXPECT_EQ(run("S'a\\nb'\n.").as_str(), "a\nb");
  EXPECT_EQ(run("V\\u00e9\n.").as_str(), "\xc3\xa9");
}

TEST(Unpickler, BigIntegersKeepTheirBytes) {
  const Value v = run("L1180591620717411303424L\n.");  // 2**70
  ASSERT_TRUE(v.is(Value::Kind::BigInt));
  EXPECT_EQ(v.as_bytes().size(), 9u);  // the fewest two's complement bytes, as LONG1 holds it
  EXPECT_EQ(static_cast<unsigned char>(v.as_bytes()[8]), 0x40u);
}

TEST(Unpickler, Containers) {
  const Value d = run("\x80\x02}(" + str("a") + "K\x01" + str("b") +
                      "]q\x00(K\x01K\x02"s
                      "eu.");
  ASSERT_TRUE(d.is(Value::Kind::Dict));
  EXPECT_EQ(d.find("a")->as_int(), 1);
  EXPECT_EQ(d.find("b")->items().size(), 2u);
  EXPECT_EQ(run("\x80\x02K\x01K\x02\x86.").items().size(), 2u);
  EXPECT_EQ(run("\x80\x04\x8f(K\x01K\x02\x90.").kind(), Value::Kind::Set);
  EXPECT_EQ(run("(K\x01K\x02l.").items().size(), 2u);
  EXPECT_EQ(run("(S'k'\nI1\nd.").find("k")->as_int(), 1);
}

TEST(Unpickler, MemoSharesValues) {
  const Value v = run("\x80\x02]q\x00h\x00\x86."s);  // (x, x) with x = []
  ASSERT_EQ(v.items().size(), 2u);
  EXPECT_EQ(v.items()[0].identity(), v.items()[1].identity());
}

TEST(Unpickler, DataConstructorsBuildData) {
  const Value od =
      run("\x80\x02"
          "ccollections\nOrderedDict\n)R(" +
          str("k") + "K\x05u.");
  ASSERT_TRUE(od.is(Value::Kind::Dict));
  EXPECT_EQ(od.find("k")->as_int(), 5);
  const Value size =
      run("\x80\x02"
          "ctorch\nSize\n(K\x02K\x03t\x85R.");
  ASSERT_TRUE(size.is(Value::Kind::Tuple));
  EXPECT_EQ(size.items()[1].as_int(), 3);
  const Value b =
      run("\x80\x02"
          "c_codecs\nencode\n" +
          str("\xc3\xbf\x01") + str("latin1") + "\x86R.");
  EXPECT_EQ(b.as_bytes(), "\xff\x01");
  const Value c =
      run("\x80\x02"
          "c__builtin__\ncomplex\nG\x3f\xf0\x00\x00\x00\x00\x00\x00"s
          "G\x40\x00\x00\x00\x00\x00\x00\x00\x86R."s);
  EXPECT_EQ(c.as_complex().second, 2.0);
}

TEST(Unpickler, UnknownClassesStayInert) {
  pickle::Stats stats;
  const Value v =
      run("\x80\x02"
          "cmy.models\nNet\n)\x81}(" +
              str("x") +
              "K\x01"
              "ub.",
          {}, &stats);
  ASSERT_TRUE(v.is(Value::Kind::Object));
  EXPECT_EQ(v.as_object().cls.qualified(), "my.models.Net");
  EXPECT_EQ(v.as_object().state.find("x")->as_int(), 1);
  ASSERT_EQ(stats.globals.size(), 1u);
  EXPECT_EQ(stats.globals[0].klass, pickle::GlobalClass::unknown);
  EXPECT_EQ(stats.calls, 1u);
}

TEST(Unpickler, DangerousGlobalsAreOnlyReferences) {
  pickle::Stats stats;
  const Value v =
      run("\x80\x02"
          "cposix\nsystem\n" +
              str("id") + "\x85R.",
          {}, &stats);
  EXPECT_TRUE(v.is(Value::Kind::Object));  // nothing ran; policy above the VM refuses it
  EXPECT_EQ(stats.globals[0].klass, pickle::GlobalClass::dangerous);
  EXPECT_EQ(stats.globals[0].first_offset, 2u);
}

// Python 3.11 pickles an Enum member as getattr(cls, 'NAME'): of an
// allow-listed Enum and one of its members, that is the member, and getattr
// is allowed while every call of it is one; any other call (another
// attribute, another class) leaves it dangerous.
TEST(Unpickler, GetattrOfAnAllowedEnumMemberIsThatMember) {
  const std::string getattr = "cbuiltins\ngetattr\n";
  const std::string mem = "ctorch.distributed.checkpoint.metadata\n_MEM_FORMAT_ENCODING\n";
  pickle::Stats ok;
  const Value v = run("\x80\x02" + getattr + "q\x00"s + mem + str("TORCH_CONTIGUOUS_FORMAT") +
                          "\x86R" + "h\x00"s + mem + str("TORCH_CHANNELS_LAST") + "\x86R\x86.",
                      {}, &ok);
  ASSERT_TRUE(v.is(Value::Kind::Tuple));
  EXPECT_EQ(v.items()[0].as_global().name, "_MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT");
  EXPECT_EQ(ok.globals[0].calls, 2u);
  EXPECT_EQ(ok.globals[0].inert_calls, 2u);
  EXPECT_EQ(ok.globals[0].klass, pickle::GlobalClass::allowed);
  for (const std::string& other :
       {mem + str("__class__"), mem + str("TORCH_NO_SUCH"), "cposix\nsystem\n" + str("x"),
        "ctorch\nnn\n" + str("TORCH_CONTIGUOUS_FORMAT")}) {
    pickle::Stats s;
    run("\x80\x02" + getattr + "q\x00"s + mem + str("TORCH_CONTIGUOUS_FORMAT") + "\x86R0" +
            "h\x00"s + other + "\x86R.",
        {}, &s);
    EXPECT_EQ(s.globals[0].klass, pickle::GlobalClass::dangerous) << other;
  }
}

// An opt-in profile's class counts as allowed only in its one form: NEWOBJ
// with no arguments then BUILD of a str-keyed dict (an `object` class), or
// builtins.getattr(cls, 'NAME') (an `enum_member` class). Any other use
// leaves it unknown, as without the profile; getattr of anything but such
// a member stays dangerous; an Enum member cannot be called.
pickle::GlobalClass profile_class_of(const std::string& body, const std::string& qualified,
                                     bool with_profile = true) {
  const std::vector<std::string> active = {"transformers-training-args"};
  const std::string bytes = "\x80\x02" + body + ".";
  ByteReader r(as_bytes(bytes), "test.pkl");
  pickle::Stats stats;
  try {  // a BUILD of the class itself is refused: its statistics still say
    pickle::unpickle(
        r, {}, {}, &stats, {}, {},
        with_profile ? std::span<const std::string>(active) : std::span<const std::string>());
  } catch (const Error&) {
  }
  for (const auto& g : stats.globals)
    if (g.module + "." + g.name == qualified) return g.klass;
  ADD_FAILURE() << qualified << " not met";
  return pickle::GlobalClass::unknown;
}

TEST(Unpickler, AProfilesClassIsAllowedOnlyInItsForm) {
  const std::string args = "ctransformers.training_args\nTrainingArguments\n";
  const std::string ta = "transformers.training_args.TrainingArguments";
  const std::string state =
      "}" + str("lr") + "G\x3f\x1a\x36\xe2\xeb\x1c\x43\x2d" + "s";  // {'lr': 1e-4}
  using pickle::GlobalClass;
  EXPECT_EQ(profile_class_of(args + ")\x81" + state + "b", ta), GlobalClass::allowed);
  EXPECT_EQ(profile_class_of(args + ")\x81" + state + "b", ta, false), GlobalClass::unknown);
  EXPECT_EQ(profile_class_of(args, ta), GlobalClass::allowed);            // only named
  EXPECT_EQ(profile_class_of(args + ")\x81", ta), GlobalClass::allowed);  // no BUILD
  for (const std::string& other : {
           args + ")R" + state + "b",               // REDUCE: runs __init__
           args + "K\x01\x85\x81" + state + "b",    // NEWOBJ with an argument
           args + ")\x81}K\x01K\x02sb",             // a state key that is not a str
           args + ")\x81" + state + "N\x86" + "b",  // (dict, slots): setattr
           args + state + "b",                      // BUILD of the class itself
       }) {
    SCOPED_TRACE(other);
    EXPECT_EQ(profile_class_of(other, ta), GlobalClass::unknown);
  }
}

TEST(Unpickler, AProfilesEnumIsReadOnlyAsItsMembers) {
  const std::string getattr = "cbuiltins\ngetattr\n";
  const std::string sched = "ctransformers.trainer_utils\nSchedulerType\n";
  using pickle::GlobalClass;
  const std::vector<std::string> active = {"transformers-training-args"};
  const std::string member = "\x80\x02" + getattr + sched + str("LINEAR") + "\x86R.";
  ByteReader r(as_bytes(member), "test.pkl");
  pickle::Stats stats;
  const Value v = pickle::unpickle(r, {}, {}, &stats, {}, {}, active);
  ASSERT_TRUE(v.is(Value::Kind::Global));
  EXPECT_EQ(v.as_global().qualified(), "transformers.trainer_utils.SchedulerType.LINEAR");
  EXPECT_EQ(stats.globals[0].klass, GlobalClass::allowed);
  EXPECT_EQ(profile_class_of(getattr + sched + str("LINEAR") + "\x86R", "builtins.getattr", false),
            GlobalClass::dangerous);
  for (const std::string& other : {
           sched + str("lower"),      // str's method, not a member
           sched + str("_missing_"),  // the class's hook
           "ctransformers.training_args\nTrainingArguments\n" + str("LINEAR"),  // not an Enum
       }) {
    SCOPED_TRACE(other);
    EXPECT_EQ(profile_class_of(getattr + other + "\x86R", "builtins.getattr"),
              GlobalClass::dangerous);
  }
  // Called, as Python cannot call a member either.
  const std::string called = "\x80\x02" + getattr + sched + str("LINEAR") + "\x86R)R.";
  ByteReader call(as_bytes(called), "test.pkl");  // views `called`: a temporary would be gone
  EXPECT_THROW(pickle::unpickle(call, {}, {}, nullptr, {}, {}, active), Error);
  // An unknown profile.
  EXPECT_THROW(pickle::validate_profiles(std::vector<std::string>{"transformers"}), Error);
}

TEST(Unpickler, DottedGlobalNamesResolveAsPythonResolvesThem) {
  // Below protocol 4, Python looks a dotted name up as one attribute and
  // fails: refused, not read as an inert object (which dropped a tensor).
  refused(
      "\x80\x02"
      "ctorch\n_utils._rebuild_tensor_v2\n.",
      ErrorCode::corrupt, "resolves only from pickle protocol 4 on");
  refused("ctorch\n_utils._rebuild_tensor_v2\n.", ErrorCode::corrupt, "a dotted name");
  // A dangerous one is left to the global policy, which names it.
  pickle::Stats danger;
  run("\x80\x02"
      "ctorch\nos.system\n.",
      {}, &danger);
  EXPECT_EQ(danger.globals[0].klass, pickle::GlobalClass::dangerous);
  // From protocol 4 on, an allowed whole is named by its module and name.
  pickle::Stats stats;
  const Value g =
      run("\x80\x04"
          "ctorch\n_utils._rebuild_tensor_v2\n.",
          {}, &stats);
  ASSERT_TRUE(g.is(Value::Kind::Global));
  EXPECT_EQ(g.as_global().qualified(), "torch._utils._rebuild_tensor_v2");
  EXPECT_EQ(g.as_global().module, "torch._utils");
  EXPECT_EQ(stats.globals[0].klass, pickle::GlobalClass::allowed);
  // ... and any other dotted name stays as written (an attribute chain).
  pickle::Stats chain;
  const Value c =
      run("\x80\x04"
          "ctorch\nos.system\n.",
          {}, &chain);
  EXPECT_EQ(c.as_global().module, "torch");
  EXPECT_EQ(chain.globals[0].klass, pickle::GlobalClass::dangerous);
}

TEST(Unpickler, GlobalClassification) {
  using pickle::classify_global;
  using pickle::GlobalClass;
  EXPECT_EQ(classify_global("torch._utils", "_rebuild_tensor_v2"), GlobalClass::allowed);
  EXPECT_EQ(classify_global("torch", "BFloat16Storage"), GlobalClass::allowed);
  EXPECT_EQ(classify_global("torch", "bfloat16"), GlobalClass::allowed);
  EXPECT_EQ(classify_global("__builtin__", "set"), GlobalClass::allowed);
  EXPECT_EQ(classify_global("torch", "load"), GlobalClass::dangerous);
  EXPECT_EQ(classify_global("os.path", "join"), GlobalClass::dangerous);
  EXPECT_EQ(classify_global("builtins", "__import__"), GlobalClass::dangerous);
  EXPECT_EQ(classify_global("__builtin__", "eval"), GlobalClass::dangerous);
  EXPECT_EQ(classify_global("operator", "attrgetter"), GlobalClass::dangerous);
  EXPECT_EQ(classify_global("torch.storage", "_load_from_bytes"), GlobalClass::dangerous);
  EXPECT_EQ(classify_global("torch.nn.modules.linear", "Linear"), GlobalClass::unknown);
  EXPECT_EQ(classify_global("torchx", "Storage"), GlobalClass::unknown);
  EXPECT_EQ(classify_global("ossy", "thing"), GlobalClass::unknown);
}

// torch's weights_only rules release by release (torch 2.6.0 to 2.14.1;
// tests/interop/check_weights_only.py compares the list with each torch).
TEST(Unpickler, TorchWeightsOnlyRulesByRelease) {
  using pickle::torch_weights_only_allows;
  EXPECT_TRUE(torch_weights_only_allows("torch._utils._rebuild_tensor_v2"));
  EXPECT_TRUE(torch_weights_only_allows("torch._utils._rebuild_nested_tensor", 14));
  EXPECT_FALSE(torch_weights_only_allows("numpy.ndarray"));
  EXPECT_FALSE(torch_weights_only_allows("torch.int4", 6));
  EXPECT_TRUE(torch_weights_only_allows("torch.int4", 7));
  EXPECT_FALSE(torch_weights_only_allows("torch.float4_e2m1fn_x2", 7));
  EXPECT_TRUE(torch_weights_only_allows("torch.float4_e2m1fn_x2", 8));
  EXPECT_FALSE(torch_weights_only_allows("torch.bcomplex32", 13));
  EXPECT_TRUE(torch_weights_only_allows("torch.bcomplex32"));
  EXPECT_FALSE(torch_weights_only_allows("torch.float32", 5));  // before weights_only's default
  EXPECT_EQ(pickle::torch_global_since("torch.int4"), 6);
  EXPECT_EQ(pickle::torch_global_since("torch.bcomplex32"), 14);
  EXPECT_EQ(pickle::torch_global_since("torch.float8_e8m0fnu"), 7);
  EXPECT_EQ(pickle::torch_global_since("torch.float32"), 0);
  // torch's own renames, not CPython's, and not torch.load's torch.tensor.
  using pickle::torch_weights_only_name;
  EXPECT_EQ(torch_weights_only_name("__builtin__", "set"), "builtins.set");
  EXPECT_EQ(torch_weights_only_name("copy_reg", "_reconstructor"), "copyreg._reconstructor");
  EXPECT_EQ(torch_weights_only_name("urllib2", "urlopen"), "urllib2.urlopen");  // CPython maps it
  EXPECT_EQ(torch_weights_only_name("torch.tensor", "_rebuild_from_type_v2"),
            "torch.tensor._rebuild_from_type_v2");
  EXPECT_EQ(torch_weights_only_name("exceptions", "ValueError", 13), "exceptions.ValueError");
  EXPECT_EQ(torch_weights_only_name("exceptions", "ValueError", 14), "builtins.ValueError");
  EXPECT_EQ(torch_weights_only_name("exceptions", "StandardError", 6), "builtins.Exception");
  // The dtypes 2.7 to 2.14 added are ours too: what torch calls safe.
  EXPECT_EQ(pickle::classify_global("torch", "uint7"), pickle::GlobalClass::allowed);
  EXPECT_EQ(pickle::classify_global("torch", "bcomplex32"), pickle::GlobalClass::allowed);
}

// SETITEM on a list counts (torch >= 2.10's weights_only refuses it); the
// names as written are kept.
TEST(Unpickler, StatsForTheWeightsOnlyVerdict) {
  pickle::Stats st;
  run("\x80\x02]K\x01"
      "aK\x00K\x07s]K\x01"
      "a(K\x00K\x08u\x86."s,
      {}, &st);
  EXPECT_EQ(st.list_setitems, 2u);
  EXPECT_EQ(st.first_list_setitem_offset, 10u);
  pickle::Stats g;
  run("\x80\x02"
      "c__builtin__\nset\n)R."s,
      {}, &g);
  ASSERT_EQ(g.globals.size(), 1u);
  EXPECT_EQ(g.globals[0].module, "builtins");
  EXPECT_EQ(g.globals[0].written_module, "__builtin__");
  EXPECT_EQ(g.globals[0].written_name, "set");
  pickle::Stats d;
  run("\x80\x02}K\x00K\x07s."s, {}, &d);
  EXPECT_EQ(d.list_setitems, 0u);
}

TEST(Unpickler, StrictTargets) {
  refused(
      "\x80\x02}K\x01"
      "a.",
      ErrorCode::corrupt, "APPEND to a dict");
  refused("\x80\x02](K\x01K\x02u.", ErrorCode::corrupt, "out of range");  // as Python's list
  refused("\x80\x02]K\x01K\x02s.", ErrorCode::corrupt, "out of range");
  refused("\x80\x02](K\x01\x90.", ErrorCode::corrupt, "ADDITEMS to a list");
  refused("\x80\x02]}b.", ErrorCode::corrupt, "BUILD on a list");
  // Python would call it: the VM's own refusal, not the bytes' fault.
  refused("\x80\x02K\x01)R.", ErrorCode::unsupported, "REDUCE of a int");
  refused(
      "\x80\x02"
      "cfoo\nbar\nK\x01R.",
      ErrorCode::corrupt, "arguments, not a tuple");
  refused(
      "\x80\x02"
      "0.",
      ErrorCode::corrupt, "without a MARK");
  refused("\x80\x02.", ErrorCode::corrupt, "empty stack");
  refused("\x80\x02K\x01(.", ErrorCode::corrupt, "empty stack");  // nothing above the MARK
  refused("\x80\x02h\x05.", ErrorCode::corrupt, "memo entry 5");
  refused("\x80\x06N.", ErrorCode::unsupported, "protocol 6");
  refused("\x80\x05\x97.", ErrorCode::unsupported, "out-of-band");
  refused("\x80\x02Q.", ErrorCode::corrupt, "empty stack");
  refused("\x80\x02N\x85Q.", ErrorCode::corrupt, "persistent id");
}

TEST(Unpickler, SelfReferencesAreRefused) {
  // l = []; l.append(l)
  refused(
      "\x80\x02]q\x00h\x00"s
      "a.",
      ErrorCode::unsupported, "self-references");
  // d = {}; d['d'] = d
  refused("\x80\x02}q\x00"s + str("d") + "h\x00s."s, ErrorCode::unsupported, "self-references");
}

TEST(Unpickler, Truncation) {
  refused(
      "\x80\x02X\x10\x00\x00\x00"s
      "abc"s,
      ErrorCode::truncated, "BINUNICODE declares 16 bytes");
  refused("\x80\x02K", ErrorCode::truncated, "BININT1");
  refused("\x80\x02", ErrorCode::truncated, "opcode");
  refused("\x80\x04\x95" + u64(1000) + "N.", ErrorCode::truncated, "frame of 1000 bytes");
  refused("\x80\x02\x8b\xff\xff\xff\xff.", ErrorCode::corrupt, "negative length");
  refused("\x80\x04\x8d" + u64(~0ull) + "x", ErrorCode::limit_exceeded, "max_string_bytes");
  refused(
      "\x80\x02"
      "cos\nsystem",
      ErrorCode::truncated, "GLOBAL name");
}

TEST(Unpickler, LimitsStopHostileStreams) {
  // Nesting: [[[[...]]]] built with EMPTY_LIST + APPEND.
  std::string deep = "\x80\x02";
  for (int i = 0; i < 300; ++i) deep += "]";
  for (int i = 0; i < 299; ++i) deep += "a";
  deep += ".";
  refused(deep, ErrorCode::limit_exceeded, "max_depth");
  // Billion laughs: each level holds the previous one ten times.
  std::string laughs = "\x80\x02]q\x00"s;
  for (int level = 1; level < 12; ++level) {
    laughs += "](";
    for (int i = 0; i < 10; ++i) laughs += "h" + std::string(1, static_cast<char>(level - 1));
    laughs += "eq" + std::string(1, static_cast<char>(level));
  }
  laughs += ".";
  refused(laughs, ErrorCode::limit_exceeded, "max_nodes");
  // A MARK flood and a stack flood.
  refused("\x80\x02" + std::string(300000, '('), ErrorCode::limit_exceeded, "max_stack");
  refused("\x80\x02" + std::string(300000, 'N'), ErrorCode::limit_exceeded, "max_stack");
  // The memo.
  Limits small;
  small.max_memo = 4;
  refused("\x80\x02NqaNqbNqcNqdNqe.", ErrorCode::limit_exceeded, "max_memo", small);
  Limits strings;
  strings.max_string_bytes = 2;
  refused("\x80\x02" + str("abc") + ".", ErrorCode::limit_exceeded, "max_string_bytes", strings);
}

TEST(Unpickler, StatsCountOpcodes) {
  pickle::Stats stats;
  run("\x80\x04\x95" + u64(3) + "K\x01.", {}, &stats);
  EXPECT_EQ(stats.protocol, 4);
  EXPECT_EQ(stats.opcodes[0x95], 1u);
  EXPECT_EQ(stats.opcodes['K'], 1u);
  EXPECT_EQ(pickle::opcode_name(0x95), "FRAME");
}

}  // namespace

// What CPython's unpickler accepts and the VM reads the same way (each
// expectation checked against /usr/bin/python3's pickle.loads).
TEST(Unpickler, ReadsWhatCPythonReads) {
  // SETITEM and SETITEMS on a list assign by index, as list.__setitem__.
  Value v =
      run("\x80\x02]K\x01"
          "aK\x00K\x07s."s);
  ASSERT_TRUE(v.is(Value::Kind::List));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v.items()[0].as_int(), 7);
  // [1, 2]: [0] = 7, [-1] = 8
  v =
      run("\x80\x02]K\x01"
          "aK\x02"
          "a(K\x00K\x07J\xff\xff\xff\xffK\x08u."s);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v.items()[0].as_int(), 7);
  EXPECT_EQ(v.items()[1].as_int(), 8);
  refused("\x80\x02]K\x00K\x05s."s, ErrorCode::corrupt, "out of range");
  refused(
      "\x80\x02]K\x01"
      "aNK\x05s."s,
      ErrorCode::corrupt, "index");
  // STOP takes the value above the innermost open MARK (the C unpickler's
  // fence); marks left open are dropped.
  EXPECT_EQ(run("\x80\x02(K\x01."s).as_int(), 1);
  EXPECT_EQ(run("\x80\x02]K\x01"
                "aK\x00K\x07s(K\x01."s)
                .as_int(),
            1);
}

TEST(Unpickler, DataConstructorCopiesAreBounded) {
  // One 1 KiB string in the memo, encoded 64 times: 64 KiB of copies.
  std::string p = "\x80\x02" + str(std::string(1024, 'a')) + "q\x00"s;
  for (int i = 0; i < 64; ++i) p += "c_codecs\nencode\nh\x00X\x06\x00\x00\x00latin1\x86R0"s;
  p += "N.";
  Limits small;
  small.max_constructed_bytes = 32 * 1024;
  refused(p, ErrorCode::limit_exceeded, "max_constructed_bytes", small);
  small.max_constructed_bytes = 64 * 1024;
  EXPECT_NO_THROW(run(p, small));
}
