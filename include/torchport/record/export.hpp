#pragma once
/// \file
/// The other direction: the export of a module to a value tree (what
/// `save_record` and, through `to_pytorch_state_dict`, `save` write), and
/// ways to print and compare modules.

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "torchport/core/value.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/record/adapter.hpp"
#include "torchport/record/fields.hpp"
#include "torchport/record/precision.hpp"

namespace torchport {

/// How to turn a module into a tree.
struct ExportSettings {
  /// Dtypes of the saved tensors (Keep saves them as they are).
  Precision precision = Precision::Keep;
  /// Adapters, applied in reverse order, bottom-up (`PyTorchAdapter` to save
  /// in PyTorch's layout).
  AdapterChain adapters;
  /// When set, each module of the tree that declares a PyTorch layout is
  /// appended here as it is exported (bottom-up): its key path in the tree
  /// ("layer1.0.bn1") and its rules. `save_record` keeps them in the record
  /// (`kPyTorchLayoutKey`), so that `to_pytorch_layout` can give the record
  /// PyTorch's names and layout without the module's type.
  std::vector<std::pair<std::string, PyTorchLayout>>* pytorch_layouts = nullptr;
};

/// The record metadata key of a module's PyTorch layouts (`save_record`).
inline constexpr std::string_view kPyTorchLayoutKey = "torchport.pytorch_layout";

/// `layouts` as the text `kPyTorchLayoutKey` holds (JSON: the distinct rule
/// lists, and each module's path with the index of its list).
std::string pytorch_layout_text(const std::vector<std::pair<std::string, PyTorchLayout>>& layouts);

/// A catalogue in PyTorch's names and layout, as a `.pt` or safetensors file
/// torch's `load_state_dict` takes: one read from a record of a module
/// (`save_record`, in torchport's layout: Linear weights [in, out], norms'
/// gamma and beta, attention and LSTM gates split) goes through
/// `PyTorchAdapter`'s export, module by module, by the layouts the record
/// keeps (`kPyTorchLayoutKey`); its values stay where they are. Any other
/// catalogue (a PyTorch or safetensors file, a record made from one, a
/// record of no module type) is returned as it is.
/// \throws Error(unsupported) for a record of a module type written without
/// its layouts (by an earlier torchport, or by hand), Error(corrupt) for
/// layouts that do not parse.
TensorCatalog to_pytorch_layout(const TensorCatalog& catalog);

namespace detail {

Tensor export_tensor(const Tensor& t, const std::string& path, const ExportSettings& s);
Value export_module(const ModuleInfo& module, Value node, const ExportSettings& s);

template <class T>
Value to_value_at(const T& field, const std::string& path, const ExportSettings& s) {
  auto child = [&](std::string_view name) {
    return path.empty() ? std::string(name) : path + "." + std::string(name);
  };
  if constexpr (std::is_same_v<T, Tensor>) {
    return field.defined() ? Value::tensor(export_tensor(field, path, s)) : Value();
  } else if constexpr (Module<T>) {
    Value d = Value::dict();
    visit_fields(field, [&](const char* name, const auto& f) {
      Value v = to_value_at(f, child(name), s);
      if (!v.is_none()) d.insert(Value::str(name), std::move(v));
    });
    if constexpr (AdaptedModule<T>) {
      if (s.pytorch_layouts != nullptr && !pytorch_layout_of<T>().empty())
        s.pytorch_layouts->emplace_back(path, pytorch_layout_of<T>());
      return export_module(module_info<T>(), std::move(d), s);
    }
    return d;
  } else if constexpr (is_optional<T>::value) {
    return field ? to_value_at(*field, path, s) : Value();
  } else if constexpr (is_vector<T>::value || is_array<T>::value) {
    Value l = Value::list();
    std::size_t i = 0;
    for (const auto& item : field) l.append(to_value_at(item, child(std::to_string(i++)), s));
    return l;
  } else if constexpr (is_string_map<T>::value) {
    Value d = Value::dict();
    for (const auto& [k, v] : field) d.insert(Value::str(k), to_value_at(v, child(k), s));
    return d;
  } else if constexpr (is_variant<T>::value) {
    return std::visit([&](const auto& alt) { return to_value_at(alt, path, s); }, field);
  } else if constexpr (std::is_same_v<T, bool>) {
    return Value::boolean(field);
  } else if constexpr (std::is_integral_v<T>) {
    return Value::integer(static_cast<std::int64_t>(field));
  } else if constexpr (std::is_floating_point_v<T>) {
    return Value::real(static_cast<double>(field));
  } else if constexpr (std::is_same_v<T, std::string>) {
    return Value::str(field);
  } else {
    static_assert(sizeof(T) == 0,
                  "this field type cannot be recorded; see torchport/record/fields.hpp");
  }
}

}  // namespace detail

/// The record of `module` as a value tree: modules and maps become dicts,
/// vectors and arrays lists, tensors stay tensors (converted by the
/// precision), an empty optional or undefined tensor is left out, an enum
/// module is its active alternative.
template <class T>
Value to_value(const T& module, const ExportSettings& settings = {}) {
  return detail::to_value_at(module, "", settings);
}

/// The tensors of `module` under their dotted key paths ("blocks.0.conv.weight").
template <class T>
TensorCatalog to_catalog(const T& module, const ExportSettings& settings = {}) {
  return TensorCatalog::from_value(Format::value, to_value(module, settings));
}

/// The module as PyTorch would name and lay out its state_dict (PyTorch
/// adapter applied), ready for the PyTorch and safetensors writers.
template <class T>
TensorCatalog to_pytorch_state_dict(const T& module, Precision precision = Precision::Keep) {
  ExportSettings s;
  s.precision = precision;
  s.adapters.push_back(std::make_shared<PyTorchAdapter>());
  return TensorCatalog::from_value(Format::state_dict, to_value(module, s));
}

/// A tree of the module's fields with dtypes, shapes and per-subtree
/// element counts and bytes, one field per line.
std::string describe(const Value& tree);
/// `describe(to_value(module))`.
template <class T>
std::string describe(const T& module) {
  return describe(to_value(module));
}

/// True when two records have the same structure and bitwise equal tensors.
bool records_equal(const Value& a, const Value& b);
/// `records_equal(to_value(a), to_value(b))`.
template <class T>
bool records_equal(const T& a, const T& b) {
  return records_equal(to_value(a), to_value(b));
}

}  // namespace torchport
