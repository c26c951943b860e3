#pragma once
/// \file
/// `Tensor`: a typed, strided view of a `Storage`.

#include <atomic>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "torchport/core/dtype.hpp"
#include "torchport/core/half.hpp"
#include "torchport/core/storage.hpp"

namespace torchport {

/// Sizes or strides, in elements (torch's convention).
using Shape = std::vector<std::int64_t>;

/// The dtype of a C++ element type (`float` -> F32, `Half` -> F16, ...).
template <class T>
constexpr DType dtype_of() noexcept {
  if constexpr (std::is_same_v<T, bool>)
    return DType::BOOL;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return DType::U8;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return DType::I8;
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return DType::I16;
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return DType::U16;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DType::I32;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return DType::U32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return DType::I64;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return DType::U64;
  else if constexpr (std::is_same_v<T, Half>)
    return DType::F16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DType::BF16;
  else if constexpr (std::is_same_v<T, float>)
    return DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::F64;
  else if constexpr (std::is_same_v<T, std::complex<float>>)
    return DType::C64;
  else if constexpr (std::is_same_v<T, std::complex<double>>)
    return DType::C128;
  else
    static_assert(sizeof(T) == 0, "no torchport dtype for this type");
}

/// Product of sizes. \throws Error(corrupt) on a negative size, or when the
/// product (or that of the sizes with zeros as ones: the strides) overflows int64.
std::int64_t shape_numel(std::span<const std::int64_t> shape);
/// Row-major (C-order) strides for `shape`. \throws Error(corrupt) on a
/// negative size or when a stride overflows int64 (checked, never wraps).
Shape contiguous_strides(std::span<const std::int64_t> shape);
/// "[3, 4]".
std::string shape_to_string(std::span<const std::int64_t> shape);

struct Quantization;  // defined after Tensor
class Tensor;

/// Reads parts of a tensor stored as pieces read separately (a distributed
/// checkpoint's chunks), so that a slice reads only the pieces it overlaps
/// (`read_slice`, a tensor-parallel rank's load).
class TensorSlicer {
 public:
  virtual ~TensorSlicer() = default;
  /// The concatenation along `dim` of `[start, start + length)` for each
  /// range (checked by the caller), read now from the pieces that overlap
  /// them; `count` hears the bytes read from files.
  virtual Tensor read(std::size_t dim,
                      std::span<const std::pair<std::int64_t, std::int64_t>> ranges,
                      const std::function<void(std::uint64_t)>& count) const = 0;
};
struct SparseParts;  // defined after Tensor

namespace detail {
/// The reference count inside a block that `CountedRef` shares: counted in
/// the block itself, not in a separate control block as `std::shared_ptr`
/// does (16 bytes more a block, and a file of many small tensors has a few
/// blocks a tensor). A copy of the block starts with a count of its own.
struct RefCount {
  mutable std::atomic<std::uint32_t> n{1};
  RefCount() noexcept = default;
  RefCount(const RefCount&) noexcept {}
  RefCount& operator=(const RefCount&) noexcept { return *this; }
};

/// A counted reference to a `T` whose member `refs` is a `RefCount`; copies
/// share the block, as shared_ptr's do, with its memory orders. The last
/// reference deletes it, or calls `Destroy` when given (for a block whose
/// type is known only where it was made).
template <class T, auto Destroy = nullptr>
class CountedRef {
 public:
  CountedRef() noexcept = default;
  /// Adopts a new block (its count starts at 1).
  explicit CountedRef(T* p) noexcept : p_(p) {}
  CountedRef(const CountedRef& o) noexcept : p_(o.p_) {
    if (p_ != nullptr) p_->refs.n.fetch_add(1, std::memory_order_relaxed);
  }
  CountedRef(CountedRef&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  CountedRef& operator=(const CountedRef& o) noexcept {
    CountedRef(o).swap(*this);
    return *this;
  }
  CountedRef& operator=(CountedRef&& o) noexcept {
    CountedRef(std::move(o)).swap(*this);
    return *this;
  }
  ~CountedRef() {
    if (p_ == nullptr || p_->refs.n.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if constexpr (std::is_same_v<decltype(Destroy), std::nullptr_t>)
      delete p_;
    else
      Destroy(p_);
  }
  void swap(CountedRef& o) noexcept { std::swap(p_, o.p_); }
  T* get() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  T* operator->() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  /// References to the block (0 for none).
  std::uint32_t use_count() const noexcept {
    return p_ != nullptr ? p_->refs.n.load(std::memory_order_acquire) : 0;
  }

 private:
  T* p_ = nullptr;
};

/// What few tensors have (a quantizer, sparse parts, the storage as the file
/// holds it), in one block a tensor shares with its copies.
struct TensorExtras {
  std::shared_ptr<const Quantization> quant;
  std::shared_ptr<const SparseParts> sparse;
  std::shared_ptr<Storage> file_storage;
  std::shared_ptr<const TensorSlicer> slicer;
};
inline const std::shared_ptr<const Quantization> kNoQuantization{};
inline const std::shared_ptr<const SparseParts> kNoSparseParts{};
}  // namespace detail

/// A typed, strided view of a `Storage` (torch's tensor without autograd).
///
/// A `Tensor` is a small value: copying it copies the view, not the bytes; the
/// storage is shared (as torch shares it between views and tied weights).
/// Tensors read from a checkpoint are lazy: their storage's bytes are read (or
/// mapped) when `bytes()`, `span()` or a copy first needs them.
///
/// Lifetime: the storage, and whatever keeps a borrowed storage's bytes alive
/// (a mapped file), lives as long as any tensor viewing it.
class Tensor {
 public:
  /// An undefined tensor (`defined()` is false).
  Tensor() = default;
  /// A view of `storage`. Checks that every element the view can reach lies
  /// inside the storage (overflow-checked).
  /// \throws Error(corrupt) naming sizes, strides, offset and storage bytes.
  Tensor(DType dtype, Shape shape, Shape strides, std::int64_t storage_offset,
         std::shared_ptr<Storage> storage);

