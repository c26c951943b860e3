#include "torchport/nn/attention.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "nn/common.hpp"
#include "nn/linalg.hpp"
#include "nn/reduce.hpp"
#include "torchport/nn/linalg.hpp"

namespace torchport::nn {
namespace {

// Adds -inf above the diagonal (j > i) of every [L, S] matrix of `scores`.
template <class T>
void add_causal(T* scores, std::int64_t matrices, std::int64_t l, std::int64_t s) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  for (std::int64_t m = 0; m < matrices; ++m)
    for (std::int64_t i = 0; i < l; ++i) {
      T* row = scores + (m * l + i) * s;
      for (std::int64_t j = i + 1; j < s; ++j) row[j] += ninf;
    }
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, bool causal, std::optional<double> scale) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  detail::require_defined(op, q, "query");
  detail::require_defined(op, k, "key");
  detail::require_defined(op, v, "value");
  const DType dt = detail::compute_dtype(op, {{&q, "query"}, {&k, "key"}, {&v, "value"}});
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2)
    detail::fail(ErrorCode::invalid_argument, op,
                 "query " + detail::str(q.shape()) + ", key " + detail::str(k.shape()) +
                     " and value " + detail::str(v.shape()) +
                     " need at least 2 dimensions [..., L, E]");
  if (q.size(-1) != k.size(-1) || k.size(-2) != v.size(-2))
    detail::fail(ErrorCode::shape_mismatch, op,
                 "query " + detail::str(q.shape()) + ", key " + detail::str(k.shape()) +
                     " and value " + detail::str(v.shape()) +
                     ": query and key need the same E, key and value the same S");
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = detail::matmul_scaled(op, q, k.transpose(-2, -1), sc, dt);
  const detail::MaskView m = detail::make_mask(op, "mask", mask, scores.shape(), dt, false);
  const std::int64_t l = q.size(-2), s = k.size(-2);
  detail::dispatch(dt, [&]<class T>() {
    T* p = detail::mdata<T>(scores);
    if (p == nullptr) return;
    detail::add_mask(p, scores.shape(), m);
    const std::int64_t matrices = scores.numel() / (l * s);
    if (causal) add_causal(p, matrices, l, s);
    detail::softmax_rows(p, matrices * l, s);
  });
  return detail::matmul_scaled(op, scores, v, 1.0, dt);
}

