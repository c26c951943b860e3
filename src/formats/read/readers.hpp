#pragma once
// The format readers behind `open()`. Each turns a `Source` into a
// `TensorCatalog`; `open()` picks one by sniffing.

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "formats/read/walk.hpp"
#include "io/zip.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"

namespace torchport::formats {

/// torch.save zip archives (1.6+), whole pickled modules, and TorchScript
/// archives (`constants.pkl` present; `code/` is never read).
TensorCatalog read_pytorch_zip(const Source& source, const OpenOptions& options, Walker& walker);
/// Legacy stacked pickles (`_use_new_zipfile_serialization=False`); a file
/// that is one plain pickle (no torch magic) reads as format "pickle".
TensorCatalog read_pytorch_legacy(const Source& source, const OpenOptions& options, Walker& walker);
/// The sweeps (`formats::sweep`) of the zip and the legacy rows: every
/// local header of a zip, front to back (pytorch_zip.cpp); the whole file
/// as one pickle stream (pytorch_legacy.cpp).
void sweep_zip(const Source& source, const OpenOptions& options, Walker& walker);
void sweep_pickle_stream(const Source& source, const OpenOptions& options, Walker& walker);
/// The tar format of the first torch releases.
TensorCatalog read_pytorch_tar(const Source& source, const OpenOptions& options, Walker& walker);
/// safetensors: tensors are zero-copy views of the mapped data (copied when
/// misaligned for their dtype); `__metadata__` becomes the catalogue's metadata.
TensorCatalog read_safetensors(const Source& source, const OpenOptions& options, Walker& walker);
/// A Hugging Face sharded checkpoint: `path` is its `*.index.json` or a
/// directory holding exactly one. Every shard is mapped and its directory
/// read (tensors stay lazy views); format "sharded-safetensors" when every
/// shard is safetensors, else "sharded-pytorch".
/// Reads a Hugging Face shard index from `index` (its JSON) and the shards
/// it names, each opened by `open_shard` (a plain file name beside it).
TensorCatalog read_shard_index(const Source& index,
                               const std::function<Source(const std::string&)>& open_shard,
                               const OpenOptions& options, Walker& walker);
/// Reads a DCP checkpoint (.metadata and the files it names) whose files
/// `open_file` opens by name.
TensorCatalog read_dcp_files(const std::function<Source(const std::string&)>& open_file,
                             const std::string& where, const OpenOptions& options, Walker& walker);
/// Reads a checkpoint by URL through `OpenOptions::remote`: a file, a shard
/// index (`*.index.json`), or a folder (a URL ending in `/`: a DCP folder by
/// its `.metadata`, else a model folder by its index or weights file).
TensorCatalog read_url(const std::string& url, const OpenOptions& options, Walker& walker);
TensorCatalog read_sharded(const std::filesystem::path& path, const OpenOptions& options,
                           Walker& walker);
/// numpy's own files, as np.load reads them: an .npy array (a tensor; an
/// array of objects is a pickle, walked and kept inert), or an .npz zip of
/// them (each named as np.load names it).
TensorCatalog read_numpy(const Source& source, const OpenOptions& options, Walker& walker);
/// True when every member of a (non-empty) zip is an .npy file: an .npz.
bool is_npz(const ZipArchive& zip);
/// The arrays of an .npz.
TensorCatalog read_npz(const ZipArchive& zip, const OpenOptions& options, Walker& walker);
/// The format of a checkpoint read from a path rather than from its bytes
/// (decided in registry.cpp, with the readers' rows): a folder holding a
/// `.metadata` (or that file) is `dcp`; a folder holding an `*.index.json`
/// (or that file) `sharded_safetensors` (read_sharded tells safetensors
/// from PyTorch shards); a folder holding neither whose `*.safetensors`
/// carry DCP_SHARDING_INFO `dcp_safetensors`; any other folder
/// `sharded_safetensors` (whose reader says it has no index); nullopt for
/// a file read by its bytes.
/// \throws Error(ambiguous) for a folder holding both a `.metadata` and an
///         `*.index.json` (torch's FileSystemReader and transformers would
///         read different files).
std::optional<Format> path_format(const std::filesystem::path& path);
/// True for the formats read from a path: sharded checkpoints and DCP
/// folders.
bool read_from_path(Format format) noexcept;
/// A torch.export archive (.pt2): its serialized program's entry, or the
/// archive_format of later PT2 archives, at the top.
bool is_torch_export(const ZipArchive& zip);
TensorCatalog read_torch_export(const std::shared_ptr<const ZipArchive>& archive,
                                const OpenOptions& options, Walker& walker);
/// A torch.distributed.checkpoint folder (or its .metadata file).
TensorCatalog read_dcp(const std::filesystem::path& path, const OpenOptions& options,
                       Walker& walker);
/// A folder of torch.distributed.checkpoint's Hugging Face storage shards
/// (safetensors files carrying DCP_SHARDING_INFO), read as torch's
/// HuggingFaceStorageReader reads it: one catalogue of the global tensors.
TensorCatalog read_dcp_safetensors(const std::filesystem::path& path, const OpenOptions& options,
                                   Walker& walker);
/// A safetensors file's DCP_SHARDING_INFO (its `__metadata__` entry that
/// torch's HuggingFaceStorageWriter writes): each tensor's saved_offsets in
/// the global tensor; nullopt when absent or empty (torch reads such a file
/// as offsets of zero). \throws Error(corrupt) naming `where` when it is not
/// a JSON object of {"saved_offsets": [non-negative integers]}.
std::optional<std::map<std::string, Shape>> dcp_sharding_info(const TensorCatalog& cat,
                                                              const std::string& where,
                                                              const Limits& limits);
/// True for a folder holding a .metadata file, or that file itself
/// (decided in registry.cpp).
bool is_dcp_path(const std::filesystem::path& path);

}  // namespace torchport::formats
