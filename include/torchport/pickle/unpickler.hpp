#pragma once
/// \file
/// A pickle virtual machine that never runs anything.

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "torchport/core/limits.hpp"
#include "torchport/core/value.hpp"
#include "torchport/io/byte_reader.hpp"

namespace torchport::pickle {

/// How a global referenced by a pickle is treated.
enum class GlobalClass {
  allowed,    ///< on the allow-list: a data constructor torch checkpoints use
  unknown,    ///< anything else: kept as an inert reference (e.g. a model's class)
  dangerous,  ///< a known way to run code (os.system, eval, pickle.loads, ...)
};

/// Classifies `module.name` (after `__builtin__` -> `builtins`). The
/// allow-list is matched exactly; see docs/security.md.
GlobalClass classify_global(std::string_view module, std::string_view name);
/// "allowed", "unknown" or "dangerous".
std::string_view global_class_name(GlobalClass c) noexcept;

/// One global a pickle referenced.
struct GlobalUse {
  /// The module, after the VM's renames (`__builtin__` -> `builtins`, ...).
  std::string module;
  std::string name;    ///< name inside the module
  GlobalClass klass = GlobalClass::unknown;  ///< how `classify_global` treats it
  std::uint64_t first_offset = 0;  ///< byte offset of its first reference
  std::uint64_t count = 0;         ///< GLOBAL/STACK_GLOBAL opcodes that referenced it
};

/// What a pickle contained, for `torchport scan` and for policy above the VM.
struct Stats {
  int protocol = 0;                           ///< from PROTO, 0 when absent
  std::array<std::uint64_t, 256> opcodes{};   ///< executions per opcode byte
  std::vector<GlobalUse> globals;             ///< in order of first reference
  std::uint64_t calls = 0;                    ///< REDUCE/NEWOBJ/INST/OBJ on unknown or dangerous globals
  std::uint64_t persistent_ids = 0;           ///< BINPERSID/PERSID opcodes run
};

/// Resolves a persistent id (torch's storage references) to a value.
/// `offset` is the byte offset of the opcode, for messages.
using PersistentLoad = std::function<Value(const Value& pid, std::uint64_t offset)>;

/// Builds the value of a call (REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ) of a
/// global that is not one of the pure data constructors, instead of the
/// inert `Object` the VM would make: the readers use it to turn torch's
/// `_rebuild_tensor_v2(...)` into a tensor while the pickle runs, rather
/// than copying the tree afterwards. Returns nothing to keep the inert
/// object. It runs nothing the pickle chose: it sees the global's name and
/// the argument tuple. It should not throw (a call it cannot build is best
/// left inert, for a later pass to report with its key path); an exception
/// it throws aborts the pickle. `offset` is the opcode's byte offset.
using CallHook =
    std::function<std::optional<Value>(const Global& callable, const Value& args, std::uint64_t offset)>;

/// Applies BUILD's state to a tensor value (one `CallHook` built), as the
/// tensor's `__setstate__` would, and returns the tensor it becomes; the
/// VM puts it in place of the old one everywhere the pickle holds it (the
/// memo too), as Python mutates the object. It throws Error for a state it
/// does not apply (a form torch never writes, a view outside its storage).
/// `offset` is the BUILD opcode's byte offset.
using BuildHook =
    std::function<Tensor(const Value& target, const Value& state, std::uint64_t offset)>;

/// Runs one pickle, from the reader's position to its STOP opcode (which is
/// consumed), and returns the object it describes as an inert `Value`.
///
/// Nothing is imported, called or instantiated. Globals become `Global`
/// values; REDUCE, NEWOBJ, INST and OBJ of a global become inert `Object`
/// values, except for a few pure data constructors that torch checkpoints
/// use, which build the data they describe: `collections.OrderedDict` (a
/// dict), `builtins.set`/`frozenset` (a set), `builtins.complex`,
/// `builtins.bytearray` and `_codecs.encode(s, "latin1")` (bytes), and
/// `torch.Size` (a tuple). APPEND works only on lists, SETITEM only on dicts,
/// ADDITEMS only on sets, BUILD only on objects and OrderedDicts, and on
/// tensors through `build` (without it, BUILD on a tensor is an error).
///
/// \param reader      the pickle's bytes, positioned at its first opcode; left after STOP
/// \param limits      the resource bounds the VM enforces (see `Limits`)
/// \param persistent  resolves BINPERSID/PERSID; when empty they are errors
/// \param stats       filled when non-null (also when an error is thrown)
/// \param hook        builds values for calls instead of inert objects, when set
/// \param build       applies BUILD's state to tensors, when set
/// \throws Error(truncated | corrupt | unsupported | limit_exceeded) with the
///         byte offset of the offending opcode.
Value unpickle(ByteReader& reader, const Limits& limits, const PersistentLoad& persistent = {},
               Stats* stats = nullptr, const CallHook& hook = {}, const BuildHook& build = {});

/// Name of an opcode byte ("BINUNICODE"), or "" for a byte that is none.
std::string_view opcode_name(std::uint8_t op) noexcept;

}  // namespace torchport::pickle
