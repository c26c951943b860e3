// The writers: round trips through safetensors and the PyTorch zip for
// every dtype, views, tied weights, 0-d and empty tensors (bit-exact), the
// byte layout each promises, streaming (one tensor alive at a time),
// atomicity, the zip writer and catalogue transforms.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "conversion_helpers.hpp"
#include "io/zip.hpp"
#include "io/zip_writer.hpp"
#include "support/fixtures.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/record_file.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/transform.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using test::expect_error;
using test::expect_same_tensors;

namespace {

class Writers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(std::string("writers-") +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TensorCatalog catalog(std::vector<NamedTensor> t, std::map<std::string, std::string> meta = {}) {
  return TensorCatalog::from_tensors(Format::state_dict, std::move(t), std::move(meta));
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A safetensors header is JSON: names with quotes, backslashes, control
// characters and non-ASCII letters are escaped and read back as they were.
TEST_F(Writers, SafetensorsNamesAreEscapedAndReadBack) {
  const std::vector<std::string> names = {"plain.weight",      "a\"quote",
                                          "back\\slash",       std::string("ctl\x01\x1f\n", 6),
                                          "\xc3\xa9t\xc3\xa9", "\"\\"};
  std::vector<NamedTensor> want;
  for (const std::string& n : names) want.push_back({n, Tensor::zeros(DType::F32, {2})});
  (void)save(catalog(want), dir_ / "names.safetensors", SaveFormat::safetensors);
  const TensorCatalog got = open(dir_ / "names.safetensors");
  ASSERT_EQ(got.size(), names.size());
  for (const std::string& n : names) EXPECT_NE(got.find(n), nullptr) << n;
}

// --- one writer-side enum -------------------------------------------------

// Every file layout torchport writes is one SaveFormat: save() writes each,
// its name is the one the reader reports for the file, and a path's
// extension names it.
TEST_F(Writers, EveryFormatIsOneSaveFormatThatSaveWritesAndTheReaderNames) {
  const auto want = test::every_dtype(true);  // the dtypes safetensors has
  const std::vector<std::pair<SaveFormat, std::string>> formats = {
      {SaveFormat::safetensors, "m.safetensors"}, {SaveFormat::pytorch, "m.pt"},
      {SaveFormat::torchport_mpk, "m.mpk"},       {SaveFormat::torchport_mpk_gz, "m.mpk.gz"},
      {SaveFormat::torchport_json, "m.json"},     {SaveFormat::torchport_json_gz, "m.json.gz"},
      {SaveFormat::torchport_bin, "m.tpb"},       {SaveFormat::torchport_bin_gz, "m.tpb.gz"}};
  for (const auto& [f, file] : formats) {
    const std::string name(save_format_name(f));
    EXPECT_EQ(parse_save_format(name), f) << name;
    EXPECT_EQ(save_format_for_path(dir_ / file), f) << file;
    EXPECT_EQ(save_format_for_path("m" + std::string(save_format_extension(f))), f) << name;
    EXPECT_EQ(is_record(f), name.starts_with("torchport-")) << name;
    const SaveResult r = save(catalog(want), dir_ / file, f);
    ASSERT_EQ(r.files.size(), 1u) << name;
    EXPECT_EQ(r.file_bytes, fs::file_size(dir_ / file)) << name;
    const TensorCatalog got = open(dir_ / file);
    // (A .pt reads as "pytorch-zip", the reader's name for torch.save's zip.)
    if (is_record(f) || f == SaveFormat::safetensors) {
      EXPECT_EQ(got.format_name(), name);
    }
    expect_same_tensors(got, want, /*any_order=*/true);
  }
  EXPECT_EQ(save_format_for_path(dir_ / "m.gz"), std::nullopt);
  EXPECT_EQ(save_format_for_path(dir_ / ".mpk"), std::nullopt);  // a name that is only an extension
  EXPECT_EQ(parse_save_format("torchport"), std::nullopt);
  // A record is one file, written to a file.
  SaveOptions shards;
  shards.max_shard_size = 16;
  expect_error([&] { save(catalog(want), dir_ / "s.tpb", SaveFormat::torchport_bin, shards); },
               ErrorCode::invalid_argument, {"one file"});
  expect_error([&] { save_stream(catalog(want), 1, "<stdout>", SaveFormat::torchport_mpk); },
               ErrorCode::unsupported, {"written to a file"});
  // A Recorder holds a record layout; the writers refuse any other.
  expect_error([&] { write_record(catalog(want), dir_ / "x.mpk", Recorder{SaveFormat::pytorch}); },
               ErrorCode::invalid_argument, {"record layouts, not pytorch"});
  EXPECT_FALSE(fs::exists(dir_ / "x.mpk"));
  EXPECT_EQ(recorder_name(NamedMpkGz{}), "torchport-mpk.gz");
  EXPECT_EQ(recorder_for_path("a.tpb.gz")->format, SaveFormat::torchport_bin_gz);
  EXPECT_FALSE(recorder_for_path("a.safetensors"));
}

// --- safetensors -----------------------------------------------------------

TEST_F(Writers, SafetensorsRoundTripsEveryDtypeBitExact) {
  const auto want = test::every_dtype(true);
  save(catalog(want), dir_ / "m.safetensors", SaveFormat::safetensors);
  const auto got = open(dir_ / "m.safetensors");
  EXPECT_EQ(got.format_name(), "safetensors");
  expect_same_tensors(got, want, /*any_order=*/true);
}

TEST_F(Writers, SafetensorsWritesViewsContiguousAndTiesTwice) {
  const auto want = test::views_and_ties();
  save(catalog(want), dir_ / "v.safetensors", SaveFormat::safetensors);
  const auto got = open(dir_ / "v.safetensors");
  expect_same_tensors(got, want, true);
  for (const auto& [name, t] : got.tensors()) EXPECT_TRUE(t.is_contiguous()) << name;
  EXPECT_NE(got.find("fc.weight")->storage(), got.find("tied.weight")->storage());
}

TEST_F(Writers, SafetensorsLayout) {
  const auto want = test::every_dtype(true);
  save(catalog(want, {{"source", "unit test"}}), dir_ / "m.safetensors", SaveFormat::safetensors);
  const auto bytes = test::read_bytes(dir_ / "m.safetensors");
  std::uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const std::string header(reinterpret_cast<const char*>(bytes.data()) + 8, n);
  const auto last = header.find_last_not_of(' ');
  EXPECT_EQ(header[last], '}');
  EXPECT_LT(header.size() - last - 1, 8u);  // padding is spaces only, less than 8
  const auto j = nlohmann::ordered_json::parse(header);
  auto it = j.begin();
  EXPECT_EQ(it.key(), "__metadata__");
  EXPECT_EQ((*it)["format"], "pt");
  EXPECT_EQ((*it)["source"], "unit test");
  // The catalogue's order, in the header and the data, the data tiled.
  std::vector<std::string> names;
  std::uint64_t expect_begin = 0;
  for (++it; it != j.end(); ++it) {
    names.push_back(it.key());
    const auto begin = (*it)["data_offsets"][0].get<std::uint64_t>();
    EXPECT_EQ(begin, expect_begin);
    expect_begin = (*it)["data_offsets"][1].get<std::uint64_t>();
  }
  std::vector<std::string> order;
  for (const auto& t : want) order.push_back(t.name);
  EXPECT_EQ(names, order);
  EXPECT_EQ(8 + n + expect_begin, bytes.size());
}

TEST_F(Writers, SafetensorsKeepsAnExistingFormatEntry) {
  save(catalog({{"x", Tensor::scalar(1.0f)}}, {{"format", "mlx"}}), dir_ / "m.safetensors",
       SaveFormat::safetensors);
  EXPECT_EQ(open(dir_ / "m.safetensors").metadata().at("format"), "mlx");
}

TEST_F(Writers, SafetensorsRefusesWhatItCannotHold) {
  expect_error(
      [&] {
        save(catalog({{"z", test::patterned(DType::C128, {2}, 1)}}), dir_ / "a.safetensors",
             SaveFormat::safetensors);
      },
      ErrorCode::unsupported, {"complex128", "--format pytorch"});
  expect_error(
      [&] {
        save(catalog({{"__metadata__", Tensor::scalar(1.0f)}}), dir_ / "a.safetensors",
             SaveFormat::safetensors);
      },
      ErrorCode::invalid_argument, {"collides"});
  expect_error(
      [&] {
        save(catalog({{"bad\xff", Tensor::scalar(1.0f)}}), dir_ / "a.safetensors",
             SaveFormat::safetensors);
      },
      ErrorCode::invalid_argument, {"not valid UTF-8"});
  EXPECT_TRUE(test::files_in(dir_).empty());  // no file, no temporary
}

// --- PyTorch zip -------------------------------------------------------------

TEST_F(Writers, PytorchRoundTripsEveryDtypeBitExactInOrder) {
  const auto want = test::every_dtype(false);
  save(catalog(want), dir_ / "m.pt", SaveFormat::pytorch);
  const auto got = open(dir_ / "m.pt");
  EXPECT_EQ(got.format_name(), "pytorch-zip");
  expect_same_tensors(got, want);
}

TEST_F(Writers, PytorchKeepsViewsAndSharedStorages) {
  const auto want = test::views_and_ties();
  save(catalog(want), dir_ / "v.pt", SaveFormat::pytorch);
  const auto got = open(dir_ / "v.pt");
  expect_same_tensors(got, want);
  const Tensor& w = *got.find("fc.weight");
  const Tensor& wt = *got.find("fc.weight_t");
  EXPECT_EQ(w.storage(), wt.storage());
  EXPECT_EQ(w.storage(), got.find("tied.weight")->storage());
  EXPECT_EQ(w.storage(), got.find("fc.cols")->storage());
  EXPECT_EQ(wt.strides(), (Shape{1, 6}));
  EXPECT_EQ(got.find("fc.cols")->storage_offset(), 2);
  EXPECT_EQ(got.find("fc.cols")->strides(), (Shape{6, 1}));
  EXPECT_EQ(got.find("half.tail")->storage_offset(), 3);
  EXPECT_EQ(got.find("half.tail")->storage()->nbytes(), 20u);  // the whole storage was written
  // One record per distinct storage.
  const auto zip = ZipArchive::open(Source::map_file(dir_ / "v.pt"), {});
  std::size_t records = 0;
  for (const auto& e : zip.entries()) records += e.name.starts_with("v/data/");
  EXPECT_EQ(records, 5u);  // base, halfs, scalar, empty, empty_1d
}

TEST_F(Writers, PytorchArchiveLayout) {
  save(catalog(test::every_dtype(false)), dir_ / "my.model.pt", SaveFormat::pytorch);
  const Source src = Source::map_file(dir_ / "my.model.pt");
  const auto zip = ZipArchive::open(src, {});
  ASSERT_GE(zip.entries().size(), 4u);
  EXPECT_EQ(zip.entries().front().name, "my/data.pkl");  // torch: the stem up to the first dot
  // torch 2.14's records in its order: data.pkl, .format_version,
  // .storage_alignment, byteorder, the storages numbered in order, version,
  // then .data/serialization_id (40 digits).
  std::vector<std::string> names;
  for (const auto& e : zip.entries()) names.push_back(e.name);
  std::vector<std::string> want = {"my/data.pkl", "my/.format_version", "my/.storage_alignment",
                                   "my/byteorder"};
  for (int i = 0; i < kDTypeCount; ++i) want.push_back("my/data/" + std::to_string(i));
  want.push_back("my/version");
  want.push_back("my/.data/serialization_id");
  EXPECT_EQ(names, want);
  auto text = [&](const char* name) {
    const auto* e = zip.find(name);
    EXPECT_NE(e, nullptr) << name;
    const Source s = zip.read(*e);
    return std::string(reinterpret_cast<const char*>(s.bytes().data()), s.size());
  };
  EXPECT_EQ(text("my/version"), "3\n");
  const std::string id = text("my/.data/serialization_id");
  EXPECT_EQ(id.size(), 40u);
  EXPECT_TRUE(std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) << id;
  EXPECT_EQ(text("my/byteorder"), "little");
  EXPECT_EQ(text("my/.format_version"), "1");
  EXPECT_EQ(text("my/.storage_alignment"), "64");
  const std::string pkl = text("my/data.pkl");
  EXPECT_EQ(pkl.substr(0, 2), "\x80\x02");
  EXPECT_NE(pkl.find("ccollections\nOrderedDict\n"), std::string::npos);
  EXPECT_NE(pkl.find("torch._utils\n_rebuild_tensor_v2\n"), std::string::npos);
  EXPECT_NE(pkl.find("torch._utils\n_rebuild_tensor_v3\n"), std::string::npos);  // U16 and friends
  EXPECT_NE(pkl.find("torch.storage\nUntypedStorage\n"),
            std::string::npos);  // as torch 2.x spells it
  EXPECT_NE(pkl.find("torch\nBFloat16Storage\n"), std::string::npos);
  EXPECT_EQ(pkl.find("ComplexHalfStorage"), std::string::npos);  // torch saves complex32 untyped
  EXPECT_NE(pkl.find("torch\ncomplex32\n"), std::string::npos);
  for (const auto& e : zip.entries()) {
    EXPECT_EQ(e.method, 0) << e.name;
    EXPECT_EQ(e.data_offset % 64, 0u) << e.name;
    EXPECT_NO_THROW(zip.verify_crc(e)) << e.name;
  }
}

TEST_F(Writers, PytorchStorageSharedUnderTwoDtypesBecomesUntyped) {
  const Tensor base = test::patterned(DType::F32, {4}, 5);
  const Tensor as_int(DType::I32, {4}, {1}, 0, base.storage());
  const std::vector<NamedTensor> want = {{"f", base}, {"i", as_int}};
  save(catalog(want), dir_ / "mixed.pt", SaveFormat::pytorch);
  const auto got = open(dir_ / "mixed.pt");
  expect_same_tensors(got, want);
  EXPECT_EQ(got.find("f")->storage(), got.find("i")->storage());
}

TEST_F(Writers, PytorchPickleEncodesEveryIntegerWidth) {
  // Strides of size-1 dimensions reach no element, so any value is a valid
  // view of a small storage: they exercise BININT1/BININT2/BININT/LONG1.
  const Tensor base = test::patterned(DType::F32, {70000}, 8);
  const std::vector<std::int64_t> strides = {
      1, 300, 70000, std::int64_t{1} << 31, std::int64_t{1} << 40, INT64_MAX};
  std::vector<NamedTensor> want;
  for (std::size_t i = 0; i < strides.size(); ++i)
    want.push_back({"s" + std::to_string(i),
                    Tensor(DType::F32, {1, 2}, {strides[i], 1}, 69990, base.storage())});
  save(catalog(want), dir_ / "ints.pt", SaveFormat::pytorch);
  const auto got = open(dir_ / "ints.pt");
  for (std::size_t i = 0; i < strides.size(); ++i) {
    SCOPED_TRACE(strides[i]);
    const Tensor& t = got.tensors()[i].tensor;
    EXPECT_EQ(t.strides(), (Shape{strides[i], 1}));
    EXPECT_EQ(t.storage_offset(), 69990);
    EXPECT_TRUE(t.equal(want[i].tensor));
  }
}

// --- streaming ---------------------------------------------------------------

// Tensors whose bytes are made on first use and counted while alive.
struct LiveCounter {
  std::atomic<int> live{0};
  std::atomic<int> peak{0};
  std::atomic<int> made{0};
};

Tensor counted(std::shared_ptr<LiveCounter> c, std::int64_t n, unsigned seed) {
  const Tensor pattern = test::patterned(DType::F32, {n}, seed);
  auto st = Storage::deferred(static_cast<std::uint64_t>(n) * 4, [c, pattern] {
    auto buf = std::shared_ptr<std::vector<std::byte>>(
        new std::vector<std::byte>(pattern.bytes().begin(), pattern.bytes().end()),
        [c](std::vector<std::byte>* p) {
          c->live--;
          delete p;
        });
    const int now = ++c->live;
    c->made++;
    for (int p = c->peak; now > p && !c->peak.compare_exchange_weak(p, now);) {
    }
    return Storage::borrow_mutable(std::span<std::byte>(buf->data(), buf->size()), buf);
  });
  return Tensor(DType::F32, {n}, {1}, 0, st);
}

TEST_F(Writers, StreamsOneTensorAtATime) {
  for (const SaveFormat f : {SaveFormat::safetensors, SaveFormat::pytorch}) {
    SCOPED_TRACE(std::string(save_format_name(f)));
    auto c = std::make_shared<LiveCounter>();
    std::vector<NamedTensor> ts;
    for (unsigned i = 0; i < 8; ++i) ts.push_back({"t" + std::to_string(i), counted(c, 1000, i)});
    save(catalog(std::move(ts)), dir_ / (f == SaveFormat::safetensors ? "s.safetensors" : "s.pt"),
         f);
    EXPECT_EQ(c->made, 8);
    EXPECT_EQ(c->peak, 1);
    EXPECT_EQ(c->live, 0);
  }
}

TEST_F(Writers, ACatalogueKeptByTheCallerKeepsItsTensors) {
  auto c = std::make_shared<LiveCounter>();
  std::vector<NamedTensor> ts;
  for (unsigned i = 0; i < 3; ++i) ts.push_back({"t" + std::to_string(i), counted(c, 10, i)});
  const TensorCatalog kept = catalog(std::move(ts));
  save(kept, dir_ / "k.safetensors", SaveFormat::safetensors);  // a copy: documented to keep them
  EXPECT_EQ(c->peak, 3);
}

TEST_F(Writers, ProgressIsMonotoneAndEndsAtTheTotal) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  SaveOptions o;
  o.progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  const Tensor big = test::patterned(DType::F32, {5 << 20}, 3);  // 20 MiB: two chunks
  save(catalog({{"big", big}, {"small", Tensor::scalar(1.0)}}), dir_ / "p.safetensors",
       SaveFormat::safetensors, o);
  ASSERT_GE(calls.size(), 2u);
  for (std::size_t i = 1; i < calls.size(); ++i) EXPECT_GT(calls[i].first, calls[i - 1].first);
  EXPECT_EQ(calls.back().first, big.nbytes() + 8);
  EXPECT_EQ(calls.back().second, big.nbytes() + 8);
}

TEST_F(Writers, MappedInputPagesAreReleasedAsTheyStream) {
  // 64 MiB of mapped input, written once with and once without release.
  std::vector<NamedTensor> ts;
  for (unsigned i = 0; i < 4; ++i)
    ts.push_back({"t" + std::to_string(i), test::patterned(DType::F32, {4 << 20}, i)});
  save(catalog(std::move(ts)), dir_ / "in.safetensors", SaveFormat::safetensors);
  for (const bool release : {false, true}) {
    SCOPED_TRACE(release);
    const TensorCatalog in = open(dir_ / "in.safetensors");  // kept alive: the mapping stays
    const long before = test::rss_file_kib();
    ASSERT_GE(before, 0);
    SaveOptions o;
    o.release_pages = release;
    save(in, dir_ / "out.safetensors", SaveFormat::safetensors, o);
    const long grown = test::rss_file_kib() - before;
    if (release) {
      EXPECT_LT(grown, 16 * 1024) << "kB still resident";
    } else {
      EXPECT_GT(grown, 48 * 1024) << "kB resident (the control: reading does fault pages in)";
    }
  }
}

TEST_F(Writers, MappedInputPagesStayReleasedWhenReadOutOfFileOrder) {
  // 1024 pairs of a 20-element tensor and a 15-page one (64 MiB), stored in
  // pairs; safetensors writes them by name, all the large ones first. A
  // small tensor owns no whole page, and reading any byte maps the pages
  // around it: the page cache's whole folio (up to 2 MiB, for a file read
  // sequentially in large blocks) or the kernel's fault-around window.
  // Released neighbours come back that way; released by whole pages of each
  // tensor only, 4 MiB to most of the file stayed resident.
  std::vector<NamedTensor> ts;
  for (unsigned i = 0; i < 1024; ++i) {
    const std::string n = std::to_string(10000 + i);
    ts.push_back({"small." + n, test::patterned(DType::F32, {20}, i)});
    ts.push_back({"large." + n, test::patterned(DType::F32, {15 << 10}, i)});
  }
  const fs::path in_path = dir_ / "in.pt";
  save(catalog(std::move(ts)), in_path, SaveFormat::pytorch);
  {  // Evict the file, then read it as `cp` or Python would: the page cache
     // then holds it in large folios where the file system supports them.
    const int fd = ::open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    std::vector<char> buf(16 << 20);
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
  }
  const TensorCatalog in = open(in_path);
  const long before = test::rss_file_kib();
  ASSERT_GE(before, 0);
  save(in, dir_ / "out.safetensors", SaveFormat::safetensors);
  EXPECT_LT(test::rss_file_kib() - before, 3 * 1024) << "KiB still resident";
}

// --- atomic writes -----------------------------------------------------------

TEST_F(Writers, AFailedSaveLeavesTheOldFileAndNoTemporary) {
  for (const SaveFormat f : {SaveFormat::safetensors, SaveFormat::pytorch}) {
    const fs::path out = dir_ / (f == SaveFormat::safetensors ? "m.safetensors" : "m.pt");
    save(catalog({{"old", Tensor::scalar(1.0f)}}), out, f);
    const std::string before = file_text(out);
    auto failing = Storage::deferred(8, []() -> std::shared_ptr<Storage> {
      throw Error(ErrorCode::corrupt, "record went bad");
    });
    const std::vector<NamedTensor> ts = {{"fine", Tensor::scalar(2.0f)},
                                         {"broken", Tensor(DType::F64, {1}, {1}, 0, failing)}};
    const auto e =
        expect_error([&] { save(catalog(ts), out, f); }, ErrorCode::corrupt, {"record went bad"});
    if (f == SaveFormat::safetensors) {
      EXPECT_EQ(e.key(), "broken");
    }
    EXPECT_EQ(file_text(out), before);
    EXPECT_EQ(open(out).tensors().front().name, "old");
  }
  EXPECT_EQ(test::files_in(dir_), (std::vector<std::string>{"m.pt", "m.safetensors"}));
}

TEST_F(Writers, AtomicFileCommitDiscardAndPermissions) {
  const fs::path target = dir_ / "f.bin";
  {
    AtomicFile f(target);
    const std::string s = "hello";
    f.write(std::as_bytes(std::span<const char>(s.data(), s.size())));
    EXPECT_TRUE(fs::exists(f.temp_path()));
    EXPECT_FALSE(fs::exists(target));
  }  // destroyed without commit
  EXPECT_TRUE(test::files_in(dir_).empty());

  AtomicFile f(target);
  const std::string s = "hello world";
  f.write(std::as_bytes(std::span<const char>(s.data(), s.size())));
  const std::string patch = "J";
  f.write_at(6, std::as_bytes(std::span<const char>(patch.data(), 1)));
  EXPECT_EQ(f.size(), 11u);
  f.commit();
  EXPECT_TRUE(f.committed());
  EXPECT_EQ(file_text(target), "hello Jorld");
  EXPECT_EQ(test::files_in(dir_), (std::vector<std::string>{"f.bin"}));
  expect_error([&] { f.commit(); }, ErrorCode::invalid_argument, {"committed"});

  // Replacing a file keeps its permissions.
  ::chmod(target.c_str(), 0640);
  AtomicFile g(target);
  g.write(std::as_bytes(std::span<const char>(s.data(), 2)));
  g.commit();
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(file_text(target), "he");
}

TEST_F(Writers, AtomicFileErrors) {
  expect_error([&] { AtomicFile f(dir_ / "missing" / "x.bin"); }, ErrorCode::io,
               {"cannot create a temporary file", "No such file or directory"});
  AtomicFile f(dir_ / "x.bin");
  const std::string s = "abc";
  expect_error([&] { f.write_at(2, std::as_bytes(std::span<const char>(s.data(), 3))); },
               ErrorCode::invalid_argument, {"past the 0 bytes written"});
  f.discard();
  expect_error([&] { f.write(std::as_bytes(std::span<const char>(s.data(), 3))); },
               ErrorCode::invalid_argument, {"committed or discarded"});
}

TEST_F(Writers, SavingOverTheMappedInputIsSafe) {
  const auto want = test::views_and_ties();
  save(catalog(want), dir_ / "m.pt", SaveFormat::pytorch);
  // Read m.pt (mapped) and write it back over itself.
  save(open(dir_ / "m.pt"), dir_ / "m.pt", SaveFormat::pytorch);
  expect_same_tensors(open(dir_ / "m.pt"), want);
}

// --- zip writer --------------------------------------------------------------

// Little-endian fields of a byte vector, for checking zip records by hand.
std::uint64_t le(const std::vector<std::byte>& b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | static_cast<std::uint8_t>(b.at(at + static_cast<std::size_t>(i)));
  return v;
}

TEST_F(Writers, ZipWriterForcedZip64Records) {
  // The records byte by byte (ZipArchive reads them back in
  // tests/io/test_zip.cpp, Python's zipfile in tests/interop).
  AtomicFile f(dir_ / "z.zip");
  ZipWriterOptions o;
  o.force_zip64 = true;
  o.alignment = 4096;
  ZipWriter z(f, o);
  const std::string a = "first entry", b = "second";
  z.add_entry("dir/a", std::as_bytes(std::span<const char>(a.data(), a.size())));
  z.begin_entry("dir/b\xc3\xa9", b.size());  // UTF-8 name
  z.write(std::as_bytes(std::span<const char>(b.data(), 3)));
  z.write(std::as_bytes(std::span<const char>(b.data() + 3, 3)));
  z.end_entry();
  z.finish();
  f.commit();
  const auto x = test::read_bytes(dir_ / "z.zip");
  // End of central directory, then the zip64 locator 20 bytes before it.
  const std::size_t eocd = x.size() - 22;
  ASSERT_EQ(le(x, eocd, 4), 0x06054b50u);
  ASSERT_EQ(le(x, eocd - 20, 4), 0x07064b50u);
  const std::size_t end64 = le(x, eocd - 20 + 8, 8);
  ASSERT_EQ(le(x, end64, 4), 0x06064b50u);
  EXPECT_EQ(le(x, end64 + 32, 8), 2u);  // entries
  std::size_t cd = le(x, end64 + 48, 8);
  const std::vector<std::string> names = {"dir/a", "dir/b\xc3\xa9"};
  const std::vector<std::string> data = {a, b};
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(names[i]);
    ASSERT_EQ(le(x, cd, 4), 0x02014b50u);
    EXPECT_EQ(le(x, cd + 8, 2), i == 1 ? 0x0800u : 0u);  // UTF-8 flag
    EXPECT_EQ(le(x, cd + 20, 4), 0xFFFFFFFFu);
    EXPECT_EQ(le(x, cd + 24, 4), 0xFFFFFFFFu);
    EXPECT_EQ(le(x, cd + 42, 4), 0xFFFFFFFFu);
    const std::size_t name_len = le(x, cd + 28, 2), extra_len = le(x, cd + 30, 2);
    const std::size_t ex = cd + 46 + name_len;
    ASSERT_EQ(le(x, ex, 2), 1u);  // zip64 extra id
    ASSERT_EQ(le(x, ex + 2, 2), 24u);
    EXPECT_EQ(le(x, ex + 4, 8), data[i].size());
    EXPECT_EQ(le(x, ex + 12, 8), data[i].size());
    const std::size_t local = le(x, ex + 20, 8);
    ASSERT_EQ(le(x, local, 4), 0x04034b50u);
    const std::size_t start = local + 30 + le(x, local + 26, 2) + le(x, local + 28, 2);
    EXPECT_EQ(start % 4096, 0u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(x.data()) + start, data[i].size()),
              data[i]);
    EXPECT_EQ(le(x, local + 14, 4), le(x, cd + 16, 4));  // the patched CRC matches the directory
    cd += 46 + name_len + extra_len;
  }
}

