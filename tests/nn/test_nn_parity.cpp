// Parity of torchport::nn with PyTorch 1.13: each test runs an op on the
// inputs of tests/nn/fixtures/<case>.pt (see make_nn_fixtures.py, which
// holds the same hyper-parameters) and compares with torch's output.
//
// Tolerances (|got - want| <= atol + rtol * |want|):
// - kExact      ops torch and we both round once per element (add, relu,
//               pooling max, shape moves): any difference is a bug.
// - kF32        rtol 1e-5, atol 1e-6: one libm call or a short sum per
//               element (exp, gelu, softmax, norms, averages); libm results
//               differ by an ulp or two (~1e-7 relative).
// - kF32Dot     rtol 1e-5, atol 1e-5: dot products of K terms of size ~1
//               (matmul, conv, attention, LSTM). An output that cancels to
//               near 0 keeps the absolute rounding error of its terms,
//               about K * 2^-24 (6e-6 for K = 100) whatever its size, so a
//               purely relative bound would fail on such elements.
// - kF64        rtol 1e-12, atol 1e-12: the same computations in double.

#include <gtest/gtest.h>

#include <vector>

#include "nn/parity.hpp"
#include "torchport/nn/ops.hpp"

namespace torchport::test {
namespace {

namespace nn = torchport::nn;

constexpr Tolerance kExact{0, 0};
constexpr Tolerance kF32{1e-5, 1e-6};
constexpr Tolerance kF32Dot{1e-5, 1e-5};
constexpr Tolerance kF64{1e-12, 1e-12};

TEST(NnParity, Elementwise) {
  const NnFixture f("elementwise");
  // Broadcast [2, 3, 4] with [3, 1]: one rounding per element, as torch.
  expect_close(nn::add(f["a"], f["b"]), f["add"], kExact, "add");
  expect_close(nn::sub(f["a"], f["b"]), f["sub"], kExact, "sub");
  expect_close(nn::mul(f["a"], f["b"]), f["mul"], kExact, "mul");
  expect_close(nn::div(f["a"], f["b"]), f["div"], kExact, "div");
  expect_close(nn::add(f["b"], f["a"]), f["add"], kExact, "add, operands swapped");
  expect_close(nn::add(f["a"], 0.1), f["add_s"], kExact, "add scalar");
  expect_close(nn::sub(f["a"], 2.5), f["sub_s"], kExact, "sub scalar");
  expect_close(nn::mul(f["a"], 3.0), f["mul_s"], kExact, "mul scalar");
  expect_close(nn::div(f["a"], 7.0), f["div_s"], kF32, "div scalar");  // torch may multiply by 1/7
}

TEST(NnParity, ElementwiseF64) {
  const NnFixture f("elementwise_f64");
  expect_close(nn::add(f["a"], f["b"]), f["add"], kF64, "add f64");
  expect_close(nn::mul(f["a"], f["b"]), f["mul"], kF64, "mul f64");
  expect_close(nn::div(f["a"], f["b"]), f["div"], kF64, "div f64");
}

TEST(NnParity, Unary) {
  const NnFixture f("unary");
  expect_close(nn::neg(f["x"]), f["neg"], kExact, "neg");
  expect_close(nn::exp(f["x"]), f["exp"], kF32, "exp");
  expect_close(nn::log(f["p"]), f["log"], kF32, "log");
  expect_close(nn::sqrt(f["p"]), f["sqrt"], kF32, "sqrt");
  expect_close(nn::rsqrt(f["p"]), f["rsqrt"], kF32, "rsqrt");
  expect_close(nn::pow(f["x"], 2.0), f["pow2"], kF32, "pow 2");
  expect_close(nn::pow(f["x"], 3.0), f["pow3"], kF32, "pow 3");
  expect_close(nn::pow(f["p"], 0.5), f["pow_half"], kF32, "pow 0.5");
  expect_close(nn::pow(f["p"], -1.5), f["pow_m15"], kF32, "pow -1.5");
}

TEST(NnParity, Matmul) {
  const NnFixture f("matmul");
  expect_close(nn::matmul(f["m2a"], f["m2b"]), f["mm"], kF32Dot, "[5,7] @ [7,3]");
  expect_close(nn::matmul(f["ba"], f["bb"]), f["bmm"], kF32Dot, "[2,1,4,6] @ [3,6,5]");
  expect_close(nn::matmul(f["v7"], f["v7"]), f["dot"], kF32Dot, "[7] @ [7]");
  expect_close(nn::matmul(f["v5"], f["m2a"]), f["vm"], kF32Dot, "[5] @ [5,7]");
  expect_close(nn::matmul(f["m2a"], f["v7"]), f["mv"], kF32Dot, "[5,7] @ [7]");
  expect_close(nn::matmul(f["b3"], f["v7"]), f["bv"], kF32Dot, "[2,5,7] @ [7]");
  expect_close(nn::matmul(f["v5"], f["b3"]), f["vb"], kF32Dot, "[5] @ [2,5,7]");
  // Transposed views go to BLAS without a copy and must give the same result.
  const Tensor bt = f["m2b"].transpose(0, 1).clone().transpose(0, 1);
  ASSERT_FALSE(bt.is_contiguous());
  expect_close(nn::matmul(f["m2a"], bt), f["mm"], kF32Dot, "[5,7] @ column-major [7,3]");
}

TEST(NnParity, MatmulF64) {
  const NnFixture f("matmul_f64");
  expect_close(nn::matmul(f["a"], f["b"]), f["expected"], kF64, "[3,4,9] @ [9,6] f64");
}

TEST(NnParity, Linear) {
  const NnFixture f("linear");
  expect_close(nn::linear(f["input"], f["weight"], f["bias"]), f["expected"], kF32Dot,
               "linear [2,3,8]");
  expect_close(nn::linear(f["input_1d"], f["weight"], f["bias"]), f["expected_1d"], kF32Dot,
               "linear [8]");
  expect_close(nn::linear(f["input"], f["weight"]), f["expected_nobias"], kF32Dot,
               "linear without bias");
  // torch's [out, in] weight, passed as a transposed view.
  expect_close(nn::linear(f["input"], f["weight_torch"].transpose(0, 1), f["bias"]), f["expected"],
               kF32Dot, "linear with a transposed torch weight");
}

TEST(NnParity, LinearHalfWeights) {
  const NnFixture f("linear_half_weights");
  expect_close(nn::linear(f["input"], f["weight_f16"], f["bias_f16"]), f["expected_f16"], kF32Dot,
               "f16 weights");
  expect_close(nn::linear(f["input"], f["weight_bf16"], f["bias_bf16"]), f["expected_bf16"],
               kF32Dot, "bf16 weights");
}

TEST(NnParity, ShapeOps) {
  const NnFixture f("shape_ops");
  expect_close(nn::concat({f["a"], f["b"]}, 1), f["cat1"], kExact, "cat dim 1");
  expect_close(nn::concat({f["a"], f["a"]}, -1), f["cat_last"], kExact, "cat dim -1");
  expect_close(nn::slice(f["a"], 2, 1, 4, 2), f["slice"], kExact, "a[:, :, 1:4:2]");
  expect_close(nn::slice(f["a"], 1, -2), f["slice_neg"], kExact, "a[:, -2:]");
  expect_close(nn::flatten(f["a"], 1, 2), f["flat"], kExact, "flatten(1, 2)");
  expect_close(nn::flatten(f["a"]), f["flat_all"], kExact, "flatten()");
}

TEST(NnParity, Reductions) {
  const NnFixture f("reductions");
  const Tensor x = f["x"];
  expect_close(nn::sum(x, {1}), f["sum_1"], kF32, "sum(1)");
  expect_close(nn::sum(x, {0, 2}, true), f["sum_02k"], kF32, "sum((0, 2), keepdim)");
  expect_close(nn::sum(x), f["sum_all"], kF32, "sum()");
  expect_close(nn::mean(x, {1, 2}), f["mean_12"], kF32, "mean((1, 2))");
  expect_close(nn::max(x, {2}), f["max_2"], kExact, "amax(2)");
  expect_close(nn::max(x, {0, 2}), f["max_02"], kExact, "amax((0, 2))");
  expect_close(nn::var(x, {1}), f["var_1"], kF32, "var(1)");
  expect_close(nn::var(x, {0, 2}, false, true), f["var_02_biased_k"], kF32,
               "var((0, 2), biased, keepdim)");
  expect_close(nn::argmax(x, 1), f["argmax_1"], kExact, "argmax(1)");
  expect_close(nn::argmax(x, 2, true), f["argmax_2k"], kExact, "argmax(2, keepdim) with a tie");
  expect_close(nn::argmax(x), f["argmax_all"], kExact, "argmax()");
}

TEST(NnParity, ReductionsLong) {
  // 8192 values of mean ~3 per row. We accumulate in double; torch sums
  // float32 pairwise, whose relative error stays ~log2(n) ulp, so 1e-5 holds.
  const NnFixture f("reductions_long");
  expect_close(nn::sum(f["x"], {1}), f["sum"], kF32, "sum of 8192");
  expect_close(nn::mean(f["x"], {1}), f["mean"], kF32, "mean of 8192");
  expect_close(nn::var(f["x"], {1}), f["var"], kF32, "var of 8192");
}

TEST(NnParity, ReductionsF64) {
  const NnFixture f("reductions_f64");
  expect_close(nn::sum(f["x"], {0}), f["sum_0"], kF64, "sum f64");
  expect_close(nn::var(f["x"], {1}), f["var_1"], kF64, "var f64");
  expect_close(nn::softmax(f["x"], 1), f["softmax_1"], kF64, "softmax f64");
}

TEST(NnParity, Softmax) {
  const NnFixture f("softmax");  // logits up to ~±100
  expect_close(nn::softmax(f["x"], -1), f["sm_last"], kF32, "softmax(-1)");
  expect_close(nn::softmax(f["x"], 1), f["sm_1"], kF32, "softmax(1)");
  expect_close(nn::log_softmax(f["x"], -1), f["lsm_last"], kF32, "log_softmax(-1)");
  expect_close(nn::log_softmax(f["x"], 0), f["lsm_0"], kF32, "log_softmax(0)");
}

TEST(NnParity, Activations) {
  const NnFixture f("activations");
  const Tensor x = f["x"];
  expect_close(nn::relu(x), f["relu"], kExact, "relu");
  expect_close(nn::gelu(x), f["gelu"], kF32, "gelu");
  expect_close(nn::gelu(x, nn::GeluApproximation::tanh), f["gelu_tanh"], kF32, "gelu tanh");
  expect_close(nn::silu(x), f["silu"], kF32, "silu");
  expect_close(nn::sigmoid(x), f["sigmoid"], kF32, "sigmoid");
  expect_close(nn::tanh(x), f["tanh"], kF32, "tanh");
  expect_close(nn::leaky_relu(x, 0.2), f["leaky"], kF32, "leaky_relu 0.2");
  expect_close(nn::prelu(f["xc"], f["a1"]), f["prelu1"], kExact, "prelu, one weight");
  expect_close(nn::prelu(f["xc"], f["a4"]), f["prelu4"], kExact, "prelu, per channel");
}

struct ConvCase {
  const char* name;
  nn::Conv2dOptions options;
  Tolerance tol;
};

TEST(NnParity, Conv2d) {
  const ConvCase cases[] = {
      {"conv2d_basic", {}, kF32Dot},  // [2,3,9,8] * [4,3,3,2]
      {"conv2d_pad_stride", {.stride = {2, 1}, .padding = {1, 2}}, kF32Dot},
      {"conv2d_dilation", {.padding = 2, .dilation = 2}, kF32Dot},
      {"conv2d_groups2", {.stride = 2, .padding = 1, .groups = 2}, kF32Dot},
      {"conv2d_depthwise", {.padding = 1, .groups = 5}, kF32Dot},
      {"conv2d_depth_multiplier",
       {.stride = 2, .padding = {1, 0}, .dilation = {1, 2}, .groups = 3},
       kF32Dot},
      {"conv2d_1x1", {}, kF32Dot},
      {"conv2d_f64", {.stride = 2, .padding = 1}, kF64},
      {"conv2d_bf16_weight", {.padding = 1}, kF32Dot},
      {"conv2d_unbatched", {.padding = {0, 1}}, kF32Dot},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const NnFixture f(c.name);
    const bool has_bias =
        std::string(c.name) != "conv2d_dilation" && std::string(c.name) != "conv2d_unbatched";
    const Tensor bias = has_bias ? f["bias"] : Tensor();
    expect_close(nn::conv2d(f["input"], f["weight"], bias, c.options), f["expected"], c.tol,
                 c.name);
  }
}

TEST(NnParity, Conv2dNonContiguousInput) {
  // The same case through a channels-last view of the input.
  const NnFixture f("conv2d_groups2");
  const Tensor x = f["input"];
  const Shape nhwc{0, 2, 3, 1}, back{0, 3, 1, 2};
  const Tensor strided = x.permute(nhwc).clone().permute(back);
  ASSERT_FALSE(strided.is_contiguous());
  expect_close(
      nn::conv2d(strided, f["weight"], f["bias"], {.stride = 2, .padding = 1, .groups = 2}),
      f["expected"], kF32Dot, "channels-last input");
}

TEST(NnParity, Conv1d) {
  const NnFixture f("conv1d");
  expect_close(nn::conv1d(f["input"], f["weight"], f["bias"], {.stride = 2, .padding = 2}),
               f["expected"], kF32Dot, "conv1d k5 s2 p2");
  expect_close(
      nn::conv1d(f["input"], f["weight_g"], Tensor(), {.padding = 1, .dilation = 2, .groups = 2}),
      f["expected_g"], kF32Dot, "conv1d groups 2 dilation 2");
}

TEST(NnParity, ConvTranspose2d) {
  const NnFixture f("conv_transpose2d");
  expect_close(nn::conv_transpose2d(f["input"], f["weight"], f["bias"],
                                    {.stride = 2, .padding = 1, .output_padding = 1}),
               f["expected"], kF32Dot, "k(3,2) s2 p1 op1");
  expect_close(nn::conv_transpose2d(f["input"], f["weight_g"], f["bias_g"],
                                    {.stride = {2, 3},
                                     .padding = {1, 0},
                                     .output_padding = {1, 2},
                                     .dilation = 2,
                                     .groups = 2}),
               f["expected_g"], kF32Dot, "groups 2 dilation 2 s(2,3) op(1,2)");
}

TEST(NnParity, ConvTranspose1d) {
  const NnFixture f("conv_transpose1d");
  expect_close(nn::conv_transpose1d(f["input"], f["weight"], f["bias"],
                                    {.stride = 3, .padding = 1, .output_padding = 2}),
               f["expected"], kF32Dot, "k4 s3 p1 op2");
  expect_close(
      nn::conv_transpose1d(f["input_g"], f["weight_g"], Tensor(), {.stride = 2, .groups = 6}),
      f["expected_g"], kF32Dot, "depthwise transposed");
}

TEST(NnParity, BatchNorm) {
  const NnFixture f("batch_norm");
  expect_close(
      nn::batch_norm(f["input"], f["running_mean"], f["running_var"], f["weight"], f["bias"]),
      f["expected"], kF32, "batch_norm 4-d affine");
  expect_close(
      nn::batch_norm(f["input_2d"], f["running_mean"], f["running_var"], Tensor(), Tensor(), 1e-3),
      f["expected_2d"], kF32, "batch_norm 2-d, no affine, eps 1e-3");
}

TEST(NnParity, LayerGroupRmsNorm) {
  const NnFixture ln("layer_norm");
  expect_close(nn::layer_norm(ln["input"], {8}, ln["weight"], ln["bias"]), ln["expected"], kF32,
               "layer_norm [8]");
  expect_close(nn::layer_norm(ln["input"], {5, 8}, Tensor(), Tensor(), 1e-6), ln["expected_2"],
               kF32, "layer_norm [5, 8]");
  const NnFixture gn("group_norm");
  expect_close(nn::group_norm(gn["input"], 3, gn["weight"], gn["bias"]), gn["expected"], kF32,
               "group_norm 3");
  expect_close(nn::group_norm(gn["input"], 6), gn["expected_instance"], kF32,
               "group_norm 6 (instance)");
  const NnFixture rn("rms_norm");
  expect_close(nn::rms_norm(rn["input"], {16}, rn["weight"], 1e-6), rn["expected"], kF32,
               "rms_norm eps 1e-6");
  expect_close(nn::rms_norm(rn["input"], {3, 16}), rn["expected_2"], kF32,
               "rms_norm [3, 16], default eps");
}

TEST(NnParity, Embedding) {
  const NnFixture f("embedding");
  expect_close(nn::embedding(f["idx64"], f["weight"]), f["expected64"], kExact, "I64 indices");
  expect_close(nn::embedding(f["idx32"], f["weight"]), f["expected32"], kExact, "I32 indices");
  expect_close(nn::embedding(f["idx64"], f["weight_bf16"]), f["expected_bf16"], kExact,
               "bf16 table");
}

TEST(NnParity, Pooling) {
  const NnFixture f("pooling");
  const Tensor x = f["input"];
  expect_close(nn::max_pool2d(x, 3, {.stride = 2, .padding = 1}), f["max_a"], kExact,
               "max k3 s2 p1");
  expect_close(nn::max_pool2d(x, {2, 3}, {.stride = nn::Int2{1, 2}, .ceil_mode = true}), f["max_b"],
               kExact, "max k(2,3) s(1,2) ceil");
  expect_close(nn::max_pool2d(x, 3, {.stride = 1, .padding = 1, .dilation = 2}), f["max_c"], kExact,
               "max k3 dilation 2");
  expect_close(nn::max_pool2d(x, 2, {.stride = 2, .padding = 1, .ceil_mode = true}), f["max_d"],
               kExact, "max k2 s2 p1 ceil, last window dropped");
  expect_close(nn::avg_pool2d(x, 3, {.stride = 2, .padding = 1}), f["avg_a"], kF32, "avg k3 s2 p1");
  expect_close(nn::avg_pool2d(x, 2, {.stride = 2, .padding = 1, .ceil_mode = true}), f["avg_e"],
               kF32, "avg k2 s2 p1 ceil, last window dropped");
  expect_close(nn::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .count_include_pad = false}),
               f["avg_b"], kF32, "avg without pad count");
  expect_close(nn::avg_pool2d(x, {3, 2}, {.stride = 2, .padding = 1, .ceil_mode = true}),
               f["avg_c"], kF32, "avg k(3,2) ceil");
  expect_close(nn::avg_pool2d(x, 2, {.divisor_override = 5}), f["avg_d"], kF32, "avg divisor 5");
  expect_close(nn::adaptive_avg_pool2d(x, {4, 3}), f["adapt_43"], kF32, "adaptive (4,3)");
  expect_close(nn::adaptive_avg_pool2d(x, 1), f["adapt_11"], kF32, "adaptive 1");
  expect_close(nn::adaptive_avg_pool2d(x, {7, 5}), f["adapt_75"], kF32, "adaptive (7,5)");
}

