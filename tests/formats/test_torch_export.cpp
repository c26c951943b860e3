// torch.export archives: torch 2.6's layout (make_export_fixtures.py, saved
// by torch 2.6), the PT2 archives torch 2.14 writes
// (make_export214_fixtures.py: what its torch.export.load returned, names,
// views, storages and bytes), the older spec-made PT2 fixtures
// (make_pt2_archive_fixtures.py, which torch 2.14 reads as their expected
// files say), and hostile or damaged archives built here. No Python runs:
// check_export_torch_current (tests/interop) compares with torch itself.

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>

#include "io/zip_writer.hpp"
#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/scan.hpp"
#include "torchport/io/atomic_file.hpp"

using namespace torchport;

namespace {

class TorchExport : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchExport, ListsWhatTorchExportLoadGives) {
  const auto want = test::read_json(test::fixture("export/" + GetParam() + ".expected.json"));
  const auto path = test::fixture("export/" + GetParam() + ".pt2");
  const TensorCatalog cat = open(path);
  EXPECT_EQ(cat.format_name(), want["format"].get<std::string>());
  ASSERT_EQ(cat.size(), want["tensors"].size());
  for (std::size_t i = 0; i < cat.size(); ++i) {
    const auto& w = want["tensors"][i];
    const NamedTensor& t = cat.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, w["name"].get<std::string>());
    EXPECT_EQ(dtype_name(t.tensor.dtype()), w["dtype"].get<std::string>());
    EXPECT_EQ(t.tensor.shape(), w["shape"].get<Shape>());
    EXPECT_EQ(test::tensor_sha256(t.tensor), w["sha256"].get<std::string>());
  }
  EXPECT_EQ(cat.metadata().at("torch_export.schema_version"),
            want["schema_version"].get<std::string>());
  // Its three pickles (weights, constants, example inputs) are judged.
  const ScanReport r = scan(path);
  EXPECT_EQ(r.verdict, ScanVerdict::clean) << scan_verdict_name(r.verdict);
}

INSTANTIATE_TEST_SUITE_P(Saved, TorchExport, ::testing::Values("conv_linear", "buffers"));

class Pt2ArchiveFixture : public ::testing::TestWithParam<std::string> {};

// Names, dtypes, shapes, views and bytes as the spec's loader gives them;
// tensors naming one blob share one storage, as torch.as_strided's do.
TEST_P(Pt2ArchiveFixture, ListsWhatTheSpecsLoaderGives) {
  const auto want = test::read_json(test::fixture("export/" + GetParam() + ".expected.json"));
  const auto path = test::fixture("export/" + GetParam() + ".pt2");
  const TensorCatalog cat = open(path);
  EXPECT_EQ(cat.format_name(), "torch-export");
  EXPECT_EQ(cat.metadata().at("torch_export.layout"), "pt2-archive");
  ASSERT_EQ(cat.size(), want["tensors"].size());
  std::map<std::string, const Tensor*> first_of_blob;
  for (std::size_t i = 0; i < cat.size(); ++i) {
    const auto& w = want["tensors"][i];
    const NamedTensor& t = cat.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, w["name"].get<std::string>());
    EXPECT_EQ(dtype_name(t.tensor.dtype()), w["dtype"].get<std::string>());
    EXPECT_EQ(t.tensor.shape(), w["shape"].get<Shape>());
    EXPECT_EQ(t.tensor.strides(), w["strides"].get<Shape>());
    EXPECT_EQ(t.tensor.storage_offset(), w["offset"].get<std::int64_t>());
    EXPECT_EQ(test::tensor_sha256(t.tensor), w["sha256"].get<std::string>());
    const std::string blob = w["model"].get<std::string>() + "/" + w["source"].get<std::string>() +
                             "/" + w["blob"].get<std::string>();
    if (const auto it = first_of_blob.find(blob); it != first_of_blob.end())
      EXPECT_EQ(t.tensor.storage().get(), it->second->storage().get()) << "not one storage";
    else
      first_of_blob.emplace(blob, &t.tensor);
  }
  const ScanReport r = scan(path);
  EXPECT_EQ(r.verdict, ScanVerdict::clean) << scan_verdict_name(r.verdict);
}

INSTANTIATE_TEST_SUITE_P(Spec, Pt2ArchiveFixture, ::testing::Values("archive", "two_models"));

