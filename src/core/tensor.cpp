#include "torchport/core/tensor.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <span>
#include <tuple>

#include "torchport/core/convert.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport {
namespace {

std::string join(std::span<const std::int64_t> v) {
  return shape_to_string(v);
}

// Copies the elements of a strided view into `out` in C order. Dimensions
// that are contiguous with each other are merged first, so a contiguous or
// row-sliced view becomes a few large memcpy calls.
void strided_copy(const std::byte* base, std::size_t elem, const Shape& shape, const Shape& strides,
                  std::byte* out) {
  Shape sz, st;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!sz.empty() && st.back() == strides[i] * shape[i]) {
      sz.back() *= shape[i];
      st.back() = strides[i];
    } else {
      sz.push_back(shape[i]);
      st.push_back(strides[i]);
    }
  }
  if (sz.empty()) {  // one element
    std::memcpy(out, base, elem);
    return;
  }
  const std::size_t nd = sz.size();
  const bool inner_dense = st.back() == 1;
  const std::int64_t inner = sz.back();
  const std::size_t run = inner_dense ? static_cast<std::size_t>(inner) * elem : elem;
  std::vector<std::int64_t> idx(nd, 0);
  for (;;) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d + 1 < nd; ++d) off += idx[d] * st[d];
    const std::byte* src = base + off * static_cast<std::int64_t>(elem);
    if (inner_dense) {
      std::memcpy(out, src, run);
      out += run;
    } else {
      const std::int64_t step = st.back() * static_cast<std::int64_t>(elem);
      for (std::int64_t i = 0; i < inner; ++i, out += elem) std::memcpy(out, src + i * step, elem);
    }
    // Advance the outer index (all but the innermost dimension).
    std::size_t d = nd - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++idx[d] < sz[d]) break;
      idx[d] = 0;
    }
  }
}

// A meta tensor's elements were never saved.
[[noreturn]] void no_data(const Tensor& t) {
  throw Error(ErrorCode::unsupported, "the elements of " + t.description() +
                                          ": a meta tensor has no data (torch saved it from device "
                                          "'meta': dtype and shape only)");
}

}  // namespace

std::int64_t shape_numel(std::span<const std::int64_t> shape) {
  // The product of the sizes with zeros counted as ones must fit too: it is
  // the outermost contiguous stride, which an empty tensor still has (torch
  // refuses [0, 2^40, 2^40] as well).
  std::int64_t n = 1, span = 1;
  for (std::int64_t s : shape) {
    if (s < 0) throw Error(ErrorCode::corrupt, "negative size in shape " + join(shape));
    if (!detail::mul_ok(n, s, n) || !detail::mul_ok(span, std::max<std::int64_t>(s, 1), span))
      throw Error(ErrorCode::corrupt,
                  "shape " + join(shape) + " has more elements than fit in 64 bits");
  }
  return n;
}

Shape contiguous_strides(std::span<const std::int64_t> shape) {
  Shape st(shape.size());
  std::int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] < 0) throw Error(ErrorCode::corrupt, "negative size in shape " + join(shape));
    st[i] = acc;
    if (!detail::mul_ok(acc, std::max<std::int64_t>(shape[i], 1), acc))
      throw Error(ErrorCode::corrupt, "the strides of shape " + join(shape) + " overflow 64 bits");
  }
  return st;
}

