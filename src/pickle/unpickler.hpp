#pragma once
// A pickle virtual machine that never runs anything (internal to the
// library: the readers and the scanner run it; what it judges and counts is
// public, in torchport/pickle/globals.hpp).

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/byte_reader.hpp"
#include "torchport/core/limits.hpp"
#include "torchport/core/value.hpp"
#include "torchport/pickle/globals.hpp"

namespace torchport::pickle {

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

/// Called after BUILD has given an object (an inert `Object`) its state, for
/// a reader whose loader reads more than opcodes there: joblib's
/// NumpyUnpickler reads a NumpyArrayWrapper's array bytes (or a nested
/// pickle) from the file right after that BUILD. `previous` is the state
/// the object had before (Python's BUILD updates the attributes, so both
/// count); `reader` is the pickle's, at the next opcode: the hook may read
/// past bytes the loader reads. `in_frame` is true while the BUILD's FRAME
/// has bytes left (the loader reads the file after the frame, not them).
/// It throws Error to stop the pickle.
using AfterBuildHook = std::function<void(const Value& target, const Value& previous,
                                          ByteReader& reader, bool in_frame, std::uint64_t offset)>;

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
/// \param profiles    the active profiles (`Profile`, by name; validated by the caller):
///                    their classes count as allowed in the uses they list
/// \param after_build  reads what the loader reads after BUILD on an object, when set
/// \throws Error(truncated | corrupt | unsupported | limit_exceeded) with the
///         byte offset of the offending opcode.
Value unpickle(ByteReader& reader, const Limits& limits, const PersistentLoad& persistent = {},
               Stats* stats = nullptr, const CallHook& hook = {}, const BuildHook& build = {},
               std::span<const std::string> profiles = {}, const AfterBuildHook& after_build = {});

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
  std::uint64_t unresolved = 0;       ///< STACK_GLOBALs whose strings the walk cannot tell
  std::uint64_t calls = 0;            ///< REDUCE/NEWOBJ/NEWOBJ_EX/INST/OBJ/BUILD opcodes
  std::uint64_t extensions = 0;       ///< EXT1/EXT2/EXT4 opcodes
  std::uint64_t persistent_ids = 0;   ///< PERSID/BINPERSID opcodes
  std::uint64_t opcodes = 0;          ///< opcodes read
  std::uint64_t frame_straddles = 0;  ///< as `Stats::frame_straddles`
  bool reached_stop = false;          ///< it read STOP
  std::uint64_t end = 0;              ///< file offset after STOP, or of the opcode where it stopped
  /// Why it stopped before STOP, where Python's unpickler stops too: a
  /// byte that is no opcode, an argument that runs past the end, a name
  /// that is not UTF-8 or no module Python could import ("" at STOP).
  std::string stopped;
};

/// Walks the opcodes from `reader`'s position to STOP (left after it, or at
/// the opcode where it stopped). Linear in the bytes; never throws for bad
/// input.
OpcodeWalk walk_opcodes(ByteReader& reader, const Limits& limits);

}  // namespace torchport::pickle