// Archives written by torch 2.14's torch.export.save and package_pt2
// (make_export214_fixtures.py), each with what torch.export.load (load_pt2
// for several models) gave back: names, dtypes, shapes, strides, offsets,
// bytes and which tensors share a storage, as torch's own loaded objects
// had them; or the refusal and the scan's verdict where torchport reads no
// objects (a tensor subclass, torchbind and opaque objects, AOTInductor).

// Every pickle, member and code record a scan met, the report's own and its
// members', in one list of lines (for looking a name up).
void collect(const ScanReport& r, std::vector<std::string>& out) {
  for (const auto& p : r.pickles)
    for (const auto& g : p.globals)
      out.push_back(r.path + " " + p.name + " " + g.name + (g.allowed ? " allowed" : " flagged"));
  for (const auto& c : r.code_records) out.push_back("code " + c);
  for (const auto& m : r.members) collect(m, out);
}

class Torch214Export : public ::testing::TestWithParam<std::string> {};

TEST_P(Torch214Export, ListsWhatTorchExportLoadGives) {
  const auto want = test::read_json(test::fixture("export/" + GetParam() + ".expected.json"));
  const auto path = test::fixture("export/" + GetParam() + ".pt2");
  if (want.contains("refused")) {
    try {
      (void)open(path);
      ADD_FAILURE() << "read; torchport refuses this archive";
    } catch (const Error& e) {
      EXPECT_EQ(error_code_name(e.code()), want["refused"]["code"].get<std::string>()) << e.what();
      EXPECT_NE(std::string(e.what()).find(want["refused"]["says"].get<std::string>()),
                std::string::npos)
          << e.what();
    }
  } else {
    const TensorCatalog cat = open(path);
    EXPECT_EQ(cat.format_name(), "torch-export");
    EXPECT_EQ(cat.metadata().at("torch_export.layout"), "pt2-archive");
    ASSERT_EQ(cat.size(), want["tensors"].size());
    std::map<std::int64_t, const Storage*> storages;
    for (std::size_t i = 0; i < cat.size(); ++i) {
      const auto& w = want["tensors"][i];
      const NamedTensor& t = cat.tensors()[i];
      SCOPED_TRACE(t.name);
      EXPECT_EQ(t.name, w["name"].get<std::string>());
      EXPECT_EQ(dtype_name(t.tensor.dtype()), w["dtype"].get<std::string>());
      EXPECT_EQ(t.tensor.shape(), w["shape"].get<Shape>());
      EXPECT_EQ(t.tensor.strides(), w["strides"].get<Shape>());
      EXPECT_EQ(t.tensor.storage_offset(), w["offset"].get<std::int64_t>());
      EXPECT_EQ(t.tensor.storage()->nbytes(), w["storage_nbytes"].get<std::uint64_t>());
      EXPECT_EQ(test::tensor_sha256(t.tensor), w["sha256"].get<std::string>());
      // One storage where torch's tensors share one, and only there.
      const auto [it, fresh] =
          storages.try_emplace(w["storage"].get<std::int64_t>(), t.tensor.storage().get());
      if (!fresh) {
        EXPECT_EQ(it->second, t.tensor.storage().get()) << "not one storage";
      }
      for (const auto& [id, st] : storages) {
        if (id != w["storage"].get<std::int64_t>()) {
          EXPECT_NE(st, t.tensor.storage().get()) << "shares storage " << id;
        }
      }
    }
  }
  const ScanReport r = scan(path);
  EXPECT_EQ(scan_verdict_name(r.verdict), want["scan"]["verdict"].get<std::string>()) << r.reason();
  std::vector<std::string> seen;
  collect(r, seen);
  const auto has = [&](const std::string& needle) {
    return std::any_of(seen.begin(), seen.end(),
                       [&](const std::string& l) { return l.find(needle) != std::string::npos; });
  };
  if (want["scan"].contains("global")) {
    EXPECT_TRUE(has(want["scan"]["global"].get<std::string>() + " flagged"));
  }
  if (want["scan"].contains("code")) {
    for (const auto& c : want["scan"]["code"]) {
      EXPECT_TRUE(has("code " + c.get<std::string>()));
    }
  }
  // No finding but the objects' and the code's: the archive is read to its
  // end, nothing is malformed.
  for (const auto& f : r.findings)
    EXPECT_TRUE(f.severity == ScanVerdict::unsafe) << f.reason << ": " << f.message;
}