// torch's layout (miniz): a non-empty entry's local header has flag bit 3
// and zero CRC-32 and sizes, and a data descriptor follows its data; an
// empty entry has neither; the next local header follows at once. torch
// 2.x's load computes record offsets from exactly this.
TEST_F(Writers, ZipWriterTorchLayoutAsMiniz) {
  for (const bool force64 : {false, true}) {
    SCOPED_TRACE(force64 ? "zip64" : "plain");
    AtomicFile f(dir_ / "t.zip");
    ZipWriterOptions o;
    o.torch_layout = true;
    o.force_zip64 = force64;
    ZipWriter z(f, o);
    const std::string a = "torch's first record", b = "second";
    z.add_entry("t/a", std::as_bytes(std::span<const char>(a.data(), a.size())));
    z.add_entry("t/empty", {});
    z.add_entry("t/b", std::as_bytes(std::span<const char>(b.data(), b.size())));
    z.finish();
    f.commit();
    const auto x = test::read_bytes(dir_ / "t.zip");
    std::size_t local = 0;
    const std::vector<std::string> data = {a, "", b};
    for (const auto& d : data) {
      SCOPED_TRACE(d);
      ASSERT_EQ(le(x, local, 4), 0x04034b50u);
      EXPECT_EQ(le(x, local + 6, 2), d.empty() ? 0u : 8u);  // bit 3
      EXPECT_EQ(le(x, local + 14, 4), 0u);                  // CRC-32 follows
      if (!d.empty() && !force64) {
        EXPECT_EQ(le(x, local + 18, 4), 0u);
        EXPECT_EQ(le(x, local + 22, 4), 0u);
      }
      const std::size_t extra = le(x, local + 28, 2);
      const std::size_t start = local + 30 + le(x, local + 26, 2) + extra;
      EXPECT_EQ(start % 64, 0u);
      // The extra fields: zip64 sizes (when forced), then torch's padding.
      const std::size_t pad_at = local + 30 + le(x, local + 26, 2) + (force64 ? 20 : 0);
      EXPECT_EQ(le(x, pad_at, 2), 0x4246u);
      EXPECT_EQ(pad_at + 4 + le(x, pad_at + 2, 2), start);
      std::size_t next = start + d.size();
      if (!d.empty()) {
        EXPECT_EQ(le(x, next, 4), 0x08074b50u);
        EXPECT_EQ(le(x, next + 4, 4),
                  crc32_z(0, reinterpret_cast<const Bytef*>(d.data()), d.size()));
        EXPECT_EQ(le(x, next + 8, force64 ? 8 : 4), d.size());
        next += force64 ? 24 : 16;
      }
      local = next;
    }
    EXPECT_EQ(le(x, local, 4), 0x02014b50u);  // the directory follows the last record
    const auto zip = ZipArchive::open(Source::map_file(dir_ / "t.zip"), {});
    ASSERT_EQ(zip.entries().size(), 3u);
    for (const auto& e : zip.entries()) EXPECT_NO_THROW(zip.verify_crc(e)) << e.name;
  }
}

