// Files the libraries on top of torch save (tests/fixtures/ecosystem, made by
// make_ecosystem_fixtures.py under the current torch with torchao and
// transformers): torchao's quantized weights, tensor subclasses without
// storage of their own, read as their component tensors once the user
// trusts their class and refused by name otherwise; and transformers'
// training_args.bin, read and scanned clean with the opt-in profile of its
// classes, refused by name without it, and written back to a .pt that
// reads the same.

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "conversion_helpers.hpp"
#include "pickle/unpickler.hpp"
#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/scan.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::expect_error;
using torchport::test::fixture;

namespace {

constexpr const char* kInt8Tensor = "torchao.quantization.Int8Tensor";
constexpr const char* kProfile = "transformers-training-args";

nlohmann::json expected(const std::string& name) {
  return test::read_json(fixture("ecosystem/" + name + ".expected.json"));
}

OpenOptions trusting(std::vector<std::string> allow, std::vector<std::string> profiles = {}) {
  OpenOptions o;
  o.allow = std::move(allow);
  o.profiles = std::move(profiles);
  return o;
}

// The catalogue's values tree holds each subclass as the call torch
// makes: _rebuild_from_type_v2(_rebuild_wrapper_subclass, cls, args),
// its class, dtype and shape in the arguments.
void expect_subclasses(const TensorCatalog& cat, const nlohmann::json& want) {
  for (const auto& [name, w] : want["subclasses"].items()) {
    SCOPED_TRACE(name);
    const std::string cls = w["class"].get<std::string>();
    EXPECT_EQ(cat.metadata().at("torchport.subclass." + name), cls);
    const Value* v = cat.root().find(name);
    ASSERT_NE(v, nullptr);
    ASSERT_TRUE(v->is(Value::Kind::Object)) << v->repr();
    const Object& o = v->as_object();
    EXPECT_TRUE(o.cls.is("torch._tensor", "_rebuild_from_type_v2"));
    ASSERT_EQ(o.args.size(), 3u);
    EXPECT_TRUE(o.args.items()[0].as_global().is("torch._utils", "_rebuild_wrapper_subclass"));
    EXPECT_EQ(o.args.items()[1].as_global().qualified(), cls);
    const auto& wrapper = o.args.items()[2].items();
    ASSERT_EQ(wrapper.size(), 8u);
    EXPECT_EQ(wrapper[1].as_global().qualified(), "torch.float32");
    std::vector<std::int64_t> shape;
    for (const Value& d : wrapper[2].items()) shape.push_back(d.as_int());
    EXPECT_EQ(shape, w["shape"].get<std::vector<std::int64_t>>());
    // Its tensors are attributes, listed as NAME.ATTR; nothing densified.
    EXPECT_EQ(cat.find(name), nullptr);
    ASSERT_TRUE(o.state.is(Value::Kind::Dict));
    EXPECT_NE(o.state.find("qdata"), nullptr);
  }
}

TEST(Ecosystem, TorchaoSubclassesAreRefusedByNameUntilTrusted) {
  const fs::path file = fixture("ecosystem/torchao_int8.pt");
  const Error e = expect_error([&] { open(file); }, ErrorCode::unsupported,
                               {kInt8Tensor, "--allow torchao.quantization.Int8Tensor",
                                "its data are tensors among its attributes"});
  EXPECT_EQ(e.key(), "0.weight");
  EXPECT_TRUE(e.offset().has_value());
  // The scan names the class it would import, and nothing else.
  const ScanReport r = scan(file);
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe);
  std::set<std::string> named;
  for (const auto& f : r.findings) named.insert(f.global);
  EXPECT_EQ(named, std::set<std::string>{kInt8Tensor});
  EXPECT_EQ(scan(file, trusting({kInt8Tensor})).verdict, ScanVerdict::clean);
}

TEST(Ecosystem, TorchaoSubclassesReadAsTheirComponentTensors) {
  const auto want = expected("torchao_int8");
  for (const std::string& pattern : {std::string(kInt8Tensor), std::string("torchao.*")}) {
    SCOPED_TRACE(pattern);
    const TensorCatalog cat = open(fixture("ecosystem/torchao_int8.pt"), trusting({pattern}));
    test::expect_tensors(cat, want);
    expect_subclasses(cat, want);
    test::expect_tensors(materialize(cat, Residence::owned), want);
  }
}

