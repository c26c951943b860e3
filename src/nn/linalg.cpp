#include "torchport/nn/linalg.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>

#include "nn/linalg.hpp"

namespace torchport::nn {
namespace detail {
namespace {

blasint blas_int(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    fail(ErrorCode::limit_exceeded, "gemm",
         std::string(what) + " " + std::to_string(v) + " exceeds OpenBLAS's 32-bit integer range");
  return static_cast<blasint>(v);
}

// One matrix operand of a batched product: the last two dimensions as a BLAS
// matrix (row-major, possibly transposed) and the batch dimensions' strides.
struct Operand {
  Shape batch;          // leading dimensions
  Shape batch_strides;  // their strides, in elements
  std::int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 0;
};

Operand describe(const Tensor& t, bool is_lhs) {
  Operand o;
  const auto& sh = t.shape();
  const auto& st = t.strides();
  if (t.dim() == 1) {
    // A 1-d left operand is a row [1, k]; a 1-d right operand a column [k, 1].
    if (is_lhs) {
      o.rows = 1, o.cols = sh[0], o.row_stride = 0, o.col_stride = st[0];
    } else {
      o.rows = sh[0], o.cols = 1, o.row_stride = st[0], o.col_stride = 0;
    }
    return o;
  }
  const std::size_t n = sh.size();
  o.batch.assign(sh.begin(), sh.end() - 2);
  o.batch_strides.assign(st.begin(), st.end() - 2);
  o.rows = sh[n - 2], o.cols = sh[n - 1], o.row_stride = st[n - 2], o.col_stride = st[n - 1];
  return o;
}

// How BLAS can read a rows x cols matrix with the given strides, if at all.
struct Layout {
  bool ok = false;
  bool trans = false;
  std::int64_t ld = 0;
};

Layout blas_layout(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  const std::int64_t r1 = std::max<std::int64_t>(rows, 1), c1 = std::max<std::int64_t>(cols, 1);
  if (cs == 1 || cols == 1) {  // row-major: consecutive elements of a row are adjacent
    const std::int64_t ld = rows == 1 ? c1 : rs;
    if (ld >= c1) return {true, false, ld};
  }
  if (rs == 1 || rows == 1) {  // column-major: read as the transpose of a row-major matrix
    const std::int64_t ld = cols == 1 ? r1 : cs;
    if (ld >= r1) return {true, true, ld};
  }
  return {};
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
          std::int64_t ldc) {
  const blasint M = blas_int(m, "M"), N = blas_int(n, "N"), K = blas_int(k, "K");
  const blasint LDA = blas_int(lda, "lda"), LDB = blas_int(ldb, "ldb"), LDC = blas_int(ldc, "ldc");
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, LDA, b, LDB, beta, c, LDC);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, LDA, b, LDB, beta, c, LDC);
}

template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                          std::int64_t, const float*, std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double,
                           const double*, std::int64_t, const double*, std::int64_t, double,
                           double*, std::int64_t);