TEST_F(Writers, ZipWriterOutputReadsBackWithoutZip64) {
  AtomicFile f(dir_ / "z.zip");
  ZipWriter z(f, ZipWriterOptions{4096, false});
  const std::string a = "payload";
  z.add_entry("x/a", std::as_bytes(std::span<const char>(a.data(), a.size())));
  z.add_entry("x/empty", {});
  z.finish();
  f.commit();
  const auto zip = ZipArchive::open(Source::map_file(dir_ / "z.zip"), {});
  ASSERT_EQ(zip.entries().size(), 2u);
  for (const auto& e : zip.entries()) {
    EXPECT_EQ(e.data_offset % 4096, 0u);
    EXPECT_NO_THROW(zip.verify_crc(e));
  }
  const Source s = zip.read(zip.entries()[0]);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(s.bytes().data()), s.size()), "payload");
}

TEST_F(Writers, ZipWriterMisuse) {
  AtomicFile f(dir_ / "z.zip");
  expect_error(
      [&] {
        ZipWriter(f, ZipWriterOptions{48, false});
      },
      ErrorCode::invalid_argument, {"power of two"});
  ZipWriter z(f);
  const std::string a = "abc";
  const auto bytes = std::as_bytes(std::span<const char>(a.data(), a.size()));
  expect_error([&] { z.write(bytes); }, ErrorCode::invalid_argument, {"without an open entry"});
  z.begin_entry("a", 2);
  expect_error([&] { z.write(bytes); }, ErrorCode::invalid_argument,
               {"declared 2 bytes", "3 were written"});
  expect_error([&] { z.end_entry(); }, ErrorCode::invalid_argument, {"only 0 were written"});
  expect_error([&] { z.begin_entry("b", 1); }, ErrorCode::invalid_argument, {"'a' is open"});
  z.write(bytes.first(2));
  z.end_entry();
  expect_error([&] { z.add_entry("a", bytes); }, ErrorCode::invalid_argument,
               {"duplicate zip entry name"});
  expect_error([&] { z.add_entry("", bytes); }, ErrorCode::invalid_argument, {"name of 0 bytes"});
  z.finish();
  expect_error([&] { z.add_entry("c", bytes); }, ErrorCode::invalid_argument, {"after finish"});
}

