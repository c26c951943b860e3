#pragma once
/// \file
/// `scan()`: what a file would make Python import and run, found without
/// loading a tensor (the analysis behind `torchport scan`). It reads a file
/// with the readers `open()` uses, over the same walk, and judges every
/// place a Python loader could unpickle against the allow-list `open()`
/// uses. It fails closed: a file is clean only when every such place was
/// read to its end and names only allowed globals (or the user's allow
/// patterns).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"
#include "torchport/pickle/globals.hpp"

namespace torchport {

/// A scan's conclusion: the worst of its findings and of its members'
/// verdicts, in the order unsafe > unscannable > truncated > malformed >
/// clean > not_a_model_file.
enum class ScanVerdict {
  /// Every place a loader could unpickle was read to its end and names only
  /// allowed globals (or the user's patterns); nothing holds code.
  clean,
  /// No model format, and nothing a loader could unpickle: text, source
  /// code, JSON, an image (also an archive of only such files).
  not_a_model_file,
  /// A pickle names a global outside the allow-list (whether it calls it or
  /// only names it: Python imports the module either way), calls something
  /// that is not a global, uses a copyreg extension code; a file holds code
  /// a loader compiles (TorchScript `code/`, `.py` sources, shared
  /// objects); or torch's readers and ours could read it differently
  /// (`ErrorCode::ambiguous`). Where a file is also broken, unsafe wins.
  unsafe,
  /// A place a loader could unpickle that the scan cannot read to its end:
  /// a pickle the VM stops in where Python reads on, a limit reached, a
  /// compression or nesting the scan does not follow. Nothing outside the
  /// allow-list was found in what it could read.
  unscannable,
  /// The file ends early (as far as it could be read, it names nothing
  /// outside the allow-list).
  truncated,
  /// The file is damaged or refused by its reader (as far as it could be
  /// read, it names nothing outside the allow-list).
  malformed,
};

/// "clean", "not-a-model-file", "unsafe", "unscannable", "truncated" or
/// "malformed".
std::string_view scan_verdict_name(ScanVerdict v) noexcept;
/// The exit status `torchport scan` gives a verdict: 0 for clean and
/// not-a-model-file, 1 for unsafe, 2 for unscannable, truncated and
/// malformed.
int scan_exit_code(ScanVerdict v) noexcept;
/// The worse of two verdicts, in the order above.
ScanVerdict worse(ScanVerdict a, ScanVerdict b) noexcept;

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
  /// Found by the opcode walk past the point where the VM stopped (where
  /// Python reads on); its calls are counted conservatively.
  bool after_error = false;
  /// Empty when allowed (and never BUILT itself); else "calls" (called,
  /// BUILT, or its objects BUILT) or "imports" (named only), then
  /// "known-dangerous" when it is on the deny-list.
  std::vector<std::string> reasons;
};

/// What one pickle holds.
struct PickleScan {
  /// The pickle's name: "archive/data.pkl", "legacy:object", "pickle:3", ...
  std::string name;
  /// Its first byte in the file (for a compressed member: in its inflated bytes).
  std::uint64_t offset = 0;
  /// Opcodes, globals, calls and persistent ids, as the VM counted them
  /// (filled as far as the pickle was read).
  pickle::Stats stats;
  /// Every global it names, judged (`stats.globals`, then those the opcode
  /// walk found past an error).
  std::vector<ScanGlobal> globals;
  /// Why the pickle could not be read to its end ("" when it was).
  std::string error;
  /// True for a pickle the reader does not run, found where a loader that
  /// reads pickle after pickle would go on (after a record's pickle, after
  /// a stream's last one): judged, but not what torch.load runs.
  bool swept = false;
  /// True when Python's unpickler would read on where the VM stopped (so
  /// what follows was walked opcode by opcode, and the pickle is
  /// unscannable unless something unsafe was found).
  bool python_reads_on = false;
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
  /// unsafe, unscannable, truncated or malformed.
  ScanVerdict severity = ScanVerdict::unsafe;
  /// A keyword: "calls", "imports", "call-of-non-global", "extension-code",
  /// "torchscript-code", "compiled-code", "ambiguous", "frame-straddle",
  /// "oversized-storage" (unsafe); "unscannable", "unknown-compression",
  /// "dbm-store" (unscannable); "truncated"; "malformed"; "alike" (findings
  /// past 8 of a kind, counted); "member" (a member's verdict).
  std::string reason;
  std::string global;                   ///< "module.name", for "calls" and "imports"
  bool known_dangerous = false;         ///< the global is on the deny-list
  std::string message;                  ///< one line: what, and why it matters
  std::string where;                    ///< the file, member, pickle or record
  std::optional<std::uint64_t> offset;  ///< byte offset, when known
};