MultiheadAttentionResult multi_head_attention(const Tensor& query, const Tensor& key,
                                              const Tensor& value, const Tensor& q_weight,
                                              const Tensor& k_weight, const Tensor& v_weight,
                                              const Tensor& q_bias, const Tensor& k_bias,
                                              const Tensor& v_bias, const Tensor& out_weight,
                                              const Tensor& out_bias,
                                              const MultiheadAttentionOptions& o) {
  constexpr std::string_view op = "multi_head_attention";
  for (const auto& [t, name] :
       {std::pair{&query, "query"}, std::pair{&key, "key"}, std::pair{&value, "value"},
        std::pair{&q_weight, "q_weight"}, std::pair{&k_weight, "k_weight"},
        std::pair{&v_weight, "v_weight"}, std::pair{&out_weight, "out_weight"}})
    detail::require_defined(op, *t, name);
  const DType dt = detail::compute_dtype(op, {{&query, "query"},
                                              {&key, "key"},
                                              {&value, "value"},
                                              {&q_weight, "q_weight"},
                                              {&k_weight, "k_weight"},
                                              {&v_weight, "v_weight"},
                                              {&q_bias, "q_bias"},
                                              {&k_bias, "k_bias"},
                                              {&v_bias, "v_bias"},
                                              {&out_weight, "out_weight"},
                                              {&out_bias, "out_bias"}});
  const bool batched = query.dim() == 3;
  if ((query.dim() != 3 && query.dim() != 2) || key.dim() != query.dim() ||
      value.dim() != query.dim())
    detail::fail(ErrorCode::invalid_argument, op,
                 "query " + detail::str(query.shape()) + ", key " + detail::str(key.shape()) +
                     " and value " + detail::str(value.shape()) +
                     " must all be 3-d (batched) or all 2-d (unbatched)");
  for (const auto& [t, name] :
       {std::pair{&q_weight, "q_weight"}, std::pair{&k_weight, "k_weight"},
        std::pair{&v_weight, "v_weight"}, std::pair{&out_weight, "out_weight"}})
    if (t->dim() != 2)
      detail::fail(ErrorCode::invalid_argument, op,
                   std::string(name) + " " + detail::str(t->shape()) + " must be 2-d [in, out]");
  const std::int64_t e = q_weight.size(1);
  if (k_weight.size(1) != e || v_weight.size(1) != e || out_weight.size(0) != e)
    detail::fail(ErrorCode::shape_mismatch, op,
                 "q_weight " + detail::str(q_weight.shape()) + ", k_weight " +
                     detail::str(k_weight.shape()) + ", v_weight " + detail::str(v_weight.shape()) +
                     " and out_weight " + detail::str(out_weight.shape()) +
                     " disagree on the embedding size (weights are [in, out])");
  const std::int64_t heads = o.num_heads;
  if (heads < 1 || e % heads != 0)
    detail::fail(ErrorCode::invalid_argument, op,
                 "num_heads " + std::to_string(heads) + " does not divide the embedding size " +
                     std::to_string(e));
  // Sizes: sequence dimension is 0 unless batch_first (unbatched: 0).
  const std::size_t seq_dim = batched && o.batch_first ? 1 : 0;
  const std::int64_t n = batched ? query.size(o.batch_first ? 0 : 1) : 1;
  const std::int64_t l = query.shape()[seq_dim];
  const std::int64_t s = key.shape()[seq_dim];
  if (key.shape()[seq_dim] != value.shape()[seq_dim] ||
      (batched && (key.size(o.batch_first ? 0 : 1) != n || value.size(o.batch_first ? 0 : 1) != n)))
    detail::fail(ErrorCode::shape_mismatch, op,
                 "query " + detail::str(query.shape()) + ", key " + detail::str(key.shape()) +
                     " and value " + detail::str(value.shape()) +
                     " disagree on the batch size or key and value on the length");
  const std::int64_t hd = e / heads;

  // Project, then view as [N, H, len, hd] without copying.
  auto heads_view = [&](const Tensor& p, std::int64_t len) {
    if (batched && o.batch_first) {
      const Shape order{0, 2, 1, 3};
      return p.reshape({n, len, heads, hd}).permute(order);
    }
    const Shape order{1, 2, 0, 3};
    return p.reshape({len, n, heads, hd}).permute(order);
  };
  const Tensor qh = heads_view(linear(query, q_weight, q_bias), l);
  const Tensor kh = heads_view(linear(key, k_weight, k_bias), s);
  const Tensor vh = heads_view(linear(value, v_weight, v_bias), s);

  Tensor scores = detail::matmul_scaled(op, qh, kh.transpose(-2, -1),
                                        1.0 / std::sqrt(static_cast<double>(hd)), dt);
  const Shape score_shape{n, heads, l, s};
  Tensor am = o.attn_mask;
  if (am.defined()) {
    const bool ok = (am.dim() == 2 && am.shape() == Shape{l, s}) ||
                    (am.dim() == 3 && am.shape() == Shape{n * heads, l, s});
    if (!ok)
      detail::fail(ErrorCode::shape_mismatch, op,
                   "attn_mask " + detail::str(am.shape()) +
                       " must be [L, S] = " + detail::str(Shape{l, s}) +
                       " or [N * num_heads, L, S] = " + detail::str(Shape{n * heads, l, s}));
    if (am.dim() == 3) am = am.contiguous().reshape(score_shape);
  }
  Tensor kpm = o.key_padding_mask;
  if (kpm.defined()) {
    const Shape want = batched ? Shape{n, s} : Shape{s};
    if (kpm.shape() != want)
      detail::fail(
          ErrorCode::shape_mismatch, op,
          "key_padding_mask " + detail::str(kpm.shape()) + " must be " + detail::str(want));
    kpm = kpm.contiguous().reshape({n, 1, 1, s});
  }
  const detail::MaskView m1 = detail::make_mask(op, "attn_mask", am, score_shape, dt, true);
  const detail::MaskView m2 = detail::make_mask(op, "key_padding_mask", kpm, score_shape, dt, true);
  MultiheadAttentionResult r;
  detail::dispatch(dt, [&]<class T>() {
    T* p = detail::mdata<T>(scores);
    if (p == nullptr) return;
    detail::add_mask(p, score_shape, m1);
    detail::add_mask(p, score_shape, m2);
    detail::softmax_rows(p, n * heads * l, s);
  });
  const Tensor ctx = detail::matmul_scaled(op, scores, vh, 1.0, dt);  // [N, H, L, hd]
  const Shape back = batched && o.batch_first ? Shape{0, 2, 1, 3} : Shape{2, 0, 1, 3};
  const Shape merged = batched ? (o.batch_first ? Shape{n, l, e} : Shape{l, n, e}) : Shape{l, e};
  r.output = linear(ctx.permute(back).clone().reshape(merged), out_weight, out_bias);
  if (o.need_weights) {
    if (o.average_attn_weights) {
      Tensor w = Tensor::empty(dt, {n, l, s});
      detail::dispatch(dt, [&]<class T>() {
        const T* src = detail::cdata<T>(scores);
        T* dst = detail::mdata<T>(w);
        const std::int64_t plane = l * s;
        for (std::int64_t b = 0; b < n; ++b)
          for (std::int64_t i = 0; i < plane; ++i) {
            T acc = 0;  // torch: weights.sum(dim=1) / num_heads
            for (std::int64_t h = 0; h < heads; ++h) acc += src[(b * heads + h) * plane + i];
            dst[b * plane + i] = acc / static_cast<T>(heads);
          }
      });
      r.weights = batched ? w : w.reshape({l, s});
    } else {
      r.weights = batched ? scores : scores.reshape({heads, l, s});
    }
  }
  return r;
}