// --- transforms --------------------------------------------------------------

TEST_F(Writers, TransformSelectsFiltersRenamesAndCastsLazily) {
  const Tensor w = test::patterned(DType::F32, {2, 3}, 1);
  const Tensor ids = Tensor::from<std::int64_t>({1, 2, 3}, {3});
  const auto src = TensorCatalog::from_value(Format::state_dict, [&] {
    Value sd = Value::dict();
    sd.insert(Value::str("enc.w"), Value::tensor(w));
    sd.insert(Value::str("enc.wt"), Value::tensor(w.transpose(0, 1)));
    sd.insert(Value::str("enc.ids"), Value::tensor(ids));
    sd.insert(Value::str("dec.w"), Value::tensor(w));
    Value root = Value::dict();
    root.insert(Value::str("state_dict"), sd);
    root.insert(Value::str("epoch"), Value::integer(3));
    return root;
  }());
  TransformOptions o;
  o.top_level_key = "state_dict";
  o.keep = [](std::string_view k) { return k.starts_with("enc."); };
  o.rename = [](std::string_view k) { return "encoder." + std::string(k.substr(4)); };
  o.dtype = DType::BF16;
  const auto out = transform(src, o);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out.tensors()[0].name, "encoder.w");
  EXPECT_EQ(out.tensors()[1].name, "encoder.wt");
  EXPECT_EQ(out.tensors()[2].name, "encoder.ids");
  const Tensor& cw = *out.find("encoder.w");
  const Tensor& cwt = *out.find("encoder.wt");
  EXPECT_EQ(cw.dtype(), DType::BF16);
  EXPECT_EQ(out.find("encoder.ids")->dtype(), DType::I64);  // integers keep theirs
  EXPECT_TRUE(cw.storage()->pending());                     // nothing converted yet
  EXPECT_EQ(cw.storage(), cwt.storage());                   // tied views share one cast
  EXPECT_EQ(cwt.strides(), (Shape{1, 3}));
  EXPECT_TRUE(cw.equal(w.to(DType::BF16)));
  EXPECT_TRUE(cwt.equal(w.transpose(0, 1).to(DType::BF16)));
  EXPECT_TRUE(out.find("encoder.ids")->equal(ids));
}

