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
    : body_(new Body()) {
  Body& w = *body_;
  w.dtype = dtype;
  w.shape = std::move(shape);
  w.strides = std::move(strides);
  w.offset = storage_offset;
  w.storage = std::move(storage);
  if (!w.storage) throw Error(ErrorCode::invalid_argument, "tensor without storage");
  if (body().shape.size() != body().strides.size())
    throw Error(ErrorCode::corrupt, "shape " + join(body().shape) + " and strides " +
                                        join(body().strides) + " have different lengths");
  w.numel = shape_numel(w.shape);
  if (w.offset < 0)
    throw Error(ErrorCode::corrupt, "negative storage offset " + std::to_string(body().offset));
  for (std::int64_t s : body().strides)
    if (s < 0) throw Error(ErrorCode::corrupt, "negative stride in " + join(body().strides));
  if (body().numel == 0) return;  // an empty view reaches no element
  // The last element the view can reach: offset + sum((size-1) * stride).
  std::int64_t last = body().offset;
  for (std::size_t i = 0; i < body().shape.size(); ++i) {
    std::int64_t step;
    if (!detail::mul_ok(body().shape[i] - 1, body().strides[i], step) ||
        !detail::add_ok(last, step, last))
      throw Error(ErrorCode::corrupt, "view sizes " + join(body().shape) + " strides " +
                                          join(body().strides) + " overflow 64 bits");
  }
  std::uint64_t need;
  if (!detail::mul_ok(static_cast<std::uint64_t>(last) + 1, dtype_size(body().dtype), need) ||
      need > body().storage->nbytes())
    throw Error(ErrorCode::corrupt,
                "view of " + std::string(dtype_name(body().dtype)) + join(body().shape) +
                    " with strides " + join(body().strides) + " at offset " +
                    std::to_string(body().offset) + " needs " +
                    std::to_string(static_cast<std::uint64_t>(last) + 1) +
                    " elements but its storage has " + std::to_string(body().storage->nbytes()) +
                    " bytes; truncated or corrupt file?");
}

Tensor Tensor::with_storage(std::shared_ptr<Storage> storage) && {
  if (body_ && body_.use_count() == 1 && !body_->extras && body_->view_bits == 0 && !body_->meta &&
      body_->storage && storage && storage->nbytes() >= body_->storage->nbytes()) {
    body_->storage = std::move(storage);  // the view's bounds held over fewer bytes
    return std::move(*this);
  }
  Tensor t(dtype(), shape(), strides(), storage_offset(), std::move(storage));
  return is_quantized() ? t.with_quantization(quantization()) : t;
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
  return body().shape[static_cast<std::size_t>(i)];
}

std::uint64_t Tensor::nbytes() const noexcept {
  return static_cast<std::uint64_t>(body().numel) * dtype_size(body().dtype);
}

bool Tensor::is_unshared() const noexcept {
  return body_ && body_.use_count() == 1 && body_->storage.use_count() == 1 && !body_->extras &&
         !body_->meta && body_->view_bits == 0;
}

bool Tensor::is_contiguous() const noexcept {
  std::int64_t expected = 1;
  for (std::size_t i = body().shape.size(); i-- > 0;) {
    if (body().shape[i] == 1) continue;
    if (body().shape[i] == 0) return true;
    if (body().strides[i] != expected) return false;
    expected *= body().shape[i];
  }
  return true;
}

std::span<const std::byte> Tensor::bytes() const& {
  if (!defined()) throw Error(ErrorCode::invalid_argument, "undefined tensor");
  if (body().meta) no_data(*this);
  if (!is_contiguous())
    throw Error(ErrorCode::invalid_argument,
                "bytes() of a non-contiguous view " + description() + "; call contiguous() first");
  if (body().numel == 0) return {};
  auto all = body().storage->bytes();
  return all.subspan(static_cast<std::size_t>(body().offset) * dtype_size(body().dtype),
                     static_cast<std::size_t>(nbytes()));
}

std::span<std::byte> Tensor::mutable_bytes() {
  if (!defined()) throw Error(ErrorCode::invalid_argument, "undefined tensor");
  if (body().meta) no_data(*this);
  if (!is_contiguous())
    throw Error(ErrorCode::invalid_argument, "mutable_bytes() of a non-contiguous view");
  auto all = body().storage->mutable_bytes();
  if (body().numel == 0) return {};
  return all.subspan(static_cast<std::size_t>(body().offset) * dtype_size(body().dtype),
                     static_cast<std::size_t>(nbytes()));
}

