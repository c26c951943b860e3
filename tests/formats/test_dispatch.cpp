// The one dispatch: format names and their parsing, torch.load's order (zip,
// then a tar as Python's tarfile opens it, then the pickle), and the
// polyglots refused as ambiguous: a file two readers both read.

#include <cstring>

#include <gtest/gtest.h>

#include "../io/tar_builder.hpp"
#include "conversion_helpers.hpp"
#include "io/tar.hpp"
#include "support/fixtures.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/scan.hpp"

using namespace torchport;
using test::expect_error;
using test::safetensors_bytes;

namespace {

TensorCatalog read(const std::vector<std::byte>& bytes, OpenOptions options = {}) {
  return open(Source::from_buffer(bytes, "f.bin"), options);
}

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// Writes a tar checksum (unsigned) into bytes 148..155 of a 512-byte block
// whose other fields already parse.
void set_tar_checksum(std::vector<std::byte>& b) {
  long sum = 256;
  for (std::size_t i = 0; i < 512; ++i)
    if (i < 148 || i >= 156) sum += static_cast<unsigned char>(b[i]);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06lo  ", sum);
  std::memcpy(b.data() + 148, buf, 8);
}

const std::string kTensor = R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";

// A valid safetensors file whose first block is also a tar header tarfile
// accepts: the fields a header needs lie in a metadata string of spaces.
std::vector<std::byte> safetensors_tar_polyglot() {
  const std::string header =
      R"({"__metadata__":{"pad":")" + std::string(600, ' ') + R"("},)" + kTensor + "}";
  auto b = safetensors_bytes(header, 4);
  set_tar_checksum(b);
  return b;
}

}  // namespace

TEST(Dispatch, NamesRoundTrip) {
  for (Format f :
       {Format::pytorch_zip, Format::torchscript, Format::pytorch_tar, Format::pytorch_legacy,
        Format::pickle, Format::safetensors, Format::sharded_safetensors, Format::sharded_pytorch,
        Format::numpy, Format::dcp, Format::dcp_safetensors, Format::torch_export,
        Format::torchport_record, Format::value, Format::state_dict})
    EXPECT_EQ(parse_format(format_name(f)), f) << format_name(f);
  EXPECT_EQ(format_name(Format::pytorch_zip), "pytorch-zip");
  EXPECT_EQ(parse_format("torchport-mpk.gz"), Format::torchport_record);
  EXPECT_EQ(parse_format("torchport-bin"), Format::torchport_record);
  EXPECT_EQ(parse_format("zip"), std::nullopt);
  EXPECT_EQ(parse_format("torchportable"), std::nullopt);  // no prefix match
  EXPECT_TRUE(has_torchport_layout(Format::torchport_record));
  EXPECT_TRUE(has_torchport_layout(Format::value));
  EXPECT_FALSE(has_torchport_layout(Format::pytorch_zip));
  EXPECT_FALSE(has_torchport_layout(Format::state_dict));  // made in memory, PyTorch's layout
  EXPECT_TRUE(is_sharded(Format::sharded_pytorch));
}

TEST(Dispatch, OptionsFormatTakesTheNames) {
  const auto st = safetensors_bytes("{" + kTensor + "}", 4);
  OpenOptions o;
  o.format = Format::safetensors;
  EXPECT_EQ(read(st, o).size(), 1u);
  EXPECT_EQ(format_from_name("safetensors"), Format::safetensors);
  EXPECT_EQ(format_from_name("torchport-mpk.gz"), Format::torchport_record);
  expect_error([&] { (void)format_from_name("no-such-format"); }, ErrorCode::invalid_argument,
               {"unknown format 'no-such-format'", "pytorch-zip", "safetensors"});
  o.format = Format::sharded_safetensors;
  expect_error([&] { read(st, o); }, ErrorCode::invalid_argument, {"read from a path"});
  o.format = Format::pytorch_tar;
  expect_error([&] { read(st, o); }, ErrorCode::not_a_checkpoint, {"not a tar archive"});
}

TEST(Dispatch, SniffFollowsTorchLoadsOrder) {
  EXPECT_EQ(sniff(Source::from_buffer(bytes_of("PK\x03\x04rest"), "z")), Format::pytorch_zip);
  EXPECT_EQ(sniff(Source::from_buffer(test::tar_of({{.name = "x", .data = "1"}}), "t")),
            Format::pytorch_tar);
  EXPECT_EQ(sniff(Source::from_buffer(safetensors_bytes("{" + kTensor + "}", 4), "s")),
            Format::safetensors);
  EXPECT_EQ(sniff(Source::from_buffer(bytes_of("\x80\x02}q\x00."), "p")), Format::pytorch_legacy);
  EXPECT_EQ(sniff(Source::from_buffer(bytes_of("hello"), "h")), std::nullopt);
  EXPECT_EQ(sniff_format(Source::from_buffer(bytes_of("hello"), "h")), "");
  // The tar sniff is Python's: a V7 header without "ustar" is a tar.
  EXPECT_EQ(
      sniff(Source::from_buffer(test::tar_of({{.name = "x", .data = "1", .magic = ""}}), "t")),
      Format::pytorch_tar);
}