TEST(NnParity, ScaledDotProductAttention) {
  // References are computed in float64 and rounded: they are the true values.
  const NnFixture f("sdpa");
  expect_close(nn::scaled_dot_product_attention(f["q"], f["k"], f["v"]), f["plain"], kF32Dot,
               "no mask");
  expect_close(nn::scaled_dot_product_attention(f["q"], f["k"], f["v"], f["bmask"]),
               f["with_bmask"], kF32Dot, "bool mask [5,7]");
  expect_close(nn::scaled_dot_product_attention(f["q"], f["k"], f["v"], f["fmask"]),
               f["with_fmask"], kF32Dot, "float mask [2,1,5,7]");
  expect_close(nn::scaled_dot_product_attention(f["q"], f["k"], f["v"], Tensor(), true),
               f["causal_rect"], kF32Dot, "causal L=5 S=7");
  expect_close(nn::scaled_dot_product_attention(f["qs"], f["ks"], f["vs"], Tensor(), true),
               f["causal"], kF32Dot, "causal L=S=6");
}

nn::MultiheadAttentionResult run_mha(const NnFixture& f, nn::MultiheadAttentionOptions o,
                                     bool bias) {
  const Tensor none;
  return nn::multi_head_attention(f["query"], f["key"], f["value"], f["q_weight"], f["k_weight"],
                                  f["v_weight"], bias ? f["q_bias"] : none,
                                  bias ? f["k_bias"] : none, bias ? f["v_bias"] : none,
                                  f["out_weight"], bias ? f["out_bias"] : none, o);
}

