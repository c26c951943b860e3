// Files torch 2.14 itself saved (tests/fixtures/torch214, made by
// make_torch214_fixtures.py under scripts/torch.sh current): every dtype it
// saves (float8_e8m0fnu, float4_e2m1fn_x2 and bcomplex32 among them), views
// and shared storages under them, records aligned to 4096, a
// torch.serialization.skip_data() save (listed, its bytes refused by name,
// never read as zeros), torch's own conversions of the new dtypes, and a
// sub-byte shell dtype torch cannot save (refused by name), and the new
// dtype numbers of its torch.export archives. Read with no
// Python, materialized, and converted to .pt and safetensors bit for bit;
// the .pt carries the records torch 2.14 writes, laid out as its writer
// lays them out.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "conversion_helpers.hpp"
#include "io/zip.hpp"
#include "support/fixtures.hpp"
#include "torchport/core/convert.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/compare.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/scan.hpp"
#include "torchport/io/source.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::expect_error;
using torchport::test::fixture;

namespace {

nlohmann::json expected(const std::string& name) {
  return test::read_json(fixture("torch214/" + name + ".expected.json"));
}

// The catalogue holds want["tensors"] in order: name, dtype, shape, the
// elements' SHA-256 (unless `with_data` is false) and, unless `views` is
// false (copies: contiguous, resolved, a storage each), the strides,
// offset, conj/neg bits and which tensors share a storage in the file.
void expect_tensors(const TensorCatalog& cat, const nlohmann::json& want, bool with_data = true,
                    bool views = true) {
  ASSERT_EQ(cat.size(), want["tensors"].size());
  std::map<int, const Storage*> storage_of;
  for (std::size_t i = 0; i < cat.size(); ++i) {
    const auto& [name, t] = cat.tensors()[i];
    const auto& w = want["tensors"][i];
    SCOPED_TRACE(name);
    EXPECT_EQ(name, w["name"].get<std::string>());
    const auto dtype = dtype_from_torch_name(w["dtype"].get<std::string>());
    ASSERT_TRUE(dtype) << w["dtype"];
    EXPECT_EQ(t.dtype(), *dtype);
    EXPECT_EQ(dtype_torch_name(t.dtype()), w["dtype"].get<std::string>());
    EXPECT_EQ(t.shape(), w["shape"].get<Shape>());
    if (views) {  // as the file has them
      EXPECT_EQ(t.strides(), w["strides"].get<Shape>());
      EXPECT_EQ(t.storage_offset(), w["offset"].get<std::int64_t>());
      EXPECT_EQ(t.is_conj(), w.value("conj", false));
      EXPECT_EQ(t.is_neg(), w.value("neg", false));
    }
    if (with_data) {
      EXPECT_EQ(test::tensor_sha256(t), w["sha256"].get<std::string>());
    }
    if (views) {
      // A conj or neg view resolves into a storage of its own; the file's
      // is file_storage().
      const auto [it, fresh] = storage_of.emplace(w["storage"].get<int>(), t.file_storage().get());
      EXPECT_EQ(it->second, t.file_storage().get()) << "should share storage " << w["storage"];
      if (fresh)
        for (const auto& [n, s] : storage_of)
          if (n != w["storage"].get<int>()) {
            EXPECT_NE(s, t.file_storage().get()) << "shares storage " << n;
          }
    }
  }
}

bool safetensors_holds(DType d) {
  return d != DType::C32 && d != DType::C128 && d != DType::BC32 && d != DType::F8_E4M3FNUZ &&
         d != DType::F8_E5M2FNUZ && !is_bits(d);
}

// The names of an archive's records below its folder, in directory order.
std::vector<std::string> record_names(const fs::path& file) {
  const auto zip = ZipArchive::open(Source::map_file(file), {});
  std::vector<std::string> out;
  for (const auto& e : zip.entries()) out.push_back(e.name.substr(e.name.find('/') + 1));
  return out;
}

// Where torch 2.x's torch.load (with calculate_storage_offsets) expects
// each storage record's data (torch/serialization.py `_get_offset` and
// inline_container.cc getPadding): record k + 1's header right after
// record k's data and its data descriptor (none for an empty record), its
// data after a 30-byte header, its name and the 4-byte padding field, at
// the next multiple of the alignment. A writer that lays records out
// otherwise gets other bytes read for its tensors there.
void expect_torch_offsets(const fs::path& file, std::uint64_t alignment) {
  const auto zip = ZipArchive::open(Source::map_file(file), {});
  const ZipEntry* prev = nullptr;
  std::size_t k = 0;
  for (const auto& e : zip.entries()) {
    const std::string rel = e.name.substr(e.name.find('/') + 1);
    if (!rel.starts_with("data/")) continue;
    SCOPED_TRACE(e.name);
    EXPECT_EQ(rel, "data/" + std::to_string(k++));  // numbered in order
    EXPECT_EQ(e.data_offset % alignment, 0u);
    if (prev != nullptr) {
      const std::uint64_t header = prev->data_offset + prev->size + (prev->size > 0 ? 16 : 0);
      EXPECT_EQ(e.header_offset, header);
      const std::uint64_t start = header + 30 + e.name.size() + 4;
      EXPECT_EQ(e.data_offset, (start + alignment - 1) / alignment * alignment);
    }
    prev = &e;
  }
}

class Torch214Saved : public ::testing::TestWithParam<std::string> {};

TEST_P(Torch214Saved, ReadAsTorchLoadsThem) {
  const std::string name = GetParam();
  const auto want = expected(name);
  const TensorCatalog cat = open(fixture("torch214/" + name + ".pt"));
  EXPECT_EQ(cat.format_name(), "pytorch-zip");
  expect_tensors(cat, want);
  EXPECT_EQ(cat.metadata().at("pytorch.format_version"), want[".format_version"]);
  EXPECT_EQ(cat.metadata().at("pytorch.storage_alignment"), want[".storage_alignment"]);
  // crc_zero's record declares CRC-32 0 as a reserved one does, which the
  // metadata says from the directory alone; its bytes match it and read.
  EXPECT_EQ(cat.metadata().count("pytorch.skip_data"), name == "crc_zero" ? 1u : 0u);
  // Owned copies: each view becomes a storage of its own (no sharing).
  expect_tensors(materialize(cat, Residence::owned), want, true, false);
  const ScanReport r = scan(fixture("torch214/" + name + ".pt"));
  EXPECT_EQ(r.verdict, ScanVerdict::clean) << r.reason();
}

TEST_P(Torch214Saved, ConvertedToPtAsTorch214WritesIt) {
  const std::string name = GetParam();
  const auto want = expected(name);
  const fs::path in = fixture("torch214/" + name + ".pt");
  const fs::path dir = test::temp_dir("torch214_pt_" + name);
  const fs::path out = dir / (name + ".pt");
  save(open(in), out, SaveFormat::pytorch);
  const TensorCatalog back = open(out);
  expect_tensors(back, want);  // views, offsets and shared storages kept
  // torch 2.14's records, in its order, the storages numbered as the pickle
  // names them (torch's archive has as many); the dot records say so.
  EXPECT_EQ(record_names(out), record_names(in));
  EXPECT_EQ(back.metadata().at("pytorch.format_version"), "1");
  EXPECT_EQ(back.metadata().at("pytorch.storage_alignment"), "64");
  expect_torch_offsets(out, 64);
  // The fixture torch wrote follows the same rule (at its alignment).
  expect_torch_offsets(in, std::stoul(want[".storage_alignment"].get<std::string>()));
  fs::remove_all(dir);
}

TEST_P(Torch214Saved, ConvertedToSafetensorsBitExact) {
  const std::string name = GetParam();
  const auto want = expected(name);
  const TensorCatalog cat = open(fixture("torch214/" + name + ".pt"));
  std::vector<NamedTensor> kept;
  nlohmann::json kept_want = {{"tensors", nlohmann::json::array()}};
  for (std::size_t i = 0; i < cat.size(); ++i)
    if (safetensors_holds(cat.tensors()[i].tensor.dtype())) {
      kept.push_back(cat.tensors()[i]);
      kept_want["tensors"].push_back(want["tensors"][i]);
    }
  ASSERT_FALSE(kept.empty());
  const fs::path dir = test::temp_dir("torch214_st_" + name);
  save(TensorCatalog::from_tensors(Format::state_dict, kept), dir / "out.safetensors",
       SaveFormat::safetensors);
  const TensorCatalog back = open(dir / "out.safetensors");
  // safetensors sorts by alignment and has no views: compare by name.
  std::vector<NamedTensor> in_order;
  for (const auto& t : kept) in_order.push_back({t.name, *back.find(t.name)});
  expect_tensors(TensorCatalog::from_tensors(Format::state_dict, in_order), kept_want, true, false);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Files, Torch214Saved,
                         ::testing::Values("dtypes", "views", "align4096", "conversions",
                                           "crc_zero"));

TEST(Torch214, TheNewDtypes) {
  EXPECT_EQ(dtype_from_torch_name("float8_e8m0fnu"), DType::F8_E8M0);
  EXPECT_EQ(dtype_from_torch_name("float4_e2m1fn_x2"), DType::F4);
  EXPECT_EQ(dtype_from_torch_name("bcomplex32"), DType::BC32);
  EXPECT_EQ(dtype_from_name("F8_E8M0"), DType::F8_E8M0);
  EXPECT_EQ(dtype_from_name("F4"), DType::F4);
  EXPECT_EQ(dtype_parse("torch.bcomplex32"), DType::BC32);
  EXPECT_EQ(dtype_size(DType::F4), 1u);  // two e2m1 values: one element, as torch counts it
  EXPECT_EQ(dtype_size(DType::BC32), 4u);
  EXPECT_EQ(dtype_alignment(DType::BC32), 2u);
  EXPECT_TRUE(is_complex(DType::BC32));
  EXPECT_TRUE(is_floating(DType::F8_E8M0));  // torch's is_floating_point
  EXPECT_TRUE(is_floating(DType::F4));
  // torch 2.14 has no float8_e8m0fnu_x4 and no sub-byte shells we read.
  EXPECT_FALSE(dtype_from_torch_name("float8_e8m0fnu_x4"));
  EXPECT_FALSE(dtype_from_torch_name("uint4"));
  EXPECT_FALSE(dtype_from_torch_name("bit"));
}

// torch's .to() of every e8m0 byte and of bcomplex32 values, and into
// bcomplex32 (which rounds through float, as c10::complex<BFloat16> does),
// bit for bit; NaNs as NaNs.
TEST(Torch214, ConversionsMatchTorch) {
  const TensorCatalog cat = open(fixture("torch214/conversions.pt"));
  std::size_t pairs = 0;
  for (const auto& [name, want] : cat.tensors()) {
    const auto at = name.find("_to_");
    if (at == std::string::npos) continue;
    SCOPED_TRACE(name);
    const Tensor got = cat.find(name.substr(0, at))->to(want.dtype());
    ASSERT_EQ(got.dtype(), want.dtype());
    const Tensor g = got.contiguous(), w = want.contiguous();
    const std::size_t lanes = is_complex(want.dtype()) ? 2 : 1;
    const std::size_t lane = dtype_size(want.dtype()) / lanes;
    const DType wide = is_complex(want.dtype()) ? DType::C128 : DType::F64;
    const Tensor gw = g.to(wide), ww = w.to(wide);
    const auto* gd = reinterpret_cast<const double*>(gw.bytes().data());
    const auto* wd = reinterpret_cast<const double*>(ww.bytes().data());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(w.numel()) * lanes; ++i) {
      const bool same =
          std::memcmp(g.bytes().data() + i * lane, w.bytes().data() + i * lane, lane) == 0 ||
          (std::isnan(gd[i]) && std::isnan(wd[i]));
      if (!same && bad++ < 5)
        ADD_FAILURE() << "component " << i << ": " << gd[i] << " vs " << wd[i];
    }
    ++pairs;
  }
  EXPECT_EQ(pairs, 14u);
}