INSTANTIATE_TEST_SUITE_P(Saved, Torch214Export,
                         ::testing::Values("net214", "multi214", "pickled214", "objects214",
                                           "aoti214"));

// Each object torch 2.14's loader unpickles is judged with what its
// unpickler would import: the opaque object's class (pickle.loads), the
// torchbind class (TorchScript's unpickler), the tensor subclass
// (torch.load(weights_only=False)).
TEST(Torch214Objects, EachObjectIsJudgedAsTheLoaderReadsIt) {
  const ScanReport r = scan(test::fixture("export/objects214.pt2"));
  EXPECT_EQ(r.reading, "ok") << r.reading_error;
  std::vector<std::string> seen;
  collect(r, seen);
  const auto has = [&](const std::string& needle) {
    return std::any_of(seen.begin(), seen.end(),
                       [&](const std::string& l) { return l.find(needle) != std::string::npos; });
  };
  EXPECT_TRUE(has("opaque_obj_0 pickle __main__.Counter flagged"));
  EXPECT_TRUE(
      has("custom_obj_0 archive/data.pkl "
          "__torch__.torch.classes.quantized.LinearPackedParamsBase flagged"));
  // The sample inputs (torch.load, weights_only=True then False) are judged too.
  EXPECT_TRUE(
      has("data/sample_inputs/model.pt archive/data.pkl torch._utils._rebuild_tensor_v2 "
          "allowed"));
  const ScanReport p = scan(test::fixture("export/pickled214.pt2"));
  EXPECT_EQ(p.reading, "ok") << p.reading_error;
}