void Tensor::check_access(DType expected, std::size_t elem_size) const {
  if (!defined()) throw Error(ErrorCode::invalid_argument, "undefined tensor");
  if (expected != body().dtype &&
      !(elem_size == dtype_size(body().dtype) && elem_size == 2 && (expected == DType::U16) &&
        (body().dtype == DType::F16 || body().dtype == DType::BF16)))
    throw Error(ErrorCode::dtype_mismatch, "tensor is " + std::string(dtype_name(body().dtype)) +
                                               ", accessed as " +
                                               std::string(dtype_name(expected)));
}

void Tensor::fail_count(std::size_t got, std::int64_t want) {
  throw Error(ErrorCode::shape_mismatch, std::to_string(got) + " values given for a shape of " +
                                             std::to_string(want) + " elements");
}

void Tensor::copy_to(std::span<std::byte> out) const {
  if (body().meta) no_data(*this);
  if (out.size() != nbytes())
    throw Error(ErrorCode::invalid_argument, "copy_to: destination has " +
                                                 std::to_string(out.size()) + " bytes, tensor " +
                                                 std::to_string(nbytes()));
  if (body().numel == 0) return;
  if (is_contiguous()) {
    body().storage->read_into(static_cast<std::uint64_t>(body().offset) * dtype_size(body().dtype),
                              out);
    return;
  }
  const auto all = body().storage->bytes();
  const std::size_t elem = dtype_size(body().dtype);
  strided_copy(all.data() + body().offset * static_cast<std::int64_t>(elem), elem, body().shape,
               body().strides, out.data());
}

Tensor Tensor::contiguous() const {
  if (!defined() || is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  if (!defined()) return *this;
  Tensor t = empty(body().dtype, body().shape);
  copy_to(t.mutable_bytes());
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (!defined()) throw Error(ErrorCode::invalid_argument, "undefined tensor");
  if (dtype == body().dtype) return contiguous();
  if (!convertible(body().dtype, dtype))
    convert_elements(nullptr, body().dtype, nullptr, dtype, 0);  // throws the explanation
  const Tensor src = contiguous();
  Tensor t = empty(dtype, body().shape);
  convert_elements(src.bytes().data(), body().dtype, t.mutable_bytes().data(), dtype,
                   static_cast<std::size_t>(body().numel));
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
  if (infer >= 0 && known > 0 && body().numel % known == 0)
    shape[static_cast<std::size_t>(infer)] = body().numel / known;
  if (shape_numel(shape) != body().numel)
    throw Error(ErrorCode::shape_mismatch, "cannot reshape " + join(body().shape) + " (" +
                                               std::to_string(body().numel) + " elements) to " +
                                               join(shape));
  Shape st = contiguous_strides(shape);
  return view_of(std::move(shape), std::move(st), body().offset);
}

Tensor Tensor::transpose(std::int64_t a, std::int64_t b) const {
  const std::int64_t n = dim();
  if (a < 0) a += n;
  if (b < 0) b += n;
  if (a < 0 || b < 0 || a >= n || b >= n)
    throw Error(ErrorCode::invalid_argument, "transpose: dimension out of range");
  Shape sh = body().shape, st = body().strides;
  std::swap(sh[static_cast<std::size_t>(a)], sh[static_cast<std::size_t>(b)]);
  std::swap(st[static_cast<std::size_t>(a)], st[static_cast<std::size_t>(b)]);
  return view_of(std::move(sh), std::move(st), body().offset);
}

Tensor Tensor::permute(std::span<const std::int64_t> order) const {
  const std::size_t n = body().shape.size();
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
    sh[i] = body().shape[static_cast<std::size_t>(d)];
    st[i] = body().strides[static_cast<std::size_t>(d)];
  }
  return view_of(std::move(sh), std::move(st), body().offset);
}

Tensor Tensor::narrow(std::int64_t d, std::int64_t start, std::int64_t length) const {
  const std::int64_t n = size(d);
  const std::size_t i = static_cast<std::size_t>(d < 0 ? d + dim() : d);
  if (start < 0 || length < 0 || start > n || length > n - start)
    throw Error(ErrorCode::invalid_argument, "narrow: [" + std::to_string(start) + ", +" +
                                                 std::to_string(length) + ") out of size " +
                                                 std::to_string(n));
  Shape sh = body().shape;
  sh[i] = length;
  return view_of(std::move(sh), body().strides, body().offset + start * body().strides[i]);
}

