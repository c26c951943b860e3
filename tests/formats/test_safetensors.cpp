// The safetensors reader: what it accepts (every dtype, metadata, zero-copy
// views, misaligned data copied) and, for every validation branch, a
// hand-made bad file refused with its code, message, key and byte offset.

#include <gtest/gtest.h>

#include "conversion_helpers.hpp"
#include "support/fixtures.hpp"
#include "torchport/formats/open.hpp"

using namespace torchport;
using test::expect_error;
using test::safetensors_bytes;

namespace {

TensorCatalog read(const std::vector<std::byte>& bytes, OpenOptions options = {}) {
  return open(Source::from_buffer(bytes, "t.safetensors"), options);
}

TensorCatalog read(const std::string& header, std::size_t data, OpenOptions options = {}) {
  return read(safetensors_bytes(header, data), options);
}

Error bad(const std::string& header, std::size_t data, ErrorCode code,
          std::initializer_list<std::string> parts, OpenOptions options = {}) {
  if (!options.format) options.format = Format::safetensors;
  return expect_error([&] { read(header, data, options); }, code, parts);
}

TEST(Safetensors, ReadsTensorsMetadataAndOrder) {
  const std::string h =
      R"({"__metadata__":{"format":"pt","note":"hi"},"b":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("a":{"dtype":"I16","shape":[3],"data_offsets":[16,22]}})";
  const auto bytes = safetensors_bytes(h + "  ", 22);  // padded header
  const auto cat = read(bytes);
  EXPECT_EQ(cat.format_name(), "safetensors");
  ASSERT_EQ(cat.size(), 2u);
  EXPECT_EQ(cat.tensors()[0].name, "b");  // header order
  EXPECT_EQ(cat.tensors()[1].name, "a");
  EXPECT_EQ(cat.metadata().at("format"), "pt");
  EXPECT_EQ(cat.metadata().at("note"), "hi");
  const Tensor& a = *cat.find("a");
  EXPECT_EQ(a.dtype(), DType::I16);
  EXPECT_EQ(a.shape(), Shape{3});
  const std::size_t data_start = 8 + h.size() + 2;
  EXPECT_EQ(std::memcmp(a.bytes().data(), bytes.data() + data_start + 16, 6), 0);
}

TEST(Safetensors, AlignedTensorsAreZeroCopyViews) {
  const std::string h = R"({"x":{"dtype":"F64","shape":[4],"data_offsets":[0,32]}})";
  std::string padded = h + std::string((8 - h.size() % 8) % 8, ' ');
  const Source src = Source::from_buffer(safetensors_bytes(padded, 32), "x.safetensors");
  const auto cat = open(src);
  const Tensor& x = *cat.find("x");
  EXPECT_TRUE(x.storage()->borrowed());
  EXPECT_EQ(x.bytes().data(), src.bytes().data() + 8 + padded.size());
}

TEST(Safetensors, MisalignedTensorsAreCopiedWithTheSameBytes) {
  // A 1-byte header tail makes the F32 data start at an odd address.
  const std::string h = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} )";
  ASSERT_NE((8 + h.size()) % 4, 0u);
  const Source src = Source::from_buffer(safetensors_bytes(h, 8), "x.safetensors");
  const auto cat = open(src);
  const Tensor& x = *cat.find("x");
  EXPECT_FALSE(x.storage()->borrowed());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x.bytes().data()) % 4, 0u);
  EXPECT_EQ(std::memcmp(x.bytes().data(), src.bytes().data() + 8 + h.size(), 8), 0);
}

TEST(Safetensors, EveryDtypeName) {
  std::string h = "{";
  std::uint64_t off = 0;
  std::vector<DType> want;
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto d = static_cast<DType>(i);
    const std::uint64_t n = 3 * dtype_size(d);
    // F4 shapes count 4-bit values: [6] is torch's [3].
    h += std::string(i ? "," : "") + "\"t" + std::to_string(i) + "\":{\"dtype\":\"" +
         std::string(dtype_name(d)) + "\",\"shape\":[" + (d == DType::F4 ? "6" : "3") +
         "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + n) + "]}";
    off += n;
    want.push_back(d);
  }
  h += "}";
  const auto cat = read(h, off);
  ASSERT_EQ(cat.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(cat.tensors()[i].tensor.dtype(), want[i]);
    EXPECT_EQ(cat.tensors()[i].tensor.shape(), (Shape{3}));
  }
}

