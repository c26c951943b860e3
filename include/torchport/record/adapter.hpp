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
#include "torchport/record/fields.hpp"
#include "torchport/record/layout.hpp"
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

/// What the adapters are told about a module: its kind and the layouts it
/// declares. Views into the module type's static declarations.
struct ModuleInfo {
  std::string_view kind;  ///< `kKind`, or empty for a module without one
  PyTorchLayout pytorch;  ///< `kPyTorchLayout`, or empty
};

/// True for modules the adapters see: those with a kind (`kKind`) or a
/// declared PyTorch layout (`kPyTorchLayout`).
template <class T>
concept AdaptedModule = KindedModule<T> ||(Module<T>&& DeclaresPyTorchLayout<T>);

/// What the adapters are told about a module of type `T`.
template <AdaptedModule T>
constexpr ModuleInfo module_info() {
  ModuleInfo m;
  if constexpr (KindedModule<T>) m.kind = T::kKind;
  m.pytorch = pytorch_layout_of<T>();
  return m;
}

/// Rewrites records between a file's layout and ours.
///
/// On load, `import_module` is called for every module with a kind or a
/// declared layout (`AdaptedModule`), top-down, with the subtree the file has
/// for it, before its fields are read; `import_tensor` is called for every
/// tensor as it is read. On save, `export_module` is called bottom-up with the
/// subtree we made, and `export_tensor` for every tensor. Subtrees are shared
/// values: return a new one rather than modifying the argument. The defaults
/// change nothing.
class Adapter {
 public:
  virtual ~Adapter() = default;
  /// The file's subtree `node` for the module `module`, rewritten into our
  /// layout. Tensors made from the file's (split, transposed) go through
  /// `ctx.derive` so their source keys count as used. The default returns `node`.
  virtual Value import_module(const ModuleInfo& module, const Value& node,
                              AdapterContext& ctx) const;
  /// Our subtree `node` for the module `module`, rewritten into the file's
  /// layout. The default returns `node`.
  virtual Value export_module(const ModuleInfo& module, const Value& node) const;
  /// The tensor `t` read for the field at key path `path` ("encoder.fc.weight"),
  /// in our layout. The default returns `t`.
  virtual Tensor import_tensor(std::string_view path, const Tensor& t) const;
  /// Our tensor `t` at key path `path`, in the file's layout. The default returns `t`.
  virtual Tensor export_tensor(std::string_view path, const Tensor& t) const;
};

/// Adapters applied in order on load and in reverse order on save.
using AdapterChain = std::vector<std::shared_ptr<const Adapter>>;

/// PyTorch's layout to ours and back, as each module declares it in its
/// `kPyTorchLayout` (see `torchport/record/layout.hpp`): renamed entries,
/// transposed tensors, fused tensors split per part. A module that declares
/// no layout is laid out as PyTorch lays it out. The nn modules declare
/// theirs in `torchport/nn/modules.hpp`.
class PyTorchAdapter : public Adapter {
 public:
  /// Applies `module.pytorch` to the file's subtree: splits fused tensors
  /// (views) into their parts' fields, renames entries, transposes tensors
  /// (views). Entries no rule takes are kept as they are.
  /// 	hrows Error(shape_mismatch) when a fused tensor does not split evenly;
  /// Error(invalid_argument) for a malformed rule.
  Value import_module(const ModuleInfo& module, const Value& node,
                      AdapterContext& ctx) const override;
  /// The inverse of `import_module`: fuses parts (a fresh tensor, or
  /// PyTorch's separate entries when the parts differ in shape and the rule
  /// names them), transposes back (contiguous), renames back. The fused
  /// entries come first, in rule order (indexed rules index by index), then
  /// the other fields in their order.
  /// 	hrows Error(shape_mismatch) when the parts to fuse differ in dtype or
  /// rank; Error(invalid_argument) for a malformed rule.
  Value export_module(const ModuleInfo& module, const Value& node) const override;
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
