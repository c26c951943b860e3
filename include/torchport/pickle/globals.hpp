#pragma once
/// \file
/// How the globals a pickle names are judged (the allow-list, the deny-list,
/// profiles, the user's patterns and torch's own weights_only rules), and
/// what a pickle held, as the VM counts it (`Stats`, which `scan()` reports).
/// Data and pure functions only: the VM itself is internal to the library.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

/// True when `module.cls` is an Enum on the allow-list and `member` one of
/// its members: Python 3.11 pickles an Enum member by name, as the call
/// `builtins.getattr(cls, 'MEMBER')` (3.12 went back to `cls(value)`), which
/// the unpickler reads as that member, a value.
bool allowed_enum_member(std::string_view module, std::string_view cls,
                         std::string_view member) noexcept;

/// How a pickle may use a class of a profile (`Profile`): the one form in
/// which Python builds it without running any code of its library.
enum class ProfileUse {
  /// An instance made as protocol 2 pickles a plain class: NEWOBJ of the
  /// class with no arguments (`cls.__new__(cls)`, which is
  /// `object.__new__`), then BUILD with a dict of str keys, which pickle's
  /// load_build stores into the instance's `__dict__` once its lookup of
  /// `__setstate__` finds none (the class has no `__new__`,
  /// `__setstate__`, `__getattribute__` or `__slots__` of its own). A
  /// REDUCE of the class would run its `__init__`.
  object,
  /// An Enum's member looked up by name, as Python 3.11 pickles a member:
  /// `builtins.getattr(cls, 'NAME')`, NAME a member name
  /// (`enum_member_name`). The class is a plain `enum.Enum` subclass (its
  /// metaclass `enum.EnumType`) whose every member is named so and whose
  /// other attributes never are: the lookup gives a member or fails.
  enum_member,
};

/// A class of a profile, and the one way a pickle may use it.
struct ProfileClass {
  std::string_view module;  ///< "transformers.training_args"
  std::string_view name;    ///< "TrainingArguments"
  ProfileUse use;           ///< the one form a pickle may use it in
  /// What building it in that form runs beyond Python's own code, when
  /// anything does ("" when nothing): tests/ecosystem/check_profiles.py
  /// traces it.
  std::string_view note;
};

/// A named, opt-in set of a library's classes that Python builds without
/// running code a file can steer (docs/security.md, "Profiles", has the
/// evidence; tests/ecosystem/check_profiles.py shows and checks it against
/// the installed libraries). A class of an active profile counts as
/// allowed while a pickle only names it or uses it in its `ProfileUse`
/// form; any other use (a call with arguments, a REDUCE, a BUILD of
/// another state, a BUILD of the class itself) leaves it unknown, as
/// without the profile. Never on by default.
struct Profile {
  std::string_view name;                  ///< as `--profile` takes it: "transformers-training-args"
  std::string_view summary;               ///< one line: what files it is for
  std::span<const ProfileClass> classes;  ///< its classes, by module and name
};

/// Every profile torchport knows, in name order.
std::span<const Profile> profiles() noexcept;
/// The class `module.name` as the active profiles `active` (profile names)
/// list it, or null.
const ProfileClass* profile_class(std::span<const std::string> active, std::string_view module,
                                  std::string_view name) noexcept;
/// Checks profile names. \throws Error(invalid_argument) naming the first
/// unknown one and the known ones.
void validate_profiles(std::span<const std::string> names);
/// True for a name an `enum_member` class's members are given: an ASCII
/// capital letter, then capitals, digits and underscores ("ADAMW_TORCH").
/// No attribute an Enum inherits (from `str`, `int`, `Enum`, its
/// metaclass) is named so.
bool enum_member_name(std::string_view name) noexcept;

/// The torch 2.x releases whose default `torch.load` (weights_only=True)
/// these functions know, by minor number: 2.6 (the first whose default it
/// is) to 2.14 (the current release, 2.14.1). docs/torch-versions.md lists
/// what changed in which.
inline constexpr int kTorchWeightsOnlyFirst = 6;     ///< torch 2.6
inline constexpr int kTorchWeightsOnlyCurrent = 14;  ///< torch 2.14