TEST(Torch214, Float4ConvertsToNothingAsInTorch) {
  const TensorCatalog cat = open(fixture("torch214/dtypes.pt"));
  const Tensor& f4 = *cat.find("float4_e2m1fn_x2");
  EXPECT_FALSE(convertible(DType::F4, DType::F32));
  EXPECT_FALSE(convertible(DType::F32, DType::F4));
  EXPECT_FALSE(convertible(DType::F4, DType::U8));
  EXPECT_TRUE(convertible(DType::F4, DType::F4));
  expect_error([&] { (void)f4.to(DType::F32); }, ErrorCode::dtype_mismatch,
               {"float4_e2m1fn_x2", "torch cannot convert"});
  // e8m0 converts out and in, as torch's .to() (check_float8_casts.py holds
  // every byte of it against torch).
  EXPECT_TRUE(convertible(DType::F8_E8M0, DType::F32));
  EXPECT_TRUE(convertible(DType::F8_E8M0, DType::C64));
  EXPECT_TRUE(convertible(DType::F32, DType::F8_E8M0));
  EXPECT_FALSE(convertible(DType::C64, DType::F8_E8M0));  // never drops the imaginary part
  EXPECT_FALSE(convertible(DType::F8_E8M0, DType::I32));  // floats never truncate to integers
  EXPECT_FALSE(convertible(DType::BC32, DType::F32));     // complex never drops its imaginary part
  EXPECT_TRUE(convertible(DType::BC32, DType::C32));
  // compare and diff widen through the same conversions: F4 is refused by name.
  expect_error([&] { (void)compare_tensors("f4", f4, f4, {}); }, ErrorCode::dtype_mismatch,
               {"float4_e2m1fn_x2"});
  const TensorComparison e8 =
      compare_tensors("e8", *cat.find("float8_e8m0fnu"), *cat.find("float8_e8m0fnu"), {});
  EXPECT_TRUE(e8.equal);
  EXPECT_EQ(e8.a.nans, 1u);  // 0xFF
}