std::string shape_to_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor::Tensor(DType dtype, Shape shape, Shape strides, std::int64_t storage_offset,
               std::shared_ptr<Storage> storage)
    : dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(storage_offset),
      storage_(std::move(storage)) {
  if (!storage_) throw Error(ErrorCode::invalid_argument, "tensor without storage");
  if (shape_.size() != strides_.size())
    throw Error(ErrorCode::corrupt, "shape " + join(shape_) + " and strides " + join(strides_) +
                                        " have different lengths");
  numel_ = shape_numel(shape_);
  if (offset_ < 0)
    throw Error(ErrorCode::corrupt, "negative storage offset " + std::to_string(offset_));
  for (std::int64_t s : strides_)
    if (s < 0) throw Error(ErrorCode::corrupt, "negative stride in " + join(strides_));
  if (numel_ == 0) return;  // an empty view reaches no element
  // The last element the view can reach: offset + sum((size-1) * stride).
  std::int64_t last = offset_;
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    std::int64_t step;
    if (!detail::mul_ok(shape_[i] - 1, strides_[i], step) || !detail::add_ok(last, step, last))
      throw Error(ErrorCode::corrupt, "view sizes " + join(shape_) + " strides " + join(strides_) +
                                          " overflow 64 bits");
  }
  std::uint64_t need;
  if (!detail::mul_ok(static_cast<std::uint64_t>(last) + 1, dtype_size(dtype_), need) ||
      need > storage_->nbytes())
    throw Error(ErrorCode::corrupt,
                "view of " + std::string(dtype_name(dtype_)) + join(shape_) + " with strides " +
                    join(strides_) + " at offset " + std::to_string(offset_) + " needs " +
                    std::to_string(static_cast<std::uint64_t>(last) + 1) +
                    " elements but its storage has " + std::to_string(storage_->nbytes()) +
                    " bytes; truncated or corrupt file?");
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  const std::int64_t n = shape_numel(shape);
  std::uint64_t bytes;
  if (!detail::mul_ok(static_cast<std::uint64_t>(n), dtype_size(dtype), bytes))
    throw Error(ErrorCode::limit_exceeded, "tensor of shape " + join(shape) + " is too large");
  Shape st = contiguous_strides(shape);
  return Tensor(dtype, std::move(shape), std::move(st), 0, Storage::allocate(bytes));
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  auto b = t.mutable_bytes();
  if (!b.empty()) std::memset(b.data(), 0, b.size());
  return t;
}

std::int64_t Tensor::size(std::int64_t d) const {
  const std::int64_t n = dim();
  const std::int64_t i = d < 0 ? d + n : d;
  if (i < 0 || i >= n)
    throw Error(ErrorCode::invalid_argument, "dimension " + std::to_string(d) +
                                                 " out of range for a " + std::to_string(n) +
                                                 "-d tensor");
  return shape_[static_cast<std::size_t>(i)];
}

std::uint64_t Tensor::nbytes() const noexcept {
  return static_cast<std::uint64_t>(numel_) * dtype_size(dtype_);
}

