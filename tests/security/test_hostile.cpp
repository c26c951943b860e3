// Every hostile and broken input of hostile.cpp ends in its error (or loads,
// for the inert ones) within the budget: 3 seconds and 256 MB above the
// baseline (x4 and x3 under sanitizers; label `budget`, run serially), measured in a child process,
// with a crash or a hang reported as such.

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <torchport/torchport.hpp>

#include "security/budget.hpp"
#include "security/hostile.hpp"
#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

// What open() and then materialize() did with the bytes.
std::string attempt(const std::string& bytes, const std::string& name) {
  const Source src = Source::borrow(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
      name);
  TensorCatalog cat;
  try {
    cat = open(src);
  } catch (const Error& e) {
    return "open " + std::string(error_code_name(e.code())) + ": " + e.what();
  }
  try {
    (void)materialize(cat, Residence::owned);
  } catch (const Error& e) {
    return "materialize " + std::string(error_code_name(e.code())) + ": " + e.what();
  }
  return "ok";
}

class Hostile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(Hostile, EndsInItsErrorWithinBudget) {
  const HostileCase& c = GetParam();
  const Measured m = run_measured([&] { return attempt(c.bytes, c.name); }, 30 * time_budget());
  ASSERT_TRUE(m.finished) << c.name << ": " << m.outcome;
  if (c.code == "ok") {
    EXPECT_EQ(m.outcome, "ok") << c.name;
  } else if (c.code == "ok_lazy") {
    EXPECT_TRUE(m.outcome.starts_with("materialize ")) << c.name << ": " << m.outcome;
    EXPECT_NE(m.outcome.find(c.message), std::string::npos) << c.name << ": " << m.outcome;
  } else if (c.code.empty()) {
    EXPECT_TRUE(m.outcome.starts_with("open ") || m.outcome.starts_with("materialize "))
        << c.name << ": " << m.outcome;
  } else {
    EXPECT_TRUE(m.outcome.starts_with("open " + c.code + ":") ||
                m.outcome.starts_with("materialize " + c.code + ":"))
        << c.name << ": expected " << c.code << ", got " << m.outcome;
    EXPECT_NE(m.outcome.find(c.message), std::string::npos) << c.name << ": " << m.outcome;
  }
  EXPECT_LE(m.seconds, time_budget()) << c.name << " took " << m.seconds << " s: " << m.outcome;
  EXPECT_LE(m.peak_mb, memory_budget_mb())
      << c.name << " used " << m.peak_mb << " MB: " << m.outcome;
  RecordProperty("seconds", std::to_string(m.seconds));
  RecordProperty("peak_mb", std::to_string(m.peak_mb));
}

INSTANTIATE_TEST_SUITE_P(All, Hostile, ::testing::ValuesIn(hostile_cases()),
                         [](const auto& p) { return p.param.name; });

// A sharded index of 200,000 names (all in one missing shard): the index is
// read in linear time (its key offsets are searched only for messages) and
// the missing shard is the error.
TEST(HostileSharded, LargeIndexEndsInItsErrorWithinBudget) {
  const auto dir = temp_dir("hostile_sharded");
  {
    std::ofstream out(dir / "model.safetensors.index.json");
    out << R"({"metadata":{},"weight_map":{)";
    for (int k = 0; k < 200000; ++k)
      out << (k ? "," : "") << "\"layer." << k << ".weight\":\"model-00001.safetensors\"";
    out << "}}";
  }
  const Measured m = run_measured(
      [&] {
        try {
          (void)open(dir);
          return std::string("ok");
        } catch (const Error& e) {
          return std::string(error_code_name(e.code())) + ": " + e.what();
        }
      },
      30 * time_budget());
  ASSERT_TRUE(m.finished) << m.outcome;
  EXPECT_TRUE(m.outcome.starts_with("io:")) << m.outcome;
  EXPECT_NE(m.outcome.find("model-00001.safetensors"), std::string::npos) << m.outcome;
  EXPECT_LE(m.seconds, time_budget()) << m.outcome;
  EXPECT_LE(m.peak_mb, memory_budget_mb()) << m.outcome;
}

// The measuring harness itself: it must see a hang, a crash and a big allocation.
TEST(Budget, SeesHangsCrashesAndMemory) {
  const Measured hang = run_measured(
      [] {
        for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return std::string();
      },
      0.5);
  EXPECT_FALSE(hang.finished);
  EXPECT_NE(hang.outcome.find("hang"), std::string::npos);
  const Measured crash = run_measured(
      [] {
        std::raise(SIGSEGV);
        return std::string();
      },
      5);
  EXPECT_FALSE(crash.finished);
  // (under ASan the signal becomes a report and exit status 1: no report either way)
  const Measured big = run_measured(
      [] {
        std::vector<char> v(300u << 20, 1);
        return std::to_string(v[12345]);
      },
      30);
  EXPECT_TRUE(big.finished);
  EXPECT_GE(big.peak_mb, 290.0);
}

}  // namespace
}  // namespace torchport::test