// A skip_data save: torch reserves each storage record (its size, CRC-32 0)
// and writes no bytes; torch.load gives whatever lies there (zeros). Listed
// as torch lists it, said in the metadata, and every read of its bytes is
// refused naming skip_data: never zeros.
TEST(Torch214SkipData, ListedButNoBytes) {
  const auto want = expected("skip_data");
  ASSERT_TRUE(want.value("skip_data", false));
  for (const bool verify : {false, true}) {
    SCOPED_TRACE(verify ? "verify_crc" : "default");
    OpenOptions o;
    o.verify_crc = verify;  // a reserved record is not a damaged one
    const TensorCatalog cat = open(fixture("torch214/skip_data.pt"), o);
    expect_tensors(cat, want, /*with_data=*/false);
    EXPECT_NE(cat.metadata().at("pytorch.skip_data").find("3 of 3 storage records"),
              std::string::npos);
    for (const auto& named : cat.tensors()) {
      SCOPED_TRACE(named.name);
      const Tensor& t = named.tensor;  // not a structured binding: the lambda captures it
      expect_error(
          [&] {
            const Tensor c = t.contiguous();
            (void)c.bytes();
          },
          ErrorCode::unsupported, {"skip_data", "holds no data", "skip_data/data/"});
    }
    expect_error([&] { (void)materialize(cat, Residence::owned); }, ErrorCode::unsupported,
                 {"skip_data"});
  }
  const fs::path dir = test::temp_dir("torch214_skip");
  const TensorCatalog cat = open(fixture("torch214/skip_data.pt"));
  for (const auto format : {SaveFormat::pytorch, SaveFormat::safetensors}) {
    const fs::path out = dir / (format == SaveFormat::pytorch ? "out.pt" : "out.safetensors");
    std::vector<NamedTensor> some = {cat.tensors()[0], cat.tensors()[2]};  // w, e8
    expect_error([&] { save(TensorCatalog::from_tensors(Format::state_dict, some), out, format); },
                 ErrorCode::unsupported, {"skip_data"});
    EXPECT_FALSE(fs::exists(out));
  }
  expect_error([&] { (void)compare(cat, cat, {}); }, ErrorCode::unsupported, {"skip_data"});
  EXPECT_NE(scan(fixture("torch214/skip_data.pt")).verdict, ScanVerdict::unsafe);
  fs::remove_all(dir);
}

