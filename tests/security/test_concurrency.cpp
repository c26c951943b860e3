// The same checkpoint opened and loaded from 8 threads gives identical
// results: each thread opening the file itself, and all threads sharing one
// lazy catalogue (so deferred storages -- inflating, byte-swapping -- are
// made once, racing). Built with ThreadSanitizer by scripts/ci-hardening.sh
// (build-tsan), where a data race fails the test.

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <thread>

#include <torchport/torchport.hpp>

#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

using Digest = std::map<std::string, std::string>;  // name -> dtype, shape and SHA-256

Digest digest(const TensorCatalog& cat) {
  Digest d;
  for (const auto& t : cat.tensors())
    d[t.name] = t.tensor.description() + " " + tensor_sha256(t.tensor);
  return d;
}

constexpr int kThreads = 8;
const char* const kFiles[] = {"checkpoint.pt", "deflated.pt", "big_endian.pt", "legacy.pt",
                              "tar.pt",        "views.pt",    "torchscript.pt"};

// Runs `work(k)` on threads k = 0..7 at once and expects each to return
// `expected` without throwing.
void expect_all_threads(const char* name, const Digest& expected,
                        const std::function<Digest(int)>& work) {
  std::vector<Digest> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&, k] {
      try {
        got[static_cast<std::size_t>(k)] = work(k);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(k)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int k = 0; k < kThreads; ++k) {
    EXPECT_EQ(errors[static_cast<std::size_t>(k)], "") << name;
    EXPECT_EQ(got[static_cast<std::size_t>(k)], expected) << name << " thread " << k;
  }
}

TEST(Concurrency, EightThreadsOpenAndLoad) {
  for (const char* name : kFiles) {
    const Digest expected = digest(materialize(open(fixture(name)), Residence::owned));
    ASSERT_FALSE(expected.empty()) << name;
    expect_all_threads(name, expected, [&](int k) {
      return digest(materialize(open(fixture(name)), k % 2 ? Residence::owned : Residence::mapped));
    });
  }
}

TEST(Concurrency, EightThreadsShareOneLazyCatalogue) {
  for (const char* name : kFiles) {
    const Digest expected = digest(materialize(open(fixture(name)), Residence::owned));
    const TensorCatalog shared = open(fixture(name));  // lazy: deferred storages not made yet
    expect_all_threads(name, expected, [&](int k) {
      return k % 2 ? digest(shared) : digest(materialize(shared, Residence::owned));
    });
  }
}

}  // namespace
}  // namespace torchport::test
