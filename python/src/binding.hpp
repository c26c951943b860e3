// Shared by the files of the torchport._core extension module: the
// framework a tensor is given to Python in, and the conversions of the
// library's values (tensors, value trees, errors) to Python objects.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include <nanobind/nanobind.h>

#include "torchport/read.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport::python {

namespace nb = nanobind;

/// What tensors become: numpy arrays or torch tensors.
enum class Framework { numpy, torch };

/// "numpy" (also "np") or "torch" (also "pt", "pytorch", safetensors'
/// spellings). \throws Error(invalid_argument) naming the others.
Framework parse_framework(std::string_view name);

/// Each storage's torch tensor, once made: the tensors over one storage
/// share one torch storage.
using TorchBases = std::unordered_map<const Storage*, nb::object>;

/// A dense tensor's elements as a view (zero copy) of its storage: a numpy
/// array (read-only unless `writable`) of the dtype's numpy type, or a torch
/// tensor made through DLPack (then viewed as the torch dtype). The view
/// keeps the tensor's storage, and so the mapped file, alive.
/// Quantized, sparse and meta tensors become torch's own (quantized ones
/// copied by torch); numpy has none of them, nor bf16, f8, complex32 or
/// torch's bits dtypes: those are Error(unsupported) naming `key` and the
/// way out (`get_raw`, framework="torch").
nb::object tensor_to_python(const Tensor& t, Framework fw, bool writable, const std::string& key,
                            TorchBases* bases = nullptr);

/// The elements' bytes as a numpy view of the same shape and strides whose
/// dtype is the unsigned integer of the element's width when numpy has no
/// such dtype (bf16 as uint16, f8 as uint8), with the dtype's name ("BF16").
nb::tuple tensor_raw(const Tensor& t, bool writable, const std::string& key);

/// Converts value trees to Python objects as torch.load(weights_only=True)
/// returns them; shared nodes (Python's shared references, tied tensors)
/// become one shared Python object.
class ValueConverter {
 public:
  ValueConverter(Framework fw, bool writable) : fw_(fw), writable_(writable) {}
  /// Gives each tensor of `from` (a catalogue's list) as the tensor at the
  /// same place of `to` (its materialized copy, same order): the tree keeps
  /// its shape, the tensors their owned bytes.
  void replace_tensors(const std::vector<NamedTensor>& from, const std::vector<NamedTensor>& to);
  /// \throws Error(unsupported) naming the key path of a value torch's
  /// weights_only loader would refuse (an object of an arbitrary class).
  nb::object convert(const Value& v, const std::string& path);

 private:
  nb::object convert_global(const Global& g, const std::string& path);
  nb::object convert_object(const Object& o, const std::string& path);
  const Tensor& replaced(const Tensor& t) const;
  Framework fw_;
  bool writable_;
  std::unordered_map<const void*, nb::object> memo_;
  TorchBases bases_;
  // A view's identity: storage, offset, dtype, sizes and strides.
  detail::StringMap<Tensor> replace_;
};

/// The Python class torchport.TorchportError (set once the module loads).
void set_error_class(nb::handle cls);
/// Sets `e` as the Python exception: a torchport.TorchportError (code, key,
/// offset, file).
void raise_error(const Error& e);

void bind_scan(nb::module_& m);
void bind_convert(nb::module_& m);

}  // namespace torchport::python