bool Tensor::is_contiguous() const noexcept {
  std::int64_t expected = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (shape_[i] == 0) return true;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::span<const std::byte> Tensor::bytes() const& {
  if (!defined()) throw Error(ErrorCode::invalid_argument, "undefined tensor");
  if (meta_) no_data(*this);
  if (!is_contiguous())
    throw Error(ErrorCode::invalid_argument,
                "bytes() of a non-contiguous view " + description() + "; call contiguous() first");
  if (numel_ == 0) return {};
  auto all = storage_->bytes();
  return all.subspan(static_cast<std::size_t>(offset_) * dtype_size(dtype_),
                     static_cast<std::size_t>(nbytes()));
}

std::span<std::byte> Tensor::mutable_bytes() {
  if (!defined()) throw Error(ErrorCode::invalid_argument, "undefined tensor");
  if (meta_) no_data(*this);
  if (!is_contiguous())
    throw Error(ErrorCode::invalid_argument, "mutable_bytes() of a non-contiguous view");
  auto all = storage_->mutable_bytes();
  if (numel_ == 0) return {};
  return all.subspan(static_cast<std::size_t>(offset_) * dtype_size(dtype_),
                     static_cast<std::size_t>(nbytes()));
}

void Tensor::check_access(DType expected, std::size_t elem_size) const {
  if (!defined()) throw Error(ErrorCode::invalid_argument, "undefined tensor");
  if (expected != dtype_ &&
      !(elem_size == dtype_size(dtype_) && elem_size == 2 && (expected == DType::U16) &&
        (dtype_ == DType::F16 || dtype_ == DType::BF16)))
    throw Error(ErrorCode::dtype_mismatch, "tensor is " + std::string(dtype_name(dtype_)) +
                                               ", accessed as " +
                                               std::string(dtype_name(expected)));
}

void Tensor::fail_count(std::size_t got, std::int64_t want) {
  throw Error(ErrorCode::shape_mismatch, std::to_string(got) + " values given for a shape of " +
                                             std::to_string(want) + " elements");
}

void Tensor::copy_to(std::span<std::byte> out) const {
  if (meta_) no_data(*this);
  if (out.size() != nbytes())
    throw Error(ErrorCode::invalid_argument, "copy_to: destination has " +
                                                 std::to_string(out.size()) + " bytes, tensor " +
                                                 std::to_string(nbytes()));
  if (numel_ == 0) return;
  if (is_contiguous()) {
    storage_->read_into(static_cast<std::uint64_t>(offset_) * dtype_size(dtype_), out);
    return;
  }
  const auto all = storage_->bytes();
  const std::size_t elem = dtype_size(dtype_);
  strided_copy(all.data() + offset_ * static_cast<std::int64_t>(elem), elem, shape_, strides_,
               out.data());
}

Tensor Tensor::contiguous() const {
  if (!defined() || is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  if (!defined()) return *this;
  Tensor t = empty(dtype_, shape_);
  copy_to(t.mutable_bytes());
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (!defined()) throw Error(ErrorCode::invalid_argument, "undefined tensor");
  if (dtype == dtype_) return contiguous();
  if (!convertible(dtype_, dtype))
    convert_elements(nullptr, dtype_, nullptr, dtype, 0);  // throws the explanation
  const Tensor src = contiguous();
  Tensor t = empty(dtype, shape_);
  convert_elements(src.bytes().data(), dtype_, t.mutable_bytes().data(), dtype,
                   static_cast<std::size_t>(numel_));
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  if (!is_contiguous())
    throw Error(ErrorCode::invalid_argument, "reshape of a non-contiguous view; call contiguous()");
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw Error(ErrorCode::shape_mismatch, "reshape: more than one -1");
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && known > 0 && numel_ % known == 0)
    shape[static_cast<std::size_t>(infer)] = numel_ / known;
  if (shape_numel(shape) != numel_)
    throw Error(ErrorCode::shape_mismatch, "cannot reshape " + join(shape_) + " (" +
                                               std::to_string(numel_) + " elements) to " +
                                               join(shape));
  Shape st = contiguous_strides(shape);
  return view_of(std::move(shape), std::move(st), offset_);
}

Tensor Tensor::transpose(std::int64_t a, std::int64_t b) const {
  const std::int64_t n = dim();
  if (a < 0) a += n;
  if (b < 0) b += n;
  if (a < 0 || b < 0 || a >= n || b >= n)
    throw Error(ErrorCode::invalid_argument, "transpose: dimension out of range");
  Shape sh = shape_, st = strides_;
  std::swap(sh[static_cast<std::size_t>(a)], sh[static_cast<std::size_t>(b)]);
  std::swap(st[static_cast<std::size_t>(a)], st[static_cast<std::size_t>(b)]);
  return view_of(std::move(sh), std::move(st), offset_);
}

Tensor Tensor::permute(std::span<const std::int64_t> order) const {
  const std::size_t n = shape_.size();
  if (order.size() != n)
    throw Error(ErrorCode::invalid_argument,
                "permute: order " + join(order) + " for a " + std::to_string(n) + "-d tensor");
  std::vector<bool> seen(n, false);
  Shape sh(n), st(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t d = order[i] < 0 ? order[i] + static_cast<std::int64_t>(n) : order[i];
    if (d < 0 || d >= static_cast<std::int64_t>(n) || seen[static_cast<std::size_t>(d)])
      throw Error(ErrorCode::invalid_argument,
                  "permute: order " + join(order) + " is not a permutation");
    seen[static_cast<std::size_t>(d)] = true;
    sh[i] = shape_[static_cast<std::size_t>(d)];
    st[i] = strides_[static_cast<std::size_t>(d)];
  }
  return view_of(std::move(sh), std::move(st), offset_);
}

Tensor Tensor::narrow(std::int64_t d, std::int64_t start, std::int64_t length) const {
  const std::int64_t n = size(d);
  const std::size_t i = static_cast<std::size_t>(d < 0 ? d + dim() : d);
  if (start < 0 || length < 0 || start > n || length > n - start)
    throw Error(ErrorCode::invalid_argument, "narrow: [" + std::to_string(start) + ", +" +
                                                 std::to_string(length) + ") out of size " +
                                                 std::to_string(n));
  Shape sh = shape_;
  sh[i] = length;
  return view_of(std::move(sh), strides_, offset_ + start * strides_[i]);
}

bool Tensor::equal(const Tensor& other) const {
  if (defined() != other.defined()) return false;
  if (!defined()) return true;
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  const Tensor a = contiguous(), b = other.contiguous();
  const auto x = a.bytes(), y = b.bytes();
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size()) == 0);
}

