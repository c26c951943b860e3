// numpy values in pickles (tests/fixtures/numpy/make_numpy_fixtures.py):
// arrays of every numeric dtype, both byte orders and both memory orders,
// written with protocols 2-5, become tensors with the bytes numpy holds;
// numpy scalars become numbers; object and string arrays stay inert; plain
// pickles of numpy containers and torch checkpoints holding numpy values
// open; bad numpy states are refused with their error.

#include <filesystem>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/scan.hpp"
#include "torchport/io/source.hpp"
#include "torchport/record/load.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::fixture;

namespace {

std::vector<fs::path> expectation_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fixture("numpy")))
    if (e.path().string().ends_with(".expected.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

fs::path data_file(const fs::path& expected) {
  const std::string s = expected.string();
  const std::string stem = s.substr(0, s.size() - 14);
  return fs::exists(stem + ".pkl") ? fs::path(stem + ".pkl") : fs::path(stem + ".pt");
}

// The value at a dotted path: dict keys, list indices.
const Value* at_path(const Value& root, const std::string& dotted) {
  const Value* v = &root;
  std::size_t start = 0;
  for (;;) {
    const auto dot = dotted.find('.', start);
    const std::string seg =
        dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v->is(Value::Kind::Dict))
      v = v->find(seg);
    else if (v->is(Value::Kind::List) || v->is(Value::Kind::Tuple)) {
      const auto i = std::stoul(seg);
      v = i < v->size() ? &v->items()[i] : nullptr;
    } else
      v = nullptr;
    if (!v || dot == std::string::npos) return v;
    start = dot + 1;
  }
}

class NumpyFixture : public ::testing::TestWithParam<fs::path> {};

TEST_P(NumpyFixture, MatchesNumpy) {
  const auto want = test::read_json(GetParam());
  const TensorCatalog cat = open(data_file(GetParam()));
  EXPECT_EQ(cat.format_name(), want["format"].get<std::string>());
  test::expect_tensors(cat, want);
  if (want.contains("values"))
    for (const auto& [key, value] : want["values"].items()) {
      SCOPED_TRACE(key);
      const Value* v = at_path(cat.root(), key);
      ASSERT_NE(v, nullptr);
      if (value.is_boolean()) {
        EXPECT_EQ(v->as_bool(), value.get<bool>());
      } else if (value.is_number_integer()) {
        EXPECT_EQ(v->as_int(), value.get<std::int64_t>());
      } else if (value.is_number_float()) {
        EXPECT_EQ(v->as_float(), value.get<double>());
      } else {
        EXPECT_EQ(v->as_str(), value.get<std::string>());
      }
    }
  if (want.contains("inert"))
    for (const auto& key : want["inert"]) {
      const Value* v = at_path(cat.root(), key.get<std::string>());
      ASSERT_NE(v, nullptr) << key;
      EXPECT_TRUE(v->is(Value::Kind::Object)) << key << ": " << v->repr(3);
    }
  test::expect_tensors(materialize(cat, Residence::owned), want);
}

INSTANTIATE_TEST_SUITE_P(All, NumpyFixture, ::testing::ValuesIn(expectation_files()),
                         [](const auto& p) {
                           const std::string n = p.param.filename().string();
                           return test::param_name(n.substr(0, n.size() - 14));
                         });

using test::BadCase;

class NumpyBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(NumpyBad, IsRefusedWithItsError) {
  const BadCase& c = GetParam();
  try {
    open(fixture("numpy/bad/" + c.file));
    FAIL() << c.file << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), c.code) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    EXPECT_EQ(e.key(), "x") << e.what();  // the key path of the bad value
    EXPECT_TRUE(e.offset().has_value()) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(All, NumpyBad,
                         ::testing::ValuesIn(test::bad_cases(fixture("numpy/bad/expected.json"))),
                         [](const auto& p) { return test::param_name(p.param.file); });

TEST(Numpy, LayoutIsKept) {
  const TensorCatalog cat = open(fixture("numpy/arrays_protocol2.pkl"));
  // Fortran order arrives as Fortran strides over the pickled bytes.
  const Tensor* f = cat.find("f4_le_fortran");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->strides(), (Shape{1, 2, 6}));
  const Tensor* t = cat.find("transposed");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape(), (Shape{4, 3}));
  EXPECT_FALSE(t->is_contiguous());
  const Tensor* z = cat.find("zero_d");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->dim(), 0);
  const Tensor zc = z->contiguous();
  EXPECT_EQ(zc.span<double>()[0], 2.5);
  // Big-endian elements are swapped to ours.
  EXPECT_TRUE(cat.find("i4_be")->equal(*cat.find("i4_le")));
  EXPECT_TRUE(
      cat.find("c16_be_fortran")->contiguous().equal(cat.find("c16_le_fortran")->contiguous()));
}