bool Tensor::equal(const Tensor& other) const {
  if (defined() != other.defined()) return false;
  if (!defined()) return true;
  if (body().dtype != other.body().dtype || body().shape != other.body().shape) return false;
  const Tensor a = contiguous(), b = other.contiguous();
  const auto x = a.bytes(), y = b.bytes();
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size()) == 0);
}

std::string Tensor::description() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(body().dtype)) + join(body().shape) + (body().meta ? " meta" : "") +
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
  if (!e.quant && !e.sparse && !e.file_storage && !e.slicer)
    mut().extras.reset();
  else
    mut().extras = std::make_shared<const detail::TensorExtras>(std::move(e));
}

Tensor Tensor::with_slicer(std::shared_ptr<const TensorSlicer> slicer) const {
  Tensor t = *this;
  detail::TensorExtras e = body().extras ? *body().extras : detail::TensorExtras{};
  e.slicer = std::move(slicer);
  t.set_extras(std::move(e));
  return t;
}

const Tensor::Body& Tensor::empty_body() noexcept {
  static const Body empty;
  return empty;
}

// A body is shared by the copies of a tensor: one that changes gets its
// own first. Only this tensor can add owners, so a count of one stays one.
Tensor::Body& Tensor::mut() {
  // A file of many small tensors has a body a tensor, held in a catalogue
  // and often in a tree too.
  static_assert(sizeof(Tensor) == sizeof(void*), "a tensor handle is one pointer");
  static_assert(sizeof(Body) == 104 || sizeof(void*) != 8, "a tensor's body grew");
  if (!body_)
    body_ = detail::CountedRef<Body>(new Body());
  else if (body_.use_count() != 1)
    body_ = detail::CountedRef<Body>(new Body(*body_));
  return *body_;
}

void Tensor::set_quantization(std::shared_ptr<const Quantization> q) {
  detail::TensorExtras e = body().extras ? *body().extras : detail::TensorExtras{};
  e.quant = std::move(q);
  set_extras(std::move(e));
}

void Tensor::set_sparse(std::shared_ptr<const SparseParts> parts) {
  detail::TensorExtras e = body().extras ? *body().extras : detail::TensorExtras{};
  e.sparse = std::move(parts);
  set_extras(std::move(e));
}

void Tensor::set_file_storage(std::shared_ptr<Storage> storage) {
  detail::TensorExtras e = body().extras ? *body().extras : detail::TensorExtras{};
  e.file_storage = std::move(storage);
  set_extras(std::move(e));
}

Tensor Tensor::with_view_bits(bool conj, bool neg) const {
  if (!conj && !neg) {
    if (body().view_bits == 0) return *this;
    Tensor t = *this;  // the bits replace any the view had: none
    t.mut().storage = file_storage();
    t.set_file_storage(nullptr);
    t.mut().view_bits = 0;
    return t;
  }
  if (conj && !is_complex(body().dtype))
    throw Error(ErrorCode::unsupported,
                "a conjugate view of a " + std::string(dtype_name(body().dtype)) +
                    " tensor (torch sets the conj bit on complex tensors only)");
  if (neg && (body().dtype == DType::BOOL || is_bits(body().dtype) ||
              (is_floating(body().dtype) && dtype_size(body().dtype) == 1)))
    throw Error(ErrorCode::unsupported,
                "a negative view of a " + std::string(dtype_name(body().dtype)) +
                    " tensor (torch sets the neg bit on numbers it negates)");
  if (body().meta || is_quantized() || is_sparse())
    throw Error(ErrorCode::unsupported,
                "conjugate or negative view bits on a meta, quantized or sparse tensor");
  // The bits replace any the view had: they apply to the file's storage.
  Tensor t = *this;
  const std::shared_ptr<Storage> raw = file_storage();
  const DType d = body().dtype;
  t.set_file_storage(raw);
  t.mut().view_bits = static_cast<std::uint8_t>((conj ? 1u : 0u) | (neg ? 2u : 0u));
  t.mut().storage = resolved_storage(raw, d, conj, neg);
  return t;
}

Tensor Tensor::view_of(Shape shape, Shape strides, std::int64_t offset) const {
  if (!body().meta)
    return Tensor(body().dtype, std::move(shape), std::move(strides), offset, body().storage);
  Tensor t = meta(body().dtype, std::move(shape), std::move(strides));  // a view of nothing
  t.mut().offset = offset;
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
  Body& w = t.mut();
  w.dtype = dtype;
  w.shape = std::move(shape);
  w.strides = std::move(strides);
  w.numel = numel;
  w.storage = std::move(none);
  w.meta = true;
  return t;
}

}  // namespace torchport
