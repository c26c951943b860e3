#pragma once
// The format readers behind `open()`. Each turns a `Source` into a
// `TensorCatalog`; `open()` picks one by sniffing.

#include <filesystem>

#include "torchport/formats/catalog.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"

namespace torchport::formats {

/// torch.save zip archives (1.6+), whole pickled modules, and TorchScript
/// archives (`constants.pkl` present; `code/` is never read).
TensorCatalog read_pytorch_zip(const Source& source, const OpenOptions& options);
/// Legacy stacked pickles (`_use_new_zipfile_serialization=False`); a file
/// that is one plain pickle (no torch magic) reads as format "pickle".
TensorCatalog read_pytorch_legacy(const Source& source, const OpenOptions& options);
/// The tar format of the first torch releases.
TensorCatalog read_pytorch_tar(const Source& source, const OpenOptions& options);
/// safetensors: tensors are zero-copy views of the mapped data (copied when
/// misaligned for their dtype); `__metadata__` becomes the catalogue's metadata.
TensorCatalog read_safetensors(const Source& source, const OpenOptions& options);
/// A Hugging Face sharded checkpoint: `path` is its `*.index.json` or a
/// directory holding exactly one. Every shard is mapped and its directory
/// read (tensors stay lazy views); format "sharded-safetensors" when every
/// shard is safetensors, else "sharded-pytorch".
TensorCatalog read_sharded(const std::filesystem::path& path, const OpenOptions& options);
/// True when `open(path)` should read `path` as a sharded checkpoint: a
/// directory, or a file named `*.index.json`.
bool is_sharded_path(const std::filesystem::path& path);

}  // namespace torchport::formats