TEST(NnParity, MultiheadAttention) {
  {
    const NnFixture f("mha_basic");  // [L=4, N=3, E=8], 2 heads, averaged weights
    const auto r = run_mha(f, {.num_heads = 2}, true);
    expect_close(r.output, f["output"], kF32Dot, "mha_basic output");
    expect_close(r.weights, f["weights"], kF32Dot, "mha_basic weights");
  }
  {
    const NnFixture f(
        "mha_masks");  // batch_first, bool attn_mask and key_padding_mask, per-head weights
    const auto r = run_mha(f,
                           {.num_heads = 3,
                            .batch_first = true,
                            .attn_mask = f["attn_mask"],
                            .key_padding_mask = f["key_padding_mask"],
                            .average_attn_weights = false},
                           true);
    expect_close(r.output, f["output"], kF32Dot, "mha_masks output");
    expect_close(r.weights, f["weights"], kF32Dot, "mha_masks weights");
  }
  {
    const NnFixture f("mha_kdim_float_mask");  // kdim 5, vdim 7, no bias, float [N*H, L, S] mask
    const auto r = run_mha(f, {.num_heads = 4, .attn_mask = f["attn_mask"]}, false);
    expect_close(r.output, f["output"], kF32Dot, "mha_kdim output");
    expect_close(r.weights, f["weights"], kF32Dot, "mha_kdim weights");
  }
  {
    const NnFixture f("mha_unbatched");
    const auto r = run_mha(f, {.num_heads = 2, .key_padding_mask = f["key_padding_mask"]}, true);
    expect_close(r.output, f["output"], kF32Dot, "mha_unbatched output");
    expect_close(r.weights, f["weights"], kF32Dot, "mha_unbatched weights");
    const auto no_weights = run_mha(
        f, {.num_heads = 2, .key_padding_mask = f["key_padding_mask"], .need_weights = false},
        true);
    EXPECT_FALSE(no_weights.weights.defined());
    expect_close(no_weights.output, f["output"], kF32Dot, "mha_unbatched without weights");
  }
}