TEST(Dispatch, SafetensorsThatIsAlsoATarIsAmbiguous) {
  const auto b = safetensors_tar_polyglot();
  ASSERT_EQ(probe_tar(b), TarOpen::opened);
  OpenOptions o;
  o.format = Format::safetensors;
  EXPECT_EQ(read(b, o).size(), 1u);  // it is a valid safetensors file ...
  expect_error([&] { read(b); }, ErrorCode::ambiguous,
               {"tar archive", "safetensors (1 tensors)"});  // ... and a tar
}

TEST(Dispatch, PickleThatIsAlsoATarIsAmbiguous) {
  // A tar whose first member is named "}." is the protocol-1 pickle of {}.
  const auto b = test::tar_of({{.name = "}.", .data = "x"}});
  expect_error([&] { read(b); }, ErrorCode::ambiguous, {"tar archive", "pickle"});
}

TEST(Dispatch, ZipThatIsAlsoATarIsAmbiguous) {
  // A stored entry whose local extra field (spaces) holds the tar fields.
  std::vector<std::byte> b(512, std::byte{' '});
  const char local[] = "PK\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00";
  std::memcpy(b.data(), local, 14);
  set_tar_checksum(b);
  ASSERT_EQ(probe_tar(b), TarOpen::opened);
  expect_error([&] { read(b); }, ErrorCode::ambiguous, {"zip archive", "tar archive"});
}

TEST(Dispatch, ATarNotAlsoAnythingElseReadsAsATar) {
  // A tar without torch's members: read as a tar (and refused for what it lacks).
  const auto b = test::tar_of({{.name = "sys_info", .data = "x"}});
  expect_error([&] { read(b); }, ErrorCode::corrupt, {"without a 'storages' member"});
}

TEST(Dispatch, SafetensorsWhoseFirstByteIsAPickleOpcodeIsNoPolyglot) {
  // Header length 125 = '}': the pickle reader tries and fails at byte 1.
  std::string h = "{" + kTensor + "}";
  h.resize(125, ' ');
  const auto b = safetensors_bytes(h, 4);
  ASSERT_EQ(static_cast<char>(b[0]), '}');
  const auto cat = read(b);
  EXPECT_EQ(cat.format_name(), "safetensors");
  EXPECT_EQ(cat.size(), 1u);
}

TEST(Dispatch, ScanReportsThePolyglot) {
  const ScanReport r = scan(Source::from_buffer(safetensors_tar_polyglot(), "p.bin"));
  EXPECT_EQ(r.format, "pytorch-tar");  // the reading torch would take
  EXPECT_NE(r.verdict, ScanVerdict::clean);
}

// A forced format reads only that format: the reader a row shares with
// others (the zip reader's TorchScript, .npz and .pt2) may not hand back
// another one's catalogue.
TEST(Dispatch, AForcedFormatReadsOnlyThatFormat) {
  OpenOptions o;
  o.format = Format::pytorch_zip;
  EXPECT_EQ(open(test::fixture("views.pt"), o).format(), Format::pytorch_zip);
  EXPECT_EQ(open(test::fixture("torchscript.pt"), o).format(), Format::torchscript);
  expect_error([&] { (void)open(test::fixture("export/conv_linear.pt2"), o); },
               ErrorCode::not_a_checkpoint, {"not pytorch-zip as asked", "torch-export"});
  o.format = Format::torch_export;
  EXPECT_EQ(open(test::fixture("export/conv_linear.pt2"), o).format(), Format::torch_export);
  expect_error([&] { (void)open(test::fixture("views.pt"), o); }, ErrorCode::not_a_checkpoint,
               {"not torch-export as asked: the file is pytorch-zip"});
  o.format = Format::torchscript;
  EXPECT_EQ(open(test::fixture("torchscript.pt"), o).format(), Format::torchscript);
  expect_error([&] { (void)open(test::fixture("views.pt"), o); }, ErrorCode::not_a_checkpoint,
               {"not torchscript as asked"});
  o.format = Format::pickle;
  EXPECT_EQ(open(test::fixture("legacy.pt"), o).format(), Format::pytorch_legacy);
}
