#pragma once
// How Python's Unpickler.find_class names a global, as torch.load reaches
// it: torch's own rename (UnpicklerWrapper's load_module_mapping), then,
// below protocol 3, the _compat_pickle renames (fix_imports is on by
// default), and from protocol 4 on a dotted name resolved attribute by
// attribute. Shared by the VM and the opcode walk (internal to pickle).

#include <string>
#include <string_view>

namespace torchport::pickle {

/// A global as Python imports it.
struct GlobalName {
  std::string module;
  std::string name;
  std::string written;  ///< "module.name" as the pickle wrote it, when a rename changed it
  /// A dotted name below protocol 4: Python looks it up as one attribute
  /// and fails (so does torch.load).
  bool dotted_below_4 = false;
};

/// Names `module`.`name` of a pickle of `protocol` as find_class does. A
/// dotted name of an allowed global from protocol 4 on is split into its
/// module and name ("torch" / "_utils._rebuild_tensor_v2" becomes
/// "torch._utils" / "_rebuild_tensor_v2"), so that every reader knows it.
GlobalName python_global_name(std::string module, std::string name, int protocol);

/// True when Python could import `module` by name: dotted components, each
/// an identifier (ASCII letters, digits and underscores not starting with a
/// digit, or any non-ASCII character: Python's identifiers are wider, and
/// a wider test only means fewer names are taken as unimportable). A module
/// name with a space, a slash or an empty component is no module any
/// import finds on a standard path: `__import__` fails there, and so does
/// the unpickler, before anything runs. This is what tells text that starts
/// like a protocol 0 pickle ("import torch" reads as INST) from a pickle.
bool importable_module(std::string_view module) noexcept;

}  // namespace torchport::pickle
