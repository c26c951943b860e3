// The zip directory parser: archives built byte by byte (every refusal has
// its own damaged input), zip64 records as our writer forces them, and the
// same answers from a mapped file (local headers read with pread) as from
// memory. The fixtures in tests/fixtures/bad cover torch-shaped archives.

#include <cstring>
#include <optional>

#include <gtest/gtest.h>

#include "io/zip.hpp"
#include "io/zip_writer.hpp"
#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/io/atomic_file.hpp"

namespace fs = std::filesystem;
using namespace torchport;

namespace {

// Little-endian field appender.
struct Le {
  std::vector<std::byte> b;
  Le& u16(std::uint64_t v) { return put(v, 2); }
  Le& u32(std::uint64_t v) { return put(v, 4); }
  Le& u64(std::uint64_t v) { return put(v, 8); }
  Le& str(std::string_view s) {
    for (char c : s) b.push_back(static_cast<std::byte>(c));
    return *this;
  }
  Le& add(const std::vector<std::byte>& o) {
    b.insert(b.end(), o.begin(), o.end());
    return *this;
  }
  Le& put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
    return *this;
  }
};

// One entry of a hand-built archive; every field can be made to lie.
struct Spec {
  std::string name{};
  std::string data{};
  std::uint16_t flags = 0;
  std::uint16_t method = 0;
  std::optional<std::string> local_name{};
  std::optional<std::uint16_t> local_method{};
  std::optional<std::uint32_t> local_crc{};
  std::uint32_t crc = 0x12345678;
  std::optional<std::uint64_t> central_size{};  // the uncompressed size in the central header
  std::string local_extra{};
  std::optional<std::uint64_t> offset{};  // the local header offset the directory claims
  bool zip64_sizes = false;               // central sizes all ones, real ones in a zip64 extra
  std::string central_extra{};            // used as given when set (overrides zip64_sizes)
  std::string trailer{};                  // bytes after the data (a data descriptor, or junk)
};

struct Options {
  std::optional<std::uint64_t> count{};  // entries the end record declares
  std::optional<std::uint64_t> cd_offset{};
  std::uint16_t disk = 0;
  std::string comment{};
  bool zip64_end = false;
  std::string lead{};        // bytes before the first local header
  std::string before_end{};  // bytes between the central directory and the end record
  std::string after{};       // bytes after the end record's comment
};

std::vector<std::byte> build(const std::vector<Spec>& specs, const Options& o = {}) {
  Le out, central;
  out.str(o.lead);
  for (const auto& s : specs) {
    const std::uint64_t at = out.b.size();
    const std::string lname = s.local_name.value_or(s.name);
    const bool descriptor = (s.flags & 8u) != 0;
    out.u32(0x04034b50)
        .u16(20)
        .u16(s.flags)
        .u16(s.local_method.value_or(s.method))
        .u16(0)
        .u16(0)
        .u32(descriptor ? 0 : s.local_crc.value_or(s.crc))
        .u32(descriptor ? 0 : s.data.size())
        .u32(descriptor ? 0 : s.data.size())
        .u16(lname.size())
        .u16(s.local_extra.size())
        .str(lname)
        .str(s.local_extra)
        .str(s.data)
        .str(s.trailer);
    const std::uint64_t size = s.central_size.value_or(s.data.size());
    std::string extra = s.central_extra;
    if (s.zip64_sizes && extra.empty()) {
      Le x;
      x.u16(1).u16(16).u64(size).u64(size);
      extra.assign(reinterpret_cast<const char*>(x.b.data()), x.b.size());
    }
    const std::uint64_t csize32 = s.zip64_sizes ? 0xFFFFFFFFu : s.data.size();
    const std::uint64_t size32 = s.zip64_sizes ? 0xFFFFFFFFu : size;
    central.u32(0x02014b50)
        .u16(20)
        .u16(20)
        .u16(s.flags)
        .u16(s.method)
        .u16(0)
        .u16(0)
        .u32(s.crc)
        .u32(csize32)
        .u32(size32)
        .u16(s.name.size())
        .u16(extra.size())
        .u16(0)
        .u16(0)
        .u16(0)
        .u32(0)
        .u32(s.offset.value_or(at))
        .str(s.name)
        .str(extra);
  }
  const std::uint64_t cd_offset = o.cd_offset.value_or(out.b.size());
  const std::uint64_t cd_size = central.b.size();
  const std::uint64_t n = o.count.value_or(specs.size());
  out.add(central.b);
  out.str(o.before_end);
  if (o.zip64_end) {
    const std::uint64_t end64 = out.b.size();
    out.u32(0x06064b50)
        .u64(44)
        .u16(45)
        .u16(45)
        .u32(0)
        .u32(0)
        .u64(n)
        .u64(n)
        .u64(cd_size)
        .u64(cd_offset);
    out.u32(0x07064b50).u32(0).u64(end64).u32(1);
    out.u32(0x06054b50).u16(0).u16(0).u16(0xFFFF).u16(0xFFFF).u32(0xFFFFFFFFu).u32(0xFFFFFFFFu);
  } else {
    out.u32(0x06054b50).u16(o.disk).u16(o.disk).u16(n).u16(n).u32(cd_size).u32(cd_offset);
  }
  out.u16(o.comment.size()).str(o.comment).str(o.after);
  return out.b;
}

