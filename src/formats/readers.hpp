#pragma once
// The format readers behind `open()`. Each turns a `Source` into a
// `TensorCatalog`; `open()` picks one by sniffing.

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

}  // namespace torchport::formats
