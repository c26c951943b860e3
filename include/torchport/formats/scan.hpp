#pragma once
/// \file
/// `scan()`: what a checkpoint would make Python import and run, found
/// without loading a tensor (the analysis behind `torchport scan`). It fails
/// closed: a file is clean only when every global it names is on the
/// allow-list (the one `open()` uses) or on the user's allow patterns.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"
#include "torchport/pickle/unpickler.hpp"

namespace torchport {

/// A scan's conclusion, the worst finding: unsafe > malformed > clean.
enum class ScanVerdict {
  /// Every global is on the allow-list (or the user's patterns), nothing
  /// holds code, and the file was read to its end, unambiguously.
  clean,
  /// A pickle names a global outside the allow-list (whether it calls it or
  /// only names it: Python imports the module either way), a call whose
  /// callable is not a global, a copyreg extension code, or a TorchScript
  /// archive holds `code/`, or torch's readers and ours could read the file
  /// differently (`ErrorCode::ambiguous`). Also when the file is damaged:
  /// what a broken pickle names is still judged.
  unsafe,
  /// The file could not be read to its end (damaged, truncated, a limit
  /// crossed, a container refused), and nothing it names, as far as it could
  /// be read, is outside the allow-list. `open()` refuses it; the scan
  /// cannot vouch for what it did not read.
  malformed,
  /// Not a format torch or torchport reads (a README, a tokenizer, an
  /// image), and no pickle in it names a global; or an archive that holds
  /// no pickle and only such files: nothing in it could make an unpickler
  /// run code. Reported by directory walks; not a failure.
  unrecognized,
};

/// "clean", "unsafe", "malformed" or "unrecognized".
std::string_view scan_verdict_name(ScanVerdict v) noexcept;

/// One global a pickle names, judged.
struct ScanGlobal {
  std::string name;          ///< "module.name", as Python imports it (after protocol-2 renames)
  std::string written;       ///< as the pickle wrote it, when a rename changed it ("" otherwise)
  std::string opcode;        ///< of its first reference: "GLOBAL", "STACK_GLOBAL" or "INST"
  std::uint64_t offset = 0;  ///< byte offset of its first reference
  std::uint64_t count = 0;   ///< references
  std::uint64_t calls = 0;   ///< REDUCE/NEWOBJ/NEWOBJ_EX/INST/OBJ of it
  std::string call_opcode;   ///< the opcode of its first call ("" when never called)
  std::optional<std::uint64_t> call_offset;  ///< byte offset of its first call
  std::uint64_t builds = 0;                  ///< BUILDs on objects it made (`__setstate__`)
  std::uint64_t sets = 0;  ///< BUILDs on the global itself (setattr on a live class or module)
  bool allowed = false;    ///< on the allow-list or the user's patterns
  bool known_dangerous = false;  ///< on the deny-list (explains; does not decide)
  /// Found by the opcode walk past the point where the VM stopped (a broken
  /// or hostile pickle Python could read further than torchport does).
  bool after_error = false;
  /// Empty when allowed (and never BUILT itself); else "calls" (called,
  /// BUILT, or its objects BUILT) or "imports" (named only), then
  /// "known-dangerous" when it is on the deny-list.
  std::vector<std::string> reasons;
};

/// What one pickle holds.
struct PickleScan {
  /// The pickle's name: "archive/data.pkl", "legacy:object", "pickle", ...
  std::string name;
  /// Its first byte in the file (for a deflated zip entry: in the inflated entry).
  std::uint64_t offset = 0;
  /// Opcodes, globals, calls and persistent ids, as the VM counted them
  /// (filled as far as the pickle was read).
  pickle::Stats stats;
  /// Every global it names, judged (`stats.globals`, then those the opcode
  /// walk found past an error).
  std::vector<ScanGlobal> globals;
  /// Persistent ids by kind (their first element: "storage", "module", ...).
  std::map<std::string, std::uint64_t> persistent_kinds;
  /// Why the pickle could not be read to its end ("" when it was).
  std::string error;
  /// numpy arrays of object dtype it holds: their elements are Python
  /// objects the pickle makes (`open()` keeps them inert; numpy or pickle
  /// would build them). Where each is, as a dotted path from the root ("$"
  /// for the root itself), the first 16; the globals they name are judged
  /// with the others.
  std::vector<std::string> object_arrays;
  std::uint64_t object_array_count = 0;  ///< all of them
};

/// One thing the scan flags.
struct ScanFinding {
  ScanVerdict severity = ScanVerdict::unsafe;  ///< unsafe or malformed
  /// A keyword: "calls", "imports", "call-of-non-global", "extension-code",
  /// "torchscript-code", "ambiguous" (unsafe); "malformed" (malformed).
  std::string reason;
  std::string global;                   ///< "module.name", for "calls" and "imports"
  bool known_dangerous = false;         ///< the global is on the deny-list
  std::string message;                  ///< one line: what, and why it matters
  std::string where;                    ///< the file, pickle or record
  std::optional<std::uint64_t> offset;  ///< byte offset, when known
};

/// Everything `scan()` found.
struct ScanReport {
  std::string path;    ///< the file (or the source's name)
  std::string format;  ///< as `open()` names it ("pytorch-zip", "safetensors", ...), "" when none
  /// How `open()` read the file: "ok", "ambiguous" (refused: torch could
  /// read it differently), "refused" (any other error), or "" when the
  /// format is none torchport reads.
  std::string reading;
  std::string reading_error;  ///< `open()`'s error, when it refused the file
  /// Every pickle the file holds, in file order (for a sharded checkpoint,
  /// every shard's, named "shard:pickle"; for a refused zip, those its local
  /// headers lead to).
  std::vector<PickleScan> pickles;
  /// Records that hold code and are never read: TorchScript `code/` (found
  /// case-insensitively, as torch finds them), `.py` files of a
  /// torch.package archive.
  std::vector<std::string> code_records;
  /// Shard files of a sharded checkpoint, in index order.
  std::vector<std::string> shards;
  /// Files inside an archive that is not itself a checkpoint (a zip or tar
  /// of checkpoints), each scanned on its own, to a bounded depth; their
  /// paths are "archive!member".
  std::vector<ScanReport> members;
  /// Tensors `open()` lists (0 when it refused the file).
  std::uint64_t tensors = 0;
  /// What the scan flags, most severe first.
  std::vector<ScanFinding> findings;
  /// The worst severity among the findings and the members' verdicts.
  ScanVerdict verdict = ScanVerdict::clean;