// safetensors 0.8.0's F4 (torch.float4_e2m1fn_x2) counts 4-bit values, two a
// byte: the header must hold whole bytes, and safetensors' torch loader
// halves the last dimension, which must be even. What it refuses is refused.
TEST(Safetensors, Float4ShapesAreHalved) {
  const auto cat = read(R"({"a":{"dtype":"F4","shape":[2,6],"data_offsets":[0,6]},)"
                        R"("b":{"dtype":"F4","shape":[2,3,4],"data_offsets":[6,18]},)"
                        R"("e":{"dtype":"F4","shape":[3,0],"data_offsets":[18,18]},)"
                        R"("m":{"dtype":"F8_E8M0","shape":[2],"data_offsets":[18,20]}})",
                        20);
  EXPECT_EQ(cat.find("a")->shape(), (Shape{2, 3}));
  EXPECT_EQ(cat.find("a")->dtype(), DType::F4);
  EXPECT_EQ(cat.find("b")->shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(cat.find("e")->shape(), (Shape{3, 0}));
  EXPECT_EQ(cat.find("m")->dtype(), DType::F8_E8M0);
  EXPECT_EQ(cat.find("m")->nbytes(), 2u);
}

TEST(Safetensors, EmptyHeaderZeroSizedAndZeroDimTensors) {
  EXPECT_TRUE(read("{}", 0).empty());
  const auto cat = read(R"({"e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]},)"
                        R"("s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                        R"("z":{"dtype":"BF16","shape":[0],"data_offsets":[4,4]}})",
                        4);
  EXPECT_EQ(cat.find("e")->numel(), 0);
  EXPECT_EQ(cat.find("s")->dim(), 0);
  EXPECT_EQ(cat.find("s")->numel(), 1);
}

TEST(Safetensors, OpenSniffsAFile) {
  const auto dir = test::temp_dir("st-sniff");
  test::write_bytes(
      dir / "m.bin",
      safetensors_bytes(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 2));
  EXPECT_EQ(open(dir / "m.bin").format_name(), "safetensors");
  std::filesystem::remove_all(dir);
}

// --- every validation branch ---------------------------------------------

TEST(SafetensorsBad, ShorterThanTheLength) {
  const std::vector<std::byte> b(5);
  OpenOptions o;
  o.format = Format::safetensors;
  const auto e = expect_error([&] { read(b, o); }, ErrorCode::truncated, {"5 bytes", "8-byte"});
  EXPECT_EQ(e.offset(), 0u);
}

TEST(SafetensorsBad, HeaderOverTheLimit) {
  OpenOptions o;
  o.limits.max_header_bytes = 16;
  bad(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1, ErrorCode::limit_exceeded,
      {"max_header_bytes = 16"}, o);
}

TEST(SafetensorsBad, HeaderLongerThanTheFile) {
  OpenOptions o;
  o.format = Format::safetensors;
  expect_error([&] { read(safetensors_bytes("{}", 0, 1000), o); }, ErrorCode::truncated,
               {"1000 bytes", "only 2", "truncated download"});
}

TEST(SafetensorsBad, HeaderNotAnObject) {
  const auto e = bad("[1, 2]", 0, ErrorCode::corrupt, {"does not start with '{'"});
  EXPECT_EQ(e.offset(), 8u);
}

TEST(SafetensorsBad, InvalidJson) {
  const auto e = bad(R"({"x": {"dtype": "F32",, }})", 0, ErrorCode::corrupt,
                     {"not valid JSON", "syntax error"});
  ASSERT_TRUE(e.offset().has_value());
  EXPECT_EQ(*e.offset(), 8u + 22u);  // the second comma
}

TEST(SafetensorsBad, DuplicateTensorName) {
  const std::string h = R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                        R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})";
  const auto e = bad(h, 2, ErrorCode::corrupt, {"'w' twice"});
  EXPECT_EQ(e.key(), "w");
  EXPECT_EQ(e.offset(), 8 + h.rfind("\"w\""));
}

TEST(SafetensorsBad, DuplicateFieldInAnEntry) {
  bad(R"({"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})", 1,
      ErrorCode::corrupt, {"'dtype' twice"});
}

TEST(SafetensorsBad, MetadataNotStrings) {
  bad(R"({"__metadata__":{"epoch":3}})", 0, ErrorCode::corrupt, {"'epoch'", "strings to strings"});
  bad(R"({"__metadata__":[1]})", 0, ErrorCode::corrupt, {"not an object"});
}

TEST(SafetensorsBad, EntryNotAnObject) {
  const auto e = bad(R"({"w":[1,2]})", 0, ErrorCode::corrupt, {"not {dtype, shape, data_offsets}"});
  EXPECT_EQ(e.key(), "w");
  EXPECT_EQ(e.offset(), 9u);
}

