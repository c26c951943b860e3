// Sweeps over damaged copies of real checkpoints: the zip fixture cut at
// 1,000 prefix lengths and changed by 10,000 seeded single-byte mutations,
// plus smaller mutation sweeps of the other formats. Every copy must end in
// a torchport::Error or load completely (materialised); anything else (a
// crash, a sanitizer report, another exception) fails, and so does a copy
// that takes longer than a few seconds (a hang).

#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include <torchport/torchport.hpp>

#include "security/budget.hpp"
#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

struct Tally {
  std::size_t errors = 0, loads = 0;
  double worst_seconds = 0;
};

// Opens the bytes (sniffed), materialises and reads every tensor.
void one(const std::vector<std::byte>& bytes, const std::string& name, Tally& t) {
  const double t0 = process_cpu_seconds();
  try {
    const TensorCatalog cat = open(Source::borrow(bytes, name));
    const TensorCatalog owned = materialize(cat, Residence::owned);
    for (const auto& nt : owned.tensors()) (void)tensor_sha256(nt.tensor);
    (void)to_json(cat.values());
    ++t.loads;
  } catch (const Error&) {
    ++t.errors;
  }
  const double s = process_cpu_seconds() - t0;  // CPU time: a loaded machine cannot fail it
  t.worst_seconds = std::max(t.worst_seconds, s);
  ASSERT_LT(s, 3 * time_budget() + 6.0)
      << name << " took " << s << " s";  // a hang, not a slow machine
}

void mutations(const std::vector<std::byte>& original, std::size_t count, std::uint64_t seed,
               Tally& t) {
  std::mt19937_64 rng(seed);
  for (std::size_t k = 0; k < count && !::testing::Test::HasFatalFailure(); ++k) {
    std::vector<std::byte> b = original;
    const std::size_t at = static_cast<std::size_t>(rng() % b.size());
    const auto old = static_cast<unsigned>(b[at]);
    b[at] = static_cast<std::byte>((old + 1 + rng() % 255) & 0xff);  // never the same byte
    one(b, "mutation " + std::to_string(k) + " at byte " + std::to_string(at), t);
  }
}

TEST(Sweep, ZipTruncatedAt1000Lengths) {
  const auto bytes = read_bytes(fixture("checkpoint.pt"));
  ASSERT_GT(bytes.size(), 1000u);
  Tally t;
  for (std::size_t k = 0; k < 1000 && !HasFatalFailure(); ++k) {
    const std::size_t len = k * bytes.size() / 1000;  // 0 .. size-1, all distinct
    one(std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len)),
        "prefix of " + std::to_string(len) + " bytes", t);
  }
  EXPECT_EQ(t.errors + t.loads, 1000u);
  EXPECT_GT(t.errors, 990u);  // a zip cut anywhere loses its directory
  std::printf("truncations: %zu errors, %zu loads, worst %.3f s\n", t.errors, t.loads,
              t.worst_seconds);
}

TEST(Sweep, Zip10000Mutations) {
  Tally t;
  mutations(read_bytes(fixture("checkpoint.pt")), 10000, 0x70726368ull, t);
  EXPECT_EQ(t.errors + t.loads, 10000u);
  // Most bytes are tensor data (a mutation there still loads); some are
  // structure (a mutation there is an error).
  EXPECT_GT(t.loads, 100u);
  EXPECT_GT(t.errors, 100u);
  std::printf("zip mutations: %zu errors, %zu loads, worst %.3f s\n", t.errors, t.loads,
              t.worst_seconds);
}

TEST(Sweep, OtherFormatsMutated) {
  const auto dir = temp_dir("sweep_formats");
  const TensorCatalog views = open(fixture("views.pt"));
  save(views, dir / "m.safetensors", SaveFormat::safetensors);
  write_record(views, dir / "m.mpk", *recorder_for_path(dir / "m.mpk"));
  write_record(views, dir / "m.json", *recorder_for_path(dir / "m.json"));
  write_record(views, dir / "m.tpb.gz", *recorder_for_path(dir / "m.tpb.gz"));
  const std::vector<std::filesystem::path> files = {fixture("legacy.pt"),
                                                    fixture("tar.pt"),
                                                    fixture("torchscript_frozen.pt"),
                                                    fixture("deflated.pt"),
                                                    fixture("big_endian.pt"),
                                                    fixture("plain_protocol0.pkl"),
                                                    dir / "m.safetensors",
                                                    dir / "m.mpk",
                                                    dir / "m.json",
                                                    dir / "m.tpb.gz"};
  std::uint64_t seed = 1;
  for (const auto& f : files) {
    Tally t;
    const auto bytes = read_bytes(f);
    mutations(bytes, 1000, seed++, t);
    for (std::size_t len = 0; len < bytes.size() && !HasFatalFailure();
         len += 1 + bytes.size() / 200)
      one(std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len)),
          f.filename().string() + " cut at " + std::to_string(len), t);
    std::printf("%s: %zu errors, %zu loads, worst %.3f s\n", f.filename().c_str(), t.errors,
                t.loads, t.worst_seconds);
    EXPECT_GT(t.errors, 0u) << f;
  }
}

}  // namespace
}  // namespace torchport::test
