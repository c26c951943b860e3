#pragma once
/// \file
/// `open()`: any checkpoint file to a `TensorCatalog`.

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/limits.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/io/source.hpp"

namespace torchport {

/// How to open a checkpoint. The defaults are safe for untrusted files.
struct OpenOptions {
  /// Resource limits; see `Limits`.
  Limits limits;
  /// How to map files.
  MapOptions map;
  /// Read a format without sniffing (a name gives it: `parse_format`,
  /// `format_from_name`). Unset sniffs: a directory or a `*.index.json`
  /// path is a sharded checkpoint; bytes go to the reader torch.load would
  /// use (zip, then a tar as Python's tarfile opens it, then the legacy
  /// pickle), else safetensors, our records or a plain pickle. The formats
  /// read from a path (sharded, DCP) are refused for bytes.
  std::optional<Format> format;
  /// Classes a pickle names that are neither allowed nor known to be
  /// dangerous (a model's own classes in a whole pickled nn.Module) are kept
  /// inert. Set to false to refuse them as well.
  bool allow_unknown_globals = true;
  /// Globals the user trusts, beyond the allow-list: each an exact
  /// `module.name` or `module.*` (that module and its submodules), as
  /// `torchport scan --allow` takes them. With `allow_unknown_globals` false
  /// they are the only unknown globals `open()` accepts (inertly); `scan()`
  /// calls a file clean only when every global is on the allow-list or here.
  /// A known-dangerous global is refused whatever they say.
  std::vector<std::string> allow;
  /// Opt-in profiles of a library's classes, by name (`pickle::profiles()`:
  /// "transformers-training-args"): each class of one counts as allowed
  /// while a pickle uses it only in the one form its profile lists, the
  /// form in which Python builds it without running code the file can
  /// steer (docs/security.md, "Profiles"). `open()` then reads, for one,
  /// the Enum members Python 3.11 pickles as `builtins.getattr(cls,
  /// 'NAME')`, which it refuses otherwise; `scan()` calls such a file
  /// clean. Empty (the default): fail-closed. An unknown name is an
  /// Error(invalid_argument).
  std::vector<std::string> profiles;
  /// Recompute the CRC-32 of every stored zip entry when opening (reads every
  /// byte; deflated entries are always checked when inflated). A mismatch is
  /// an Error(corrupt) naming every damaged entry and, for a PyTorch file's
  /// storages, the tensors stored in each.
  bool verify_crc = false;
  /// How URLs (`https://`, `http://`, `s3://`) are read: set it to
  /// `torchport::remote::opener()` (link `torchport::remote`) to open and
  /// scan remote checkpoints; null refuses URLs, naming what to link.
  std::shared_ptr<const RemoteOpener> remote;
};

/// Opens a checkpoint (a path, or with `OpenOptions::remote` a URL: a file,
/// a shard index, or a folder URL ending in `/`, see docs/remote.md): a PyTorch zip
/// (`torch.save`, 1.6+), a legacy pickle file (`_use_new_zipfile_serialization=False`), the old tar
/// format, a TorchScript archive (weights only, `code/` is never read), a whole pickled `nn.Module`
/// (classes stay inert), a plain pickle, a safetensors file, or a Hugging Face sharded checkpoint
/// (its `*.index.json`, or a directory holding one). Only directories and pickles are read; tensors
/// are mapped views until used.
///
/// \throws Error: `io` (cannot open), `not_a_checkpoint` (unknown format),
/// `ambiguous` (two readers, torch's and ours or two of ours, read the bytes
/// differently: a polyglot, or a container torch and other readers read
/// differently; see docs/format.md), `invalid_argument` (an unknown
/// `OpenOptions::format`),
/// `unsafe_global` (a pickle names a global that runs code), and the
/// format's own `truncated` / `corrupt` / `unsupported` / `limit_exceeded`,
/// each naming the file, the key path and the byte offset where they apply.
TensorCatalog open(const std::filesystem::path& path, const OpenOptions& options = {});

/// Opens a checkpoint held in memory (or already mapped).
TensorCatalog open(const Source& source, const OpenOptions& options = {});

/// The name of the format `sniff()` finds in `source`'s first bytes, or ""
/// when it is none of them.
std::string sniff_format(const Source& source);

}  // namespace torchport

namespace torchport {

/// Where a loaded catalogue's tensor bytes live.
enum class Residence {
  /// Copied into memory the process owns (one allocation for all storages;
  /// each storage copied once, so tied weights stay tied).
  owned,
  /// Left in the mapped file where they can be (aligned, little-endian,
  /// stored); the rest (deflated, unaligned, byte-swapped) materialised.
  mapped,
};

/// What `materialize` did.
struct MaterializeStats {
  std::uint64_t storages = 0;      ///< distinct storages made ready
  std::uint64_t bytes = 0;         ///< bytes of distinct storages
  std::uint64_t mapped_bytes = 0;  ///< of those, left in the mapped file
};

/// Hears a materialisation's bytes read so far and in all, now and then
/// from the calling thread (a progress bar; the reads go on meanwhile), and
/// once at the end.
using MaterializeProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// Reads every tensor's bytes now and returns a catalogue whose tensors no
/// longer wait on anything: the same names, dtypes, shapes, strides and
/// storage sharing as `catalog`. `progress`, when set, hears how far it is.
TensorCatalog materialize(const TensorCatalog& catalog, Residence residence,
                          MaterializeStats* stats = nullptr,
                          const MaterializeProgress& progress = {});
/// The same, consuming `catalog`: its tree and index are released before
/// the storages are made, and each file storage as soon as no tensor views
/// it, so the peak holds one catalogue, not two.
TensorCatalog materialize(TensorCatalog&& catalog, Residence residence,
                          MaterializeStats* stats = nullptr,
                          const MaterializeProgress& progress = {});

}  // namespace torchport
