#pragma once
/// \file
/// Adapters: the one place that knows another framework's layout differs
/// from ours.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/tensor.hpp"
#include "torchport/core/value.hpp"
#include "torchport/record/remap.hpp"

namespace torchport {

/// Lets an adapter say where a tensor it makes came from, so the load report
/// counts the file's key as used.
class AdapterContext {
 public:
  virtual ~AdapterContext() = default;
  /// A tensor value made from the file's leaf `from` (a slice, a transpose).
  virtual Value derive(Tensor t, const Value& from) = 0;
};

/// Rewrites records between a file's layout and ours.
///
/// On load, `import_module` is called for every module that has a kind
/// (`kKind`), top-down, with the subtree the file has for it, before its
/// fields are read; `import_tensor` is called for every tensor as it is read.
/// On save, `export_module` is called bottom-up with the subtree we made, and
/// `export_tensor` for every tensor. Subtrees are shared values: return a new
/// one rather than modifying the argument. The defaults change nothing.
class Adapter {
 public:
  virtual ~Adapter() = default;
  /// The file's subtree `node` for a module of kind `kind`, rewritten into our
  /// layout. Tensors made from the file's (split, transposed) go through
  /// `ctx.derive` so their source keys count as used. The default returns `node`.
  virtual Value import_module(std::string_view kind, const Value& node, AdapterContext& ctx) const;
  /// Our subtree `node` for a module of kind `kind`, rewritten into the file's
  /// layout. The default returns `node`.
  virtual Value export_module(std::string_view kind, const Value& node) const;
  /// The tensor `t` read for the field at key path `path` ("encoder.fc.weight"),
  /// in our layout. The default returns `t`.
  virtual Tensor import_tensor(std::string_view path, const Tensor& t) const;
  /// Our tensor `t` at key path `path`, in the file's layout. The default returns `t`.
  virtual Tensor export_tensor(std::string_view path, const Tensor& t) const;
};

/// Adapters applied in order on load and in reverse order on save.
using AdapterChain = std::vector<std::shared_ptr<const Adapter>>;

/// PyTorch's layout to ours and back, keyed on module kinds:
///
/// | kind | PyTorch | ours |
/// |---|---|---|
/// | Linear | weight [out, in] | weight [in, out] |
/// | BatchNorm1d/2d, LayerNorm, GroupNorm | weight, bias | gamma, beta |
/// | RMSNorm | weight | gamma |
/// | PReLU | weight | alpha |
/// | MultiheadAttention | in_proj_weight/bias (or q/k/v_proj_weight), out_proj | query, key, value,
/// output (Linear) | | LSTM | weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k} (gates i,
/// f, g, o) | layers[k].{input,forget,cell,output}_gate.{input,hidden}_transform | | GRU | the same
/// with gates r, z, n | layers[k].{reset,update,new}_gate.{input,hidden}_transform |
///
/// Convolutions, embeddings and everything else keep torch's layout.
class PyTorchAdapter : public Adapter {
 public:
  /// Transposes Linear weights, renames norm and PReLU parameters, and splits
  /// fused attention and recurrent parameters per projection or gate.
  /// \throws Error(shape_mismatch) when a fused tensor does not split evenly.
  Value import_module(std::string_view kind, const Value& node, AdapterContext& ctx) const override;
  /// The inverse of `import_module`: transposes back (contiguous), renames
  /// back, and fuses projections and gates as torch stores them.
  /// \throws Error(shape_mismatch) when the parts to fuse differ in dtype or rank.
  Value export_module(std::string_view kind, const Value& node) const override;
};

/// Permutes the dimensions of tensors whose key path matches a pattern
/// (e.g. a TensorFlow-style HWIO kernel to OIHW): `order` as in
/// `torch.permute`, applied on load; its inverse on save.
class PermuteAdapter : public Adapter {
 public:
  /// \throws Error(invalid_argument) for a bad pattern or an order that is no permutation.
  PermuteAdapter& add(std::string_view pattern, std::vector<std::int64_t> order);
  /// `t` permuted by the first rule whose pattern matches `path` (a view, no
  /// copy); `t` itself when none matches.
  /// \throws Error(shape_mismatch) when `t`'s rank is not the order's length.
  Tensor import_tensor(std::string_view path, const Tensor& t) const override;
  /// `t` permuted by the inverse order of the first matching rule of its rank,
  /// as a contiguous copy; `t` itself when none matches.
  Tensor export_tensor(std::string_view path, const Tensor& t) const override;

 private:
  struct Rule {
    KeyFilter match;
    std::vector<std::int64_t> order;
  };
  std::vector<Rule> rules_;
};

}  // namespace torchport
