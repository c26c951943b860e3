#pragma once
/// \file
/// `scan()`: what a checkpoint would make Python run, found without loading
/// a tensor (the analysis behind `torchport scan`).

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

/// A scan's conclusion. The verdict is the worst finding, where dangerous
/// outranks malformed (a payload often breaks the pickle after its global).
enum class ScanVerdict {
  /// Only allowed globals, nothing that needs code: what torch.load with
  /// weights_only=True accepts.
  clean,
  /// Python would need code to rebuild it: classes that are neither allowed
  /// nor known to be dangerous are called (a whole pickled `nn.Module`), a
  /// TorchScript archive carries `code/`, or a persistent id is of a kind
  /// torch does not write. torchport reads such files inertly; `torch.load`
  /// without weights_only would import and run those classes.
  needs_code,
  /// The file references a known way to run code (`os.system`, `eval`,
  /// `torch.storage._load_from_bytes`, ...), which `open()` refuses.
  dangerous,
  /// The file could not be read to its end (damaged, truncated, hostile
  /// structure, a limit crossed): `open()` refuses it, and the scan cannot
  /// vouch for what it did not read.
  malformed,
};

/// "clean", "needs_code", "dangerous" or "malformed".
std::string_view scan_verdict_name(ScanVerdict v) noexcept;

/// What one pickle holds.
struct PickleScan {
  /// The pickle's name: "archive/data.pkl", "legacy:object", "pickle", ...
  std::string name;
  /// Its first byte in the file (for a deflated zip entry: in the inflated entry).
  std::uint64_t offset = 0;
  /// Opcodes, globals (each classified, with its first offset, references
  /// and calls), persistent ids; filled as far as the pickle was read.
  pickle::Stats stats;
  /// Calls (REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ) per global "module.name";
  /// the pure data constructors the VM builds itself are not counted.
  std::map<std::string, std::uint64_t> calls;
  /// Persistent ids by kind (their first element: "storage", "module", ...).
  std::map<std::string, std::uint64_t> persistent_kinds;
  /// Why the pickle could not be read to its end ("" when it was).
  std::string error;
};

/// One thing the scan flags.
struct ScanFinding {
  ScanVerdict severity = ScanVerdict::needs_code;  ///< needs_code, dangerous or malformed
  std::string reason;                              ///< one line: what, and why it matters
  std::string where;                               ///< the file, pickle or record
  std::optional<std::uint64_t> offset;             ///< byte offset, when known
};

/// Everything `scan()` found.
struct ScanReport {
  std::string path;    ///< the file (or the source's name)
  std::string format;  ///< as `open()` names it ("pytorch-zip", "safetensors", ...), "" when none
  /// Every pickle the file holds, in file order (for a sharded checkpoint,
  /// every shard's, named "shard:pickle").
  std::vector<PickleScan> pickles;
  /// Records that hold code and are never read: TorchScript `code/`,
  /// `.py` files of a torch.package archive.
  std::vector<std::string> code_records;
  /// Shard files of a sharded checkpoint, in index order.
  std::vector<std::string> shards;
  /// Tensors `open()` lists (0 when it refused the file).
  std::uint64_t tensors = 0;
  /// What the scan flags, most severe first.
  std::vector<ScanFinding> findings;
  /// The worst severity among the findings (clean when there are none).
  ScanVerdict verdict = ScanVerdict::clean;

  /// The first finding of the verdict's severity, as one line ("" when clean).
  std::string reason() const;
};

/// Scans `source` without loading tensors: reads the directory, runs every
/// pickle through the non-executing VM to record its opcodes, globals,
/// calls and persistent ids, lists code records, then opens the file as
/// `open()` would (lazily: no tensor bytes are read) to check its structure.
/// Nothing from the file runs. `options.limits` bound the work as for
/// `open()`; `options.format` forces a format. Never throws for bad input:
/// problems become findings.
/// \throws Error(io) only when a sharded checkpoint's index cannot be read.
ScanReport scan(const Source& source, const OpenOptions& options = {});

/// Scans a file, or a sharded checkpoint (its `*.index.json` or directory:
/// the index and every shard it names).
/// \throws Error(io) when the file cannot be opened or mapped.
ScanReport scan(const std::filesystem::path& path, const OpenOptions& options = {});

}  // namespace torchport
