// KeyRemap and KeyFilter: PCRE2 rename rules (global, chained) and
// include/exclude filters, their errors, and concurrent const use.

#include <thread>

#include <gtest/gtest.h>

#include "conversion_helpers.hpp"
#include "torchport/record/remap.hpp"

using namespace torchport;
using test::expect_error;

namespace {

TEST(KeyRemap, EmptyRemapIsTheIdentity) {
  const KeyRemap r;
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.size(), 0u);
  EXPECT_EQ(r.apply("a.b.c"), "a.b.c");
}

TEST(KeyRemap, RulesApplyInOrderToThePreviousResult) {
  KeyRemap r;
  r.add(R"(^model\.)", "")
      .add(R"((^|\.)layers\.(\d+)\.)", "$1blocks.$2.")
      .add(R"(^blocks\.)", "body.blocks.");
  EXPECT_EQ(r.size(), 3u);
  // Rule 2 only matches because rule 1 removed the prefix first, and rule 3
  // only because rule 2 produced "blocks.".
  EXPECT_EQ(r.apply("model.layers.3.weight"), "body.blocks.3.weight");
  EXPECT_EQ(r.apply("encoder.layers.12.bias"), "encoder.blocks.12.bias");
  EXPECT_EQ(r.apply("unrelated"), "unrelated");
}

TEST(KeyRemap, EveryMatchInAKeyIsReplaced) {
  KeyRemap r;
  r.add(R"(conv(\d))", "c$1");
  EXPECT_EQ(r.apply("conv1.conv2.conv3"), "c1.c2.c3");
}

TEST(KeyRemap, ReplacementSyntax) {
  KeyRemap r;
  r.add(R"((?<layer>\w+)\.(weight|bias)$)", "${layer}_$2").add("x", "$$").add(R"(^(\w))", "${1}0");
  EXPECT_EQ(r.apply("fc.weight"), "f0c_weight");
  EXPECT_EQ(r.apply("x.bias"), "$_bias");
  KeyRemap n;
  n.add("(?<n>q)", "$n$n");
  EXPECT_EQ(n.apply("aqb"), "aqqb");
}

TEST(KeyRemap, LongResultsGrowTheBuffer) {
  KeyRemap r;
  r.add(".", "0123456789");
  const std::string key(200, 'k');
  EXPECT_EQ(r.apply(key).size(), 2000u);
}

TEST(KeyRemap, Utf8AndInvalidUtf8Keys) {
  KeyRemap r;
  r.add("é", "e").add(R"(^.)", "[$0]");
  EXPECT_EQ(r.apply("café.w"), "[c]afe.w");
  KeyRemap s;
  s.add(R"(\.w$)", ".weight");
  EXPECT_EQ(s.apply("\xff\xfe.w"), "\xff\xfe.weight");  // invalid UTF-8 is still matched
}

TEST(KeyRemap, InvalidPatternNamesPatternOffsetAndMessage) {
  KeyRemap r;
  expect_error([&] { r.add("layers.(\\d+", "x"); }, ErrorCode::invalid_argument,
               {"'layers.(\\d+'", "at offset 11", "missing closing parenthesis"});
  EXPECT_TRUE(r.empty());  // a failed add adds nothing
  expect_error([&] { r.add("a{2,1}", "x"); }, ErrorCode::invalid_argument,
               {"'a{2,1}'", "out of order"});
}

TEST(KeyRemap, ReplacementReferencesAreCheckedWhenAdded) {
  KeyRemap r;
  expect_error([&] { r.add("(a)", "$2"); }, ErrorCode::invalid_argument,
               {"group 2", "1 capturing group"});
  expect_error([&] { r.add("(a)", "${nope}"); }, ErrorCode::invalid_argument, {"'nope'"});
  expect_error([&] { r.add("(a)", "$nope"); }, ErrorCode::invalid_argument, {"'nope'"});
  expect_error([&] { r.add("a", "cost: $"); }, ErrorCode::invalid_argument, {"lone '$'"});
  expect_error([&] { r.add("a", "${1"); }, ErrorCode::invalid_argument, {"closing '}'"});
  expect_error([&] { r.add("a", "$-"); }, ErrorCode::invalid_argument, {"'$' followed by '-'"});
  expect_error([&] { r.add("a", "${}"); }, ErrorCode::invalid_argument, {"empty group reference"});
  EXPECT_TRUE(r.empty());
  EXPECT_NO_THROW(r.add("(?<x>a)(b)", "${x}$2$0$$"));
}

TEST(KeyRemap, CopiesShareCompiledRulesIndependently) {
  KeyRemap a;
  a.add("a", "b");
  KeyRemap b = a;
  b.add("b", "c");
  EXPECT_EQ(a.apply("a"), "b");
  EXPECT_EQ(b.apply("a"), "c");
  KeyRemap moved = std::move(b);
  EXPECT_EQ(moved.apply("a"), "c");
}

TEST(KeyRemap, ConcurrentApplyOnAConstRemap) {
  KeyRemap r;
  r.add(R"(^model\.layers\.(\d+)\.)", "blocks.$1.").add(R"(self_attn)", "attn");
  const KeyRemap& shared = r;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        const std::string k = "model.layers." + std::to_string(i + t) + ".self_attn.q.weight";
        if (shared.apply(k) != "blocks." + std::to_string(i + t) + ".attn.q.weight") ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
}

TEST(KeyFilter, IncludesExcludesAndNone) {
  KeyFilter none;
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.accepts("anything"));

  KeyFilter f;
  f.include(R"(^encoder\.)").include("lm_head").exclude(R"(\.bias$)");
  EXPECT_FALSE(f.empty());
  EXPECT_TRUE(f.accepts("encoder.layer.0.weight"));
  EXPECT_TRUE(f.accepts("lm_head.weight"));
  EXPECT_FALSE(f.accepts("encoder.layer.0.bias"));
  EXPECT_FALSE(f.accepts("decoder.layer.0.weight"));
  EXPECT_FALSE(f.accepts("xencoder.weight"));  // anchored include

  KeyFilter only_excludes;
  only_excludes.exclude("rotary");
  EXPECT_TRUE(only_excludes.accepts("layers.0.weight"));
  EXPECT_FALSE(only_excludes.accepts("layers.0.rotary_emb.inv_freq"));
}

TEST(KeyFilter, InvalidPattern) {
  KeyFilter f;
  expect_error([&] { f.include("[unclosed"); }, ErrorCode::invalid_argument,
               {"'[unclosed'", "offset 9"});
  expect_error([&] { f.exclude("*x"); }, ErrorCode::invalid_argument, {"'*x'", "offset 0"});
  EXPECT_TRUE(f.empty());
}

}  // namespace