std::string Tensor::description() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype_)) + join(shape_) + (meta_ ? " meta" : "") +
         (is_conj() ? " conj" : "") + (is_neg() ? " neg" : "");
}

namespace {

// Flips the sign bit of every `width`-byte component at `stride` bytes
// apart starting at byte `first` (little-endian: the sign is the last
// byte's top bit). IEEE negation is exactly this, NaNs included.
void flip_signs(std::span<std::byte> b, std::size_t first, std::size_t width, std::size_t stride) {
  for (std::size_t at = first + width - 1; at < b.size(); at += stride) b[at] ^= std::byte{0x80};
}

// resolve_conj / resolve_neg of every element of a storage's bytes.
void apply_view_bits(std::span<std::byte> b, DType d, bool conj, bool neg) {
  const std::size_t n = dtype_size(d);
  if (is_complex(d)) {
    const std::size_t half = n / 2;
    if (neg) flip_signs(b, 0, half, n);             // real parts
    if (conj != neg) flip_signs(b, half, half, n);  // imaginary: conj and neg cancel
    return;
  }
  if (!neg) return;
  if (is_floating(d)) {
    flip_signs(b, 0, n, n);
    return;
  }
  // Integers: two's complement negation, wrapping as torch's neg does.
  for (std::size_t at = 0; at + n <= b.size(); at += n) {
    std::uint64_t v = 0;
    std::memcpy(&v, b.data() + at, n);
    v = ~v + 1;
    std::memcpy(b.data() + at, &v, n);
  }
}

// One resolved storage per file storage and bits, whatever the number of
// views: a file of a thousand conj views of one storage costs one copy, not
// a thousand (cost linear in the file). The resolved storage keeps the
// file's alive, so a live entry's key cannot be reused by another storage.
std::shared_ptr<Storage> resolved_storage(const std::shared_ptr<Storage>& raw, DType d, bool conj,
                                          bool neg) {
  static std::mutex mutex;
  static std::map<std::tuple<const Storage*, DType, bool, bool>, std::weak_ptr<Storage>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(raw.get(), d, conj, neg);
  if (auto it = cache.find(key); it != cache.end())
    if (auto live = it->second.lock()) return live;
  if (cache.size() >= 64)  // drop the entries of storages no tensor holds any more
    std::erase_if(cache, [](const auto& kv) { return kv.second.expired(); });
  auto made = Storage::deferred(raw->nbytes(), [raw, d, conj, neg]() {
    auto out = Storage::allocate(raw->nbytes());
    const auto in = raw->bytes();
    if (!in.empty()) std::memcpy(out->mutable_bytes().data(), in.data(), in.size());
    apply_view_bits(out->mutable_bytes(), d, conj, neg);
    return out;
  });
  cache[key] = made;
  return made;
}

}  // namespace

// The rarely set parts are changed on a copy of the shared block (other
// tensors may share it); a block left with nothing in it is dropped.
void Tensor::set_extras(detail::TensorExtras e) {
  if (!e.quant && !e.sparse && !e.file_storage)
    extras_.reset();
  else
    extras_ = std::make_shared<const detail::TensorExtras>(std::move(e));
}

void Tensor::set_quantization(std::shared_ptr<const Quantization> q) {
  detail::TensorExtras e = extras_ ? *extras_ : detail::TensorExtras{};
  e.quant = std::move(q);
  set_extras(std::move(e));
}