  /// A contiguous tensor over fresh, uninitialised, owned memory.
  static Tensor empty(DType dtype, Shape shape);
  /// A contiguous tensor of zeros.
  static Tensor zeros(DType dtype, Shape shape);
  /// A contiguous tensor holding a copy of `values`.
  /// \throws Error(shape_mismatch) when the count of values is not the shape's.
  template <class T>
  static Tensor from(std::span<const T> values, Shape shape);
  /// A contiguous tensor holding a copy of a braced list:
  /// `Tensor::from({1.f, 2.f, 3.f, 4.f}, {2, 2})`.
  /// \throws Error(shape_mismatch) when the count of values is not the shape's.
  template <class T>
  static Tensor from(std::initializer_list<T> values, Shape shape) {
    return from(std::span<const T>(values.begin(), values.size()), std::move(shape));
  }
  /// A 0-d tensor holding `value`.
  template <class T>
  static Tensor scalar(T value) {
    return from(std::span<const T>(&value, 1), Shape{});
  }

  /// False for a default-constructed tensor (no storage).
  bool defined() const noexcept { return body_ && body_->storage != nullptr; }
  DType dtype() const noexcept { return body().dtype; }             ///< the element type
  const Shape& shape() const noexcept { return body().shape; }      ///< sizes, one per dimension
  const Shape& strides() const noexcept { return body().strides; }  ///< strides, in elements
  /// Index of the first element in the storage, in elements.
  std::int64_t storage_offset() const noexcept { return body().offset; }
  /// Number of dimensions (0 for a scalar).
  std::int64_t dim() const noexcept { return static_cast<std::int64_t>(body().shape.size()); }
  /// Size of dimension `d` (negative counts from the end). \throws Error(invalid_argument).
  std::int64_t size(std::int64_t d) const;
  std::int64_t numel() const noexcept {
    return body().numel;
  }  ///< number of elements (1 for a scalar)
  /// Bytes of the elements this view holds (numel × element size).
  std::uint64_t nbytes() const noexcept;
  /// The storage viewed (null for an undefined tensor).
  const std::shared_ptr<Storage>& storage() const noexcept { return body().storage; }
  /// The same view (dtype, sizes, strides, offset, quantizer) over
  /// `storage`, as `Tensor(dtype(), shape(), strides(), storage_offset(),
  /// storage)` with this tensor's quantizer would make it; other extras
  /// (conjugate and negative bits, a packed file storage) are not kept.
  /// Reuses this tensor's body when nothing else shares it, it has no
  /// extras and `storage` holds at least the bytes of the current one (a
  /// checkpoint's many small tensors then move to their copies without an
  /// allocation each).
  /// \throws Error(corrupt) as the constructor, when `storage` is too small.
  Tensor with_storage(std::shared_ptr<Storage> storage) &&;
  /// True when the elements are densely laid out in C order (0- and
  /// 1-element tensors always are).
  bool is_contiguous() const noexcept;
  /// True when this handle is the only one on its elements: no other tensor
  /// shares its body (a copy of the handle) or its `Storage` (a view, a
  /// slice, a tied weight), and it is a plain dense tensor. Writing its
  /// bytes then changes no other tensor, unless memory given to
  /// `Storage::borrow_mutable` is also another storage's (the caller's to
  /// keep apart).
  bool is_unshared() const noexcept;