ZipArchive open_bytes(const std::vector<std::byte>& bytes, const Limits& limits = {}) {
  return ZipArchive::open(Source::from_buffer(bytes, "test.zip"), limits);
}

void expect_refused(const std::vector<std::byte>& bytes, ErrorCode code,
                    const std::string& message) {
  try {
    open_bytes(bytes);
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

std::string text(const ZipArchive& z, const ZipEntry& e) {
  const Source s = z.read(e);
  return {reinterpret_cast<const char*>(s.bytes().data()), static_cast<std::size_t>(s.size())};
}

TEST(Zip, ReadsEntriesAndTheirDataOffsets) {
  const auto z = open_bytes(build({{.name = "a/x", .data = "hello", .local_extra = "pad-pad!"},
                                   {.name = "a/y", .data = "world!"}},
                                  {.comment = "a comment after the end record"}));
  ASSERT_EQ(z.entries().size(), 2u);
  const ZipEntry* x = z.find("a/x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->data_offset, 30u + 3 + 8);  // the local extra field counts, the central has none
  EXPECT_EQ(text(z, *x), "hello");
  EXPECT_EQ(text(z, *z.find("a/y")), "world!");
  EXPECT_EQ(z.find("a/z"), nullptr);
  EXPECT_EQ(z.find("a/"), nullptr);
}

TEST(Zip, EmptyArchive) {
  EXPECT_TRUE(open_bytes(build({})).entries().empty());
}

TEST(Zip, DataDescriptorFlagLeavesLocalSizesUnchecked) {
  // torch's writer sets bit 3 and leaves CRC and sizes zero in local headers.
  const auto z = open_bytes(build({{.name = "d", .data = "abc", .flags = 8}}));
  EXPECT_EQ(text(z, z.entries()[0]), "abc");
}

TEST(Zip, ManyEntriesFromAMappedFileMatchMemory) {
  // Local headers of a mapped file are read with pread in windows: entries
  // small and large, so some headers share a window and some do not.
  std::vector<Spec> specs;
  for (int i = 0; i < 300; ++i)
    specs.push_back(
        {.name = "archive/data/" + std::to_string(i),
         .data = std::string(i % 7 == 0 ? 9000 : 40 + i, static_cast<char>('a' + i % 26)),
         .local_extra = std::string(static_cast<std::size_t>(i % 5) * 13, 'Z')});
  const auto bytes = build(specs);
  const fs::path dir = test::temp_dir("zip-mapped");
  test::write_bytes(dir / "m.zip", bytes);
  const auto mapped = ZipArchive::open(Source::map_file(dir / "m.zip"), {});
  const auto memory = open_bytes(bytes);
  ASSERT_EQ(mapped.entries().size(), 300u);
  for (std::size_t i = 0; i < 300; ++i) {
    const ZipEntry& a = mapped.entries()[i];
    const ZipEntry& b = memory.entries()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.data_offset, b.data_offset);
    EXPECT_EQ(text(mapped, a), specs[i].data);
    EXPECT_EQ(mapped.find(a.name), &a);
  }
  fs::remove_all(dir);
}

TEST(Zip, OpeningAMappedFileLeavesTheEntriesDataUnmapped) {
  // 4096 entries of 16 KiB, each followed by a data descriptor (as torch
  // writes them). Opening reads every local header and descriptor; through
  // the mapping, that maps at least one page per entry (16 MiB; more, as
  // the kernel maps around a fault), and the tensor data around it stays
  // resident in the loader. With pread only the central directory and the
  // end record are touched: its ~300 KiB plus, at worst, the two folios
  // around it (2 MiB each).
  constexpr int kEntries = 4096;
  constexpr std::uint32_t kSize = 16 << 10;
  Le d;
  d.u32(0x08074b50).u32(0x12345678).u32(kSize).u32(kSize);
  const std::string desc(reinterpret_cast<const char*>(d.b.data()), d.b.size());
  std::vector<Spec> specs;
  for (int i = 0; i < kEntries; ++i)
    specs.push_back({.name = "archive/data/" + std::to_string(i),
                     .data = std::string(kSize, static_cast<char>('a' + i % 26)),
                     .flags = 8,
                     .trailer = desc});
  const fs::path dir = test::temp_dir("zip-resident");
  test::write_bytes(dir / "m.zip", build(specs));
  const Source source = Source::map_file(dir / "m.zip");
  const long before = test::rss_file_kib();
  ASSERT_GE(before, 0);
  const auto z = ZipArchive::open(source, {});
  ASSERT_EQ(z.entries().size(), static_cast<std::size_t>(kEntries));
  const long opened = test::rss_file_kib();
  EXPECT_LT(opened - before, 8 * 1024) << "KiB of the file became resident in opening it";
  // The control: reading each descriptor through the mapping does map it.
  unsigned sum = 0;
  for (const ZipEntry& e : z.entries())
    sum += static_cast<unsigned>(
        *static_cast<const volatile std::byte*>(&source.bytes()[e.data_offset + kSize]));
  EXPECT_EQ(sum, kEntries * 0x50u);
  EXPECT_GT(test::rss_file_kib() - opened, 12 * 1024) << "KiB mapped by touching every descriptor";
  fs::remove_all(dir);
}

TEST(Zip, ReadsZip64RecordsOurWriterForces) {
  const fs::path dir = test::temp_dir("zip64");
  AtomicFile f(dir / "z.zip");
  ZipWriterOptions o;
  o.force_zip64 = true;
  ZipWriter w(f, o);
  const std::string a = "first entry", b = "second";
  w.add_entry("dir/a", std::as_bytes(std::span<const char>(a.data(), a.size())));
  w.add_entry("dir/b", std::as_bytes(std::span<const char>(b.data(), b.size())));
  w.finish();
  f.commit();
  const auto z = ZipArchive::open(Source::map_file(dir / "z.zip"), {});
  ASSERT_EQ(z.entries().size(), 2u);
  EXPECT_EQ(text(z, *z.find("dir/a")), a);
  EXPECT_EQ(text(z, *z.find("dir/b")), b);
  for (const auto& e : z.entries()) {
    EXPECT_EQ(e.data_offset % 64, 0u);
    EXPECT_NO_THROW(z.verify_crc(e));
  }
  fs::remove_all(dir);
}

TEST(Zip, ReadsHandMadeZip64) {
  const auto z = open_bytes(
      build({{.name = "big", .data = "zip64 sizes", .zip64_sizes = true}}, {.zip64_end = true}));
  ASSERT_EQ(z.entries().size(), 1u);
  EXPECT_EQ(z.entries()[0].size, 11u);
  EXPECT_EQ(text(z, z.entries()[0]), "zip64 sizes");
}

TEST(Zip, RefusesDamagedEndRecords) {
  const auto good = build({{.name = "x", .data = "abc"}});
  expect_refused(std::vector<std::byte>(good.begin(), good.end() - 1), ErrorCode::not_a_checkpoint,
                 "end-of-central-directory");
  expect_refused({}, ErrorCode::not_a_checkpoint, "end-of-central-directory");
  expect_refused(build({{.name = "x", .data = "abc"}}, {.disk = 1}), ErrorCode::unsupported,
                 "multi-disk");
  expect_refused(build({{.name = "x", .data = "abc"}}, {.cd_offset = 1000}), ErrorCode::corrupt,
                 "does not lie before its end record");
  expect_refused(build({{.name = "x", .data = "abc"}}, {.count = 2}), ErrorCode::corrupt,
                 "ends early");
  // A count the directory's bytes cannot hold is refused before anything is reserved.
  expect_refused(build({{.name = "x", .data = "abc"}}, {.count = 60000}), ErrorCode::corrupt,
                 "cannot hold");
  // The end record asks for zip64 values but there is no locator.
  auto no_locator = build({{.name = "x", .data = "abc"}});
  for (std::size_t i = no_locator.size() - 10; i < no_locator.size() - 2; ++i)
    no_locator[i] = std::byte{0xFF};
  expect_refused(no_locator, ErrorCode::corrupt, "no zip64 locator");
  // A locator pointing at no zip64 end record.
  auto bad_locator = build({{.name = "x", .data = "abc"}}, {.zip64_end = true});
  const std::size_t locator = bad_locator.size() - 22 - 20;
  bad_locator[locator + 8] = std::byte{3};
  expect_refused(bad_locator, ErrorCode::corrupt, "points to no zip64");
}

TEST(Zip, RefusesDamagedCentralHeaders) {
  expect_refused(build({{.name = "x", .data = "abc", .flags = 1}}), ErrorCode::unsupported,
                 "encrypted");
  expect_refused(build({{.name = "x", .data = "abc", .method = 12}}), ErrorCode::unsupported,
                 "compression method 12");
  // Bit 13 (local header values masked): miniz refuses the archive, Python's
  // zipfile ignores the bit.
  const auto masked = build({{.name = "x", .data = "abc", .flags = 1u << 13}});
  expect_refused(masked, ErrorCode::unsupported, "general purpose bit 13");
  EXPECT_NO_THROW(
      ZipArchive::open(Source::from_buffer(masked, "test.zip"), {}, ZipMethods::python));
  expect_refused(build({{.name = "x", .data = "abc", .central_size = 4}}), ErrorCode::corrupt,
                 "stored entry declares");
  expect_refused(build({{.name = "x", .data = "a"}, {.name = "x", .data = "b"}}),
                 ErrorCode::ambiguous, "lists 'x' twice");
  // Sizes of all ones need the zip64 extra field, whole.
  expect_refused(build({{.name = "x",
                         .data = "abc",
                         .zip64_sizes = true,
                         .central_extra = std::string("\x09\x00\x00\x00", 4)}}),
                 ErrorCode::corrupt, "no zip64 extra field");
  expect_refused(
      build({{.name = "x",
              .data = "abc",
              .zip64_sizes = true,
              .central_extra = std::string("\x01\x00\x08\x00", 4) + std::string(8, '\x03')}}),
      ErrorCode::corrupt, "lacks a size");
  expect_refused(
      build({{.name = "x",
              .data = "abc",
              .zip64_sizes = true,
              .central_extra = std::string("\x01\x00\x20\x00", 4) + std::string(8, '\x03')}}),
      ErrorCode::corrupt, "runs past its header");
}

TEST(Zip, RefusesLocalHeadersThatDisagree) {
  expect_refused(build({{.name = "x", .data = "abc", .local_name = "y"}}), ErrorCode::corrupt,
                 "different file");
  expect_refused(build({{.name = "x", .data = "abc", .local_name = "xy"}}), ErrorCode::corrupt,
                 "different file");
  expect_refused(build({{.name = "x", .data = "abc", .local_method = 8}}), ErrorCode::corrupt,
                 "disagrees");
  expect_refused(build({{.name = "x", .data = "abc", .local_crc = 7}}), ErrorCode::corrupt,
                 "disagrees");
  expect_refused(build({{.name = "x", .data = "abc", .offset = 3}}), ErrorCode::corrupt,
                 "no local header signature");
  expect_refused(build({{.name = "x", .data = "abc", .offset = 1u << 20}}), ErrorCode::truncated,
                 "local header runs past");
}

TEST(Zip, RefusesOverlapsAndDataPastTheDirectory) {
  // Entry "y"'s local header (a valid one) lies inside entry "x"'s data.
  Le inner;
  inner.u32(0x04034b50)
      .u16(20)
      .u16(0)
      .u16(0)
      .u16(0)
      .u16(0)
      .u32(0x12345678)
      .u32(3)
      .u32(3)
      .u16(1)
      .u16(0)
      .str("y")
      .str("abc");
  const std::string hidden(reinterpret_cast<const char*>(inner.b.data()), inner.b.size());
  expect_refused(
      build({{.name = "x", .data = hidden}, {.name = "y", .data = "abc", .offset = 30 + 1}}),
      ErrorCode::corrupt, "overlaps 'x'");
  // The directory claims more data than the entry has (bit 3 set: the local
  // header does not repeat the sizes): it runs into the directory...
  const std::string le64_64("\x40\0\0\0\0\0\0\0", 8), le64_4g("\0\0\0\0\x01\0\0\0", 8);
  expect_refused(build({{.name = "x",
                         .data = "abc",
                         .flags = 8,
                         .zip64_sizes = true,
                         .central_extra = std::string("\x01\x00\x10\x00", 4) + le64_64 + le64_64}}),
                 ErrorCode::corrupt, "into the central directory");
  // ...or past the end of the file.
  expect_refused(build({{.name = "x",
                         .data = "abc",
                         .flags = 8,
                         .zip64_sizes = true,
                         .central_extra = std::string("\x01\x00\x10\x00", 4) + le64_4g + le64_4g}}),
                 ErrorCode::truncated, "runs past the end");
}

TEST(Zip, MaxEntriesApplies) {
  Limits l;
  l.max_entries = 1;
  try {
    open_bytes(build({{.name = "a", .data = "1"}, {.name = "b", .data = "2"}}), l);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::limit_exceeded);
    EXPECT_NE(std::string(e.what()).find("max_entries"), std::string::npos);
  }
}

TEST(Zip, CopiesKeepTheirIndex) {
  std::optional<ZipArchive> z =
      open_bytes(build({{.name = "a", .data = "1"}, {.name = "b", .data = "2"}}));
  const ZipArchive copy = *z;
  z.reset();
  ASSERT_NE(copy.find("b"), nullptr);
  EXPECT_EQ(text(copy, *copy.find("b")), "2");
}

// --- miniz's rules (torch's reader), and what other readers would read otherwise.

TEST(Zip, NamesAreFoundIgnoringCaseAsMinizFindsThem) {
  const auto z = open_bytes(build({{.name = "archive/DATA.PKL", .data = "pickle"},
                                   {.name = "archive/DATA/0", .data = "storage"}}));
  ASSERT_NE(z.find("archive/data.pkl"), nullptr);
  EXPECT_EQ(text(z, *z.find("archive/data.pkl")), "pickle");
  EXPECT_EQ(text(z, *z.find("Archive/data/0")), "storage");
  EXPECT_EQ(z.find("archive/data.pk"), nullptr);
  // Only ASCII letters fold, as MZ_TOLOWER does.
  const auto u = open_bytes(build({{.name = "a/\xc3\x89", .data = "e"}}));
  EXPECT_EQ(u.find("a/\xc3\xa9"), nullptr);
}

TEST(Zip, NamesEqualUpToCaseAreAmbiguous) {
  expect_refused(
      build({{.name = "archive/data.pkl", .data = "a"}, {.name = "archive/DATA.PKL", .data = "b"}}),
      ErrorCode::ambiguous, "differ only in case");
}

TEST(Zip, TwoEndRecordsWithDifferentDirectoriesAreAmbiguous) {
  // An archive with one entry, then a second directory (listing only the
  // second entry) and end record appended: miniz reads the last.
  const auto first = build({{.name = "a/x", .data = "one"}});
  Le second;
  second.add(first);
  const std::uint64_t cd2 = second.b.size();
  second.u32(0x02014b50)
      .u16(20)
      .u16(20)
      .u16(0)
      .u16(0)
      .u16(0)
      .u16(0)
      .u32(0x12345678)
      .u32(3)
      .u32(3)
      .u16(3)
      .u16(0)
      .u16(0)
      .u16(0)
      .u16(0)
      .u32(0)
      .u32(0)
      .str("a/y");
  const std::uint64_t cd2_size = second.b.size() - cd2;
  second.u32(0x06054b50).u16(0).u16(0).u16(1).u16(1).u32(cd2_size).u32(cd2).u16(0);
  try {
    open_bytes(second.b);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ambiguous);
    EXPECT_NE(std::string(e.what()).find("two end-of-central-directory records"), std::string::npos)
        << e.what();
  }
}