TEST_F(Writers, TransformCastsAViewAloneOnItsStorageByItself) {
  const Tensor base = test::patterned(DType::F64, {100}, 4);
  const auto out = transform(catalog({{"v", base.narrow(0, 10, 5)}}), [] {
    TransformOptions o;
    o.dtype = DType::F32;
    return o;
  }());
  EXPECT_EQ(out.find("v")->storage()->nbytes(), 20u);
  EXPECT_TRUE(out.find("v")->equal(base.narrow(0, 10, 5).to(DType::F32)));
}

TEST_F(Writers, TransformErrors) {
  const auto cat = catalog({{"a.x", Tensor::scalar(1.0f)}, {"b.x", Tensor::scalar(2.0f)}});
  TransformOptions collide;
  collide.rename = [](std::string_view k) { return std::string(k.substr(2)); };
  expect_error([&] { transform(cat, collide); }, ErrorCode::invalid_argument,
               {"both 'a.x' and 'b.x'", "'x'"});
  TransformOptions empty;
  empty.rename = [](std::string_view) { return std::string(); };
  expect_error([&] { transform(cat, empty); }, ErrorCode::invalid_argument, {"empty name"});
  TransformOptions to_int;
  to_int.dtype = DType::I32;
  expect_error([&] { transform(cat, to_int); }, ErrorCode::invalid_argument,
               {"only floating dtypes"});
  TransformOptions to_f4;
  to_f4.dtype = DType::F4;
  expect_error([&] { transform(cat, to_f4); }, ErrorCode::invalid_argument, {"float4_e2m1fn_x2"});
  TransformOptions key;
  key.top_level_key = "c";
  expect_error([&] { transform(cat, key); }, ErrorCode::missing_key, {"'a', 'b'"});
}

