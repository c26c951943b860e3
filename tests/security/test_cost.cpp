// Cost tests: for each class of input that once cost more than its size
// (issue 15), a generator at 1x, 4x and 16x, and an assertion that the work
// counters (detail::work(): characters printed, values visited, items moved,
// bytes inflated, bytes copied) grow at most linearly with it. They count
// work, not seconds, so a loaded machine cannot fail them. Where the cost
// was memory rather than steps, the peak resident set is the count.

#include <array>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include <torchport/torchport.hpp>

#include "io/byte_reader.hpp"
#include "pickle/unpickler.hpp"
#include "security/hostile.hpp"
#include "support/fixtures.hpp"
#include "torchport/detail/work.hpp"

namespace torchport::test {
namespace {

using detail::work;

constexpr std::array<int, 3> kScales = {1, 4, 16};

// Work at 4x may be at most 5 times the work at 1x (linear: 4; quadratic:
// 16), and likewise from 4x to 16x; `slack` absorbs constant costs.
void expect_linear(const std::array<std::uint64_t, 3>& w, const std::array<std::uint64_t, 3>& size,
                   const std::string& what, std::uint64_t slack = 4096) {
  for (int i = 0; i < 2; ++i)
    EXPECT_LE(w[i + 1], 5 * w[i] + slack) << what << ": " << w[i] << " at " << kScales[i] << "x, "
                                          << w[i + 1] << " at " << kScales[i + 1] << "x";
  for (int i = 0; i < 3; ++i)
    std::printf("%s at %2dx: %llu bytes in, %llu work\n", what.c_str(), kScales[i],
                static_cast<unsigned long long>(size[i]), static_cast<unsigned long long>(w[i]));
}

// {"v": [s, s, ... n times], (s, s, ... n times): 1} with one string s of
// 256*k bytes shared through the memo (BINPUT/BINGET), n = 256*k: a file of
// about 1.5 KB*k whose values, expanded, hold 64K*k^2 characters.
std::string shared_string_pickle(int k) {
  const auto n = static_cast<std::size_t>(256 * k);
  Pk p;
  p.op('}')
      .s("v")
      .op(']')
      .mark()
      .s(std::string(static_cast<std::size_t>(256 * k), 'x'))
      .raw("q\x01");
  for (std::size_t i = 1; i < n; ++i) p.raw("h\x01");
  p.op('e').op('s');
  p.mark();
  for (std::size_t i = 0; i < n; ++i) p.raw("h\x01");
  p.tuple().i(1).op('s');
  return p.stop();
}

Value unpickle_bytes(const std::string& bytes, const Limits& limits = {}) {
  ByteReader r(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
      "test");
  return pickle::unpickle(r, limits);
}

TEST(Cost, PrintingSharedStringsIsLinear) {
  std::array<std::uint64_t, 3> chars{}, visits{}, size{};
  for (int i = 0; i < 3; ++i) {
    const std::string pkl = shared_string_pickle(kScales[i]);
    size[i] = pkl.size();
    const Value v = unpickle_bytes(pkl);
    work().reset();
    const std::string json = to_json(v);
    const std::string text = v.repr();
    const std::string key = v.pairs()[1].first.repr();
    chars[i] = work().chars_printed.load();
    visits[i] = work().values_printed.load();
    EXPECT_LE(text.size(), Value::kReprChars + 3);
    EXPECT_LE(key.size(), Value::kReprChars + 3);
    EXPECT_NE(json.find("{\"shared\":"), std::string::npos) << "the shared list is printed once";
  }
  expect_linear(chars, size, "shared strings: characters printed");
  expect_linear(visits, size, "shared strings: values visited");
}

// A binary DAG of tuples, depth d: level i is (level i-1, level i-1), so the
// tree holds 2^d leaves in a file of ~10*d bytes.
std::string tuple_dag_pickle(int depth) {
  Pk p;
  p.op('}').s("k").s("leaf");
  // BINPUT 1, POP, BINGET 1, BINGET 1, TUPLE2: the new level replaces the old on the stack.
  for (int i = 0; i < depth; ++i) p.raw("q\x01").op('0').raw("h\x01").raw("h\x01").raw("\x86");
  p.op('s');
  return p.stop();
}

TEST(Cost, PrintingSharedContainersIsLinear) {
  std::array<std::uint64_t, 3> chars{}, visits{}, size{};
  for (int i = 0; i < 3; ++i) {
    const std::string pkl =
        tuple_dag_pickle(kScales[i]);  // depth 1, 4, 16: 2^16 leaves when expanded
    size[i] = pkl.size();
    const Value v = unpickle_bytes(pkl);
    work().reset();
    (void)to_json(v);
    (void)v.repr(1u << 20);
    (void)prune_tensors(v);
    chars[i] = work().chars_printed.load();
    visits[i] = work().values_printed.load();
  }
  expect_linear(chars, size, "tuple DAG: characters printed");
  // repr stops at its character budget; to_json and prune_tensors visit each
  // shared container once.
  EXPECT_LE(visits[2], 40u * 16 + 2 * Value::kReprChars);
}

TEST(Cost, JsonIsBoundedAndValid) {
  const Value v = unpickle_bytes(shared_string_pickle(4));
  JsonBudget b;
  b.max_chars = 2000;
  b.max_string_bytes = 100;
  const std::string j = to_json(v, 2, b);
  EXPECT_LT(j.size(), 4000u);
  EXPECT_NE(j.find("... (1024 bytes)"), std::string::npos) << j;
  EXPECT_NE(j.find("truncated"), std::string::npos) << j;
}

// A dict of n int keys set in SETITEMS batches of 1,000, as pickle writes
// them: reserving the exact size before each batch made this quadratic.
std::string batched_dict_pickle(std::int64_t n) {
  Pk p;
  p.op('}');
  for (std::int64_t i = 0; i < n; i += 1000) {
    p.mark();
    for (std::int64_t j = i; j < std::min(n, i + 1000); ++j) p.i(j).i(j);
    p.setitems();
  }
  return p.stop();
}

TEST(Cost, SetitemsBatchesAreLinear) {
  std::array<std::uint64_t, 3> moved{}, inserted{}, scanned{}, size{};
  for (int i = 0; i < 3; ++i) {
    const std::string pkl = batched_dict_pickle(16000 * kScales[i]);
    size[i] = pkl.size();
    work().reset();
    const Value v = unpickle_bytes(pkl);
    EXPECT_EQ(v.size(), static_cast<std::size_t>(16000 * kScales[i]));
    moved[i] = work().items_moved.load();
    inserted[i] = work().items_inserted.load();
    work().reset();
    (void)scan(borrow(pkl, "dict.pkl"));  // scan runs the same VM (45 s for 1M keys before)
    scanned[i] = work().items_moved.load();
  }
  expect_linear(scanned, size, "SETITEMS: items moved by growth in scan()");
  expect_linear(moved, size, "SETITEMS: items moved by growth");
  expect_linear(inserted, size, "SETITEMS: items inserted");
  EXPECT_LE(moved[2], 8u * 256000) << "growth moves each item a bounded number of times";
}

TEST(Cost, AStringOfOtherBytesIsRefusedBeforeItIsCopied) {
  // Bytes of another format tried as a pickle (open() tries the legacy
  // reader on every file whose first byte is an opcode): "T" then a 4-byte
  // length makes a BINSTRING of megabytes, here 48 MiB of bytes that are
  // not UTF-8. Refusing it must not copy it first.
  std::string pkl = "T";
  const std::uint32_t n = 48u << 20;
  for (int i = 0; i < 4; ++i) pkl.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  pkl.append(n, '\x82');
  pkl.push_back('.');
  ASSERT_TRUE(reset_peak_rss());
  const long before = status_kib("VmHWM");
  ASSERT_GT(before, 0);
  try {
    (void)unpickle_bytes(pkl);
    FAIL() << "read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::corrupt);
    EXPECT_NE(std::string(e.what()).find("not UTF-8"), std::string::npos) << e.what();
  }
  EXPECT_LT(status_kib("VmHWM") - before, 16 * 1024) << "KiB of peak growth";
}

TEST(Cost, ContainerItemsAreLimited) {
  Limits l;
  l.max_container_items = 5000;
  try {
    (void)unpickle_bytes(batched_dict_pickle(6000), l);
    FAIL() << "no limit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::limit_exceeded);
    EXPECT_NE(std::string(e.what()).find("max_container_items"), std::string::npos) << e.what();
  }
}

// A zip of k*8 deflated entries that each inflate to 16 MiB of zeros (the
// per-entry ratio floor) from 16 KB: the whole-file cap refuses it before
// anything is inflated.
std::string many_bombs_zip(int k, const std::string& bomb) {
  std::vector<ZipMember> m{{"archive/data.pkl", good_state_pickle()}};
  for (int i = 0; i < 8 * k; ++i)
    m.push_back(
        {"archive/data/b" + std::to_string(i), std::string(), 8, 16 << 20, "", 0, -1, bomb});
  m.push_back({"archive/data/0", std::string(16, '\0')});
  return zip_archive(m);
}

TEST(Cost, InflatedBytesOfAFileAreBounded) {
  const std::string bomb = deflate_raw(std::string(16 << 20, '\0'));
  std::array<std::uint64_t, 3> inflated{}, size{};
  for (int i = 0; i < 3; ++i) {
    const std::string zip = many_bombs_zip(kScales[i], bomb);
    size[i] = zip.size();
    work().reset();
    try {
      const TensorCatalog cat = open(borrow(zip, "bombs.pt"));
      (void)materialize(cat, Residence::owned);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::limit_exceeded) << e.what();
      EXPECT_NE(std::string(e.what()).find("max_inflate_ratio"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("in all"), std::string::npos) << e.what();
    }
    inflated[i] = work().bytes_inflated.load();
    EXPECT_LE(inflated[i], 100 * size[i] + (16u << 20));
  }
  expect_linear(inflated, size, "deflated entries: bytes inflated");

  Limits l;
  l.max_inflate_total_bytes = 1u << 20;
  const std::string one = zip_archive({{"archive/data.pkl", good_state_pickle(), 8},
                                       {"archive/data/0", std::string(2 << 20, '\0'), 8}});
  OpenOptions o;
  o.limits = l;
  try {
    (void)open(borrow(one, "two.pt"), o);
    ADD_FAILURE() << "max_inflate_total_bytes not applied";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_inflate_total_bytes"), std::string::npos) << e.what();
  }
}

// A torch tar file: one F32 storage of 16,384 elements, and `views` storage
// views each covering all of it.
std::string tar_with_views(int views) {
  std::string storages = Pk().i(1).stop();
  storages += Pk().mark().s("0").s("cpu").glob("torch", "FloatStorage").tuple().stop();
  std::string count;
  for (int i = 0; i < 8; ++i)
    count += static_cast<char>(i == 1 ? 0x40 : 0);  // 16384, little-endian
  storages += count + std::string(16384 * 4, '\0');
  Pk v;
  v.op(']').mark();
  for (int i = 0; i < views; ++i) v.mark().s("v" + std::to_string(i)).s("0").i(0).i(16384).tuple();
  storages += v.op('e').stop();
  return tar_archive({{"sys_info", Pk().op('}').s("little_endian").op('\x88').op('s').stop()},
                      {"storages", storages},
                      {"tensors", Pk().i(0).stop()},
                      {"pickle", Pk().op('}').stop()}});
}

TEST(Cost, StorageViewsAreLimited) {
  OpenOptions o;
  o.limits.max_materialized_bytes = 256 << 10;  // allowance: 4 x 64 KiB + 256 KiB
  std::array<std::string, 3> outcome;
  for (int i = 0; i < 3; ++i) {
    try {
      (void)open(borrow(tar_with_views(4 * kScales[i]), "views.tar"), o);
      outcome[i] = "ok";
    } catch (const Error& e) {
      outcome[i] = e.what();
      EXPECT_EQ(e.code(), ErrorCode::limit_exceeded);
      EXPECT_NE(outcome[i].find("Limits::max_materialized_bytes"), std::string::npos) << outcome[i];
    }
  }
  EXPECT_EQ(outcome[0], "ok");
  EXPECT_NE(outcome[1], "ok");
  EXPECT_NE(outcome[2], "ok");
}

// A legacy (torch < 1.6) file: one F32 storage of 16,384 elements, and a
// list of `views` storage views (torch < 0.4) each covering all of it.
std::string legacy_with_views(int views) {
  Pk obj;
  obj.op(']').mark();
  for (int i = 0; i < views; ++i) {
    obj.mark().s("storage").glob("torch", "FloatStorage").s("0").s("cpu").i(16384);
    obj.mark().s("v" + std::to_string(i)).i(0).i(16384).tuple();
    obj.tuple().op('Q');  // BINPERSID
  }
  obj.op('e');
  std::string count;
  for (int i = 0; i < 8; ++i)
    count += static_cast<char>(i == 1 ? 0x40 : 0);  // 16384, little-endian
  return legacy_head() + obj.stop() + Pk().mark().s("0").op('l').stop() + count +
         std::string(16384 * 4, '\0');
}

TEST(Cost, LegacyStorageViewsAreLimited) {
  OpenOptions o;
  o.limits.max_materialized_bytes = 256 << 10;  // allowance: 4 x 64 KiB + 256 KiB
  std::array<std::string, 3> outcome;
  for (int i = 0; i < 3; ++i) {
    try {
      const std::string file = legacy_with_views(4 * kScales[i]);  // borrowed: must outlive cat
      const TensorCatalog cat = open(borrow(file, "views.pt"), o);
      (void)materialize(cat, Residence::owned);
      outcome[i] = "ok";
    } catch (const Error& e) {
      outcome[i] = e.what();
      EXPECT_EQ(e.code(), ErrorCode::limit_exceeded);
      EXPECT_NE(outcome[i].find("Limits::max_materialized_bytes"), std::string::npos) << outcome[i];
    }
  }
  EXPECT_EQ(outcome[0], "ok");
  EXPECT_NE(outcome[1], "ok");
  EXPECT_NE(outcome[2], "ok");
}

TEST(Cost, ViewsAreWrittenOnceToPtAndLimitedElsewhere) {
  // n views of one 64 KiB storage.
  const Tensor base = Tensor::zeros(DType::F32, {16384});
  std::array<std::uint64_t, 3> pt_bytes{}, size{};
  const auto dir = temp_dir("cost-views");
  for (int i = 0; i < 3; ++i) {
    std::vector<NamedTensor> ts;
    for (int j = 0; j < 4 * kScales[i]; ++j) ts.push_back({"t" + std::to_string(j), base});
    size[i] = ts.size();
    SaveOptions s;
    s.limits.max_materialized_bytes = 256 << 10;
    const SaveResult r = save(TensorCatalog::from_tensors(Format::state_dict, ts), dir / "v.pt",
                              SaveFormat::pytorch, s);
    pt_bytes[i] = r.file_bytes;
    EXPECT_LT(r.file_bytes, 2u * 65536 + 64 * ts.size() + 4096) << "one storage, many views";
    if (i > 0) {
      try {
        (void)save(TensorCatalog::from_tensors(Format::state_dict, ts), dir / "v.safetensors",
                   SaveFormat::safetensors, s);
        ADD_FAILURE() << "safetensors written whole past the limit";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::limit_exceeded);
        EXPECT_NE(std::string(e.what()).find("max_materialized_bytes"), std::string::npos)
            << e.what();
      }
      try {
        write_record(TensorCatalog::from_tensors(Format::state_dict, ts), dir / "v.mpk", Recorder{},
                     s.limits);
        ADD_FAILURE() << "record written whole past the limit";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("max_materialized_bytes"), std::string::npos)
            << e.what();
      }
    }
  }
  std::filesystem::remove_all(dir);
  expect_linear(pt_bytes, size, ".pt of views: bytes written", 65536 + 4096);
}

}  // namespace
}  // namespace torchport::test