TEST(Zip, AnEndRecordCopiedIntoTheCommentIsAmbiguous) {
  // miniz takes the copy (the last signature); Python's zipfile takes it
  // too but then shifts every offset by the 22 bytes of the real record
  // before it.
  auto plain = build({{.name = "a/x", .data = "one"}});
  const std::string copy(reinterpret_cast<const char*>(plain.data() + plain.size() - 22), 22);
  expect_refused(build({{.name = "a/x", .data = "one"}}, {.comment = copy}), ErrorCode::ambiguous,
                 "between the central directory and its end record");
}

TEST(Zip, BytesOutsideTheEntriesAreAmbiguous) {
  expect_refused(build({{.name = "a/x", .data = "one"}}, {.lead = "prepended"}),
                 ErrorCode::ambiguous, "precede the first entry");
  expect_refused(
      build({{.name = "a/x", .data = "one", .trailer = "junk"}, {.name = "a/y", .data = "two"}}),
      ErrorCode::ambiguous, "no data descriptor");
  expect_refused(build({{.name = "a/x", .data = "one"}}, {.before_end = "hidden"}),
                 ErrorCode::ambiguous, "between the central directory and its end record");
  expect_refused(build({{.name = "a/x", .data = "one"}}, {.after = "appended"}),
                 ErrorCode::ambiguous, "bytes follow it");
  // A directory holding more headers than its end record counts.
  expect_refused(
      build({{.name = "a/x", .data = "one"}, {.name = "a/y", .data = "two"}}, {.count = 1}),
      ErrorCode::ambiguous, "after its 1 counted entries");
}

TEST(Zip, DataDescriptorsAreNoGap) {
  // torch's writer: bit 3, then a signed 16-byte descriptor after the data.
  Le d;
  d.u32(0x08074b50).u32(0x12345678).u32(3).u32(3);
  const std::string desc(reinterpret_cast<const char*>(d.b.data()), d.b.size());
  const auto z =
      open_bytes(build({{.name = "a/x", .data = "one", .flags = 8, .trailer = desc},
                        {.name = "a/y", .data = "two", .flags = 8, .trailer = desc.substr(4)}}));
  EXPECT_EQ(text(z, *z.find("a/y")), "two");
  // A descriptor that disagrees with the directory is junk.
  Le bad;
  bad.u32(0x08074b50).u32(0x12345678).u32(4).u32(3);
  expect_refused(
      build({{.name = "a/x",
              .data = "one",
              .flags = 8,
              .trailer = std::string(reinterpret_cast<const char*>(bad.b.data()), bad.b.size())}}),
      ErrorCode::ambiguous, "no data descriptor");
}

}  // namespace
