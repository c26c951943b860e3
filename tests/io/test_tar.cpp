// The tar reader against CPython's tarfile rules (torch.load opens every
// non-zip file with tarfile first): header kinds, checksums, numeric
// encodings, long names and pax overrides, the last member of a name, and
// where the archive ends. Each case is a hand-built archive; the interop
// test checks the same kinds of archives against Python itself.

#include <gtest/gtest.h>

#include "io/tar.hpp"
#include "tar_builder.hpp"
#include "torchport/core/error.hpp"

using namespace torchport;
using namespace torchport::test;

namespace {

TarArchive open_tar(const std::vector<std::byte>& b) {
  return TarArchive::open(Source::from_buffer(b, "test.tar"), {});
}

std::string data_of(const std::vector<std::byte>& b, const TarMember& m) {
  return {reinterpret_cast<const char*>(b.data() + m.data_offset),
          static_cast<std::size_t>(m.size)};
}

void expect_refused(const std::vector<std::byte>& b, ErrorCode code, const std::string& message) {
  try {
    open_tar(b);
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Tar, ReadsUstarMembers) {
  const auto b = tar_of(
      {{.name = "sys_info", .data = "abc"}, {.name = "pickle", .data = std::string(600, 'x')}});
  EXPECT_EQ(probe_tar(b), TarOpen::opened);
  const TarArchive t = open_tar(b);
  ASSERT_EQ(t.members().size(), 2u);
  EXPECT_EQ(data_of(b, t.file("sys_info")), "abc");
  EXPECT_EQ(t.file("pickle").data_offset, 1024u + 512u);
  EXPECT_EQ(t.file("pickle").size, 600u);
}

TEST(Tar, ReadsV7HeadersWithoutMagic) {
  // tarfile reads no magic at all: a V7 header is a header.
  const auto b = tar_of({{.name = "storages", .data = "v7", .magic = ""}});
  EXPECT_TRUE(looks_like_tar(b));
  EXPECT_EQ(data_of(b, open_tar(b).file("storages")), "v7");
}

TEST(Tar, V7DirectoryIsANameWithASlash) {
  const auto b = tar_of({{.name = "storages/", .type = '\0', .magic = ""}});
  const TarArchive t = open_tar(b);
  ASSERT_NE(t.resolve("storages"), nullptr);
  EXPECT_EQ(t.resolve("storages")->type, '5');
  EXPECT_EQ(t.find("storages"), nullptr);
}

TEST(Tar, AcceptsSignedAndUnsignedChecksums) {
  // Bytes with the high bit set make the two sums differ; tarfile takes either.
  const std::string name = "st\xc3\xa9";
  for (bool is_signed : {false, true}) {
    const auto b = tar_of({{.name = name, .data = "d", .signed_checksum = is_signed}});
    EXPECT_EQ(probe_tar(b), TarOpen::opened) << is_signed;
    EXPECT_EQ(data_of(b, open_tar(b).file(name)), "d");
  }
  auto b = tar_of({{.name = name, .data = "d", .checksum_field = std::string("0000000\0", 8)}});
  EXPECT_EQ(probe_tar(b), TarOpen::refused);
  expect_refused(b, ErrorCode::not_a_checkpoint, "bad checksum");
}

TEST(Tar, NumericFieldsAsPythonParsesThem) {
  // Octal with surrounding spaces, Python's 0o prefix and underscores, and
  // GNU base-256 all give the size; anything int(x, 8) refuses is invalid.
  std::string b256(12, '\0');
  b256[0] = '\x80';
  b256[11] = '\x05';
  for (const std::string& field :
       {std::string("   5 \0\0\0\0\0\0\0", 12), std::string("0o5\0\0\0\0\0\0\0\0\0", 12),
        std::string("0_0_5\0\0\0\0\0\0\0", 12), b256}) {
    const auto b = tar_of({{.name = "x", .data = "12345", .size_field = field}});
    EXPECT_EQ(open_tar(b).file("x").size, 5u);
  }
  for (const std::string& field :
       {std::string("9\0\0\0\0\0\0\0\0\0\0\0", 12), std::string("5_\0\0\0\0\0\0\0\0\0\0", 12),
        std::string("_5\0\0\0\0\0\0\0\0\0\0", 12)}) {
    const auto b = tar_of({{.name = "x", .data = "12345", .size_field = field}});
    EXPECT_EQ(probe_tar(b), TarOpen::refused) << field;
  }
}

TEST(Tar, GnuLongNameAndLongLink) {
  const std::string longname(150, 'n');
  const auto b = tar_of({{.name = "././@LongLink", .data = longname + '\0', .type = 'L'},
                         {.name = "short", .data = "payload"},
                         {.name = "././@LongLink", .data = "target-of-link", .type = 'K'},
                         {.name = "link", .type = '2', .linkname = "ignored"}});
  EXPECT_EQ(probe_tar(b), TarOpen::opened);
  const TarArchive t = open_tar(b);
  ASSERT_EQ(t.members().size(), 2u);
  EXPECT_EQ(data_of(b, t.file(longname)), "payload");
  EXPECT_EQ(t.members()[0].header_offset, 0u);
  EXPECT_EQ(t.resolve("link")->linkname, "target-of-link");
  EXPECT_EQ(t.resolve("short"), nullptr);
}

TEST(Tar, UstarPrefixIsJoined) {
  const auto b = tar_of({{.name = "pickle", .data = "p", .prefix = "dir"}});
  EXPECT_EQ(data_of(b, open_tar(b).file("dir/pickle")), "p");
}

TEST(Tar, PaxPathAndSizeOverride) {
  const std::string pax = pax_record("path", "tensors") + pax_record("size", "3");
  const auto b = tar_of({{.name = "PaxHeader/x", .data = pax, .type = 'x'},
                         {.name = "other-name", .data = "abc", .size = 100}});
  const TarArchive t = open_tar(b);
  ASSERT_EQ(t.members().size(), 1u);
  EXPECT_EQ(data_of(b, t.file("tensors")), "abc");
  EXPECT_EQ(t.resolve("other-name"), nullptr);
}

TEST(Tar, GlobalPaxPathRenamesEveryLaterMember) {
  const auto b = tar_of({{.name = "global", .data = pax_record("path", "pickle"), .type = 'g'},
                         {.name = "a", .data = "first"},
                         {.name = "b", .data = "second"}});
  const TarArchive t = open_tar(b);
  ASSERT_EQ(t.members().size(), 2u);
  EXPECT_EQ(data_of(b, t.file("pickle")), "second");  // both are named "pickle": the last wins
}

TEST(Tar, LastMemberOfANameWinsWhateverItsType) {
  const auto file_then_dir =
      tar_of({{.name = "storages", .data = "data"}, {.name = "storages", .type = '5'}});
  const TarArchive t = open_tar(file_then_dir);
  EXPECT_EQ(t.resolve("storages")->type, '5');
  EXPECT_EQ(t.find("storages"), nullptr);
  try {
    t.file("storages");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("a directory"), std::string::npos) << e.what();
  }
  const auto dir_then_file =
      tar_of({{.name = "storages", .type = '5'}, {.name = "storages", .data = "data"}});
  EXPECT_EQ(data_of(dir_then_file, open_tar(dir_then_file).file("storages")), "data");
  const auto two_files =
      tar_of({{.name = "pickle", .data = "old"}, {.name = "pickle", .data = "new"}});
  EXPECT_EQ(data_of(two_files, open_tar(two_files).file("pickle")), "new");
}

TEST(Tar, LinksAreRefusedWhereTorchWouldFollowThem) {
  const auto b = tar_of({{.name = "pickle", .type = '2', .linkname = "/etc/passwd"}});
  try {
    open_tar(b).file("pickle");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
}

TEST(Tar, UnknownTypesAreFiles) {
  const auto b = tar_of({{.name = "pickle", .data = "zz", .type = 'Z'}});
  EXPECT_EQ(data_of(b, open_tar(b).file("pickle")), "zz");
}

TEST(Tar, TheArchiveEndsWhereTarfileStops) {
  // No end blocks, the last member padded to the end: tarfile reads it.
  EXPECT_EQ(open_tar(tar_of({{.name = "a", .data = "x"}}, false)).members().size(), 1u);
  // Zeros after the end are padding.
  auto padded = tar_of({{.name = "a", .data = "x"}});
  padded.insert(padded.end(), 8192, std::byte{0});
  EXPECT_EQ(open_tar(padded).members().size(), 1u);
  // Members after a zero block are unseen by tarfile but not by
  // `tar --ignore-zeros`: ambiguous.
  auto hidden = tar_of({{.name = "a", .data = "x"}});
  tar_add(hidden, {.name = "pickle", .data = "hidden"});
  expect_refused(hidden, ErrorCode::ambiguous, "non-zero bytes follow");
  // So are bytes after a header tarfile finds invalid.
  auto garbage = tar_of({{.name = "a", .data = "x"}}, false);
  garbage.insert(garbage.end(), 512, std::byte{'?'});
  expect_refused(garbage, ErrorCode::ambiguous, "non-zero bytes follow");
}

TEST(Tar, DataPastTheEndIsTarfilesReadError) {
  auto b = tar_of({{.name = "a", .data = "x", .size = 4096}}, false);
  EXPECT_EQ(probe_tar(b), TarOpen::opened);                           // tarfile.open succeeds ...
  expect_refused(b, ErrorCode::truncated, "unexpected end of data");  // ... getmembers() does not
}

TEST(Tar, ALongNameHeaderWithoutAMemberIsNoTar) {
  auto b = tar_of({{.name = "././@LongLink", .data = "name", .type = 'L'}}, false);
  b.insert(b.end(), 512, std::byte{'!'});
  EXPECT_EQ(probe_tar(b), TarOpen::refused);
  expect_refused(b, ErrorCode::not_a_checkpoint, "not followed by a valid header");
}

TEST(Tar, ZeroFirstBlockOpensAnEmptyArchive) {
  const std::vector<std::byte> zeros(1024, std::byte{0});
  EXPECT_EQ(probe_tar(zeros), TarOpen::empty);
  EXPECT_TRUE(open_tar(zeros).members().empty());
  EXPECT_EQ(probe_tar(std::vector<std::byte>(100, std::byte{0})),
            TarOpen::refused);  // short: no header
}

TEST(Tar, RefusesWhatTarfileWouldLoopOn) {
  std::string negative(12, '\xff');
  const auto b = tar_of({{.name = "a", .data = "x", .size_field = negative}});
  expect_refused(b, ErrorCode::corrupt, "negative size");
  expect_refused(tar_of({{.name = "sparse", .type = 'S'}}), ErrorCode::unsupported, "sparse");
}

TEST(Tar, ProbeCostsOneHeaderForAPlainMember) {
  // A huge member is probed from its header alone: the probe never looks
  // past the first member's headers, so it answers on a 512-byte prefix.
  auto b = tar_of({{.name = "a", .data = std::string(1 << 20, 'x')}});
  b.resize(512);
  EXPECT_EQ(probe_tar(b), TarOpen::opened);
}