/// What torch's default `torch.load(path)` (weights_only=True, the default
/// from torch 2.6 on) does with a file as it is, for one range of
/// releases that give the same answer (judged from what the scan read: the
/// format, every opcode, global and container a pickle torch.load runs
/// uses; torch/_weights_only_unpickler.py of each release, 2.6.0 to 2.14.1).
struct TorchWeightsOnlyRange {
  std::string first;  ///< the first release of the range ("2.6")
  std::string last;   ///< its last release ("2.9")
  /// True when it loads; false when it is refused; unset when the scan
  /// cannot tell (`why` says what torch would do differently).
  std::optional<bool> loads;
  /// Globals outside those releases' default list, in order of first
  /// reference, spelled as their unpickler looks them up: what
  /// `torch.serialization.add_safe_globals` would need. "module.*"
  /// stands for every class of the module (numpy.dtypes.*: the classes of
  /// the numpy dtypes a file BUILDs, which torch must allow too).
  std::vector<std::string> needs;
  /// Why it does not load whatever globals are added ("" otherwise): the
  /// tar format, a TorchScript archive, an opcode the weights_only
  /// unpickler does not read, SETITEM on a list (refused from 2.10), a
  /// pickle the scan could not read to its end.
  std::string why;
};

/// Whether torch's default `torch.load(path)` loads a file as it is: the
/// answer for the current release (`torch`, 2.14), the first release from
/// which that answer holds (`since`), and the answers of every release from
/// 2.6 on (`releases`), where the rules changed between them (2.7 allows
/// the sub-byte integer dtypes, 2.8 float4_e2m1fn_x2, 2.10 refuses SETITEM
/// on anything but a dict, 2.14 allows bcomplex32: docs/torch-versions.md).
struct TorchWeightsOnly {
  /// For the current release (`torch`): as `TorchWeightsOnlyRange`.
  std::optional<bool> loads;
  std::vector<std::string> needs;  ///< for the current release
  std::string why;                 ///< for the current release
  std::string torch;               ///< the current release the three answer for ("2.14")
  /// The first release from which they hold, unchanged, up to `torch`
  /// ("2.6" when every release since 2.6 gives the same answer).
  std::string since;
  /// 2.6 to `torch` in ranges of releases that give one answer, oldest
  /// first; the last is `since` to `torch`.
  std::vector<TorchWeightsOnlyRange> releases;
};

/// One line of Python a user can paste before `torch.load` to allow
/// `needs` (the tuple form of `add_safe_globals`, which registers each
/// global under the name torch's unpickler looks up, as `needs` spells it,
/// so numpy 1.x names load under numpy 2.x too);
/// "" when nothing is needed, or when a name is not a dotted Python
/// identifier (the names come from the file), and when one of them is on
/// the known-dangerous list (under any split of its dots into module and
/// attribute). Offer it only for a file the scan calls clean: it allows
/// what it names (the overload taking the report does so).
std::string add_safe_globals_line(const std::vector<std::string>& needs);

