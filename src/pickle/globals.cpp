// The allow-list and the deny-list of pickle globals.
//
// The allow-list mirrors what torch's own weights_only unpickler accepts
// (torch/_weights_only_unpickler.py, _get_allowed_globals) plus the storage
// and dtype globals of newer releases. The deny-list names globals that are
// known ways to run code from a pickle (fickling's catalogue, the CVEs in
// docs/security.md); everything else is "unknown": kept inert, never resolved.

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>

#include "torchport/core/dtype.hpp"
#include "torchport/pickle/unpickler.hpp"

namespace torchport::pickle {
namespace {

constexpr std::string_view kAllowedExact[] = {
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch._tensor._rebuild_from_type_v2",
    "collections.OrderedDict",
    "torch.UntypedStorage",
    "torch.Size",
    "torch.device",
    "torch.nn.parameter.Parameter",
    "torch.Tensor",
    "_codecs.encode",
    "builtins.set",
    "builtins.complex",
    "builtins.bytearray",
    // numpy arrays, dtypes and scalars (read as data; numpy 1.x and 2.x spellings)
    "numpy.ndarray",
    "numpy.dtype",
    "numpy.core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar",
    "numpy.core.numeric._frombuffer",
    "numpy._core.multiarray._reconstruct",
    "numpy._core.multiarray.scalar",
    "numpy._core.numeric._frombuffer",
    // quantized tensors: their rebuild call, storages and quantizer schemes
    "torch._utils._rebuild_qtensor",
    "torch.QInt8Storage",
    "torch.QUInt8Storage",
    "torch.QInt32Storage",
    "torch.per_tensor_affine",
    "torch.per_channel_affine",
    "torch.per_channel_affine_float_qparams",
    "torch.qint8",
    "torch.quint8",
    "torch.qint32",
    // sparse tensors: their rebuild calls and layouts (_get_layout only maps a
    // layout's name to the layout object)
    "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_sparse_csr_tensor",
    "torch.serialization._get_layout",
    "torch.sparse_coo",
    "torch.sparse_csr",
    "torch.sparse_csc",
    "torch.sparse_bsr",
    "torch.sparse_bsc",
};

// Modules whose every member can reach the OS, the interpreter or another
// unpickler.
constexpr std::string_view kDangerousModules[] = {
    "os",          "posix",      "nt",        "subprocess", "sys",        "socket",
    "shutil",      "pty",        "commands",  "popen2",     "webbrowser", "ctypes",
    "importlib",   "runpy",      "code",      "codeop",     "multiprocessing",
    "pickle",      "_pickle",    "cPickle",   "dill",       "marshal",    "types",
    "functools",   "operator",   "_operator", "pdb",        "timeit",     "asyncio",
    "signal",      "urllib",     "http",      "requests",   "tempfile",   "glob",
    "io",          "_io",        "numpy.testing", "torch.hub",
    "_posixsubprocess", "pkgutil", "cProfile", "profile",  "pydoc",     "zipimport",  "imp", "bdb", "trace",
    "_ctypes",     "numpy.ctypeslib", "torch.fx", "torch.utils.cpp_extension", "torch.package",
    "torch.serialization", "_thread", "threading", "gc",
};

// builtins that are plain data types; every other builtin (eval, exec,
// getattr, open, __import__, compile, ...) is dangerous.
constexpr std::string_view kHarmlessBuiltins[] = {
    "set",  "frozenset", "complex", "bytearray", "list",  "dict",   "tuple", "int",
    "float", "str",      "bytes",   "bool",      "slice", "range",  "object", "NoneType",
};

// Individual torch functions that load or run code.
constexpr std::string_view kDangerousExact[] = {
    "torch.storage._load_from_bytes",  // a pickle inside the pickle, unpickled without limits
    "torch.load",
    "torch.serialization.load",
    "torch.serialization._load",
    "torch.jit.load",
    "torch.jit._script.RecursiveScriptModule",
    "torch._C._jit_script_compile",
    "torch.package.package_importer.PackageImporter",
    "numpy.load",
    "torch._ops.ops",
};

bool in_module(std::string_view module, std::string_view root) {
  return module == root || (module.size() > root.size() && module.starts_with(root) &&
                            module[root.size()] == '.');
}

}  // namespace

GlobalClass classify_global(std::string_view module_in, std::string_view name) {
  std::string_view module = module_in == "__builtin__" ? "builtins" : module_in;
  if (module == "copy_reg") module = "copyreg";
  // "module.name", on the stack when it fits (the VM classifies every call).
  char buf[256];
  std::string heap;
  std::string_view full;
  if (module.size() + name.size() + 1 <= sizeof buf) {
    std::memcpy(buf, module.data(), module.size());
    buf[module.size()] = '.';
    std::memcpy(buf + module.size() + 1, name.data(), name.size());
    full = std::string_view(buf, module.size() + name.size() + 1);
  } else {
    heap = std::string(module) + "." + std::string(name);
    full = heap;
  }
  if (std::ranges::find(kAllowedExact, full) != std::end(kAllowedExact))
    return GlobalClass::allowed;
  // A dotted name is an attribute chain (protocol 4 resolves "os.system" in
  // module "torch" to torch.os.system, that is os.system): it reaches
  // whatever the module imported, so nothing vouches for it.
  if (name.find('.') != std::string_view::npos) return GlobalClass::dangerous;
  if (module == "torch") {
    if (name.ends_with("Storage") && dtype_from_storage_class(name)) return GlobalClass::allowed;
    if (dtype_from_torch_name(name)) return GlobalClass::allowed;
  }
  if (std::ranges::find(kDangerousExact, full) != std::end(kDangerousExact))
    return GlobalClass::dangerous;
  if (module == "builtins")
    return std::ranges::find(kHarmlessBuiltins, name) != std::end(kHarmlessBuiltins)
               ? GlobalClass::unknown
               : GlobalClass::dangerous;
  if (module == "copyreg" && name != "_reconstructor") return GlobalClass::dangerous;
  // torch.jit loads and compiles code; TorchScript's own pickles use only
  // torch.jit._pickle's list and tensor builders, which stay unknown (inert).
  if (in_module(module, "torch.jit") && !in_module(module, "torch.jit._pickle")) return GlobalClass::dangerous;
  if (module == "torch._C" && (name.starts_with("_jit_") || name.starts_with("import_ir_module")))
    return GlobalClass::dangerous;
  for (std::string_view m : kDangerousModules)
    if (in_module(module, m) || full == m) return GlobalClass::dangerous;
  return GlobalClass::unknown;
}

std::string_view global_class_name(GlobalClass c) noexcept {
  switch (c) {
    case GlobalClass::allowed: return "allowed";
    case GlobalClass::unknown: return "unknown";
    case GlobalClass::dangerous: return "dangerous";
  }
  return "?";
}

}  // namespace torchport::pickle