Tensor matmul_scaled(std::string_view op, const Tensor& a_in, const Tensor& b_in, double alpha,
                     DType dt) {
  require_defined(op, a_in, "first operand");
  require_defined(op, b_in, "second operand");
  if (a_in.dim() == 0 || b_in.dim() == 0)
    fail(ErrorCode::invalid_argument, op,
         "both operands need at least one dimension, got " + str(a_in.shape()) + " and " +
             str(b_in.shape()));
  // Operands in the compute dtype keep their strides; others are converted.
  Tensor a = a_in.dtype() == dt ? a_in : a_in.to(dt);
  Tensor b = b_in.dtype() == dt ? b_in : b_in.to(dt);
  Operand oa = describe(a, true), ob = describe(b, false);
  if (oa.cols != ob.rows)
    fail(ErrorCode::shape_mismatch, op,
         str(a.shape()) + " @ " + str(b.shape()) + ": inner sizes " + std::to_string(oa.cols) +
             " and " + std::to_string(ob.rows) + " differ");
  const Shape batch = broadcast_shapes(op, oa.batch, ob.batch);
  Layout la = blas_layout(oa.rows, oa.cols, oa.row_stride, oa.col_stride);
  Layout lb = blas_layout(ob.rows, ob.cols, ob.row_stride, ob.col_stride);
  if (!la.ok) {
    a = a.clone();
    oa = describe(a, true);
    la = blas_layout(oa.rows, oa.cols, oa.row_stride, oa.col_stride);
  }
  if (!lb.ok) {
    b = b.clone();
    ob = describe(b, false);
    lb = blas_layout(ob.rows, ob.cols, ob.row_stride, ob.col_stride);
  }
  const std::int64_t m = oa.rows, k = oa.cols, n = ob.cols;
  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(m);
  if (b.dim() > 1) out_shape.push_back(n);
  if (k == 0) return Tensor::zeros(dt, out_shape);  // an empty sum is 0
  Tensor out = Tensor::empty(dt, out_shape);        // gemm writes every element (beta = 0)
  if (out.numel() == 0) return out;

  dispatch(dt, [&]<class T>() {
    const T* pa = view_data<T>(a);
    const T* pb = view_data<T>(b);
    T* pc = out.mutable_data<T>();
    const T al = static_cast<T>(alpha);
    // When b has no batch of its own and a's batch and rows are one uniform
    // row stride, the whole product is one gemm with M = batch * rows.
    if (shape_numel(ob.batch) == 1 && !la.trans) {
      Shape sh = oa.batch;
      sh.push_back(m);
      std::array<Shape, 1> st{oa.batch_strides};
      st[0].push_back(la.ld);
      collapse_dims(sh, st);
      const std::int64_t ld = sh.empty() ? la.ld : st[0][0];
      if (sh.size() <= 1 &&
          ld >= std::max<std::int64_t>(k, 1)) {  // stride 0 (expanded) rows do not fold
        gemm<T>(false, lb.trans, shape_numel(oa.batch) * m, n, k, al, pa, ld, pb, lb.ld, T(0), pc,
                n);
        return;
      }
    }
    std::array<Shape, 2> st{broadcast_strides(oa.batch, oa.batch_strides, batch),
                            broadcast_strides(ob.batch, ob.batch_strides, batch)};
    Shape loop = batch;
    loop.push_back(1);  // for_each_row walks all dimensions but the last
    st[0].push_back(0);
    st[1].push_back(0);
    std::int64_t index = 0;
    for_each_row(loop, st, [&](const std::array<std::int64_t, 2>& off) {
      gemm<T>(la.trans, lb.trans, m, n, k, al, pa + off[0], la.ld, pb + off[1], lb.ld, T(0),
              pc + index * m * n, n);
      ++index;
    });
  });
  return out;
}

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b) {
  const DType dt = detail::compute_dtype("matmul", {{&a, "first operand"}, {&b, "second operand"}});
  return detail::matmul_scaled("matmul", a, b, 1.0, dt);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  constexpr std::string_view op = "linear";
  detail::require_defined(op, x, "input");
  detail::require_defined(op, weight, "weight");
  const DType dt = detail::compute_dtype(op, {{&x, "input"}, {&weight, "weight"}, {&bias, "bias"}});
  if (weight.dim() != 2)
    detail::fail(
        ErrorCode::invalid_argument, op,
        "weight " + detail::str(weight.shape()) + " is not 2-d [in_features, out_features]");
  if (x.dim() == 0 || x.size(-1) != weight.size(0))
    detail::fail(ErrorCode::shape_mismatch, op,
                 "input " + detail::str(x.shape()) + " does not end in in_features = " +
                     std::to_string(weight.size(0)) + " of weight " + detail::str(weight.shape()) +
                     " (weight is [in, out]: torch's nn.Linear weight transposed)");
  const std::int64_t out_features = weight.size(1);
  if (bias.defined() && (bias.dim() != 1 || bias.numel() != out_features))
    detail::fail(ErrorCode::shape_mismatch, op,
                 "bias " + detail::str(bias.shape()) + " does not match out_features = " +
                     std::to_string(out_features) + " of weight " + detail::str(weight.shape()));
  Tensor out = detail::matmul_scaled(op, x, weight, 1.0, dt);
  if (bias.defined() && out.numel() > 0) {
    const Tensor b = bias.to(dt);
    detail::dispatch(dt, [&]<class T>() {
      const T* pb = b.data<T>();
      T* o = out.mutable_data<T>();
      const std::int64_t rows = out.numel() / out_features;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < out_features; ++j) o[r * out_features + j] += pb[j];
    });
  }
  return out;
}

}  // namespace torchport::nn