  /// The first finding of the verdict's severity, as one line ("" when clean).
  std::string reason() const;
};

/// Scans `source` without loading tensors: sniffs its content, reads the
/// container's directory (or, when the container is refused, its local
/// headers), runs every pickle through the non-executing VM to record its
/// opcodes, globals, calls, builds and persistent ids, walks the opcodes
/// past any point where the VM stopped, lists code records, scans the
/// members of archives that are not checkpoints (nested to a bounded
/// depth), then opens the file as `open()` would (lazily: no tensor bytes
/// are read) to check its structure. Nothing from the file runs.
/// `options.limits` bound the work as for `open()`; `options.format` forces
/// a format; `options.allow` adds trusted globals. Never throws for bad
/// input: problems become findings.
/// \throws Error(invalid_argument) for a malformed allow pattern.
ScanReport scan(const Source& source, const OpenOptions& options = {});

/// Scans a file, or a sharded checkpoint (its `*.index.json` or directory:
/// the index and every shard it names).
/// \throws Error(io) when the file cannot be opened or mapped;
///         Error(invalid_argument) for a malformed allow pattern.
ScanReport scan(const std::filesystem::path& path, const OpenOptions& options = {});

/// Scans every regular file under `dir` (recursively; symbolic links to
/// directories are not followed), each by its content whatever its name, as
/// `scan(Source)` does, in path order; at most `options.limits.max_entries`
/// files. A file that cannot be read is reported malformed.
/// \throws Error(io) when `dir` cannot be listed;
///         Error(invalid_argument) for a malformed allow pattern.
std::vector<ScanReport> scan_directory(const std::filesystem::path& dir,
                                       const OpenOptions& options = {});

}  // namespace torchport