TEST(Numpy, ScalarsAreNumbersInTheJson) {
  const TensorCatalog cat = open(fixture("numpy/training_numpy.pt"));
  const std::string json = to_json(cat.values());
  EXPECT_NE(json.find("\"best_acc\":0.93"), std::string::npos) << json;
  EXPECT_NE(json.find("\"epoch\":3"), std::string::npos) << json;
  ASSERT_NE(cat.find("arr"), nullptr);
  EXPECT_EQ(cat.find("arr")->dtype(), DType::I64);
  // A u64 scalar past int64 is a Python int.
  const TensorCatalog arrays = open(fixture("numpy/arrays_protocol4.pkl"));
  const Value* u = arrays.root().find("scalars")->find("u64");
  ASSERT_NE(u, nullptr);
  ASSERT_TRUE(u->is(Value::Kind::BigInt));
  EXPECT_EQ(u->as_bytes(), std::string("\x05\0\0\0\0\0\0\x80\0", 9));
}

TEST(Numpy, PlainPicklesReadFromMemoryToo) {
  const auto bytes = test::read_bytes(fixture("numpy/detectron2_style.pkl"));
  const TensorCatalog cat = open(Source::from_buffer(bytes, "detectron2_style.pkl"));
  EXPECT_EQ(cat.format_name(), "pickle");
  EXPECT_EQ(cat.select("model").size(), 3u);
}

TEST(Numpy, UnknownGlobalsPolicyAllowsNumpy) {
  // numpy's constructors are on the allow-list: refusing unknown globals
  // still reads a numpy checkpoint.
  OpenOptions o;
  o.allow_unknown_globals = false;
  EXPECT_EQ(open(fixture("numpy/detectron2_style.pkl"), o).size(), 3u);
  EXPECT_EQ(open(fixture("numpy/training_numpy.pt"), o).size(), 6u);
}

TEST(Numpy, ConvertsToSafetensorsAndPytorch) {
  const fs::path dir = test::temp_dir("numpy_convert");
  const TensorCatalog cat = open(fixture("numpy/arrays_protocol5.pkl"));
  // complex128 has no safetensors dtype: convert the rest.
  std::vector<NamedTensor> kept;
  for (const auto& t : cat.tensors())
    if (t.tensor.dtype() != DType::C128) kept.push_back(t);
  save(TensorCatalog::from_tensors(Format::pickle, kept), dir / "a.safetensors",
       SaveFormat::safetensors);
  const TensorCatalog back = open(dir / "a.safetensors");
  ASSERT_EQ(back.size(), kept.size());
  for (const auto& t : kept) EXPECT_TRUE(back.find(t.name)->equal(t.tensor.contiguous())) << t.name;
  save(open(fixture("numpy/training_numpy.pt")), dir / "b.pt", SaveFormat::pytorch);
  const TensorCatalog pt = open(dir / "b.pt");
  EXPECT_TRUE(pt.find("rng")->equal(*open(fixture("numpy/training_numpy.pt")).find("rng")));
}

