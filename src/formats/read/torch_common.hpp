#pragma once
// What the PyTorch readers (zip, legacy, tar, TorchScript) share: storage
// references in persistent ids, the rebuild of tensors from inert pickled
// calls, the global policy, and storages over records of the mapped file.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "formats/read/walk.hpp"
#include "pickle/unpickler.hpp"
#include "torchport/core/dtype.hpp"
#include "torchport/core/limits.hpp"
#include "torchport/core/value.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"

namespace torchport::formats {

/// A storage reference, as torch's persistent_id writes it:
/// zip:    ('storage', StorageType, key, location, numel)
/// legacy: ('storage', StorageType, root_key, location, numel, view_metadata)
struct StorageRef {
  DType dtype = DType::U8;  ///< from the storage class (UntypedStorage: U8)
  std::string key;
  std::string location;
  std::uint64_t numel = 0;  ///< in elements of `dtype`
  std::uint64_t nbytes = 0;
  /// 4 or 2 for a packed quantized storage (QUInt4x2Storage, QUInt2x4Storage:
  /// `dtype` U8, `numel` its bytes), else 0.
  int packed_bits = 0;
  /// Legacy storage views: (view_key, offset, size) in elements.
  struct View {
    std::string key;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
  };
  std::optional<View> view;
};

/// Parses a persistent id tuple. \throws Error(corrupt | unsupported).
StorageRef parse_storage_ref(const Value& pid);

/// The dtype a storage class global stands for (`torch.FloatStorage` -> F32,
/// `torch.UntypedStorage` -> U8). A packed quantized class (QUInt4x2Storage)
/// is U8 with its bits in `*packed_bits`, and refused when that is null.
/// \throws Error(unsupported) for others.
DType storage_class_dtype(const Value& storage_type, int* packed_bits = nullptr);

/// The value a persistent id resolves to: a typed storage
/// (`Value::storage`), represented as a 1-D tensor of `dtype` over all of
/// `storage`; for a packed storage
/// (`packed_bits` 4 or 2) a quantized tensor of its values
/// (`Tensor::packed_quantized`), which only `_rebuild_qtensor` takes.
Value storage_value(DType dtype, std::uint64_t numel, std::shared_ptr<Storage> storage,
                    int packed_bits = 0);

/// A storage over `[offset, offset + nbytes)` of `source`: a zero-copy view
/// when the address suits `dtype`'s alignment and the byte order is ours,
/// else a deferred aligned (and byte-swapped) copy.
std::shared_ptr<Storage> record_storage(const Source& source, std::uint64_t offset,
                                        std::uint64_t nbytes, DType dtype, bool big_endian);

/// Turns the inert calls torch uses to pickle tensors
/// (`torch._utils._rebuild_tensor[_v2|_v3]`, `_rebuild_parameter[_with_state]`,
/// `torch._tensor._rebuild_from_type_v2`, `Parameter(...)`) into tensors,
/// checking each view against its storage. Any other `torch._utils._rebuild_*`
/// (sparse, quantized, meta tensors) is an Error(unsupported) naming its key.
/// Errors name the key path, the byte offset of the call and `where`.
/// A rebuild's storage must be a storage value (`Value::is_storage`, as
/// `storage_value` makes them), never a tensor.
/// A tensor subclass with no storage of its own (torch.Tensor's
/// `_make_wrapper_subclass`: torchao's quantized tensors) pickled as
/// `_rebuild_from_type_v2(_rebuild_wrapper_subclass, cls, args, state)` is
/// read, when `allow` trusts `cls`, as an object of `_rebuild_from_type_v2`
/// (args: the function, the class and its arguments) whose state is its
/// attribute dict, so its component tensors are listed as NAME.ATTR; never
/// densified.
Value rebuild_tensors(const Value& root, std::string_view where,
                      std::span<const std::string> allow = {});

/// Runs one pickle (named `name` for the walker) with the options' limits,
/// through `walker` (which applies its policy to the globals).
Value run_pickle(Walker& walker, std::string_view name, ByteReader& reader,
                 const OpenOptions& options, const pickle::PersistentLoad& persistent = {},
                 pickle::Stats* stats = nullptr);

/// Runs the pickle of a torch object (`run_pickle`, then `rebuild_tensors`)
/// without copying its tree: tensors are built by a `pickle::CallHook` as
/// the pickle runs. When one cannot be built, the tree goes through
/// `rebuild_tensors`, which reports the error with its key path.
Value run_torch_pickle(Walker& walker, std::string_view name, ByteReader& reader,
                       const OpenOptions& options, const pickle::PersistentLoad& persistent);

}  // namespace torchport::formats