// Filled in later (what skip_data is for) the record still declares CRC-32
// 0: nothing tells its bytes from the zeros torch left, so it is refused
// all the same. A record whose bytes do have CRC-32 0 (crc_zero.pt) reads.
TEST(Torch214SkipData, AFilledRecordIsStillRefused) {
  const fs::path dir = test::temp_dir("torch214_filled");
  auto bytes = test::read_bytes(fixture("torch214/skip_data.pt"));
  const auto zip = ZipArchive::open(Source::map_file(fixture("torch214/skip_data.pt")), {});
  const ZipEntry* w = zip.find("skip_data/data/0");
  ASSERT_NE(w, nullptr);
  for (std::uint64_t i = 0; i < w->size; ++i) bytes[w->data_offset + i] = std::byte{0x3f};
  test::write_bytes(dir / "filled.pt", bytes);
  const TensorCatalog cat = open(dir / "filled.pt");
  expect_error([&] { (void)cat.find("w")->bytes(); }, ErrorCode::unsupported, {"skip_data"});
  fs::remove_all(dir);
}

// torch 2.14's torch.export.save names e8m0, uint32 and uint64 by its
// schema's new ScalarType numbers (33, 34, 35).
TEST(Torch214, ExportArchiveDtypes) {
  const TensorCatalog cat = open(fixture("torch214/export.pt2"));
  EXPECT_EQ(cat.format_name(), "torch-export");
  expect_tensors(cat, expected("export"), true, /*views=*/false);
}