Tensor apply_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  constexpr std::string_view op = "apply_rotary";
  detail::require_defined(op, x, "input");
  detail::require_defined(op, cos, "cos");
  detail::require_defined(op, sin, "sin");
  const DType dt = detail::compute_dtype(op, {{&x, "input"}, {&cos, "cos"}, {&sin, "sin"}});
  if (x.dim() == 0 || x.size(-1) % 2 != 0)
    detail::fail(ErrorCode::invalid_argument, op,
                 "input " + detail::str(x.shape()) + " must end in an even head dimension");
  for (const auto& [t, name] : {std::pair{&cos, "cos"}, std::pair{&sin, "sin"}})
    if (!detail::broadcasts_to(t->shape(), x.shape()))
      detail::fail(ErrorCode::shape_mismatch, op,
                   std::string(name) + " " + detail::str(t->shape()) +
                       " does not broadcast to input " + detail::str(x.shape()));
  const Tensor xs = x.to(dt), cs = cos.to(dt), sn = sin.to(dt);
  Tensor out = Tensor::empty(dt, xs.shape());
  if (out.numel() == 0) return out;
  const Shape& shape = xs.shape();
  const std::array<Shape, 3> st{xs.strides(),
                                detail::broadcast_strides(cs.shape(), cs.strides(), shape),
                                detail::broadcast_strides(sn.shape(), sn.strides(), shape)};
  const std::int64_t d = shape.back(), half = d / 2;
  const std::int64_t c_step = st[1].back(), s_step = st[2].back();
  detail::dispatch(dt, [&]<class T>() {
    const T* px = xs.data<T>();
    const T* pc = cs.data<T>();
    const T* ps = sn.data<T>();
    T* po = out.mutable_data<T>();
    detail::for_each_row(shape, st, [&](const std::array<std::int64_t, 3>& off) {
      const T* xr = px + off[0];
      const T* cr = pc + off[1];
      const T* sr = ps + off[2];
      T* orow = po + off[0];
      for (std::int64_t j = 0; j < half; ++j)
        orow[j] = xr[j] * cr[j * c_step] - xr[j + half] * sr[j * s_step];
      for (std::int64_t j = half; j < d; ++j)
        orow[j] = xr[j] * cr[j * c_step] + xr[j - half] * sr[j * s_step];
    });
  });
  return out;
}

Tensor repeat_kv(const Tensor& x, std::int64_t n_rep) {
  constexpr std::string_view op = "repeat_kv";
  detail::require_defined(op, x, "input");
  if (x.dim() != 4)
    detail::fail(ErrorCode::invalid_argument, op,
                 "input " + detail::str(x.shape()) + " must be [N, H_kv, S, D]");
  if (n_rep < 1)
    detail::fail(ErrorCode::invalid_argument, op,
                 "n_rep " + std::to_string(n_rep) + " must be >= 1");
  const Tensor src = x.contiguous();
  const std::int64_t n = x.size(0), h = x.size(1);
  Tensor out = Tensor::empty(x.dtype(), {n, h * n_rep, x.size(2), x.size(3)});
  if (out.numel() == 0) return out;
  const std::size_t block = static_cast<std::size_t>(x.size(2) * x.size(3)) * dtype_size(x.dtype());
  const std::byte* in = src.bytes().data();
  std::byte* o = out.mutable_bytes().data();
  for (std::int64_t i = 0; i < n * h; ++i)
    for (std::int64_t r = 0; r < n_rep; ++r, o += block)
      std::memcpy(o, in + static_cast<std::size_t>(i) * block, block);
  return out;
}

}  // namespace torchport::nn