  /// The view's bytes. \throws Error(invalid_argument) when not contiguous.
  /// Not callable on a temporary tensor, whose storage could die with it.
  std::span<const std::byte> bytes() const&;
  std::span<const std::byte> bytes() const&& = delete;
  /// The view's bytes, for writing. \throws when not contiguous or read-only.
  std::span<std::byte> mutable_bytes();

  /// Typed elements of a contiguous tensor whose dtype is `dtype_of<T>()`.
  /// \throws Error(dtype_mismatch) or Error(invalid_argument).
  template <class T>
  std::span<const T> span() const& {
    check_access(dtype_of<T>(), sizeof(T));
    auto b = bytes();
    return {reinterpret_cast<const T*>(b.data()), static_cast<std::size_t>(numel())};
  }
  template <class T>
  std::span<const T> span() const&& = delete;  // would dangle
  /// Typed elements, for writing, of a contiguous tensor whose dtype is
  /// `dtype_of<T>()`. \throws Error(dtype_mismatch) or Error(invalid_argument)
  /// (also when the storage is read-only).
  template <class T>
  std::span<T> mutable_span() {
    check_access(dtype_of<T>(), sizeof(T));
    auto b = mutable_bytes();
    return {reinterpret_cast<T*>(b.data()), static_cast<std::size_t>(numel())};
  }
  /// The first element of `span<T>()`; same requirements.
  template <class T>
  const T* data() const& {
    return span<T>().data();
  }
  template <class T>
  const T* data() const&& = delete;  // would dangle
  /// The first element of `mutable_span<T>()`; same requirements.
  template <class T>
  T* mutable_data() {
    return mutable_span<T>().data();
  }

  /// Copies the elements in C order into `out` (exactly `nbytes()` bytes).
  void copy_to(std::span<std::byte> out) const;
  /// This tensor when contiguous, else a contiguous owned copy.
  Tensor contiguous() const;
  /// A contiguous owned copy, always.
  Tensor clone() const;
  /// A contiguous copy converted to `dtype` (this tensor when already
  /// `dtype` and contiguous). Rounding is to nearest even; an integer that
  /// does not fit, or a complex to real conversion, is an Error(dtype_mismatch).
  Tensor to(DType dtype) const;
  /// A view with a new shape over the same elements (contiguous tensors only;
  /// one size may be -1). \throws Error(shape_mismatch).
  Tensor reshape(Shape shape) const;
  /// A view with dimensions `a` and `b` swapped (no copy).
  Tensor transpose(std::int64_t a, std::int64_t b) const;
  /// A view with dimensions reordered by `order` (no copy).
  Tensor permute(std::span<const std::int64_t> order) const;
  /// A view of `length` entries of dimension `d` starting at `start` (no copy).
  Tensor narrow(std::int64_t d, std::int64_t start, std::int64_t length) const;

