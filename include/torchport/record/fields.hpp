#pragma once
/// \file
/// The visit protocol: a plain struct declares its fields once, and can then
/// be loaded, saved, printed and compared.
///
/// \code
/// struct Block {
///   torchport::nn::Conv2d conv;
///   torchport::nn::BatchNorm2d norm;
///   TORCHPORT_FIELDS(conv, norm)   // names come from the members
/// };
/// \endcode
///
/// A field may be: a `Tensor`; a module (a type with `TORCHPORT_FIELDS`);
/// `std::vector<T>` or `std::array<T, N>` (keys `0`, `1`, ...);
/// `std::optional<T>` (empty: the file decides, absent leaves it empty;
/// engaged, as a constructor engages a bias: part of the module, absent is
/// missing); `std::map<std::string, T>`;
/// `std::variant<A, B, ...>` (an enum module: the alternative whose structure
/// the file matches is chosen); `bool`, integers, floating point numbers and
/// `std::string` (configs).
///
/// A module that gives itself a kind (`static constexpr std::string_view
/// kKind = "Linear";`) or declares how PyTorch lays it out
/// (`kPyTorchLayout`, see `torchport/record/layout.hpp`) is handed to the
/// adapters, which is how a PyTorch layout becomes ours without the user
/// tagging anything.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "torchport/core/tensor.hpp"

/// \cond INTERNAL
#define TORCHPORT_PP_EXPAND(x) x
#define TORCHPORT_PP_ARG_N(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, \
                           _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30,  \
                           _31, _32, N, ...)                                                      \
  N
#define TORCHPORT_PP_NARG(...)                                                                    \
  TORCHPORT_PP_EXPAND(TORCHPORT_PP_ARG_N(__VA_ARGS__, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, \
                                         21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, \
                                         6, 5, 4, 3, 2, 1))
#define TORCHPORT_PP_CAT(a, b) TORCHPORT_PP_CAT_(a, b)
#define TORCHPORT_PP_CAT_(a, b) a##b
#define TORCHPORT_F1(m, x) m(x)
#define TORCHPORT_F2(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F1(m, __VA_ARGS__))
#define TORCHPORT_F3(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F2(m, __VA_ARGS__))
#define TORCHPORT_F4(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F3(m, __VA_ARGS__))
#define TORCHPORT_F5(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F4(m, __VA_ARGS__))
#define TORCHPORT_F6(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F5(m, __VA_ARGS__))
#define TORCHPORT_F7(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F6(m, __VA_ARGS__))
#define TORCHPORT_F8(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F7(m, __VA_ARGS__))
#define TORCHPORT_F9(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F8(m, __VA_ARGS__))
#define TORCHPORT_F10(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F9(m, __VA_ARGS__))
#define TORCHPORT_F11(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F10(m, __VA_ARGS__))
#define TORCHPORT_F12(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F11(m, __VA_ARGS__))
#define TORCHPORT_F13(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F12(m, __VA_ARGS__))
#define TORCHPORT_F14(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F13(m, __VA_ARGS__))
#define TORCHPORT_F15(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F14(m, __VA_ARGS__))
#define TORCHPORT_F16(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F15(m, __VA_ARGS__))
#define TORCHPORT_F17(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F16(m, __VA_ARGS__))
#define TORCHPORT_F18(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F17(m, __VA_ARGS__))
#define TORCHPORT_F19(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F18(m, __VA_ARGS__))
#define TORCHPORT_F20(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F19(m, __VA_ARGS__))
#define TORCHPORT_F21(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F20(m, __VA_ARGS__))
#define TORCHPORT_F22(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F21(m, __VA_ARGS__))
#define TORCHPORT_F23(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F22(m, __VA_ARGS__))
#define TORCHPORT_F24(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F23(m, __VA_ARGS__))
#define TORCHPORT_F25(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F24(m, __VA_ARGS__))
#define TORCHPORT_F26(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F25(m, __VA_ARGS__))
#define TORCHPORT_F27(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F26(m, __VA_ARGS__))
#define TORCHPORT_F28(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F27(m, __VA_ARGS__))
#define TORCHPORT_F29(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F28(m, __VA_ARGS__))
#define TORCHPORT_F30(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F29(m, __VA_ARGS__))
#define TORCHPORT_F31(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F30(m, __VA_ARGS__))
#define TORCHPORT_F32(m, x, ...) m(x) TORCHPORT_PP_EXPAND(TORCHPORT_F31(m, __VA_ARGS__))
#define TORCHPORT_FOR_EACH(m, ...) \
  TORCHPORT_PP_EXPAND(TORCHPORT_PP_CAT(TORCHPORT_F, TORCHPORT_PP_NARG(__VA_ARGS__))(m, __VA_ARGS__))
