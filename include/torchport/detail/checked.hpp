#pragma once
/// \file
/// Overflow-checked integer arithmetic (internal).

namespace torchport::detail {

/// `out = a + b`; false on overflow (out is then unspecified).
template <class A, class B, class R>
constexpr bool add_ok(A a, B b, R& out) noexcept {
  return !__builtin_add_overflow(a, b, &out);
}
/// `out = a * b`; false on overflow.
template <class A, class B, class R>
constexpr bool mul_ok(A a, B b, R& out) noexcept {
  return !__builtin_mul_overflow(a, b, &out);
}

}  // namespace torchport::detail