TEST(Numpy, ScanNamesObjectArrays) {
  for (int proto = 2; proto <= 5; ++proto) {
    SCOPED_TRACE(proto);
    const ScanReport r = scan(fixture("numpy/arrays_protocol" + std::to_string(proto) + ".pkl"));
    ASSERT_EQ(r.pickles.size(), 1u);
    EXPECT_EQ(r.pickles[0].object_array_count, 1u);
    EXPECT_EQ(r.pickles[0].object_arrays, std::vector<std::string>{"objects"});
  }
  // A checkpoint with numeric arrays only names none.
  const ScanReport r = scan(fixture("numpy/training_numpy.pt"));
  for (const auto& p : r.pickles) EXPECT_EQ(p.object_array_count, 0u) << p.name;
}

// An .npy of version 1.0 with this header text and body, padded as np.save pads.
Source npy_file(const std::string& header, const std::string& body) {
  std::string h = header;
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string b = std::string("\x93NUMPY\x01\x00", 8);
  b += static_cast<char>(h.size() & 0xff);
  b += static_cast<char>(h.size() >> 8);
  b += h + body;
  const auto* p = reinterpret_cast<const std::byte*>(b.data());
  return Source::from_buffer(std::vector<std::byte>(p, p + b.size()), "crafted.npy");
}

// Headers numpy reads with ast.literal_eval whose dtype holds objects, in the
// forms a reader that accepts less would miss: each is an object array, its
// data a pickle numpy runs (np.load(allow_pickle=True)), so a scan judges it.
TEST(Numpy, HeadersAreReadAsAstLiteralEvalReadsThem) {
  const std::string evil = std::string(
      "\x80\x03"
      "cposix\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.",
      31);
  const std::string benign = std::string("\x80\x03]q\x00(K\x01K\x02e.", 12);
  const char* headers[] = {
      "{'descr': '|O', # a comment\n 'fortran_order': False, 'shape': (2,), }",
      "{'descr': '|' 'O', 'fortran_order': False, 'shape': (2,), }",
      "{'descr': '\\x7cO', 'fortran_order': False, 'shape': (2,), }",
      "{'descr': '\\u007cO', 'fortran_order': False, 'shape': (2,), }",
      "{'descr':\x0c'|O',\r'fortran_order': False, 'shape': (2,)}",
      "{'descr': '(2,)O', 'fortran_order': False, 'shape': (1,), }",
      "{'descr': ['aO'], 'fortran_order': False, 'shape': (2,), }",
      "{'descr': '4,O', 'fortran_order': False, 'shape': (2,), }",
      "\x0c {'descr': '|O', 'fortran_order': False, 'shape': (2L,), }",
  };
  for (const char* h : headers) {
    SCOPED_TRACE(h);
    const ScanReport bad = scan(npy_file(h, evil));
    EXPECT_EQ(bad.verdict, ScanVerdict::unsafe) << bad.reason();
    const ScanReport good = scan(npy_file(h, benign));
    EXPECT_EQ(good.verdict, ScanVerdict::clean) << good.reason();
    EXPECT_NO_THROW((void)open(npy_file(h, benign)));
  }
  // Numbers, however the header is written, are a tensor of numpy's dtype.
  const TensorCatalog c =
      open(npy_file("{'descr': '<' 'f4', 'fortran_order': False, # c\n"
                    " 'shape': (0x2,)}",
                    std::string(8, '\0')));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.tensors().front().tensor.dtype(), DType::F32);
  EXPECT_EQ(c.tensors().front().tensor.shape(), (Shape{2}));
}

// A header this reader cannot read (\N{...} needs Unicode's name table) is
// refused by name, and a scan still judges its data as the pickle numpy may
// run: never clean by default.
TEST(Numpy, AHeaderNotReadHasItsDataJudged) {
  const std::string h = "{'descr': '\\N{VERTICAL LINE}O', 'fortran_order': False, 'shape': (2,), }";
  try {
    (void)open(npy_file(h, ""));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("\\N{"), std::string::npos) << e.what();
  }
  const std::string evil = std::string(
      "\x80\x03"
      "cposix\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.",
      31);
  EXPECT_EQ(scan(npy_file(h, evil)).verdict, ScanVerdict::unsafe);
}

}  // namespace