TEST(Torch214, ShellDtypesAreRefusedByName) {
  const auto want = expected("uint4_shell");
  expect_error([&] { (void)open(fixture("torch214/uint4_shell.pt")); }, ErrorCode::unsupported,
               {want["refused"].get<std::string>(), "sub-byte shell dtype", "'s'"});
}

// safetensors 0.8.0 writes F4 shapes in 4-bit values (the last dimension
// twice torch's); torchport writes and reads them so, listing torch's shape.
TEST(Torch214, Float4InSafetensorsCountsHalfBytes) {
  const TensorCatalog cat = open(fixture("torch214/views.pt"));
  const fs::path dir = test::temp_dir("torch214_f4");
  std::vector<NamedTensor> f4 = {{"f4", *cat.find("f4")}, {"f4_slice", *cat.find("f4_slice")}};
  save(TensorCatalog::from_tensors(Format::state_dict, f4), dir / "f4.safetensors",
       SaveFormat::safetensors);
  const auto bytes = test::read_bytes(dir / "f4.safetensors");
  std::uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  const auto header = nlohmann::json::parse(
      std::string(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<std::size_t>(n)));
  EXPECT_EQ(header["f4"]["dtype"], "F4");
  EXPECT_EQ(header["f4"]["shape"], nlohmann::json::array({4, 12}));
  EXPECT_EQ(header["f4_slice"]["shape"], nlohmann::json::array({2, 6}));
  EXPECT_EQ(header["f4_slice"]["data_offsets"][1].get<int>() -
                header["f4_slice"]["data_offsets"][0].get<int>(),
            6);
  const TensorCatalog back = open(dir / "f4.safetensors");
  EXPECT_EQ(back.find("f4")->shape(), (Shape{4, 6}));
  EXPECT_EQ(back.find("f4_slice")->nbytes(), 6u);
  EXPECT_EQ(test::tensor_sha256(*back.find("f4_slice")),
            test::tensor_sha256(*cat.find("f4_slice")));
  // A 0-d F4 tensor has no last dimension to count 4-bit values in.
  std::vector<NamedTensor> scalar = {
      {"s", Tensor(DType::F4, {}, {}, 0, cat.find("f4")->storage())}};
  expect_error(
      [&] {
        save(TensorCatalog::from_tensors(Format::state_dict, scalar), dir / "s.safetensors",
             SaveFormat::safetensors);
      },
      ErrorCode::unsupported, {"0-d float4_e2m1fn_x2"});
  EXPECT_FALSE(fs::exists(dir / "s.safetensors"));
  // bcomplex32 has no safetensors dtype.
  std::vector<NamedTensor> bc = {{"bc", *cat.find("bc")}};
  expect_error(
      [&] {
        save(TensorCatalog::from_tensors(Format::state_dict, bc), dir / "bc.safetensors",
             SaveFormat::safetensors);
      },
      ErrorCode::unsupported, {"bcomplex32"});
  fs::remove_all(dir);
}

}  // namespace