TEST(Ecosystem, TorchaoSubclassesWriteBackToPt) {
  const auto want = expected("torchao_int8");
  const fs::path dir = test::temp_dir("ecosystem_torchao");
  SaveOptions s;
  s.keep_tree = true;
  // A .pt naming the class makes torch import it: only when trusted.
  expect_error(
      [&] {
        save(open(fixture("ecosystem/torchao_int8.pt"), trusting({kInt8Tensor})), dir / "no.pt",
             SaveFormat::pytorch, s);
      },
      ErrorCode::unsupported, {kInt8Tensor, "not on the allow-list"});
  s.allow = {kInt8Tensor};
  save(open(fixture("ecosystem/torchao_int8.pt"), trusting({kInt8Tensor})), dir / "out.pt",
       SaveFormat::pytorch, s);
  const TensorCatalog back = open(dir / "out.pt", trusting({kInt8Tensor}));
  test::expect_tensors(back, want);
  expect_subclasses(back, want);
  EXPECT_EQ(scan(dir / "out.pt", trusting({kInt8Tensor})).verdict, ScanVerdict::clean);
  // A tensor file holds the components, named as listed.
  save(open(fixture("ecosystem/torchao_int8.pt"), trusting({kInt8Tensor})), dir / "out.safetensors",
       SaveFormat::safetensors);
  test::expect_tensors(open(dir / "out.safetensors"), want);
  fs::remove_all(dir);
}

TEST(Ecosystem, MalformedSubclassesAreRefusedByName) {
  for (const char* name : {"other_class", "no_tensor", "sparse_layout", "list_state"}) {
    SCOPED_TRACE(name);
    const auto want = expected(std::string("torchao_bad_") + name);
    const fs::path file = fixture(std::string("ecosystem/torchao_bad_") + name + ".pt");
    const Error e =
        expect_error([&] { open(file, trusting({kInt8Tensor})); }, ErrorCode::unsupported,
                     {want["refused"].get<std::string>(), kInt8Tensor});
    EXPECT_EQ(e.key(), "w");
  }
}

// numpy 2 spells its core module numpy._core: a .pt written back keeps the
// spelling, which torch's weights_only allow-list matches by name (the
// Trainer loads rng_state.pth allowing numpy 2's _reconstruct alone).
TEST(Ecosystem, Numpy2ArraysAreWrittenBackUnderNumpy2sName) {
  const auto want = expected("numpy2_arrays");
  const fs::path dir = test::temp_dir("ecosystem_numpy2");
  const TensorCatalog cat = open(fixture("ecosystem/numpy2_arrays.pt"));
  test::expect_tensors(cat, want);
  const Value& array = cat.root().find("state")->items()[1];
  ASSERT_TRUE(array.is_numpy_array());
  EXPECT_EQ(array.numpy_core_module(), "numpy._core");
  SaveOptions s;
  s.keep_tree = true;
  save(open(fixture("ecosystem/numpy2_arrays.pt")), dir / "out.pt", SaveFormat::pytorch, s);
  std::set<std::string> named;
  for (const auto& p : scan(dir / "out.pt").pickles)
    for (const auto& g : p.globals) named.insert(g.name);
  EXPECT_TRUE(named.count(want["reconstruct"].get<std::string>()));
  EXPECT_FALSE(named.count("numpy.core.multiarray._reconstruct"));
  test::expect_tensors(open(dir / "out.pt"), want);
  fs::remove_all(dir);
}

// The training_args.bin fields the fixture script recorded, as torchport
// reads them: an Enum member as the global "module.Class.NAME".
void expect_field(const Value& v, const nlohmann::json& w, const std::string& key) {
  SCOPED_TRACE(key);
  if (w.is_string()) {
    const std::string s = w.get<std::string>();
    if (v.is(Value::Kind::Global)) {
      EXPECT_EQ(v.as_global().qualified(), s);
    } else {
      EXPECT_EQ(v.as_str(), s);
    }
  } else if (w.is_number_integer()) {
    EXPECT_EQ(v.as_int(), w.get<std::int64_t>());
  } else if (w.is_number()) {
    EXPECT_EQ(v.as_float(), w.get<double>());
  } else if (w.is_array()) {
    ASSERT_EQ(v.size(), w.size());
    for (std::size_t i = 0; i < w.size(); ++i) expect_field(v.items()[i], w[i], key);
  } else {
    ADD_FAILURE() << w;
  }
}

