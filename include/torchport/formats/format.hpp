#pragma once
/// \file
/// The formats `open()` reads, as a type, with the names files and reports
/// use for them.

#include <optional>
#include <string_view>

#include "torchport/io/source.hpp"

namespace torchport {

/// A checkpoint format. The order is torch.load's for the formats torch
/// reads (zip, TorchScript, tar, legacy pickle), then ours.
enum class Format {
  pytorch_zip,          ///< torch.save's zip archive (1.6+): "pytorch-zip"
  torchscript,          ///< torch.jit.save's zip archive (weights only): "torchscript"
  pytorch_tar,          ///< the tar of the first torch releases: "pytorch-tar"
  pytorch_legacy,       ///< stacked legacy pickles (`_use_new_zipfile_serialization=False`):
                        ///< "pytorch-legacy"
  pickle,               ///< one plain pickle without torch's magic number: "pickle"
  safetensors,          ///< a safetensors file: "safetensors"
  numpy,                ///< numpy's .npy array or .npz archive of them: "numpy"
  sharded_safetensors,  ///< a sharded checkpoint of safetensors shards (a path):
                        ///< "sharded-safetensors"
  sharded_pytorch,      ///< a sharded checkpoint with PyTorch shards (a path): "sharded-pytorch"
  dcp,                  ///< a torch.distributed.checkpoint folder (a path): "dcp"
  dcp_safetensors,      ///< torch.distributed.checkpoint's Hugging Face storage shards, a
                        ///< folder of safetensors with DCP_SHARDING_INFO (a path):
                        ///< "dcp-safetensors"
  torch_export,      ///< torch.export.save's .pt2 archive (weights and constants): "torch-export"
  torchport_record,  ///< one of our records: "torchport" ("torchport-mpk", "-json", "-bin", each
                     ///< maybe ".gz")
  value,             ///< tensors made in memory in torchport's layout (a value tree, a
                     ///< module's record): "value"
  state_dict,        ///< tensors made in memory in PyTorch's layout (a module's state_dict,
                     ///< tensors a program names): "state-dict"
};

/// The format's name, as catalogues, `inspect` and `scan` print it.
std::string_view format_name(Format format) noexcept;

/// The format a name stands for: every `format_name`, the record names
/// ("torchport-mpk", "torchport-json", "torchport-bin", with or without
/// ".gz"), or nullopt.
std::optional<Format> parse_format(std::string_view name) noexcept;

/// `parse_format`, for a name a user gave. \throws Error(invalid_argument)
/// naming the formats there are, when it names none.
Format format_from_name(std::string_view name);

/// True for a sharded checkpoint's formats (read from a path, not bytes).
bool is_sharded(Format format) noexcept;

/// True when a catalogue of this format holds tensors in torchport's own
/// layout (our records and in-memory value trees) rather than PyTorch's, so
/// loading it applies no PyTorch adapter.
bool has_torchport_layout(Format format) noexcept;

/// The container format of `source` from its first bytes, in torch.load's
/// order (zip, then a tar as Python's tarfile opens it, then ours and the
/// pickle), without reading it and without deciding ambiguities (`open()`
/// does both); nullopt when none fits. Never throws.
std::optional<Format> sniff(const Source& source) noexcept;

}  // namespace torchport
