#pragma once
// The one shard resolver: where the files of a checkpoint folder may be,
// as `open()` reads a sharded checkpoint's shards and `scan()` walks a
// folder. Internal to the formats layer (sharded.cpp).

#include <filesystem>
#include <string>

namespace torchport::formats {

/// The folder every file of the checkpoint in `dir` must really lie in:
/// `dir` itself, or, when it is a snapshot of the Hugging Face hub cache
/// (`models--org--name/snapshots/<revision>/`, whose files are symlinks to
/// `../../blobs/<hash>`), the repository's cache folder that holds both.
/// \throws Error(io) when `dir` cannot be resolved.
std::filesystem::path shard_root(const std::filesystem::path& dir);

/// The real path of `path`, which must lie inside `root` (a `shard_root`)
/// and be a regular file (a directory with `directory`): a symlink may not
/// lead a reader out of the checkpoint (to /etc/passwd, another user's
/// file), a FIFO would block it, a device is no checkpoint. Nothing of a
/// file outside is read, nor quoted in the error.
/// \throws Error(io) when it cannot be resolved, Error(invalid_argument)
///         when it lies outside or is of another type.
std::filesystem::path resolve_inside(const std::filesystem::path& root,
                                     const std::filesystem::path& path, bool directory = false);

/// True for a name a checkpoint's table of contents (an index, a DCP
/// .metadata) may give a file of its own folder: not empty, `.` or `..`,
/// without `/`, `\` or NUL.
bool plain_file_name(const std::string& name);

/// `resolve_inside(root, dir / shard)`, for a shard the index names.
std::filesystem::path resolve_shard(const std::filesystem::path& root,
                                    const std::filesystem::path& dir, const std::string& shard);

}  // namespace torchport::formats