void expect_training_args(const TensorCatalog& cat, const nlohmann::json& want) {
  EXPECT_EQ(cat.size(), 0u);
  const Value& root = cat.root();
  ASSERT_TRUE(root.is(Value::Kind::Object)) << root.repr();
  const Object& o = root.as_object();
  EXPECT_EQ(o.cls.qualified(), want["class"].get<std::string>());
  EXPECT_TRUE(o.newobj);
  EXPECT_EQ(o.args.size(), 0u);
  for (const auto& [key, w] : want["fields"].items()) {
    const Value* v = o.state.find(key);
    ASSERT_NE(v, nullptr) << key;
    if (key != "distributed_state") {
      expect_field(*v, w, key);
      continue;
    }
    ASSERT_TRUE(v->is(Value::Kind::Object));
    EXPECT_EQ(v->as_object().cls.qualified(), w["class"].get<std::string>());
    EXPECT_TRUE(v->as_object().newobj);
    const Value* type = v->as_object().state.find("distributed_type");
    ASSERT_NE(type, nullptr);
    expect_field(*type, w["distributed_type"], "distributed_type");
  }
}

std::set<std::string> flagged(const ScanReport& r) {
  std::set<std::string> out;
  for (const auto& f : r.findings)
    if (!f.global.empty()) out.insert(f.global);
  return out;
}

TEST(Ecosystem, TrainingArgsAreRefusedByNameWithoutTheProfile) {
  const auto want = expected("training_args");
  const fs::path file = fixture("ecosystem/training_args.bin");
  // Python 3.11 pickles its Enum members as builtins.getattr(cls, 'NAME').
  expect_error([&] { open(file); }, ErrorCode::unsafe_global, {"builtins.getattr"});
  const ScanReport r = scan(file);
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe);
  const auto needs = want["weights_only_needs"].get<std::vector<std::string>>();
  EXPECT_EQ(flagged(r), std::set<std::string>(needs.begin(), needs.end()));
  // Another profile name is refused, naming the known ones.
  expect_error([&] { open(file, trusting({}, {"transformers"})); }, ErrorCode::invalid_argument,
               {"no profile 'transformers'", kProfile});
  expect_error([&] { scan(file, trusting({}, {"transformers"})); }, ErrorCode::invalid_argument,
               {"no profile 'transformers'"});
}

TEST(Ecosystem, TrainingArgsReadAndScanCleanWithTheProfile) {
  const auto want = expected("training_args");
  const fs::path file = fixture("ecosystem/training_args.bin");
  const OpenOptions o = trusting({}, {want["profile"].get<std::string>()});
  expect_training_args(open(file, o), want);
  const ScanReport r = scan(file, o);
  EXPECT_EQ(r.verdict, ScanVerdict::clean) << r.reason();
  EXPECT_TRUE(r.findings.empty());
  // What torch >= 2.6's default load needs, as torch itself told the
  // fixture script; builtins.getattr among them, so no line is offered.
  ASSERT_TRUE(r.torch_weights_only.has_value());
  EXPECT_EQ(r.torch_weights_only->loads, std::optional<bool>(false));
  EXPECT_EQ(r.torch_weights_only->needs,
            want["weights_only_needs"].get<std::vector<std::string>>());
  EXPECT_EQ(add_safe_globals_line(r, r.torch_weights_only->needs), "");
}

TEST(Ecosystem, TrainingArgsWriteBackToPtWithTheProfile) {
  const auto want = expected("training_args");
  const fs::path file = fixture("ecosystem/training_args.bin");
  const fs::path dir = test::temp_dir("ecosystem_training_args");
  const OpenOptions o = trusting({}, {kProfile});
  SaveOptions s;
  s.keep_tree = true;
  expect_error([&] { save(open(file, o), dir / "no.pt", SaveFormat::pytorch, s); },
               ErrorCode::unsupported, {"transformers.training_args.TrainingArguments"});
  s.profiles = {kProfile};
  save(open(file, o), dir / "out.pt", SaveFormat::pytorch, s);
  // NEWOBJ and BUILD as Python pickled them, Enum members as getattr: the
  // same reading, the same verdicts.
  expect_training_args(open(dir / "out.pt", o), want);
  EXPECT_EQ(scan(dir / "out.pt", o).verdict, ScanVerdict::clean);
  EXPECT_EQ(flagged(scan(dir / "out.pt")), flagged(scan(file)));
  fs::remove_all(dir);
}

TEST(Ecosystem, TheProfilesListTheirClassesOnce) {
  std::set<std::string> names;
  for (const pickle::Profile& p : pickle::profiles()) {
    EXPECT_TRUE(names.insert(std::string(p.name)).second) << p.name;
    std::set<std::string> classes;
    for (const pickle::ProfileClass& c : p.classes) {
      const std::string q = std::string(c.module) + "." + std::string(c.name);
      EXPECT_TRUE(classes.insert(q).second) << q;
      // Never a class the allow-list or the deny-list already judges.
      EXPECT_EQ(pickle::classify_global(c.module, c.name), pickle::GlobalClass::unknown) << q;
    }
  }
  EXPECT_TRUE(names.count(kProfile));
}

}  // namespace
