// torch 1.13 and numpy against torchport convert for the values beyond
// plain tensors: quantized tensors written to .pt load in torch with equal
// int_repr(), scales, zero points and axis; numpy arrays (from torch
// checkpoints and plain pickles) written to .pt load as equal tensors.
// Meta tensors and torch 2.x's records (hand-built from its writer) written
// to .pt load in torch as the originals.
// The other direction (files torch and numpy wrote, read by torchport) is
// tests/formats/test_quantized.cpp and test_numpy.cpp.

#include <sstream>
#include <utility>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"

namespace fs = std::filesystem;
using torchport::test::fixture;
using torchport::test::run_command;

namespace {

const std::string kPython = torchport::test::python();

std::string q(const fs::path& p) {
  return "'" + p.string() + "'";
}

void convert(const std::string& args, int want_rc = 0, std::string* out = nullptr) {
  std::string o;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " convert --force " + args, &o), want_rc)
      << o;
  if (out) *out = o;
}

std::string tool_output(const std::string& args) {
  std::string o;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " " + args, &o), 0) << args << "\n" << o;
  return o;
}

void python_check(const fs::path& script, const fs::path& out, const fs::path& ref) {
  std::string o;
  EXPECT_EQ(
      run_command(kPython + " -W ignore " + q(script) + " check " + q(out) + " " + q(ref), &o), 0)
      << o;
}

TEST(InteropSpecial, QuantizedRoundTripThroughPt) {
  const fs::path dir = torchport::test::temp_dir("interop_quantized");
  for (const char* name : {"quantized", "quantized_legacy", "quantized_linear"}) {
    SCOPED_TRACE(name);
    const fs::path in = fixture(std::string("quantized/") + name + ".pt");
    // quantized_linear's state_dict holds fc._packed_params.dtype, a value:
    // refused unless the tensors alone are asked for.
    convert(q(in) + " " + q(dir / (std::string(name) + "_out.pt")) + " --tensors-only");
    python_check(fixture("quantized/make_quantized_fixtures.py"),
                 dir / (std::string(name) + "_out.pt"), in);
  }
}

// Meta tensors and the files torch 2.x writes (tests/fixtures/torch2):
// converted to .pt, torch reads the same tensors (meta stays meta, with its
// strides; a big-endian file comes back little-endian with equal values).
TEST(InteropSpecial, Torch2RecordsAndMetaTensorsRoundTripThroughPt) {
  const fs::path dir = torchport::test::temp_dir("interop_torch2");
  const fs::path script = fixture("torch2/make_torch2_fixtures.py");
  for (const char* name :
       {"meta", "meta_linear", "torch2_layout", "torch2_align4096", "torch2_data_version"}) {
    SCOPED_TRACE(name);
    const fs::path in = fixture(std::string("torch2/") + name + ".pt");
    convert(q(in) + " " + q(dir / (std::string(name) + "_out.pt")));
    python_check(script, dir / (std::string(name) + "_out.pt"), in);
  }
  convert(q(fixture("torch2/torch2_big.pt")) + " " + q(dir / "big_out.pt"));
  python_check(script, dir / "big_out.pt", fixture("torch2/torch2_layout.pt"));
  // Data-only formats refuse meta tensors by name.
  std::string out;
  convert(q(fixture("torch2/meta.pt")) + " " + q(dir / "meta.safetensors"), 1, &out);
  EXPECT_NE(out.find("meta_weight"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "meta.safetensors"));
  // inspect shows them, diff finds a file equal to itself.
  EXPECT_NE(tool_output("inspect " + q(fixture("torch2/meta.pt"))).find("F32 meta"),
            std::string::npos);
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " diff " + q(fixture("torch2/meta.pt")) +
                        " " + q(dir / "meta_out.pt")),
            0);
}

