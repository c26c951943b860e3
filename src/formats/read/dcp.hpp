#pragma once
// What both layouts of torch.distributed.checkpoint (DCP) share: a tensor
// is chunks (offsets and sizes in the global tensor, per dimension), each
// one blob of a file in the checkpoint's folder. The .metadata layout
// (FileSystemWriter, dcp.cpp) keeps each chunk as a torch.save blob, maybe
// through stream transforms; the Hugging Face layout (HuggingFaceStorage-
// Writer, dcp_safetensors.cpp) as a tensor of a safetensors file. The chunk
// geometry is checked once here, and a tensor is assembled from its chunks
// when its bytes are first used (or a slice of it from the chunks the slice
// overlaps). Internal to the formats layer.

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/read/walk.hpp"
#include "torchport/core/error.hpp"
#include "torchport/core/tensor.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"

namespace torchport::formats::dcp {

/// Where a blob lies, and the stream transforms its bytes went through
/// (`_StorageInfo.transform_descriptors`, e.g. "stream.zstd/1"), in the
/// order torch's reader undoes them.
struct Blob {
  std::string file;  ///< a plain file name in the folder
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::vector<std::string> transforms;
};

/// One chunk of a tensor: its box in the global tensor and where its
/// elements are (a blob to unpickle, or a tensor already read).
struct Chunk {
  Shape offsets;
  Shape sizes;
  Blob blob;
  Tensor piece;  ///< defined: the chunk itself (a safetensors tensor)
};

/// A tensor as its chunks make it.
struct TensorPlan {
  DType dtype = DType::F32;
  Shape size;
  std::vector<Chunk> chunks;
};

/// The checkpoint's folder, shared by the reader and the tensors' loaders.
struct Folder {
  std::filesystem::path dir;
  std::filesystem::path root;  ///< the real folder files must lie in
  OpenOptions options;
  std::string where;  ///< what messages name (DIR/.metadata, or DIR)
  std::map<std::string, Source> files;
  /// Opens a file of the folder by name when set (a remote folder);
  /// else files are mapped from `dir`, confined to `root`.
  std::function<Source(const std::string&)> opener;

  [[noreturn]] void fail(ErrorCode code, const std::string& message,
                         const std::string& key = {}) const {
    throw Error(code, message, key, std::nullopt, where);
  }
  /// The mapped file `name` of the folder (a plain file name whose real
  /// path lies inside `root`), mapped once.
  const Source& file(const std::string& name, const std::string& key);
  /// A blob's bytes inside its file, as stored.
  /// \throws Error(corrupt) when it reaches past its file.
  Source raw(const Blob& b, const std::string& key);
  /// A blob's bytes inside its file, with its transforms undone (each
  /// bounded by Limits::max_inflate_bytes and max_inflate_ratio).
  /// \throws Error(corrupt) when it reaches past its file,
  ///         Error(unsupported) for a transform torchport does not know,
  ///         the decoder's error for a damaged stream.
  Source blob(const Blob& b, const std::string& key);
};

/// Checks a transform descriptor ("name[@domain]/version") is one torch's
/// ExtensionRegistry reads and torchport undoes: only "stream.zstd" of
/// version 1.x. \throws Error(unsupported) naming it otherwise.
void check_transform(const Folder& f, const std::string& descriptor, const std::string& key);

/// Chunks inside the tensor, not overlapping, covering it: what torch's
/// saver checks (_validate_global_plan) and its loaders do not.
/// \throws Error(corrupt), or Error(limit_exceeded) when checking would
///         take more comparisons than any sharding torch writes needs.
void check_chunks(const Folder& f, const TensorPlan& t, const std::string& fqn);

/// The chunk's own tensor (its blob unpickled, or its piece), checked to
/// be of the plan's dtype and the chunk's sizes.
Tensor chunk_tensor(Folder& f, const Chunk& c, DType dtype, const std::string& fqn, Walker& walker);

/// The tensor the plan's (checked) chunks make, assembled when its bytes
/// are first used; a slice reads only the chunks it overlaps. `f` is kept
/// alive by the tensor.
Tensor lazy_tensor(const std::shared_ptr<Folder>& f, TensorPlan plan, const std::string& fqn);

}  // namespace torchport::formats::dcp