void Tensor::set_sparse(std::shared_ptr<const SparseParts> parts) {
  detail::TensorExtras e = extras_ ? *extras_ : detail::TensorExtras{};
  e.sparse = std::move(parts);
  set_extras(std::move(e));
}

void Tensor::set_file_storage(std::shared_ptr<Storage> storage) {
  detail::TensorExtras e = extras_ ? *extras_ : detail::TensorExtras{};
  e.file_storage = std::move(storage);
  set_extras(std::move(e));
}

Tensor Tensor::with_view_bits(bool conj, bool neg) const {
  if (!conj && !neg) {
    if (view_bits_ == 0) return *this;
    Tensor t = *this;  // the bits replace any the view had: none
    t.storage_ = file_storage();
    t.set_file_storage(nullptr);
    t.view_bits_ = 0;
    return t;
  }
  if (conj && !is_complex(dtype_))
    throw Error(ErrorCode::unsupported,
                "a conjugate view of a " + std::string(dtype_name(dtype_)) +
                    " tensor (torch sets the conj bit on complex tensors only)");
  if (neg && (dtype_ == DType::BOOL || is_bits(dtype_) ||
              (is_floating(dtype_) && dtype_size(dtype_) == 1)))
    throw Error(ErrorCode::unsupported,
                "a negative view of a " + std::string(dtype_name(dtype_)) +
                    " tensor (torch sets the neg bit on numbers it negates)");
  if (meta_ || is_quantized() || is_sparse())
    throw Error(ErrorCode::unsupported,
                "conjugate or negative view bits on a meta, quantized or sparse tensor");
  // The bits replace any the view had: they apply to the file's storage.
  Tensor t = *this;
  const std::shared_ptr<Storage> raw = file_storage();
  const DType d = dtype_;
  t.set_file_storage(raw);
  t.view_bits_ = static_cast<std::uint8_t>((conj ? 1u : 0u) | (neg ? 2u : 0u));
  t.storage_ = resolved_storage(raw, d, conj, neg);
  return t;
}

Tensor Tensor::view_of(Shape shape, Shape strides, std::int64_t offset) const {
  if (!meta_) return Tensor(dtype_, std::move(shape), std::move(strides), offset, storage_);
  Tensor t = meta(dtype_, std::move(shape), std::move(strides));  // a view of nothing
  t.offset_ = offset;
  return t;
}

Tensor Tensor::meta(DType dtype, Shape shape, Shape strides) {
  if (shape.size() != strides.size())
    throw Error(ErrorCode::corrupt, "meta tensor: sizes " + join(shape) + " and strides " +
                                        join(strides) + " have different lengths");
  // The view must be one torch could make: empty_strided computes the
  // bytes of its extent, (offset of the last element + 1) * element size,
  // which must fit 64 bits. The storage holds nothing and refuses to be read.
  const std::int64_t numel = shape_numel(shape);
  std::int64_t last = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    std::int64_t step;
    if (strides[i] < 0)
      throw Error(ErrorCode::corrupt, "meta tensor: negative stride in " + join(strides));
    if (numel > 0 &&
        (!detail::mul_ok(shape[i] - 1, strides[i], step) || !detail::add_ok(last, step, last)))
      throw Error(ErrorCode::corrupt, "meta tensor: sizes " + join(shape) + " strides " +
                                          join(strides) + " overflow 64 bits");
  }
  std::uint64_t extent;
  if (numel > 0 && !detail::mul_ok(static_cast<std::uint64_t>(last) + 1, dtype_size(dtype), extent))
    throw Error(ErrorCode::corrupt, "meta tensor: the bytes of sizes " + join(shape) + " strides " +
                                        join(strides) + " overflow 64 bits");
  auto none = Storage::deferred(0, []() -> std::shared_ptr<Storage> {
    throw Error(
        ErrorCode::unsupported,
        "a meta tensor has no data (torch saved it from device 'meta': dtype and shape only)");
  });
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.numel_ = numel;
  t.storage_ = std::move(none);
  t.meta_ = true;
  return t;
}

}  // namespace torchport