  /// Same dtype, same shape, same elements (bitwise). The quantizer is not
  /// compared.
  bool equal(const Tensor& other) const;

  /// \name Quantized tensors
  /// A quantized tensor (torch.quantize_per_tensor, quantize_per_channel,
  /// torch.ao.quantization models) is its integer representation (what
  /// torch's `int_repr()` gives: I8 for qint8, U8 for quint8, I32 for
  /// qint32) plus the affine quantizer that maps it to real numbers. The
  /// quantizer travels with copies of this `Tensor` object; the methods that
  /// make new views or copies (`to`, `clone`, `reshape`, ...) give the
  /// plain integer representation.
  ///@{

  /// torch's sub-byte quantized dtypes (quint4x2, quint2x4: `Quantization::bits`
  /// 4 or 2) pack two or four values into each byte of their storage, the
  /// first in the low bits. Here such a tensor's elements are its values
  /// unpacked, one U8 each (made on first access, as a conj view's are);
  /// `file_storage()` is the packed storage, as torch holds and writes it.

  /// The quantizer, or null for a tensor that is not quantized.
  const std::shared_ptr<const Quantization>& quantization() const noexcept {
    return body().extras ? body().extras->quant : detail::kNoQuantization;
  }
  /// True when `quantization()` is set.
  bool is_quantized() const noexcept { return body().extras && body().extras->quant; }
  /// This view with quantizer `q` (null removes it). \throws Error(invalid_argument)
  /// when the dtype is not I8, U8 or I32, or a per-channel quantizer's axis
  /// or parameter counts do not fit the shape. A 4- or 2-bit quantizer needs
  /// a contiguous U8 tensor (its packed storage is made when first read;
  /// a value that does not fit the bits is then an Error(invalid_argument)).
  Tensor with_quantization(std::shared_ptr<const Quantization> q) const;
  /// The tensor torch rebuilds from a packed storage (QUInt4x2Storage,
  /// QUInt2x4Storage): sizes `shape` in C order from the storage's first
  /// byte, quantizer `q` with `q->bits` 4 or 2.
  /// \throws Error(corrupt) when the storage holds fewer than
  /// ceil(numel × bits / 8) bytes.
  static Tensor packed_quantized(std::shared_ptr<Storage> packed, Shape shape,
                                 std::shared_ptr<const Quantization> q);
  /// The real values, as torch's `dequantize()` computes them, contiguous F32:
  /// per tensor `float(q - zero_point) * float(scale)`, per channel
  /// `float(double(q - zero_points[c]) * scales[c])`.
  /// \throws Error(invalid_argument) when the tensor is not quantized.
  Tensor dequantize() const;
  ///@}

  /// \name Sparse tensors
  /// A sparse tensor (COO, CSR, CSC, BSR, BSC) has the dtype of its values
  /// and the dense shape, and no dense storage: its index and value tensors
  /// are `sparse()`, its elements `to_dense()`. Reading its bytes (`bytes()`,
  /// `contiguous()`, `to()`, ...) is an Error(unsupported) naming `to_dense()`.
  ///@{

  /// The parts of a sparse tensor, or null for a dense one.
  const std::shared_ptr<const SparseParts>& sparse() const noexcept {
    return body().extras ? body().extras->sparse : detail::kNoSparseParts;
  }
  /// True when `sparse()` is set.
  bool is_sparse() const noexcept { return body().extras && body().extras->sparse; }
  /// The sparse tensor of `parts` (checked when `to_dense()` reads them).
  /// \throws Error(invalid_argument) when `parts` has no values.
  static Tensor sparse_tensor(std::shared_ptr<const SparseParts> parts);
  /// The dense tensor, contiguous and owned, as torch's `to_dense()` (COO
  /// duplicates are summed); a dense tensor returns itself.
  /// \throws Error(corrupt) when indices and values do not fit the shape.
  Tensor to_dense() const;
  ///@}
  /// \name Meta tensors
  /// A meta tensor (torch's device "meta": a model built with
  /// `device="meta"`, saved as `_rebuild_meta_tensor_no_storage`) has a
  /// dtype, sizes and strides but no data. Reading its elements (`bytes()`,
  /// `clone()`, `to()`, a copy, ...) is an Error(unsupported) saying so.
  ///@{