TEST(InteropSpecial, QuantizedToSafetensorsNeedsAnOption) {
  const fs::path dir = torchport::test::temp_dir("interop_quantized_st");
  const fs::path in = fixture("quantized/quantized.pt");
  std::string out;
  convert(q(in) + " " + q(dir / "a.safetensors"), 1,
          &out);  // the file's content, not the command line: exit 1
  EXPECT_NE(out.find("--dequantize"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "a.safetensors"));
  convert(q(in) + " " + q(dir / "a.safetensors") + " --dequantize --keep-quantized", 2, &out);
  convert(q(in) + " " + q(dir / "a.safetensors") + " --dequantize");
  convert(q(in) + " " + q(dir / "b.safetensors") + " --keep-quantized");
  // torch reads the dequantized file as the fixture's dequantize().
  const std::string script =
      "import torch,sys,json,struct\n"
      "def st(p):\n"
      "  b=open(p,'rb').read(); n=struct.unpack('<Q',b[:8])[0]; h=json.loads(b[8:8+n]); d=b[8+n:]\n"
      "  "
      "D={'F32':torch.float32,'F64':torch.float64,'I8':torch.int8,'U8':torch.uint8,'I32':torch."
      "int32,'I64':torch.int64}\n"
      "  return {k:torch.frombuffer(bytearray(d[v['data_offsets'][0]:v['data_offsets'][1]]) or "
      "bytearray(1),dtype=D[v['dtype']])[:torch.Size(v['shape']).numel()].reshape(v['shape']) for "
      "k,v in h.items() if k!='__metadata__'}\n"
      "ref=torch.load(sys.argv[1]); a=st(sys.argv[2]); b=st(sys.argv[3])\n"
      "for k,t in ref.items():\n"
      "  if t.is_quantized:\n"
      "    assert torch.equal(a[k],t.dequantize()),k\n"
      "    assert torch.equal(b[k],t.int_repr()),k\n"
      "  else: assert torch.equal(a[k],t),k\n"
      "assert b['pt_qint8.q_scale'].item()==ref['pt_qint8'].q_scale()\n"
      "assert "
      "torch.equal(b['pc_qint8.q_per_channel_zero_points'],ref['pc_qint8'].q_per_channel_zero_"
      "points())\n"
      "print('ok')\n";
  torchport::test::write_bytes(
      dir / "check.py",
      std::vector<std::byte>(reinterpret_cast<const std::byte*>(script.data()),
                             reinterpret_cast<const std::byte*>(script.data()) + script.size()));
  std::string o;
  EXPECT_EQ(run_command(kPython + " -W ignore " + q(dir / "check.py") + " " + q(in) + " " +
                            q(dir / "a.safetensors") + " " + q(dir / "b.safetensors"),
                        &o),
            0)
      << o;
}

TEST(InteropSpecial, SparseRoundTripThroughPt) {
  const fs::path dir = torchport::test::temp_dir("interop_sparse");
  const fs::path in = fixture("sparse/sparse.pt");
  convert(q(in) + " " + q(dir / "out.pt"));
  python_check(fixture("sparse/make_sparse_fixtures.py"), dir / "out.pt", in);
  std::string out;
  convert(q(in) + " " + q(dir / "a.safetensors"), 1, &out);  // the file's content: exit 1
  EXPECT_NE(out.find("--densify"), std::string::npos) << out;
  convert(q(in) + " " + q(dir / "a.safetensors") + " --densify");
  const std::string d = tool_output("inspect " + q(in));
  EXPECT_NE(d.find("F32 coo"), std::string::npos) << d;
}

TEST(InteropSpecial, NumpyArraysToPt) {
  const fs::path dir = torchport::test::temp_dir("interop_numpy");
  for (const char* name :
       {"training_numpy.pt", "training_numpy_legacy.pt", "detectron2_style.pkl"}) {
    SCOPED_TRACE(name);
    const fs::path in = fixture(std::string("numpy/") + name);
    convert(q(in) + " " + q(dir / (std::string(name) + ".out.pt")) + " --tensors-only");
    python_check(fixture("numpy/make_numpy_fixtures.py"), dir / (std::string(name) + ".out.pt"),
                 in);
  }
}

// The whole object, numpy arrays written back as numpy pickles them: torch
// loads the same containers, numbers and arrays (dtype, shape, memory order,
// values) from the copy as from the original.
TEST(InteropSpecial, NumpyArraysStayArraysInTheWholeObject) {
  const fs::path dir = torchport::test::temp_dir("interop_numpy_whole");
  for (const char* name : {"training_numpy.pt", "training_numpy_legacy.pt"}) {
    SCOPED_TRACE(name);
    const fs::path in = fixture(std::string("numpy/") + name);
    const fs::path out = dir / (std::string(name) + ".whole.pt");
    convert(q(in) + " " + q(out));
    std::string o;
    ASSERT_EQ(run_command(kPython + " " + q(fixture("numpy/make_numpy_fixtures.py")) +
                              " check_whole " + q(out) + " " + q(in),
                          &o),
              0)
        << o;
  }
}

