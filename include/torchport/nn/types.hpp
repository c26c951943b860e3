#pragma once
/// \file
/// Small argument types shared by the `torchport::nn` ops.

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

namespace torchport::nn {

/// A list of dimensions (negative values count from the end, as in torch).
using Dims = std::vector<std::int64_t>;

/// A per-dimension pair for 2-d ops (height, width), written as one int for
/// both (`2`) or two (`{2, 1}`), as torch's `int | tuple[int, int]` arguments.
struct Int2 {
  std::int64_t h = 0;  ///< height (the first spatial dimension)
  std::int64_t w = 0;  ///< width (the second spatial dimension)

  /// Zero for both (the value of an unset `Setting<Int2>`).
  constexpr Int2() noexcept = default;

  /// The same value for both dimensions.
  constexpr Int2(std::int64_t both) noexcept : h(both), w(both) {}  // NOLINT: implicit by design
  /// Height and width.
  constexpr Int2(std::int64_t height, std::int64_t width) noexcept : h(height), w(width) {}
  /// Element `i` (0 = height, 1 = width).
  constexpr std::int64_t operator[](int i) const noexcept { return i == 0 ? h : w; }
  /// Both values equal.
  friend constexpr bool operator==(const Int2&, const Int2&) noexcept = default;
};

namespace detail {
/// Throws Error(invalid_argument): a module's setting was read before it was set.
[[noreturn]] void unset_setting();
}  // namespace detail

/// A module's configuration value that no checkpoint records (a
/// convolution's stride, a norm's eps, attention's head count): torch keeps
/// it in the module's constructor arguments, never in the state_dict. The
/// module's sized constructor sets it, and so does an assignment
/// (`conv.stride = 2`); a default-constructed module leaves it unset, and
/// its `forward` refuses to run, naming what to set, rather than compute
/// with a value nobody gave.
///
/// \code
/// torchport::nn::Conv2d conv;  // shapes from the file, configuration from you:
/// conv.stride = 2;
/// conv.padding = 3;
/// conv.dilation = 1;
/// conv.groups = 1;
/// \endcode
template <class T>
class Setting {
 public:
  /// Unset.
  constexpr Setting() = default;
  /// Set to `value`.
  constexpr Setting(const T& value) : value_(value), set_(true) {}  // NOLINT: implicit by design
  /// Sets the value.
  constexpr Setting& operator=(const T& value) {
    value_ = value;
    set_ = true;
    return *this;
  }
  /// True once given a value.
  constexpr bool is_set() const noexcept { return set_; }
  /// The value. \throws Error(invalid_argument) when unset.
  constexpr const T& get() const {
    if (!set_) detail::unset_setting();
    return value_;
  }
  /// The value, as `get()`.
  constexpr operator const T&() const { return get(); }  // NOLINT: implicit by design
  /// A member of the value, as `get()`.
  constexpr const T* operator->() const { return &get(); }

 private:
  T value_{};
  bool set_ = false;
};

/// The settings of `module` named `names` that are unset, for a message:
/// throws Error(invalid_argument) "<kind>: <names> not set: ..." with `how`
/// (how to set them) when any is.
void require_settings(std::string_view kind,
                      std::initializer_list<std::pair<std::string_view, bool>> names_set,
                      std::string_view how);

}  // namespace torchport::nn