  /// A meta tensor of `dtype` with sizes `shape` and strides `strides`, as
  /// torch's `empty_strided(..., device="meta")`.
  /// \throws Error(corrupt) on negative sizes or strides, lengths that differ,
  /// or an extent that overflows 64 bits.
  static Tensor meta(DType dtype, Shape shape, Shape strides);
  /// True for a meta tensor (no data).
  bool is_meta() const noexcept { return body().meta; }
  ///@}

  /// \name Conjugate and negative views
  /// torch's lazy view bits (`is_conj()`, `is_neg()`: `x.conj()` of a
  /// complex tensor, `torch._neg_view`), which a file keeps as
  /// `{'conj': True}` / `{'neg': True}` metadata over the unchanged storage.
  /// Here the elements are resolved, as `resolve_conj()` and
  /// `resolve_neg()` give them: the view reads a storage made on first
  /// access (every element of the file's storage conjugated or negated),
  /// with the same sizes, strides and offset. The bits are kept for listing
  /// and for writing back (`file_storage()`).
  ///@{

  /// This view with torch's bits set, reading resolved elements.
  /// \throws Error(unsupported) for a conj bit on a non-complex dtype, a
  /// neg bit on bool, bits or float8 (torch sets neither there).
  Tensor with_view_bits(bool conj, bool neg) const;
  bool is_conj() const noexcept { return (body().view_bits & 1u) != 0; }  ///< torch's conj bit
  bool is_neg() const noexcept { return (body().view_bits & 2u) != 0; }   ///< torch's neg bit
  /// The reader of this tensor's pieces, or null for a tensor whose bytes
  /// are one storage (see `TensorSlicer`).
  const TensorSlicer* slicer() const noexcept {
    return body().extras ? body().extras->slicer.get() : nullptr;
  }
  /// This tensor, its slices read by `slicer` (a reader's, for tensors
  /// stored as pieces). Copies share it; a materialised copy drops it.
  Tensor with_slicer(std::shared_ptr<const TensorSlicer> slicer) const;
  /// The storage as the file holds it: before the bits are applied, packed
  /// for a 4- or 2-bit quantized tensor (the storage itself for others).
  const std::shared_ptr<Storage>& file_storage() const noexcept {
    return body().extras && body().extras->file_storage ? body().extras->file_storage
                                                        : body().storage;
  }
  ///@}

  /// "F32[3, 4]" ("F32[3, 4] meta" for a meta tensor, "... conj"/"... neg"
  /// for the view bits).
  std::string description() const;

 private:
  void check_access(DType expected, std::size_t elem_size) const;
  // A view of this tensor's storage (a meta tensor's views are meta).
  Tensor view_of(Shape shape, Shape strides, std::int64_t offset) const;
  [[noreturn]] static void fail_count(std::size_t got, std::int64_t want);

  // The rarely set parts, changed copy-on-write (copies share the block).
  void set_extras(detail::TensorExtras e);
  void set_quantization(std::shared_ptr<const Quantization> q);
  void set_sparse(std::shared_ptr<const SparseParts> parts);
  void set_file_storage(std::shared_ptr<Storage> storage);

