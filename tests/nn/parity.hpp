#pragma once
// Helpers of the nn tests: reading a parity fixture (tests/nn/fixtures/<case>.pt,
// written by make_nn_fixtures.py) and comparing tensors with a tolerance.

#include <string>

#include "torchport/core/tensor.hpp"
#include "torchport/formats/catalog.hpp"

namespace torchport::test {

/// |actual - expected| <= atol + rtol * |expected| elementwise (torch.allclose's rule).
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

/// One fixture file; `operator[]` returns a named tensor or fails the test
/// (throws) when it is missing.
class NnFixture {
 public:
  explicit NnFixture(const std::string& name);
  Tensor operator[](const std::string& key) const;

 private:
  std::string name_;
  TensorCatalog catalog_;
};

/// Expects equal shapes, the dtype the nn contract promises (F64 for an F64
/// reference, F32 for other floating references, the same dtype for integer
/// ones) and values within `tol` (NaN matches NaN). Reports the worst
/// element. `what` names the comparison in failures.
void expect_close(const Tensor& actual, const Tensor& expected, Tolerance tol,
                  const std::string& what);

/// A tensor of `shape` filled with `values` (F32).
Tensor f32(std::initializer_list<float> values, Shape shape);

}  // namespace torchport::test
