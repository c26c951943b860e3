#pragma once
/// \file
/// A pickle virtual machine that never runs anything.

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "torchport/core/limits.hpp"
#include "torchport/core/value.hpp"
#include "torchport/io/byte_reader.hpp"

namespace torchport::pickle {

/// How a global referenced by a pickle is treated.
enum class GlobalClass {
  allowed,    ///< on the allow-list: a data constructor torch checkpoints use
  unknown,    ///< anything else: kept as an inert reference (e.g. a model's class)
  dangerous,  ///< on the deny-list: a known way to run code (os.system, eval, pip.main, ...)
};

/// Classifies `module.name`, after Python's protocol-2 renames
/// (`compat_rename`: `__builtin__` -> `builtins`, `cStringIO` -> `io`, ...),
/// so that a name is judged as Python would import it. The allow-list is
/// matched exactly; see docs/security.md.
GlobalClass classify_global(std::string_view module, std::string_view name);
/// Classifies `module.name` with a user's allow patterns: a name on the
/// allow-list is allowed; an unknown one that matches a pattern
/// (`allow_pattern_matches`) is allowed too; a dangerous one stays dangerous
/// whatever the patterns say.
GlobalClass classify_global(std::string_view module, std::string_view name,
                            std::span<const std::string> allow);
/// "allowed", "unknown" or "dangerous".
std::string_view global_class_name(GlobalClass c) noexcept;

/// True when torch >= 2.6's default `torch.load` (weights_only=True,
/// torch/_weights_only_unpickler.py `_get_allowed_globals`, as torch 2.6
/// lists it) accepts the global `module.name` without
/// `torch.serialization.add_safe_globals`. Narrower than our allow-list
/// (numpy's arrays, for one, are ours but not its).
bool torch_weights_only_allows(std::string_view full_name) noexcept;
/// True when that unpickler reads opcode `code` (it reads a fixed subset:
/// no text opcodes of protocol 0, no STACK_GLOBAL, MEMOIZE or FRAME of
/// protocol 4, ...).
bool torch_weights_only_reads(std::uint8_t code) noexcept;

/// Python's renames of Python 2 names (CPython's `_compat_pickle`:
/// `NAME_MAPPING`, else `IMPORT_MAPPING` of the module), which its
/// unpickler applies to every global of a pickle whose protocol is below 3
/// (with `fix_imports`, the default, as torch.load uses it). Returns the
/// name unchanged when no rule applies.
std::pair<std::string, std::string> compat_rename(std::string_view module, std::string_view name);

/// True when the allow pattern `pattern` covers `module.name`: an exact
/// `module.name`, or `module.*` for every name of `module` and of its
/// submodules. A dotted `name` (an attribute chain) is never covered.
bool allow_pattern_matches(std::string_view pattern, std::string_view module,
                           std::string_view name) noexcept;
/// True when one of `patterns` covers `module.name`.
bool allow_patterns_match(std::span<const std::string> patterns, std::string_view module,
                          std::string_view name) noexcept;
/// Checks allow patterns: each an exact `module.name` or `module.*`, made of
/// identifiers separated by dots.
/// \throws Error(invalid_argument) naming the first bad pattern.
void validate_allow_patterns(std::span<const std::string> patterns);

/// One global a pickle referenced.
struct GlobalUse {
  /// The module, after the renames Python applies (`compat_rename` below
  /// protocol 3; torch's `torch.tensor` -> `torch._tensor` always).
  std::string module;
  std::string name;                          ///< name inside the module
  GlobalClass klass = GlobalClass::unknown;  ///< how `classify_global` treats it
  std::uint64_t first_offset = 0;            ///< byte offset of its first reference
  std::uint64_t count = 0;  ///< GLOBAL/STACK_GLOBAL/INST opcodes that referenced it
  /// `module.name` as the pickle wrote it, when a rename changed it ("" otherwise).
  std::string written;
  std::uint8_t opcode = 0;  ///< the opcode of its first reference (GLOBAL, STACK_GLOBAL or INST)
  std::uint64_t calls = 0;  ///< REDUCE/NEWOBJ/NEWOBJ_EX/INST/OBJ of it
  std::uint64_t first_call_offset = 0;  ///< byte offset of its first call (when `calls` > 0)
  std::uint8_t call_opcode = 0;         ///< the opcode of its first call
  /// BUILDs on an object made by calling it (Python runs the class's
  /// `__setstate__`, when it has one, or sets the object's attributes).
  std::uint64_t builds = 0;
  /// BUILDs on the global itself: Python sets attributes of a live class,
  /// function or module (torch's own, when the global is allowed).
  std::uint64_t sets = 0;
};

/// What a pickle contained, for `torchport scan` and for policy above the VM.
struct Stats {
  int protocol = 0;                          ///< from PROTO, 0 when absent
  std::array<std::uint64_t, 256> opcodes{};  ///< executions per opcode byte
  std::vector<GlobalUse> globals;            ///< in order of first reference
  std::uint64_t calls = 0;           ///< REDUCE/NEWOBJ/INST/OBJ on unknown or dangerous globals
  std::uint64_t persistent_ids = 0;  ///< BINPERSID/PERSID opcodes run
  /// Calls whose callable is not a global (the result of another call, a
  /// persistent id's value, ...), which the VM refuses but Python would make.
  std::uint64_t other_calls = 0;
  std::uint64_t first_other_call_offset = 0;  ///< byte offset of the first (when `other_calls` > 0)
  /// EXT1/EXT2/EXT4 opcodes: globals named through copyreg's extension registry.
  std::uint64_t extensions = 0;
  /// BUILDs on a tensor a call made (Python's Tensor.__setstate__; torch's
  /// weights_only unpickler applies them as Tensor.set_ instead).
  std::uint64_t tensor_builds = 0;
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
using CallHook = std::function<std::optional<Value>(const Global& callable, const Value& args,
                                                    std::uint64_t offset)>;

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

/// What an opcode walk finds: the opcodes read as pickletools.genops reads
/// them, argument by argument, with no stack and no values, from a
/// position to STOP. The scanner uses it where the VM stopped but Python
/// could read on, and to tell whether bytes are a pickle at all.
struct OpcodeWalk {
  int protocol = 0;  ///< from PROTO, 0 when absent
  /// GLOBAL, INST and STACK_GLOBAL names as Python imports them, in order
  /// of first reference, classified (`calls` counts calling opcodes after
  /// the reference, conservatively: any REDUCE, NEWOBJ, NEWOBJ_EX, OBJ or
  /// BUILD after it). A STACK_GLOBAL takes the two strings pushed or
  /// fetched from the memo last; when it cannot tell them, its module and
  /// name are "?" and `unresolved` counts it.
  std::vector<GlobalUse> globals;
  std::uint64_t unresolved = 0;      ///< STACK_GLOBALs whose strings the walk cannot tell
  std::uint64_t calls = 0;           ///< REDUCE/NEWOBJ/NEWOBJ_EX/INST/OBJ/BUILD opcodes
  std::uint64_t extensions = 0;      ///< EXT1/EXT2/EXT4 opcodes
  std::uint64_t persistent_ids = 0;  ///< PERSID/BINPERSID opcodes
  std::uint64_t opcodes = 0;         ///< opcodes read
  bool reached_stop = false;         ///< it read STOP
  std::uint64_t end = 0;             ///< file offset after STOP, or of the opcode where it stopped
  /// Why it stopped before STOP, where Python's unpickler stops too: a
  /// byte that is no opcode, an argument that runs past the end, a name
  /// that is not UTF-8 or no module Python could import ("" at STOP).
  std::string stopped;
};

/// Walks the opcodes from `reader`'s position to STOP (left after it, or at
/// the opcode where it stopped). Linear in the bytes; never throws for bad
/// input.
OpcodeWalk walk_opcodes(ByteReader& reader, const Limits& limits);

/// Name of an opcode byte ("BINUNICODE"), or "" for a byte that is none.
std::string_view opcode_name(std::uint8_t op) noexcept;

}  // namespace torchport::pickle