  // What a tensor is, shared by its copies and changed copy-on-write: a
  // copy costs one reference, not two shape vectors (checkpoints hold tens
  // of thousands of tensors, each listed in a tree and in a catalogue).
  struct Body {
    detail::RefCount refs;
    DType dtype = DType::F32;
    bool meta = false;
    std::uint8_t view_bits = 0;  // 1 conj, 2 neg
    Shape shape;
    Shape strides;
    std::int64_t offset = 0;
    std::int64_t numel = 0;
    std::shared_ptr<Storage> storage;
    // Quantizer, sparse parts, and the storage before the view bits (or
    // packed): null for almost every tensor.
    std::shared_ptr<const detail::TensorExtras> extras;
  };
  static const Body& empty_body() noexcept;
  const Body& body() const noexcept { return body_ ? *body_ : empty_body(); }
  Body& mut();  // this tensor's own body (copied first when shared)

  detail::CountedRef<Body> body_;
};

/// torch's affine quantizers (`Tensor::quantization()`).
struct Quantization {
  /// torch.qscheme.
  enum class Scheme {
    per_tensor_affine,                ///< one scale and zero point
    per_channel_affine,               ///< a scale and zero point per index of `axis`
    per_channel_affine_float_qparams  ///< as per_channel_affine, float zero points (embeddings)
  };
  Scheme scheme = Scheme::per_tensor_affine;  ///< which quantizer
  double scale = 1.0;                         ///< per tensor: the scale
  std::int64_t zero_point = 0;                ///< per tensor: the zero point
  Tensor scales;          ///< per channel: F64 (F32 for float qparams) [size(axis)]
  Tensor zero_points;     ///< per channel: I64 (F32 for float qparams) [size(axis)]
  std::int64_t axis = 0;  ///< per channel: the channel dimension
  /// Bits per value: 8 (32 for qint32), or 4 for quint4x2 and 2 for
  /// quint2x4, whose storage packs 8 / bits values per byte.
  int bits = 8;
  /// torch's name of the quantized dtype of `int_dtype` at `bits` per value:
  /// "qint8", "quint8", "qint32", "quint4x2", "quint2x4", or "" for others.
  static std::string_view qdtype_name(DType int_dtype, int bits = 8) noexcept;
  /// "per_tensor_affine", "per_channel_affine", "per_channel_affine_float_qparams".
  static std::string_view scheme_name(Scheme s) noexcept;
};

/// The parts torch saves of a sparse tensor (`Tensor::sparse()`).
struct SparseParts {
  /// torch.layout.
  enum class Layout { coo, csr, csc, bsr, bsc };
  Layout layout = Layout::coo;  ///< which layout
  Shape size;                   ///< the dense shape
  Tensor indices;               ///< COO: I64 [sparse_dim, nnz]
  Tensor compressed_indices;    ///< CSR/BSR: crow_indices; CSC/BSC: ccol_indices
  Tensor plain_indices;         ///< CSR/BSR: col_indices; CSC/BSC: row_indices
  /// COO: [nnz, dense dims...]; CSR/CSC: [nnz]; BSR/BSC: [nnz, block rows, block columns].
  Tensor values;
  /// torch's name: "sparse_coo", "sparse_csr", ...
  static std::string_view layout_name(Layout l) noexcept;
  /// Checks torch's invariants, as `torch.load` does after loading (every
  /// torch up to 2.7, and from 2.14 with weights_only=True; 2.8 to 2.13
  /// skip it unless asked): the shapes fit `size`, every index lies inside
  /// it, compressed indices start at 0, end at nnz and never decrease, and
  /// the plain indices of a row are sorted and distinct; with
  /// `is_coalesced` (torch 2.x saves whether a COO tensor was coalesced),
  /// no COO entry is repeated or out of order. Reads the indices.
  /// \throws Error(corrupt) with torch's message (e.g. "size is
  /// inconsistent with indices: for dim 0, size is 2 but found index 5");
  /// Error(unsupported) for a batched compressed layout.
  void validate(bool is_coalesced = false) const;
};

template <class T>
Tensor Tensor::from(std::span<const T> values, Shape shape) {
  Tensor t = empty(dtype_of<T>(), std::move(shape));
  t.check_access(dtype_of<T>(), sizeof(T));
  auto out = t.mutable_bytes();
  if (out.size() != values.size_bytes()) fail_count(values.size(), t.numel());
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return t;
}

}  // namespace torchport
