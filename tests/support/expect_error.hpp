#pragma once
// The one way tests check a refusal: the call throws torchport::Error with
// the wanted code, and its message names what it should.

#include <string>

#include <gtest/gtest.h>

#include "torchport/core/error.hpp"

namespace torchport::test {

/// Runs `f`; expects an Error with `code` whose message contains `text`.
/// A call that returns, or throws anything else, fails the test.
template <class F>
void expect_error(F&& f, ErrorCode code, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; wanted " << error_code_name(code) << " containing '" << text << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace torchport::test