// What torch 2.6 saved with its new dtypes (uint16/32/64, float8,
// complex32, bits), conj/neg views and nested tensors, converted to .pt,
// loads with its
// weights_only=True as the original, bits included (torch 1.13 has none of
// these dtypes: skipped there).
TEST(InteropSpecial, Torch26DtypesRoundTripThroughPt) {
  std::string o;
  if (run_command(kPython +
                      " -c \"import sys, torch; sys.exit(0 if int(torch.__version__.split('.')[0]) "
                      ">= 2 else 3)\"",
                  &o) == 3)
    GTEST_SKIP() << "torch 1.13 has no uint16, float8 or bits dtypes";
  const fs::path dir = torchport::test::temp_dir("interop_torch26");
  for (const char* name : {"new_dtypes", "bits", "conj", "nested"}) {
    SCOPED_TRACE(name);
    const fs::path in = fixture(std::string("torch26/") + name + ".pt");
    convert(q(in) + " " + q(dir / (std::string(name) + "_out.pt")));
    python_check(fixture("torch26/make_torch26_fixtures.py"), dir / (std::string(name) + "_out.pt"),
                 in);
  }
}

// quint4x2 and quint2x4 tensors (per tensor and with float per-channel
// parameters), read from torch 2.6's zip and legacy saves, converted to
// .pt: both torches load them packed as the originals (values, quantizers,
// dequantized elements).
TEST(InteropSpecial, PackedQuantizedRoundTripThroughPt) {
  const fs::path dir = torchport::test::temp_dir("interop_quint4x2");
  for (const char* name : {"quint4x2", "quint4x2_legacy"}) {
    SCOPED_TRACE(name);
    const fs::path in = fixture(std::string("torch26/") + name + ".pt");
    convert(q(in) + " " + q(dir / (std::string(name) + "_out.pt")));
    python_check(fixture("torch26/make_torch26_fixtures.py"), dir / (std::string(name) + "_out.pt"),
                 in);
  }
}

// The torch this test runs under, as (major, minor).
std::pair<int, int> torch_version() {
  std::string o;
  EXPECT_EQ(run_command(kPython + " -W ignore -c \"import torch; v = torch.__version__.split('.'); "
                                  "print(v[0], v[1])\"",
                        &o),
            0)
      << o;
  int major = 0, minor = 0;
  std::istringstream(o.substr(o.find_last_of('\n', o.size() - 2) + 1)) >> major >> minor;
  return {major, minor};
}

