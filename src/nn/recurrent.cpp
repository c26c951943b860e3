#include "torchport/nn/recurrent.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "nn/common.hpp"
#include "nn/linalg.hpp"

namespace torchport::nn {
namespace {

constexpr std::string_view kOp = "lstm";
constexpr const char* kGate[4] = {"i", "f", "g", "o"};

void check_shape(const Tensor& t, const Shape& want, std::size_t layer, std::string_view what,
                 int gate) {
  if (t.shape() != want)
    detail::fail(ErrorCode::shape_mismatch, kOp,
                 "layer " + std::to_string(layer) + " " + std::string(what) + "[" + kGate[gate] +
                     "] is " + detail::str(t.shape()) + ", expected " + detail::str(want) +
                     " (weights are [in, out])");
}

// The four gates side by side: [rows, 4H] from four [rows, H] tensors.
template <class T>
std::vector<T> stack_gates(const std::array<Tensor, 4>& gates, std::int64_t rows, std::int64_t h,
                           DType dt) {
  std::vector<T> out(static_cast<std::size_t>(rows * 4 * h));
  for (int k = 0; k < 4; ++k) {
    const Tensor g = gates[static_cast<std::size_t>(k)].to(dt);
    const T* src = detail::cdata<T>(g);
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(out.data() + r * 4 * h + k * h, src + r * h,
                  static_cast<std::size_t>(h) * sizeof(T));
  }
  return out;
}

template <class T>
T sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

}  // namespace

LstmResult lstm(const Tensor& input, std::span<const LstmLayerWeights> layers,
                const LstmOptions& o) {
  detail::require_defined(kOp, input, "input");
  if (layers.empty()) detail::fail(ErrorCode::invalid_argument, kOp, "no layers");
  if (input.dim() != 3 && input.dim() != 2)
    detail::fail(ErrorCode::invalid_argument, kOp,
                 "input " + detail::str(input.shape()) +
                     " must be [T, N, input_size] (or [N, T, input_size] with "
                     "batch_first) or [T, input_size]");
  DType dt = detail::compute_dtype(kOp, {{&input, "input"}, {&o.h0, "h0"}, {&o.c0, "c0"}});
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (int k = 0; k < 4; ++k) {
      const std::size_t g = static_cast<std::size_t>(k);
      const std::string at = "layer " + std::to_string(l) + " gate " + kGate[k] + " ";
      const DType d = detail::compute_dtype(kOp, {{&layers[l].w_ih[g], at + "w_ih"},
                                                  {&layers[l].w_hh[g], at + "w_hh"},
                                                  {&layers[l].b_ih[g], at + "b_ih"},
                                                  {&layers[l].b_hh[g], at + "b_hh"}});
      if (d == DType::F64) dt = DType::F64;
    }
  const bool batched = input.dim() == 3;
  // Work in [T, N, features] layout.
  Tensor x = input.to(dt);
  if (!batched)
    x = x.reshape({input.size(0), 1, input.size(1)});
  else if (o.batch_first)
    x = x.transpose(0, 1).clone();
  const std::int64_t steps = x.size(0), n = x.size(1);
  const std::int64_t nl = static_cast<std::int64_t>(layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (int k = 0; k < 4; ++k) {
      const std::size_t g = static_cast<std::size_t>(k);
      detail::require_defined(kOp, layers[l].w_ih[g],
                              "layer " + std::to_string(l) + " w_ih[" + kGate[k] + "]");
      detail::require_defined(kOp, layers[l].w_hh[g],
                              "layer " + std::to_string(l) + " w_hh[" + kGate[k] + "]");
    }
  const std::int64_t hidden = layers[0].w_hh[0].dim() == 2 ? layers[0].w_hh[0].size(0) : -1;
  if (hidden < 0)
    detail::fail(ErrorCode::shape_mismatch, kOp,
                 "layer 0 w_hh[i] " + detail::str(layers[0].w_hh[0].shape()) + " must be [H, H]");
  const Shape state_shape = batched ? Shape{nl, n, hidden} : Shape{nl, hidden};
  for (const auto& [t, name] : {std::pair{&o.h0, "h0"}, std::pair{&o.c0, "c0"}})
    if (t->defined() && t->shape() != state_shape)
      detail::fail(ErrorCode::shape_mismatch, kOp,
                   std::string(name) + " " + detail::str(t->shape()) + " must be " +
                       detail::str(state_shape));

  LstmResult r;
  r.h_n = Tensor::empty(dt, {nl, n, hidden});
  r.c_n = Tensor::empty(dt, {nl, n, hidden});
  detail::dispatch(dt, [&]<class T>() {
    const Tensor h0 = o.h0.defined() ? o.h0.to(dt) : Tensor::zeros(dt, {nl, n, hidden});
    const Tensor c0 = o.c0.defined() ? o.c0.to(dt) : Tensor::zeros(dt, {nl, n, hidden});
    Tensor layer_in = x;
    const std::int64_t hn = n * hidden;
    std::vector<T> gates(static_cast<std::size_t>(steps * n * 4 * hidden));
    std::vector<T> h(static_cast<std::size_t>(hn)), c(static_cast<std::size_t>(hn));
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const LstmLayerWeights& lw = layers[l];
      const std::int64_t in = layer_in.size(2);
      for (int k = 0; k < 4; ++k) {
        const std::size_t g = static_cast<std::size_t>(k);
        check_shape(lw.w_ih[g], {in, hidden}, l, "w_ih", k);
        check_shape(lw.w_hh[g], {hidden, hidden}, l, "w_hh", k);
        if (lw.b_ih[g].defined()) check_shape(lw.b_ih[g], {hidden}, l, "b_ih", k);
        if (lw.b_hh[g].defined()) check_shape(lw.b_hh[g], {hidden}, l, "b_hh", k);
      }
      const std::vector<T> wih = stack_gates<T>(lw.w_ih, in, hidden, dt);
      const std::vector<T> whh = stack_gates<T>(lw.w_hh, hidden, hidden, dt);
      std::vector<T> bias(static_cast<std::size_t>(4 * hidden), T(0));
      for (int k = 0; k < 4; ++k)
        for (const Tensor* b :
             {&lw.b_ih[static_cast<std::size_t>(k)], &lw.b_hh[static_cast<std::size_t>(k)]}) {
          if (!b->defined()) continue;
          const Tensor bt = b->to(dt);
          const T* pb = detail::cdata<T>(bt);
          for (std::int64_t j = 0; j < hidden; ++j)
            bias[static_cast<std::size_t>(k * hidden + j)] += pb[j];
        }
      // Input projections of every step at once: gates = X @ W_ih + b.
      const std::int64_t rows = steps * n;
      for (std::int64_t r0 = 0; r0 < rows; ++r0)
        std::memcpy(gates.data() + r0 * 4 * hidden, bias.data(),
                    static_cast<std::size_t>(4 * hidden) * sizeof(T));
      if (rows > 0 && in > 0)
        detail::gemm<T>(false, false, rows, 4 * hidden, in, T(1), detail::cdata<T>(layer_in), in,
                        wih.data(), 4 * hidden, T(1), gates.data(), 4 * hidden);
      if (hn > 0) {
        std::memcpy(h.data(), detail::cdata<T>(h0) + static_cast<std::int64_t>(l) * hn,
                    static_cast<std::size_t>(hn) * sizeof(T));
        std::memcpy(c.data(), detail::cdata<T>(c0) + static_cast<std::int64_t>(l) * hn,
                    static_cast<std::size_t>(hn) * sizeof(T));
      }
      Tensor out = Tensor::empty(dt, {steps, n, hidden});
      T* y = detail::mdata<T>(out);
      for (std::int64_t t = 0; t < steps && hn > 0; ++t) {
        T* gt = gates.data() + t * n * 4 * hidden;
        detail::gemm<T>(false, false, n, 4 * hidden, hidden, T(1), h.data(), hidden, whh.data(),
                        4 * hidden, T(1), gt, 4 * hidden);
        for (std::int64_t b = 0; b < n; ++b) {
          const T* gr = gt + b * 4 * hidden;
          T* hb = h.data() + b * hidden;
          T* cb = c.data() + b * hidden;
          for (std::int64_t j = 0; j < hidden; ++j) {
            const T ig = sigmoid(gr[j]), fg = sigmoid(gr[hidden + j]);
            const T gg = std::tanh(gr[2 * hidden + j]), og = sigmoid(gr[3 * hidden + j]);
            cb[j] = fg * cb[j] + ig * gg;
            hb[j] = og * std::tanh(cb[j]);
          }
        }
        std::memcpy(y + t * hn, h.data(), static_cast<std::size_t>(hn) * sizeof(T));
      }
      if (hn > 0) {
        std::memcpy(r.h_n.mutable_data<T>() + static_cast<std::int64_t>(l) * hn, h.data(),
                    static_cast<std::size_t>(hn) * sizeof(T));
        std::memcpy(r.c_n.mutable_data<T>() + static_cast<std::int64_t>(l) * hn, c.data(),
                    static_cast<std::size_t>(hn) * sizeof(T));
      }
      layer_in = out;
    }
    r.output = layer_in;
  });
  if (!batched) {
    r.output = r.output.reshape({steps, hidden});
    r.h_n = r.h_n.reshape({nl, hidden});
    r.c_n = r.c_n.reshape({nl, hidden});
  } else if (o.batch_first) {
    r.output = r.output.transpose(0, 1).clone();
  }
  return r;
}

}  // namespace torchport::nn