TEST(NnParity, RotaryAndRepeatKv) {
  const NnFixture f("rotary");
  expect_close(nn::apply_rotary(f["x"], f["cos"], f["sin"]), f["expected"], kF32,
               "rotary, cos [6,8]");
  expect_close(nn::apply_rotary(f["x"], f["cos_b"], f["sin_b"]), f["expected_b"], kF32,
               "rotary, cos [2,1,6,8]");
  expect_close(nn::repeat_kv(f["kv"], 3), f["repeated"], kExact, "repeat_kv 3");
}

TEST(NnParity, LlamaAttentionBlock) {
  // GQA (4 query heads over 2 kv heads) with RoPE and a causal mask, composed
  // from linear, apply_rotary, repeat_kv and scaled_dot_product_attention.
  const NnFixture f("llama_attention");
  const std::int64_t n = 2, l = 5, heads = 4, kv_heads = 2, hd = 8;
  const Shape to_heads{0, 2, 1, 3};
  auto project = [&](const char* w, std::int64_t h) {
    return nn::linear(f["x"], f[w]).reshape({n, l, h, hd}).permute(to_heads);
  };
  const Tensor q = nn::apply_rotary(project("wq", heads), f["cos"], f["sin"]);
  const Tensor k = nn::repeat_kv(nn::apply_rotary(project("wk", kv_heads), f["cos"], f["sin"]),
                                 heads / kv_heads);
  const Tensor v = nn::repeat_kv(project("wv", kv_heads).contiguous(), heads / kv_heads);
  const Tensor ctx = nn::scaled_dot_product_attention(q, k, v, Tensor(), true);
  const Tensor merged = ctx.permute(to_heads).contiguous().reshape({n, l, heads * hd});
  expect_close(nn::linear(merged, f["wo"]), f["expected"], kF32Dot, "llama attention");
}