// What torch 2.14 saved (tests/fixtures/torch214), converted to .pt: torch
// 2.14 loads it with weights_only=True as the original (plain, mmap, and
// with calculate_storage_offsets, which finds every record from the
// layout alone); torch 1.13 and 2.6 have no float8_e8m0fnu,
// float4_e2m1fn_x2 or bcomplex32 and refuse each by name (1.13 names
// _rebuild_tensor_v3, which it predates). Converted to safetensors, the
// current safetensors (0.8.0) loads F8_E8M0, F4 (its shape in 4-bit
// values) and C64 with load_file and safe_open as torch's tensors.
TEST(InteropSpecial, Torch214DtypesThroughPtAndSafetensors) {
  const auto [major, minor] = torch_version();
  const bool current = major > 2 || (major == 2 && minor >= 14);
  const fs::path dir = torchport::test::temp_dir("interop_torch214");
  const fs::path script = fixture("torch214/make_torch214_fixtures.py");
  if (current) {
    for (const char* name : {"dtypes", "views", "align4096", "conversions", "crc_zero"}) {
      SCOPED_TRACE(name);
      const fs::path in = fixture(std::string("torch214/") + name + ".pt");
      const fs::path out = dir / (std::string(name) + "_out.pt");
      convert(q(in) + " " + q(out));
      std::string o;
      EXPECT_EQ(
          run_command(kPython + " -W ignore " + q(script) + " check " + q(out) + " " + q(in), &o),
          0)
          << o;
      EXPECT_NE(o.find("4 ways"), std::string::npos) << o;  // calculate_storage_offsets too
    }
    // safetensors holds neither complex32/complex128/bcomplex32, the fnuz
    // float8 kinds (torchport writes them to .pt only) nor bits.
    const std::string not_in_safetensors =
        " --exclude '^(bc|complex32|complex128|bcomplex32|float8_e4m3fnuz|float8_e5m2fnuz|bits)'";
    for (const char* name : {"dtypes", "views", "crc_zero"}) {
      SCOPED_TRACE(name);
      const fs::path in = fixture(std::string("torch214/") + name + ".pt");
      const fs::path out = dir / (std::string(name) + ".safetensors");
      convert(q(in) + " " + q(out) + not_in_safetensors);
      std::string o;
      EXPECT_EQ(run_command(kPython + " -W ignore " + q(script) + " check_safetensors " + q(out) +
                                " " + q(in),
                            &o),
                0)
          << o;
      if (std::string(name) == "dtypes") {
        for (const char* d : {"float8_e8m0fnu", "float4_e2m1fn_x2", "complex64"})
          EXPECT_NE(o.find(d), std::string::npos) << o;
      }
    }
    return;
  }
  // Each new dtype alone, so the refusal names it.
  for (const char* d : {"float8_e8m0fnu", "float4_e2m1fn_x2", "bcomplex32"}) {
    SCOPED_TRACE(d);
    const fs::path out = dir / (std::string(d) + ".pt");
    convert(q(fixture("torch214/dtypes.pt")) + " " + q(out) + " --include '^" + d + "$'");
    const std::string word = major < 2 ? "_rebuild_tensor_v3" : std::string("torch.") + d;
    std::string o;
    EXPECT_EQ(
        run_command(kPython + " -W ignore " + q(script) + " refused " + q(out) + " " + word, &o), 0)
        << o;
    EXPECT_NE(o.find("refused naming " + word), std::string::npos) << o;
  }
}

std::string tool(const std::string& args, int want_rc = 0) {
  std::string o;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " " + args, &o), want_rc) << args << "\n"
                                                                                << o;
  return o;
}

TEST(InteropSpecial, InspectAndDiffShowThem) {
  const std::string qt = q(fixture("quantized/quantized.pt"));
  EXPECT_NE(tool("inspect " + qt).find("pc_quint8_axis1  quint8"), std::string::npos);
  const std::string js = tool("inspect --json " + qt);
  EXPECT_NE(js.find("\"scheme\": \"per_channel_affine\""), std::string::npos) << js;
  EXPECT_NE(js.find("\"zero_point\": 3"), std::string::npos) << js;
  const std::string np = tool("inspect --json " + q(fixture("numpy/training_numpy.pt")));
  EXPECT_NE(np.find("\"best_acc\": 0.93"), std::string::npos) << np;
  EXPECT_NE(np.find("\"name\": \"arr\""), std::string::npos) << np;
  // Same integers, different scale: diff compares real values.
  const fs::path dir = torchport::test::temp_dir("interop_diff");
  std::string o;
  ASSERT_EQ(
      run_command(kPython + " -W ignore -c \"import torch; x=torch.load('" +
                      fixture("quantized/quantized.pt").string() +
                      "'); s={k: v for k, v in x.items() if k != 'pt_transposed'}; "
                      "torch.save(s, '" +
                      (dir / "a.pt").string() +
                      "'); s['pt_qint8'] = "
                      "torch._make_per_tensor_quantized_tensor(s['pt_qint8'].int_repr(), 0.5, 3); "
                      "torch.save(s, '" +
                      (dir / "b.pt").string() + "')\"",
                  &o),
      0)
      << o;
  tool("diff " + q(dir / "a.pt") + " " + q(dir / "a.pt"));
  const std::string d = tool("diff " + q(dir / "a.pt") + " " + q(dir / "b.pt"), 1);
  EXPECT_NE(d.find("pt_qint8"), std::string::npos) << d;
  tool("diff " + q(fixture("numpy/training_numpy.pt")) + " " +
       q(fixture("numpy/training_numpy_legacy.pt")));
}

}  // namespace
