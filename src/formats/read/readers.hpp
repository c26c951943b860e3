#pragma once
// The format readers behind `open()`. Each turns a `Source` into a
// `TensorCatalog`; `open()` picks one by sniffing.

#include <filesystem>
#include <memory>

#include "formats/read/walk.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"
#include "torchport/io/zip.hpp"

namespace torchport::formats {

/// torch.save zip archives (1.6+), whole pickled modules, and TorchScript
/// archives (`constants.pkl` present; `code/` is never read).
TensorCatalog read_pytorch_zip(const Source& source, const OpenOptions& options, Walker& walker);
/// Legacy stacked pickles (`_use_new_zipfile_serialization=False`); a file
/// that is one plain pickle (no torch magic) reads as format "pickle".
TensorCatalog read_pytorch_legacy(const Source& source, const OpenOptions& options, Walker& walker);
/// The tar format of the first torch releases.
TensorCatalog read_pytorch_tar(const Source& source, const OpenOptions& options, Walker& walker);
/// safetensors: tensors are zero-copy views of the mapped data (copied when
/// misaligned for their dtype); `__metadata__` becomes the catalogue's metadata.
TensorCatalog read_safetensors(const Source& source, const OpenOptions& options, Walker& walker);
/// A Hugging Face sharded checkpoint: `path` is its `*.index.json` or a
/// directory holding exactly one. Every shard is mapped and its directory
/// read (tensors stay lazy views); format "sharded-safetensors" when every
/// shard is safetensors, else "sharded-pytorch".
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
/// True when `open(path)` should read `path` as a sharded checkpoint: a
/// directory, or a file named `*.index.json`.
bool is_sharded_path(const std::filesystem::path& path);
/// A torch.export archive (.pt2): its serialized program's entry, or the
/// archive_format of later PT2 archives, at the top.
bool is_torch_export(const ZipArchive& zip);
TensorCatalog read_torch_export(const std::shared_ptr<const ZipArchive>& archive,
                                const OpenOptions& options, Walker& walker);
/// A torch.distributed.checkpoint folder (or its .metadata file).
TensorCatalog read_dcp(const std::filesystem::path& path, const OpenOptions& options,
                       Walker& walker);
/// True for a folder holding a .metadata file, or that file itself.
bool is_dcp_path(const std::filesystem::path& path);

}  // namespace torchport::formats