TEST_F(Writers, CastThenSaveStreams) {
  auto c = std::make_shared<LiveCounter>();
  std::vector<NamedTensor> ts;
  for (unsigned i = 0; i < 6; ++i) ts.push_back({"t" + std::to_string(i), counted(c, 1000, i)});
  TransformOptions o;
  o.dtype = DType::F16;
  // As the tool does: the input catalogue is a temporary of the transform
  // statement, so only the transformed catalogue holds the tensors.
  TensorCatalog cast = transform(catalog(std::move(ts)), o);
  save(std::move(cast), dir_ / "c.safetensors", SaveFormat::safetensors);
  EXPECT_EQ(c->made, 6);
  EXPECT_EQ(c->peak, 1);
  EXPECT_EQ(c->live, 0);
  const auto got = open(dir_ / "c.safetensors");
  for (const auto& [n, t] : got.tensors()) EXPECT_EQ(t.dtype(), DType::F16);
}

// --- the whole object in a .pt ---------------------------------------------

// keep_tree writes the tree as it is: values, shared references, and
// objects of classes on the allow-list; others (code torch would import to
// load the file) are refused before a byte is written, unless allowed.
TEST_F(Writers, WholeObjectKeepsValuesAndRefusesUnknownClasses) {
  const Tensor w = Tensor::from<float>({1, 2, 3, 4}, {2, 2});
  const Value args = Value::dict({{Value::str("lr"), Value::real(0.5)}});
  Value obj = Value::object(Global{"argparse", "Namespace"}, Value::tuple());
  obj.set_state(Value::dict({{Value::str("seed"), Value::integer(3)}}));
  const auto tree = [&](const Value& extra) {
    return Value::dict({{Value::str("w"), Value::tensor(w)},
                        {Value::str("w_view"), Value::tensor(w.narrow(0, 1, 1))},
                        {Value::str("args"), args},
                        {Value::str("again"), args},
                        {Value::str("big"), Value::big_integer(std::string(40, '\x7f'))},
                        {Value::str("raw"), Value::bytes(std::string("\x00\xff", 2))},
                        {Value::str("extra"), extra}});
  };
  SaveOptions o;
  o.keep_tree = true;
  const fs::path out = dir_ / "tree.pt";
  save(TensorCatalog::from_value(Format::state_dict, tree(Value::integer(1))), out,
       SaveFormat::pytorch, o);
  const TensorCatalog back = open(out);
  EXPECT_EQ(to_json(back.root()), to_json(tree(Value::integer(1))));
  EXPECT_EQ(back.root().find("args")->identity(), back.root().find("again")->identity());
  EXPECT_EQ(back.find("w_view")->storage().get(), back.find("w")->storage().get());

  expect_error(
      [&] {
        save(TensorCatalog::from_value(Format::state_dict, tree(obj)), out, SaveFormat::pytorch, o);
      },
      ErrorCode::unsupported, {"argparse.Namespace"});
  EXPECT_EQ(to_json(open(out).root()), to_json(tree(Value::integer(1))));  // the old file stays
  o.allow = {"argparse.*"};
  save(TensorCatalog::from_value(Format::state_dict, tree(obj)), out, SaveFormat::pytorch, o);
  EXPECT_EQ(to_json(open(out).root()), to_json(tree(obj)));
}

}  // namespace
