#pragma once
/// \file
/// `save()`: a `TensorCatalog` to a safetensors file, a torch.save zip, a
/// Hugging Face sharded checkpoint of either, or a torchport record, streamed
/// and written atomically.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "torchport/core/limits.hpp"
#include "torchport/formats/catalog.hpp"

namespace torchport {

/// The file formats torchport writes: the one writer-side enum, a value
/// per file layout (`save` writes each; `write_record` and `save_record`
/// the record layouts, through a `Recorder`).
enum class SaveFormat {
  /// safetensors: a JSON header, then each tensor's bytes, C order.
  safetensors,
  /// What `torch.save(state_dict, path)` writes (zip, pickle protocol 2):
  /// loads with `torch.load(path, weights_only=True)`.
  pytorch,
  /// torchport's records (docs/format.md), each also gzipped: named
  /// MessagePack (`.mpk`), pretty JSON with base64 tensors (`.json`), and the
  /// compact binary layout with 64-byte aligned raw tensors (`.tpb`, the
  /// fastest; zero-copy when read).
  torchport_mpk,
  torchport_mpk_gz,
  torchport_json,
  torchport_json_gz,
  torchport_bin,
  torchport_bin_gz,
};

/// True for the record layouts (`torchport_*`).
bool is_record(SaveFormat format) noexcept;
/// "safetensors", "pytorch", or a record's layout as its file says it and
/// a catalogue read from it reports it ("torchport-mpk", "torchport-mpk.gz",
/// "torchport-json", ..., "torchport-bin.gz").
std::string_view save_format_name(SaveFormat format) noexcept;
/// Parses a `save_format_name` (also "pt" and "torch" for pytorch);
/// nullopt otherwise.
std::optional<SaveFormat> parse_save_format(std::string_view name) noexcept;
/// The format a file name implies: `.safetensors` -> safetensors; `.pt`,
/// `.pth`, `.bin` -> pytorch; `.mpk`, `.json`, `.tpb` -> the record
/// layouts, each maybe `.gz`; nullopt for anything else.
std::optional<SaveFormat> save_format_for_path(const std::filesystem::path& path);
/// The extension a file of `format` is given: the first of those that ask
/// for it (".safetensors", ".pt", ".mpk", ".mpk.gz", ...).
std::string_view save_format_extension(SaveFormat format) noexcept;

/// Reports progress: bytes of tensor data written so far, of `total`.
using SaveProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// How `save` writes.
struct SaveOptions {
  /// Split the checkpoint into shards of at most this many bytes of tensor
  /// data (a single tensor larger than this gets a shard of its own), named
  /// as Hugging Face names them, with an index. 0 (or a checkpoint that fits
  /// in one shard) writes the single file `path`.
  std::uint64_t max_shard_size = 0;
  /// After writing a tensor that views a read-only mapping (a tensor read
  /// from a file), ask the kernel to drop those pages from this process
  /// (madvise MADV_PAGEOUT). This is what keeps converting a checkpoint
  /// larger than memory at a peak of about its largest tensor; the pages are
  /// read from the file again if the tensor is used later. A hint only:
  /// nothing changes when the kernel ignores it.
  bool release_pages = true;
  /// Called as data is written: every 16 MiB and once all data is written.
  SaveProgress progress;
  /// `max_materialized_bytes` and `max_materialized_ratio` apply: safetensors
  /// has no views, so each view is written whole, and the tensors written may
  /// total at most the ratio times the distinct storage bytes plus the floor
  /// (a `.pt` file keeps one storage and its views, as torch does).
  Limits limits;
  /// SaveFormat::pytorch and the records: write the catalogue's whole object (`root()`: its
  /// nesting, numbers, strings, optimizer state and tensors) as torch.load
  /// returns it, not a state dict of its tensors. One file (no shards).
  /// Every global and object class in it must be on the allow-list or match
  /// `allow` (a file naming others makes torch import and run them); a
  /// pickled nn.Module is refused.
  bool keep_tree = false;
  /// Patterns trusted beyond the allow-list for `keep_tree` (as
  /// `OpenOptions::allow`: an exact `module.name` or `module.*`).
  std::vector<std::string> allow;
  /// Profiles (`OpenOptions::profiles`) whose classes `keep_tree` may write,
  /// each only in the form its profile lists.
  std::vector<std::string> profiles;
};

/// What `save` wrote.
struct SaveResult {
  /// The data files, in order (one unless sharded).
  std::vector<std::filesystem::path> files;
  /// The index of a sharded checkpoint; empty otherwise.
  std::filesystem::path index;
  /// Bytes of tensor data written (the index's `metadata.total_size`).
  std::uint64_t tensor_bytes = 0;
  /// Bytes of all files written, headers and index included.
  std::uint64_t file_bytes = 0;
};

/// Writes `catalog`'s tensors to `path` in `format`.
///
/// safetensors: tensors sorted by dtype alignment (largest first), then
/// name, so every tensor's data is aligned; header padded with spaces to a
/// multiple of 8; `__metadata__` is the catalogue's metadata plus
/// `"format": "pt"` when it has no "format" (transformers requires it).
/// Tensors that share a storage (tied weights) are written once each, as
/// safetensors cannot share. Complex32/complex128 and the FNUZ float8 kinds
/// have no safetensors dtype: Error(unsupported) naming the tensor.
///
/// pytorch: the archive torch.save writes (folder named after the file's
/// stem, `data.pkl` holding an OrderedDict of `_rebuild_tensor_v2` calls,
/// `data/<key>` records aligned to 64 bytes, `byteorder`, `version`).
/// Tensors that share a storage keep sharing it (one record; each view its
/// own offset and strides). Dtypes without a typed storage class (uint16/32/
/// 64, float8, complex32) use UntypedStorage and `_rebuild_tensor_v3`, as
/// torch 2.1+ writes them; only torch 2.1 or newer loads those tensors. The catalogue's non-tensor
/// values and metadata are not written: the file is a flat state dict.
///
/// Streaming: the header (or pickle) is written from shapes and dtypes
/// alone, then one tensor (or storage) at a time; a non-contiguous view is
/// copied to C order first, a lazy tensor (a cast from `transform`) is made
/// just then. Pass the catalogue by `std::move`: the writer then releases
/// each tensor once written, so peak memory stays near the largest tensor.
/// A catalogue the caller keeps alive keeps every lazily made tensor alive.
///
/// A record layout (`is_record`): as `write_record` writes the catalogue
/// (`keep_tree`: its whole object), one file, its tensors whole.
///
/// Every file is written with `AtomicFile`: an error leaves the previous
/// files untouched (shards and index are committed together at the end,
/// the index last). After a successful save, shards named like this
/// save's (`<stem>-NNNNN-of-MMMMM<ext>`) that it did not write, and the
/// index `<path>.index.json` when it wrote a single file, are deleted: they
/// are leftovers of an earlier save of `path` (as save_pretrained does).
///
/// \throws Error(invalid_argument) for names that are not UTF-8 or collide
/// with safetensors' `__metadata__`; Error(io) when writing fails; the
/// reader's errors when a lazy tensor fails to load.
SaveResult save(TensorCatalog catalog, const std::filesystem::path& path, SaveFormat format,
                const SaveOptions& options = {});

/// Writes `catalog`'s tensors to the open descriptor `fd` (standard output,
/// a pipe) as one safetensors file, in order, as `save` writes it; `name`
/// names the stream in errors. Not atomic: a failure leaves what was
/// written. \throws Error(unsupported) for SaveFormat::pytorch (its zip is
/// patched after each entry, which a stream cannot do) and the records,
/// Error(invalid_argument) with a `max_shard_size`; else as `save`.
SaveResult save_stream(TensorCatalog catalog, int fd, const std::string& name, SaveFormat format,
                       const SaveOptions& options = {});

/// Parses a size as Hugging Face's `max_shard_size` does: a number of
/// bytes with an optional unit, decimal (`kB`, `MB`, `GB`, `TB`: powers of
/// 1000) or binary (`KiB`, `MiB`, `GiB`, `TiB`: powers of 1024), case-
/// insensitive, fractions allowed ("1.5GB"). \throws Error(invalid_argument)
/// naming the text for anything else, zero, or a size past 2^63.
std::uint64_t parse_byte_size(std::string_view text);

}  // namespace torchport