/// True when torch 2.`minor`'s default `torch.load` (weights_only=True,
/// torch/_weights_only_unpickler.py `_get_allowed_globals`) accepts the
/// global `full_name` ("module.name", as torch_weights_only_name spells it)
/// without `torch.serialization.add_safe_globals`. The list is 2.14.1's,
/// exactly; the names later releases added (sub-byte integer dtypes in 2.7,
/// float4_e2m1fn_x2 in 2.8, bcomplex32 in 2.14) count from their release.
/// Narrower than our allow-list (numpy's arrays, for one, are ours but not
/// its). False for a minor outside [kTorchWeightsOnlyFirst, ...).
bool torch_weights_only_allows(std::string_view full_name,
                               int minor = kTorchWeightsOnlyCurrent) noexcept;
/// The minor number of the first torch 2.x release that has `full_name` at
/// all, for the dtypes later releases added to torch and to its default
/// list (float8_e8m0fnu: 7, float4_e2m1fn_x2: 8, bcomplex32: 14): before
/// it no `add_safe_globals` can name it. 0 for every other name.
int torch_global_since(std::string_view full_name) noexcept;
/// True when that unpickler reads opcode `code` (it reads a fixed subset,
/// the same in 2.6 to 2.14: no text opcodes of protocol 0, no STACK_GLOBAL,
/// MEMOIZE or FRAME of protocol 4, ...).
bool torch_weights_only_reads(std::uint8_t code) noexcept;
/// The "module.name" torch 2.`minor`'s weights_only unpickler looks up for a
/// GLOBAL that wrote `module` and `name`: its own renames (torch._utils
/// IMPORT_MAPPING and NAME_MAPPING, a subset of CPython's, applied whatever
/// the protocol; 2.14 adds `exceptions.X` -> `builtins.X`), not torch.load's
/// `torch.tensor` -> `torch._tensor`. What `add_safe_globals` must name.
std::string torch_weights_only_name(std::string_view module, std::string_view name,
                                    int minor = kTorchWeightsOnlyCurrent);

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
  /// The module as the pickle wrote it, before any rename (GLOBAL's first
  /// line, STACK_GLOBAL's first string, INST's): what torch's weights_only
  /// unpickler renames its own way (torch_weights_only_name).
  std::string written_module;
  std::string written_name;  ///< the name as the pickle wrote it, before any rename
  std::uint8_t opcode = 0;   ///< the opcode of its first reference (GLOBAL, STACK_GLOBAL or INST)
  std::uint64_t calls = 0;   ///< REDUCE/NEWOBJ/NEWOBJ_EX/INST/OBJ of it
  /// Calls that build nothing but data: of `builtins.getattr`, those read
  /// as an allowed Enum's member by name (`allowed_enum_member`, or a
  /// member of an active profile's `enum_member` class); of an active
  /// profile's `object` class, NEWOBJ with no arguments. While every call
  /// (and every BUILD, `inert_builds`) is one, `klass` says allowed.
  std::uint64_t inert_calls = 0;
  /// BUILDs with a dict of attributes on objects of an active profile's
  /// `object` class.
  std::uint64_t inert_builds = 0;
  /// The class as an active profile lists it (null when none does).
  const ProfileClass* profile = nullptr;
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
  /// SETITEM/SETITEMS on a list (Python's list.__setitem__, which torch's
  /// weights_only unpickler also ran up to 2.9; from 2.10 it sets items of
  /// dict, OrderedDict and Counter only).
  std::uint64_t list_setitems = 0;
  std::uint64_t first_list_setitem_offset = 0;  ///< byte offset of the first (when > 0)
  /// Opcodes whose argument runs past the end of their FRAME, and FRAMEs
  /// begun before the current one ends: CPython's C unpickler before
  /// 3.13.15 and 3.14.7 reads across frames (as the VM does), its Python
  /// unpickler and later releases refuse them (gh-154848).
  std::uint64_t frame_straddles = 0;
  std::uint64_t first_frame_straddle_offset = 0;  ///< byte offset of the first (when > 0)
};

/// Name of an opcode byte ("BINUNICODE"), or "" for a byte that is none.
std::string_view opcode_name(std::uint8_t op) noexcept;

}  // namespace torchport::pickle
