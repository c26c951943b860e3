// ast.literal_eval as CPython 3.11 evaluates a text (pickle/pytext.hpp):
// what numpy's .npy headers may hold. Each expectation is what Python
// itself gives (checked by hand with python3.11 -c "import ast; ...");
// tests/formats/npy_headers.py compares whole headers with numpy.

#include <gtest/gtest.h>

#include "torchport/core/error.hpp"
#include "torchport/detail/python_literal.hpp"

using namespace torchport;
using detail::literal_eval;

namespace {

std::string repr(std::string_view text, bool drop_long = false) {
  return literal_eval(text, drop_long).repr(8);
}

ErrorCode refusal(std::string_view text, bool drop_long = false) {
  try {
    (void)literal_eval(text, drop_long);
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::io;  // "accepted": no test expects io
}

TEST(LiteralEval, ReadsWhatPythonReads) {
  EXPECT_EQ(repr("{'a': 1, 'b': (2,), 'c': [True, None], }"),
            "{'a': 1, 'b': (2,), 'c': [True, None]}");
  EXPECT_EQ(repr("{'a' # a comment\n: 1}"), "{'a': 1}");
  EXPECT_EQ(repr("'de' \"scr\""), "'descr'");  // implicit concatenation
  EXPECT_EQ(literal_eval("'\\x64\\u0065\\U00000073\\143\\r'").as_str(), "desc\r");  // escapes
  EXPECT_EQ(repr("'\\q'"), "'\\\\q'");                  // an unknown escape keeps its backslash
  EXPECT_EQ(repr("r'\\x41'"), "'\\\\x41'");             // raw
  EXPECT_EQ(repr("b'\\x41\\u0042'"), "b'A\\\\u0042'");  // \u is no escape in bytes
  EXPECT_EQ(repr("{\x0c'a'\r:\r1}"), "{'a': 1}");       // form feed, lone CR, no trailing newline
  EXPECT_EQ(repr("(1,\\\n2)"), "(1, 2)");               // a joined line
  EXPECT_EQ(repr("1, 2"), "(1, 2)");                    // a tuple without parentheses
  EXPECT_EQ(repr("(3)"), "3");
  EXPECT_EQ(repr("-(3)"), "-3");
  EXPECT_EQ(repr("0x1_0"), "16");
  EXPECT_EQ(repr("0_0"), "0");
  EXPECT_EQ(repr("007.5"), "7.5");
  EXPECT_EQ(repr("1e400"), "inf");
  EXPECT_EQ(repr("-1-2j"), "(-1-2j)");
  EXPECT_TRUE(literal_eval("set()").is(Value::Kind::Set));
  EXPECT_EQ(repr("{1, 2}"), "{1, 2}");
  EXPECT_EQ(repr("\t {'a': 1}\n\n# trailing\n"), "{'a': 1}");
  EXPECT_EQ(repr("\x0c{'a': 1}"), "{'a': 1}");      // a form feed resets the column
  EXPECT_EQ(repr("{'a': 1, 'a': 2}"), "{'a': 2}");  // the last value of a repeated key
}

TEST(LiteralEval, RefusesWhatPythonRefuses) {
  for (const char* text : {"",
                           "{'a': 1",
                           "{'a': 1}}",
                           "{'a': 1}\n{'b': 2}",
                           "\n {'a': 1}",
                           "\x0c {'a': 1}",
                           "007",
                           "1__0",
                           "1_",
                           "0x",
                           "--1",
                           "-True",
                           "1+2",
                           "1+2j+3j",
                           "(1+2j)-1",
                           "f'a'",
                           "'a' b'b'",
                           "b'\\xff\xc3\xa9'",
                           "'a\nb'",
                           "'\\x4'",
                           "os.system",
                           "x",
                           "[1, 2][0]",
                           "1 if 1 else 2",
                           "{'a': 1}\\",
                           "'a' \\ 'b'",
                           "3L",
                           "(\x00)"})
    EXPECT_EQ(refusal(text), ErrorCode::corrupt) << text;
  // The tokenizer's MAXLEVEL: 200 brackets deep and no deeper.
  EXPECT_EQ(refusal(std::string(201, '[') + "1" + std::string(201, ']')), ErrorCode::corrupt);
  EXPECT_EQ(repr(std::string(200, '(') + "1" + std::string(200, ')')), "1");
}

TEST(LiteralEval, Python2HeadersAsNumpyFiltersThem) {
  // numpy's _filter_header drops a long suffix and rewrites the text, so
  // white space before the first token of the first line is no indent.
  EXPECT_EQ(repr("(3L, 4 L)", true), "(3, 4)");
  EXPECT_EQ(repr("\x0c {'a': 1}", true), "{'a': 1}");
  EXPECT_EQ(refusal("\n\x0c{'a': 1}", true), ErrorCode::corrupt);
  EXPECT_EQ(refusal("(3l,)", true), ErrorCode::corrupt);
}

TEST(LiteralEval, NamesWhatItDoesNotRead) {
  EXPECT_EQ(refusal("'\\N{LATIN CAPITAL LETTER O}'"), ErrorCode::unsupported);
  EXPECT_EQ(refusal("'\\ud800'"), ErrorCode::unsupported);
  EXPECT_EQ(refusal("{1: 2}"), ErrorCode::unsupported);
  try {
    (void)literal_eval("{'a': 1,, }");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at character 8"), std::string::npos) << e.what();
  }
}

}  // namespace