// A PT2 archive built record by record: a valid one-model archive ("m")
// whose records a test replaces or adds to.
class Pt2Builder {
 public:
  Pt2Builder() {
    set("archive_format", "pt2");
    set("archive_version", "0");
    set("byteorder", "little");
    set("models/m.json", "{}");
    set("data/sample_inputs/m.pt", "");
    const float w[4] = {1.0F, -2.0F, 3.5F, 0.25F};
    set("data/weights/weight_0", std::string(reinterpret_cast<const char*>(w), sizeof w));
    weights("{\"w\": " + payload("weight_0", 7, {4}, {1}, 0) + "}");
    constants("{}");
  }
  static std::string meta(int dtype, const std::vector<std::int64_t>& sizes,
                          const std::vector<std::int64_t>& strides, std::int64_t offset) {
    const auto ints = [](const std::vector<std::int64_t>& v) {
      std::string s = "[";
      for (std::size_t i = 0; i < v.size(); ++i)
        s += (i ? ", " : "") + std::string("{\"as_int\": ") + std::to_string(v[i]) + "}";
      return s + "]";
    };
    return "{\"dtype\": " + std::to_string(dtype) + ", \"sizes\": " + ints(sizes) +
           ", \"requires_grad\": false, \"device\": {\"type\": \"cpu\"}, \"strides\": " +
           ints(strides) + ", \"storage_offset\": {\"as_int\": " + std::to_string(offset) +
           "}, \"layout\": 7}";
  }
  static std::string payload(const std::string& path, int dtype,
                             const std::vector<std::int64_t>& sizes,
                             const std::vector<std::int64_t>& strides, std::int64_t offset) {
    return "{\"path_name\": \"" + path +
           "\", \"is_param\": true, \"use_pickle\": false, \"tensor_meta\": " +
           meta(dtype, sizes, strides, offset) + "}";
  }
  Pt2Builder& set(const std::string& rel, std::string bytes) {
    records_[rel] = std::move(bytes);
    return *this;
  }
  Pt2Builder& weights(const std::string& config) {
    return set("data/weights/m_weights_config.json", "{\"config\": " + config + "}");
  }
  Pt2Builder& constants(const std::string& config) {
    return set("data/constants/m_constants_config.json", "{\"config\": " + config + "}");
  }
  std::filesystem::path write(const std::filesystem::path& dir) const {
    const auto path = dir / "m.pt2";
    AtomicFile f(path);
    ZipWriter z(f);
    for (const auto& [rel, bytes] : records_)  // "/name": outside the archive's folder
      z.add_entry(rel.starts_with("/") ? rel.substr(1) : "m/" + rel,
                  std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
    z.finish();
    f.commit();
    return path;
  }

 private:
  std::map<std::string, std::string> records_;
};

void expect_refused(const Pt2Builder& b, ErrorCode code, const std::string& needle) {
  const auto dir = test::temp_dir("pt2_bad");
  try {
    (void)open(b.write(dir));
    ADD_FAILURE() << "read; expected " << error_code_name(code) << " saying '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Pt2ArchiveBuilt, TheBaseArchiveReads) {
  const auto dir = test::temp_dir("pt2_ok");
  const TensorCatalog cat = open(Pt2Builder().write(dir));
  ASSERT_EQ(cat.size(), 1U);
  EXPECT_EQ(cat.tensors()[0].name, "w");
  EXPECT_EQ(cat.tensors()[0].tensor.shape(), Shape({4}));
  std::filesystem::remove_all(dir);
}

TEST(Pt2ArchiveBuilt, BadPayloadsAreRefusedNamingTheTensor) {
  using B = Pt2Builder;
  expect_refused(B().weights("{\"w\": " + B::payload("../weights/weight_0", 7, {4}, {1}, 0) + "}"),
                 ErrorCode::corrupt, "not a file name");
  expect_refused(B().weights("{\"w\": " + B::payload("weight_9", 7, {4}, {1}, 0) + "}"),
                 ErrorCode::corrupt, "not in the archive");
  // A view past its blob's end (torch's as_strided refuses it too).
  expect_refused(B().weights("{\"w\": " + B::payload("weight_0", 7, {3}, {2}, 0) + "}"),
                 ErrorCode::corrupt, "weight_0");
  expect_refused(B().weights("{\"w\": " + B::payload("weight_0", 7, {4}, {1}, 1) + "}"),
                 ErrorCode::corrupt, "weight_0");
  // 10 bytes are no whole number of F32 elements.
  expect_refused(B().set("data/weights/weight_0", std::string(10, '\0')), ErrorCode::corrupt,
                 "whole number");
  // A fake tensor's empty blob: torch's loader would give zeros.
  expect_refused(B().set("data/weights/weight_0", ""), ErrorCode::corrupt, "holds no bytes");
  // Two tensors of one blob with different dtypes: torch views both as the first's.
  expect_refused(B().weights("{\"w\": " + B::payload("weight_0", 7, {4}, {1}, 0) +
                             ", \"v\": " + B::payload("weight_0", 4, {4}, {1}, 0) + "}"),
                 ErrorCode::corrupt, "view it as the first");
  expect_refused(B().weights("{\"w\": {\"path_name\": \"weight_0\", \"is_param\": true, "
                             "\"use_pickle\": false, \"tensor_meta\": {\"dtype\": 7, \"sizes\": "
                             "[{\"as_expr\": {\"expr_str\": \"s0\"}}], \"requires_grad\": false, "
                             "\"device\": {\"type\": \"cpu\"}, \"strides\": [{\"as_int\": 1}], "
                             "\"storage_offset\": {\"as_int\": 0}, \"layout\": 7}}}"),
                 ErrorCode::unsupported, "symbolic size");
  std::string negative = B::payload("weight_0", 7, {4}, {1}, 0);
  const std::string stride = "\"strides\": [{\"as_int\": 1}]";
  negative.replace(negative.find(stride), stride.size(), "\"strides\": [{\"as_int\": -1}]");
  expect_refused(B().weights("{\"w\": " + negative + "}"), ErrorCode::corrupt, "n >= 0");
  std::string later = B::payload("weight_0", 7, {4}, {1}, 0);
  const std::string layout = "\"layout\": 7";
  later.replace(later.find(layout), layout.size(), "\"layout\": 7, \"memory_format\": 1");
  expect_refused(B().weights("{\"w\": " + later + "}"), ErrorCode::unsupported, "memory_format");
  expect_refused(B().weights("{\"w\": " + B::payload("weight_0", 99, {4}, {1}, 0) + "}"),
                 ErrorCode::unsupported, "ScalarType");
  expect_refused(B().weights("{\"w\": {\"path_name\": \"weight_0\"}}"), ErrorCode::corrupt,
                 "PayloadMeta");
  expect_refused(B().weights("{\"w\": 1, \"w\": 2}"), ErrorCode::corrupt, "w");
}

TEST(Pt2ArchiveBuilt, WhatTorchReadsOtherwiseIsRefused) {
  using B = Pt2Builder;
  expect_refused(B().set("archive_version", "1"), ErrorCode::unsupported, "version '1'");
  expect_refused(B().set("byteorder", "big"), ErrorCode::unsupported, "byte order 'big'");
  expect_refused(B().set("archive_format", "pt3"), ErrorCode::corrupt, "archive_format");
  // One name both a weight and a constant: which one the program gets is
  // the reader's choice.
  expect_refused(B().set("data/constants/tensor_0", std::string(16, '\0'))
                     .constants("{\"w\": " + B::payload("tensor_0", 7, {4}, {1}, 0) + "}"),
                 ErrorCode::ambiguous, "both a weight and a constant");
  // Both layouts in one archive: torch 2.6 and later torches read different files.
  expect_refused(B().set("/serialized_exported_program.json", "{}"), ErrorCode::ambiguous,
                 "both layouts");
  expect_refused(B().set("models/m.txt", "{}"), ErrorCode::corrupt, "models/<model>.json");
  expect_refused(B().set("data/weights/m_weights_config.json", "[]"), ErrorCode::corrupt,
                 "PayloadConfig");
}

// The older PT2 layout: data/weights/<model>.pt and data/constants/<model>.pt
// are torch.save archives of the dicts (no configs); read by the .pt reader.
TEST(Pt2ArchiveBuilt, OlderLayoutReadsTheSavedDicts) {
  const auto bytes = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string saved = bytes(test::fixture("views.pt"));
  Pt2Builder b;
  b.set("data/weights/m_weights_config.json", "not read")
      .set("data/weights/m.pt", saved)
      .set("data/constants/m.pt", bytes(test::fixture("protocol2.pt")));
  const auto dir = test::temp_dir("pt2_older");
  const TensorCatalog cat = open(b.write(dir));
  const TensorCatalog weights = open(test::fixture("views.pt"));
  const TensorCatalog constants = open(test::fixture("protocol2.pt"));
  ASSERT_EQ(cat.size(), weights.size() + constants.size());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    EXPECT_EQ(cat.tensors()[i].name, weights.tensors()[i].name);
    EXPECT_EQ(test::tensor_sha256(cat.tensors()[i].tensor),
              test::tensor_sha256(weights.tensors()[i].tensor));
  }
  EXPECT_EQ(cat.tensors()[weights.size()].name, constants.tensors()[0].name);
  std::filesystem::remove_all(dir);
}

// A weights .pt is read as torch.load reads the io.BytesIO torch.export
// hands it (the registry's read_as_torch_load): a zip, else a pickle, never
// a tar (torch tries tarfile only on a real file), so a tar-format
// torch.save file fails as torch's unpickler fails on it; a zip the
// registry tells as numpy's .npz, which torch.load fails on, is refused.
TEST(Pt2ArchiveBuilt, OlderLayoutBlobsAreReadAsTorchLoadReadsThem) {
  const auto bytes = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const auto dir = test::temp_dir("pt2_nested");
  Pt2Builder b;
  b.set("data/weights/m_weights_config.json", "not read")
      .set("data/weights/m.pt", bytes(test::fixture("tar.pt")));
  ASSERT_EQ(open(test::fixture("tar.pt")).format(), Format::pytorch_tar);  // read from a file
  expect_refused(b, ErrorCode::corrupt, "m/data/weights/m.pt");
  // An .npz of one float32 array, as np.savez writes it.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
  header.resize(128 - 10 - 1, ' ');  // magic, version and length, then 118 bytes
  header += '\n';
  std::string npy = std::string("\x93NUMPY\x01\x00", 8) + std::string(1, '\x76') +
                    std::string(1, '\0') + header + std::string(4, '\0');
  std::string npz;
  {
    const auto zdir = dir / "z";
    std::filesystem::create_directories(zdir);
    AtomicFile f(zdir / "a.npz");
    ZipWriter z(f);
    z.add_entry("a.npy", std::as_bytes(std::span<const char>(npy.data(), npy.size())));
    z.finish();
    f.commit();
    ASSERT_EQ(open(zdir / "a.npz").format_name(), "numpy");
    npz = bytes(zdir / "a.npz");
  }
  Pt2Builder c;
  c.set("data/weights/m_weights_config.json", "not read").set("data/weights/m.pt", npz);
  expect_refused(c, ErrorCode::corrupt, "no data.pkl");
  std::filesystem::remove_all(dir);
}

// Objects among the constants are pickles torch unpickles (an opaque
// object with pickle.loads): open refuses them, a scan judges them; a
// weight blob that is a pickle is judged too (a loader reading weights from
// disk torch.loads every file under data/weights/).
TEST(Pt2ArchiveBuilt, PickledObjectsAreRefusedAndJudged) {
  // pickle protocol 2: os.system('touch /tmp/torchport-pt2-pwned')
  const std::string evil = std::string("\x80\x02") + "cos\nsystem\nq\x00X\x1e\x00\x00\x00" +
                           "touch /tmp/torchport-pt2-pwned" + "q\x01\x85q\x02Rq\x03.";
  const auto b = Pt2Builder()
                     .set("data/constants/opaque_obj_0", evil)
                     .constants(
                         "{\"hook\": {\"path_name\": \"opaque_obj_0\", \"is_param\": "
                         "false, \"use_pickle\": true, \"tensor_meta\": null}}");
  expect_refused(b, ErrorCode::unsupported, "pickle.loads");
  const auto dir = test::temp_dir("pt2_evil");
  const ScanReport r = scan(b.write(dir));
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe);
  const auto dir2 = test::temp_dir("pt2_evil_weight");
  const ScanReport w = scan(Pt2Builder().set("data/weights/weight_1", evil).write(dir2));
  EXPECT_EQ(w.verdict, ScanVerdict::unsafe);
  // Named as a raw weight, the pickle is still judged (torch.load would run it).
  const ScanReport named =
      scan(Pt2Builder()
               .set("data/weights/weight_0", evil + std::string(3, '\0'))
               .weights("{\"w\": " + Pt2Builder::payload("weight_0", 1, {56}, {1}, 0) + "}")
               .write(dir2));
  EXPECT_EQ(named.verdict, ScanVerdict::unsafe);
  // Each place torch 2.14's loader unpickles: a use_pickle weight
  // (torch.load, weights_only=False), the sample inputs (torch.load,
  // weights_only=True and then False), a torchbind object (TorchScript's
  // unpickler), an opaque object (pickle.loads).
  const std::string pickled =
      "{\"w\": {\"path_name\": \"weight_0\", \"is_param\": true, \"use_pickle\": true, "
      "\"tensor_meta\": " +
      Pt2Builder::meta(7, {4}, {1}, 0) + "}}";
  const auto use_pickle = Pt2Builder().set("data/weights/weight_0", evil).weights(pickled);
  expect_refused(use_pickle, ErrorCode::unsafe_global, "os.system");
  EXPECT_EQ(scan(use_pickle.write(dir2)).verdict, ScanVerdict::unsafe);
  const auto inputs = Pt2Builder().set("data/sample_inputs/m.pt", evil);
  EXPECT_EQ(scan(inputs.write(dir2)).verdict, ScanVerdict::unsafe);
  const auto custom = Pt2Builder()
                          .set("data/constants/custom_obj_0", evil)
                          .constants(
                              "{\"obj\": {\"path_name\": \"custom_obj_0\", \"is_param\": "
                              "false, \"use_pickle\": true, \"tensor_meta\": null}}");
  expect_refused(custom, ErrorCode::unsupported, "torchbind");
  const ScanReport c = scan(custom.write(dir2));
  EXPECT_EQ(c.verdict, ScanVerdict::unsafe);
  EXPECT_EQ(c.reading, "ok") << c.reading_error;
  // Raw floats that merely begin like a pickle (0x80 0x02, then no opcode)
  // are tensor data: the archive is clean, not malformed.
  const std::string raw = std::string("\x80\x02\xff\xfe", 4) + std::string(12, '\x01');
  const ScanReport data = scan(Pt2Builder().set("data/weights/weight_0", raw).write(dir2));
  EXPECT_EQ(data.verdict, ScanVerdict::clean) << scan_verdict_name(data.verdict);
  EXPECT_FALSE(std::filesystem::exists("/tmp/torchport-pt2-pwned"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(dir2);
}

// What torch.load reads from memory (a use_pickle payload, the example
// inputs) is judged as it reads it: a zip, else a pickle, whatever else the
// bytes look like. Bytes that are neither torch.load fails on, so open()
// refuses them, and the scan may not call them clean as "no model file".
TEST(Pt2ArchiveBuilt, WhatTorchLoadReadsIsJudgedAsItReadsIt) {
  const std::string pickled =
      "{\"w\": {\"path_name\": \"weight_0\", \"is_param\": true, \"use_pickle\": true, "
      "\"tensor_meta\": " +
      Pt2Builder::meta(7, {4}, {1}, 0) + "}}";
  // LONG_BINPUT on an empty stack: pickle's unpickler stops at byte 0.
  const std::string broken = std::string("r.c\x04", 4) + std::string(28, '\0');
  const auto b = Pt2Builder().set("data/weights/weight_0", broken).weights(pickled);
  expect_refused(b, ErrorCode::corrupt, "m/data/weights/weight_0");
  const auto dir = test::temp_dir("pt2_torch_load");
  const ScanReport r = scan(b.write(dir));
  EXPECT_EQ(r.verdict, ScanVerdict::malformed) << scan_verdict_name(r.verdict);
  const auto member = [](const ScanReport& s, const std::string& rel) -> const ScanReport* {
    for (const auto& m : s.members)
      if (m.path.ends_with("!m/" + rel)) return &m;
    ADD_FAILURE() << "no member " << rel;
    return nullptr;
  };
  const ScanReport* w = member(r, "data/weights/weight_0");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->format, "pytorch-legacy");
  EXPECT_EQ(w->verdict, ScanVerdict::malformed);
  // The example inputs: a tar-format torch.save file is a pickle to
  // torch.load from memory, which fails on it.
  const std::string tar = [] {
    std::ifstream in(test::fixture("tar.pt"), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const ScanReport t = scan(Pt2Builder().set("data/sample_inputs/m.pt", tar).write(dir));
  EXPECT_NE(t.verdict, ScanVerdict::clean) << scan_verdict_name(t.verdict);
  const ScanReport* in = member(t, "data/sample_inputs/m.pt");
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->format, "pytorch-legacy");
  std::filesystem::remove_all(dir);
}

// An AOTInductor package (the PT2 archive layout: archive_format and
// compiled shared objects under data/aotinductor/): refused by name, and
// its shared object is code to a scan.
TEST(TorchExportLater, AotInductorPackageIsRefusedAndItsCodeListed) {
  const auto dir = test::temp_dir("aoti");
  const auto path = dir / "model.pt2";
  {
    AtomicFile f(path);
    ZipWriter z(f);
    const auto add = [&](std::string_view name, std::string_view text) {
      z.add_entry(name, std::as_bytes(std::span<const char>(text.data(), text.size())));
    };
    add("version", "0");
    add("archive_format", "pt2");
    add("data/aotinductor/model/model.so",
        "\x7f"
        "ELF (a shared object; it would run on load)");
    z.finish();
    f.commit();
  }
  try {
    (void)open(path);
    FAIL() << "an AOTInductor package was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("AOTInductor"), std::string::npos) << e.what();
  }
  const ScanReport r = scan(path);
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe);
  bool listed = false;
  for (const auto& f : r.findings) listed = listed || f.reason == "compiled-code";
  EXPECT_TRUE(listed);
  std::filesystem::remove_all(dir);
}

// torch 2.6's layout as torch.export.load (2.6, and 2.14's fallback) reads
// it: Python's zipfile, the last of serialized_state_dict.pt / .json in the
// archive's order, a version record of major 8, the constants and example
// inputs present.
TEST(TorchExportSaved, ReadAsTorchExportLoadReadsIt) {
  const auto bytes = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string views = bytes(test::fixture("views.pt"));
  const std::string protocol2 = bytes(test::fixture("protocol2.pt"));
  const std::string others = bytes(test::fixture("dtypes.pt"));  // the constants
  const auto dir = test::temp_dir("export26");
  const auto write = [&](const std::vector<std::pair<std::string, std::string>>& records) {
    const auto path = dir / "e.pt2";
    AtomicFile f(path);
    ZipWriter z(f);
    for (const auto& [name, data] : records)
      z.add_entry(name, std::as_bytes(std::span<const char>(data.data(), data.size())));
    z.finish();
    f.commit();
    return path;
  };
  const auto first_name = [](const std::filesystem::path& p) {
    return open(p).tensors().at(0).name;
  };
  const std::string want_views = open(test::fixture("views.pt")).tensors().at(0).name;
  const std::string want_p2 = open(test::fixture("protocol2.pt")).tensors().at(0).name;
  ASSERT_NE(want_views, want_p2);
  // Both spellings: the later one is the state dict.
  EXPECT_EQ(first_name(write({{"serialized_exported_program.json", "{}"},
                              {"serialized_state_dict.pt", views},
                              {"serialized_state_dict.json", protocol2},
                              {"serialized_constants.pt", others},
                              {"serialized_example_inputs.pt", ""},
                              {"version", "8.2"}})),
            want_p2);
  EXPECT_EQ(first_name(write({{"serialized_exported_program.json", "{}"},
                              {"serialized_state_dict.json", protocol2},
                              {"serialized_state_dict.pt", views},
                              {"serialized_constants.pt", others},
                              {"serialized_example_inputs.pt", ""},
                              {"version", "8.2"}})),
            want_views);
  const auto refused = [&](const std::vector<std::pair<std::string, std::string>>& records,
                           ErrorCode code, const std::string& needle) {
    try {
      (void)open(write(records));
      ADD_FAILURE() << "read; expected " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Example inputs naming a class torch imports (its torch.load falls back
  // to weights_only=False): judged as a file of their own, the archive
  // still read to its end.
  const std::string thing =
      std::string("\x80\x02") + std::string("cmymod\nThing\nq\x00)\x81q\x01.", 20);
  const auto with_inputs = write({{"serialized_exported_program.json", "{}"},
                                  {"serialized_state_dict.pt", views},
                                  {"serialized_constants.pt", others},
                                  {"serialized_example_inputs.pt", thing},
                                  {"version", "8.2"}});
  EXPECT_EQ(first_name(with_inputs), want_views);
  const ScanReport r = scan(with_inputs);
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe);
  EXPECT_EQ(r.reading, "ok") << r.reading_error;
  refused({{"serialized_exported_program.json", "{}"},
           {"serialized_state_dict.pt", views},
           {"serialized_example_inputs.pt", ""},
           {"version", "8.2"}},
          ErrorCode::corrupt, "serialized_constants.pt");
  refused({{"serialized_exported_program.json", "{}"},
           {"serialized_state_dict.pt", views},
           {"serialized_constants.pt", others},
           {"serialized_example_inputs.pt", ""}},
          ErrorCode::corrupt, "version record");
  refused({{"serialized_exported_program.json", "{}"},
           {"serialized_state_dict.pt", views},
           {"serialized_constants.pt", others},
           {"serialized_example_inputs.pt", ""},
           {"version", "9.0"}},
          ErrorCode::unsupported, "major version 8");
  std::filesystem::remove_all(dir);
}

// An export archive whose state dict is another export archive (each
// level would recurse, as deep as the file is long): refused at the
// second level. Each level ends with 70 KB of padding so that no inner end
// record lies in the last 64 KiB, where zip readers look for theirs.
TEST(TorchExportLater, NestedExportArchivesAreRefused) {
  const auto dir = test::temp_dir("pt2_nested");
  std::string inner = "not reached";
  const std::string pad(70000, 'p');
  for (int level = 0; level < 3; ++level) {
    const auto path = dir / "level.pt2";
    {
      AtomicFile f(path);
      ZipWriter z(f);
      const auto add = [&](std::string_view name, std::string_view text) {
        z.add_entry(name, std::as_bytes(std::span<const char>(text.data(), text.size())));
      };
      add("serialized_exported_program.json", "{}");
      add("serialized_state_dict.pt", inner);
      add("serialized_constants.pt", "not reached");
      add("serialized_example_inputs.pt", "not reached");
      add("version", "8.2");
      add("extra_files/pad", pad);
      z.finish();
      f.commit();
    }
    std::ifstream in(path, std::ios::binary);
    inner.assign(std::istreambuf_iterator<char>(in), {});
  }
  try {
    (void)open(dir / "level.pt2");
    FAIL() << "nested export archives were read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::corrupt) << e.what();
    EXPECT_NE(std::string(e.what()).find("inside another"), std::string::npos) << e.what();
  }
  (void)scan(dir / "level.pt2");  // judged without recursing
  std::filesystem::remove_all(dir);
}

}  // namespace