std::vector<nn::LstmLayerWeights> lstm_layers(const NnFixture& f, int count, bool bias) {
  std::vector<nn::LstmLayerWeights> layers(static_cast<std::size_t>(count));
  const char* gates = "ifgo";
  for (int l = 0; l < count; ++l)
    for (int g = 0; g < 4; ++g) {
      const std::string suffix = "_l" + std::to_string(l) + "_" + gates[g];
      auto& lw = layers[static_cast<std::size_t>(l)];
      const std::size_t gi = static_cast<std::size_t>(g);
      lw.w_ih[gi] = f["w_ih" + suffix];
      lw.w_hh[gi] = f["w_hh" + suffix];
      if (bias) {
        lw.b_ih[gi] = f["b_ih" + suffix];
        lw.b_hh[gi] = f["b_hh" + suffix];
      }
    }
  return layers;
}

TEST(NnParity, Lstm) {
  {
    const NnFixture f("lstm_single");  // T=5, N=3, in 4, H 6
    const auto r = nn::lstm(f["input"], lstm_layers(f, 1, true));
    expect_close(r.output, f["output"], kF32Dot, "lstm_single output");
    expect_close(r.h_n, f["h_n"], kF32Dot, "lstm_single h_n");
    expect_close(r.c_n, f["c_n"], kF32Dot, "lstm_single c_n");
  }
  {
    const NnFixture f("lstm_stacked");  // 2 layers, batch_first, given h0/c0
    const auto r = nn::lstm(f["input"], lstm_layers(f, 2, true),
                            {.batch_first = true, .h0 = f["h0"], .c0 = f["c0"]});
    expect_close(r.output, f["output"], kF32Dot, "lstm_stacked output");
    expect_close(r.h_n, f["h_n"], kF32Dot, "lstm_stacked h_n");
    expect_close(r.c_n, f["c_n"], kF32Dot, "lstm_stacked c_n");
  }
  {
    const NnFixture f("lstm_f64");  // 2 layers in double
    const auto r = nn::lstm(f["input"], lstm_layers(f, 2, true));
    expect_close(r.output, f["output"], kF64, "lstm_f64 output");
    expect_close(r.h_n, f["h_n"], kF64, "lstm_f64 h_n");
    expect_close(r.c_n, f["c_n"], kF64, "lstm_f64 c_n");
  }
  {
    const NnFixture f("lstm_unbatched_nobias");  // [T=7, 3], 2 layers, bias=False
    const auto r = nn::lstm(f["input"], lstm_layers(f, 2, false));
    expect_close(r.output, f["output"], kF32Dot, "lstm_unbatched output");
    expect_close(r.h_n, f["h_n"], kF32Dot, "lstm_unbatched h_n");
    expect_close(r.c_n, f["c_n"], kF32Dot, "lstm_unbatched c_n");
  }
}

}  // namespace
}  // namespace torchport::test