/// Everything `scan()` found in one file (or one member of an archive).
struct ScanReport {
  std::string path;  ///< the file (or the source's name); "archive!member" for a member
  /// The format its reader read ("pytorch-zip", "safetensors", "numpy",
  /// "gzip", ...; "" when none).
  std::string format;
  /// How the reader `open()` uses read it: "ok", "ambiguous" (refused:
  /// torch could read it differently), "refused" (any other error), or ""
  /// when no reader reads the format.
  std::string reading;
  std::string reading_error;  ///< the reader's error, when it refused the file
  /// Every pickle the file holds, in the order the walk met them.
  std::vector<PickleScan> pickles;
  /// Records that hold code and are never read: TorchScript `code/` (found
  /// case-insensitively, as torch finds them), `.py` files of a
  /// torch.package archive.
  std::vector<std::string> code_records;
  /// Shard files of a sharded checkpoint, in index order.
  std::vector<std::string> shards;
  /// Members of an archive (or the inflated bytes of a compressed file)
  /// that the format does not read, each judged by its content; their paths
  /// are "archive!member".
  std::vector<ScanReport> members;
  /// Records of raw tensor bytes the walk met (never unpickled, never read).
  std::uint64_t tensor_records = 0;
  /// Tensors the reader lists (0 when it refused the file).
  std::uint64_t tensors = 0;
  /// What the scan flags, most severe first.
  std::vector<ScanFinding> findings;
  /// The worst severity among the findings and the members' verdicts.
  ScanVerdict verdict = ScanVerdict::clean;
  /// For the formats torch.load reads (zip, legacy, tar, TorchScript),
  /// when our reader reads the file: whether torch >= 2.6 loads it by
  /// default, release by release, and what it would need.
  std::optional<TorchWeightsOnly> torch_weights_only;

  /// The first finding of the verdict's severity, as one line ("" when
  /// clean or not a model file).
  std::string reason() const;
};

/// `add_safe_globals_line(needs)` for a file whose verdict is clean, and ""
/// for any other: a line of trust is never offered for a file the scan
/// flags. `report` is the file's whole report (for an archive's member, the
/// caller passes the member's only when the archive's verdict is clean too).
std::string add_safe_globals_line(const ScanReport& report, const std::vector<std::string>& needs);

/// Scans `source` without loading tensors: reads it with the reader `open()`
/// would use (or every reader that could read it), telling the scan what the
/// reader meets; runs every pickle through the non-executing VM to record
/// its opcodes, globals, calls and builds, walks the opcodes past any point
/// where the VM stopped but Python would read on, lists code records, judges
/// the members of archives and the inflated bytes of compressed files by
/// their content (nested to a bounded depth), and the bytes after a stream's
/// last pickle as a loader reading pickle after pickle would. Nothing from
/// the file runs. `options.limits` bound the work as for `open()`
/// (`Limits::max_scan_bytes` all of it); `options.format` forces a format;
/// `options.allow` adds trusted globals. Never throws for bad input:
/// problems become findings.
/// \throws Error(invalid_argument) for a malformed allow pattern.
ScanReport scan(const Source& source, const OpenOptions& options = {});

/// Scans a file, or a sharded checkpoint (its `*.index.json`: the index and
/// every shard it names, each through the one shard resolver `open()` uses).
/// \throws Error(io) when the file cannot be opened or mapped;
///         Error(invalid_argument) for a malformed allow pattern.
ScanReport scan(const std::filesystem::path& path, const OpenOptions& options = {});

/// Which files of a directory `scan_directory` scans.
struct ScanFilter {
  /// Glob patterns (`*`, `?`, `[...]`, `**` for any number of folders)
  /// matched against each file's path relative to the directory: when any
  /// are given, only files matching one of them are scanned.
  std::vector<std::string> include;
  /// Files matching one of these are skipped (after `include`).
  std::vector<std::string> exclude;
};

/// Scans every regular file under `dir`, recursively, each by its content
/// whatever its name, as `scan(Source)` does, in path order; at most
/// `options.limits.max_entries` files. Symbolic links are followed when
/// they stay inside `dir` (or, for a Hugging Face cache snapshot
/// `models--org--name/snapshots/<revision>/`, inside the repository's cache
/// folder, which holds its `blobs/`), as `open()` follows a shard's; a link
/// that leads out, or to a FIFO, device or socket, is reported malformed
/// and not read. A file that cannot be read is reported malformed.
/// \throws Error(io) when `dir` cannot be listed;
///         Error(invalid_argument) for a malformed allow or glob pattern.
/// `progress`, when set, is called after each file with the bytes of the
/// files scanned so far and of all the files selected.
std::vector<ScanReport> scan_directory(
    const std::filesystem::path& dir, const OpenOptions& options = {},
    const ScanFilter& filter = {},
    const std::function<void(std::uint64_t done, std::uint64_t total)>& progress = {});

/// True when the glob `pattern` matches `path` (a relative path with '/'
/// separators): `*` and `?` match within one folder name, `**` any number
/// of folders, `[...]` a character class.
bool glob_matches(std::string_view pattern, std::string_view path) noexcept;

}  // namespace torchport