TEST(SafetensorsBad, MissingFields) {
  bad(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", 1, ErrorCode::corrupt, {"lacks 'dtype'"});
  bad(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1, ErrorCode::corrupt, {"lacks 'shape'"});
  bad(R"({"w":{"dtype":"U8","shape":[1]}})", 1, ErrorCode::corrupt, {"lacks 'data_offsets'"});
}

TEST(SafetensorsBad, Dtypes) {
  bad(R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4, ErrorCode::corrupt,
      {"unknown dtype 'F33'"});
  bad(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", 4, ErrorCode::corrupt,
      {"unknown dtype 'f32'"});
  bad(R"({"w":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}})", 3, ErrorCode::unsupported,
      {"F6_E2M3", "torch has no dtype"});
  bad(R"({"w":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[0,3]}})", 3, ErrorCode::unsupported,
      {"F6_E3M2"});
  // F4: whole bytes, then an even last dimension (torch's is half of it).
  bad(R"({"w":{"dtype":"F4","shape":[5],"data_offsets":[0,3]}})", 3, ErrorCode::corrupt,
      {"odd number of 4-bit values"});
  bad(R"({"w":{"dtype":"F4","shape":[],"data_offsets":[0,1]}})", 1, ErrorCode::corrupt,
      {"odd number of 4-bit values"});
  bad(R"({"w":{"dtype":"F4","shape":[3,1],"data_offsets":[0,2]}})", 2, ErrorCode::corrupt,
      {"odd number of 4-bit values"});
  bad(R"({"w":{"dtype":"F4","shape":[2,5],"data_offsets":[0,5]}})", 5, ErrorCode::unsupported,
      {"F4[2, 5]", "must be even"});
  bad(R"({"w":{"dtype":"F4","shape":[0,3],"data_offsets":[0,0]}})", 0, ErrorCode::unsupported,
      {"must be even"});
  bad(R"({"w":{"dtype":"F4","shape":[2,6],"data_offsets":[0,12]}})", 12, ErrorCode::corrupt,
      {"needs 6 bytes"});
  bad(R"({"w":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})", 4, ErrorCode::corrupt,
      {"not a string"});
}

TEST(SafetensorsBad, Shapes) {
  bad(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", 0, ErrorCode::corrupt,
      {"shape entry -1", "non-negative integer"});
  bad(R"({"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})", 1, ErrorCode::corrupt,
      {"shape entry 1.0", "non-negative integer"});
  bad(R"({"w":{"dtype":"U8","shape":["2"],"data_offsets":[0,2]}})", 2, ErrorCode::corrupt,
      {"non-negative integer"});
  bad(R"({"w":{"dtype":"U8","shape":3,"data_offsets":[0,3]}})", 3, ErrorCode::corrupt,
      {"not an array"});
  bad(R"({"w":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", 1, ErrorCode::corrupt,
      {"nests deeper"});
  bad(R"({"w":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,1]}})", 1,
      ErrorCode::corrupt, {"does not fit 63 bits"});
}

TEST(SafetensorsBad, SizeOverflow) {
  bad(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8,
      ErrorCode::corrupt, {"more bytes than fit in 64 bits"});
}

TEST(SafetensorsBad, SizeDisagreesWithShape) {
  const auto e = bad(R"({"w":{"dtype":"F32","shape":[3,4],"data_offsets":[0,40]}})", 40,
                     ErrorCode::corrupt, {"F32[3, 4] needs 48 bytes", "[0, 40] hold 40"});
  EXPECT_EQ(e.key(), "w");
}

TEST(SafetensorsBad, Offsets) {
  bad(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1, ErrorCode::corrupt,
      {"not [begin, end]"});
  bad(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[3,2]}})", 3, ErrorCode::corrupt,
      {"end before they begin"});
  bad(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", 1, ErrorCode::corrupt,
      {"non-negative integer"});
}

TEST(SafetensorsBad, PastTheDataRegion) {
  const std::string h =
      R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[2,6]},"v":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  const auto e = bad(h, 5, ErrorCode::truncated, {"[2, 6]", "5-byte data region"});
  EXPECT_EQ(e.key(), "w");
  EXPECT_EQ(e.offset(), 8 + h.size() + 2);
}

TEST(SafetensorsBad, Overlap) {
  const std::string h =
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})";
  const auto e = bad(h, 4, ErrorCode::corrupt, {"overlap 'a' [0, 4]"});
  EXPECT_EQ(e.key(), "b");
  EXPECT_EQ(e.offset(), 8 + h.size() + 2);
}

TEST(SafetensorsBad, SharedBytesAreAnOverlapToo) {
  bad(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
      4, ErrorCode::corrupt, {"overlap"});
}

TEST(SafetensorsBad, Hole) {
  const std::string h =
      R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[5,7]}})";
  const auto e = bad(h, 7, ErrorCode::corrupt, {"3 unused bytes", "after 'a'", "contiguous"});
  EXPECT_EQ(e.key(), "b");
  EXPECT_EQ(e.offset(), 8 + h.size() + 2);
  bad(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", 3, ErrorCode::corrupt,
      {"1 unused bytes", "the header"});
}

TEST(SafetensorsBad, TrailingBytes) {
  const std::string h = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  const auto e = bad(h, 10, ErrorCode::corrupt, {"8 trailing bytes", "('a')"});
  EXPECT_EQ(e.offset(), 8 + h.size() + 2);
  bad("{}", 1, ErrorCode::corrupt, {"1 trailing bytes"});
}

TEST(SafetensorsBad, TooManyTensorsAndLongNames) {
  OpenOptions o;
  o.limits.max_tensors = 1;
  bad(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
      2, ErrorCode::limit_exceeded, {"max_tensors = 1"}, o);
  OpenOptions n;
  n.limits.max_name_bytes = 4;
  bad(R"({"abcdef":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1, ErrorCode::limit_exceeded,
      {"6 bytes", "max_name_bytes = 4"}, n);
}

TEST(SafetensorsBad, ErrorsNameTheFile) {
  const auto e = bad(R"({"w":[]})", 0, ErrorCode::corrupt, {"t.safetensors"});
  EXPECT_EQ(e.where(), "t.safetensors");
}

}  // namespace