#define TORCHPORT_VISIT_ONE(f) visitor(#f, self.f);
#define TORCHPORT_VISIT_NAMED_(f, name) visitor(name, self.f);
#define TORCHPORT_VISIT_NAMED(pair) TORCHPORT_VISIT_NAMED_ pair
/// \endcond

/// Declares the recorded fields of a struct (up to 32), by member name.
/// Members not listed (configuration such as a convolution's stride) are
/// not part of the record. The struct must be declared at namespace or class
/// scope (C++ allows no member templates in classes local to a function).
#define TORCHPORT_FIELDS(...)                                                    \
  template <class TorchportSelf, class TorchportVisitor>                         \
  static void torchport_visit(TorchportSelf& self, TorchportVisitor&& visitor) { \
    TORCHPORT_FOR_EACH(TORCHPORT_VISIT_ONE, __VA_ARGS__)                         \
  }

/// Like `TORCHPORT_FIELDS`, with the key of each field given explicitly, for
/// keys that are not C++ identifiers (an `nn.Sequential`'s "0", "1"):
/// `TORCHPORT_NAMED_FIELDS((conv, "0"), (norm, "1"))`.
#define TORCHPORT_NAMED_FIELDS(...)                                              \
  template <class TorchportSelf, class TorchportVisitor>                         \
  static void torchport_visit(TorchportSelf& self, TorchportVisitor&& visitor) { \
    TORCHPORT_FOR_EACH(TORCHPORT_VISIT_NAMED, __VA_ARGS__)                       \
  }

namespace torchport {

/// True for types declared with `TORCHPORT_FIELDS`.
template <class T>
concept Module = requires(T& t) {
  T::torchport_visit(t, [](const char*, auto&) {});
};

/// True for modules that give themselves a kind for the adapters.
template <class T>
concept KindedModule = Module<T> && requires {
  std::string_view(T::kKind);
};

/// Calls `f(name, field)` for every recorded field of `m`, in declaration order.
template <Module M, class F>
void visit_fields(M& m, F&& f) {
  M::torchport_visit(m, f);
}
/// Calls `f(name, field)` for every recorded field of a const `m`, in
/// declaration order (`field` is a const reference).
template <Module M, class F>
void visit_fields(const M& m, F&& f) {
  M::torchport_visit(m, f);
}

namespace detail {

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_array : std::false_type {};
template <class T, std::size_t N>
struct is_array<std::array<T, N>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class T, class C, class A>
struct is_string_map<std::map<std::string, T, C, A>> : std::true_type {};
template <class T>
struct is_variant : std::false_type {};
template <class... T>
struct is_variant<std::variant<T...>> : std::true_type {};

template <class T>
constexpr bool is_scalar_v = std::is_arithmetic_v<T>;

// The text between "T = " and the closing bracket of __PRETTY_FUNCTION__.
template <class T>
constexpr std::string_view raw_type_name() {
  std::string_view p = __PRETTY_FUNCTION__;
  const auto start = p.find("T = ") + 4;
  const auto end = p.find_first_of(";]", start);
  return p.substr(start, end - start);
}

}  // namespace detail

/// A readable name of a field's type for messages: a module's kind, or its
/// C++ name ("Tensor", "std::vector<Block>", "MyNet").
template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, Tensor>) {
    return "Tensor";
  } else if constexpr (KindedModule<T>) {
    return std::string(T::kKind);
  } else {
    std::string s(detail::raw_type_name<T>());
    for (std::string_view ns : {"torchport::nn::", "torchport::", "std::__cxx11::"}) {
      for (auto at = s.find(ns); at != std::string::npos; at = s.find(ns)) s.erase(at, ns.size());
    }
    return s;
  }
}

}  // namespace torchport
