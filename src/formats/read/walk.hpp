#pragma once
// The walk: what a reader meets as it reads a file, told to a `Walker` in
// the order the reader meets it. Every reader is written once, over this
// interface, and has two consumers: `open()` (a `LoadWalker`: each pickle
// runs under the global policy, everything else is ignored) and `scan()`
// (its walker judges every pickle and every part a Python loader could
// unpickle). Neither parses a byte the other does not see: the scanner
// reads no format on its own. Internal to the formats layer.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "io/byte_reader.hpp"
#include "pickle/unpickler.hpp"
#include "torchport/core/error.hpp"
#include "torchport/core/value.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"

namespace torchport::formats {

/// What a part of a file is to the reader that met it.
enum class PartRole {
  /// A record the reader goes on to read (a zip's pickles, an .npz's
  /// arrays): what it holds follows, through `pickle()` and `part()`.
  read,
  /// Raw tensor (storage) bytes: never unpickled by any loader of the
  /// format.
  tensor_data,
  /// A record that holds code a loader compiles or imports (TorchScript's
  /// `code/`, the `.py` files of a torch.package archive): never read.
  code,
  /// A record the reader reads as text or JSON (a version, a byte order, a
  /// header, an index): no pickle.
  metadata,
  /// A member of an archive that the format does not read (its bytes are
  /// judged by their content: another archive, a pickle, a text).
  member,
  /// Bytes after the last pickle of a stream that a loader reading pickle
  /// after pickle (`pickle.load` in a loop) would go on reading.
  stream,
};

/// A part's bytes as far as they could be read, and why the reading
/// stopped before their end (a decoder's damage, a method it lacks, a
/// limit), for a part a sweep decodes: what decoded is judged too.
struct PartBytes {
  PartBytes() = default;
  PartBytes(Source whole) : bytes(std::move(whole)) {}  // NOLINT: every byte read
  PartBytes(Source some, std::optional<Error> why, std::string decoding)
      : bytes(std::move(some)), stopped(std::move(why)), what(std::move(decoding)) {}
  Source bytes;
  std::optional<Error> stopped;  ///< empty when every byte was read
  std::string what;              ///< what was being decoded ("deflate data"), with `stopped`
};

/// A part of a file, as its reader meets it.
struct Part {
  PartRole role = PartRole::member;
  std::string name;          ///< as the file names it ("archive/data.pkl", "storages", ...)
  std::uint64_t offset = 0;  ///< its first byte in the file (of its stored bytes)
  std::uint64_t size = 0;    ///< its stored bytes
  std::uint16_t method = 0;  ///< how a zip member is stored (0 stored, 8 deflated, ...)
  /// Its bytes, inflated when compressed (set for members and streams).
  /// \throws Error when they cannot be read (damaged, past a limit).
  std::function<PartBytes()> bytes;
  /// Met by a sweep (`sweep`), after the reading stopped: a part the
  /// reading already met at the same offset is not met again.
  bool swept = false;
  /// Stored encrypted (a zip entry's flag): what a loader with the password
  /// reads cannot be judged from these bytes.
  bool encrypted = false;
  /// A member a loader hands to torch.load as a file object (torch.export
  /// reads a .pt2's pickled payloads and example inputs from io.BytesIO):
  /// judged as `read_as_torch_load` reads it, not by its content.
  bool torch_load = false;
};

/// The consumer of a walk.
class Walker {
 public:
  virtual ~Walker() = default;
  /// True when the walker wants `part()` calls (a scanner); a reader may
  /// skip the work of naming parts when it does not.
  virtual bool lists_parts() const noexcept { return false; }
  /// A part the reader met (only when `lists_parts()`).
  virtual void part(Part part) { (void)part; }
  /// Runs one pickle the reader unpickles, named `name` ("data.pkl",
  /// "legacy:object", ...), whose first opcode `start` is at: `run` is the
  /// VM with the reader's own hooks, filling `stats` as it goes (also when
  /// it throws). Returns the pickle's value; throws what `run` throws, or
  /// what the walker's policy refuses.
  virtual Value pickle(std::string_view name, const ByteReader& start, pickle::Stats& stats,
                       const std::function<Value()>& run) = 0;
  /// The reader goes into a file inside the one it reads (a shard), whose
  /// parts and pickles follow until `leave()`.
  virtual void enter(std::string_view file) { (void)file; }
  virtual void leave() {}
};

/// `open()`'s walker: runs each pickle and applies the global policy to what
/// it referenced (`OpenOptions::allow_unknown_globals`, `allow`; a
/// known-dangerous global is always refused), also when the pickle broke
/// after naming it: the global is what the user must hear about.
class LoadWalker final : public Walker {
 public:
  /// \throws Error(invalid_argument) for an unknown profile.
  explicit LoadWalker(const OpenOptions& options) : options_(options) {
    pickle::validate_profiles(options.profiles);
  }
  Value pickle(std::string_view name, const ByteReader& start, pickle::Stats& stats,
               const std::function<Value()>& run) override;

 private:
  const OpenOptions& options_;
};

/// Applies the global policy to what a pickle referenced: a dangerous global
/// is an Error(unsafe_global); an unknown one too unless allowed.
void check_globals(const pickle::Stats& stats, const OpenOptions& options, std::string_view where);

/// Reads `source` as `open()` does (the dispatch in torch.load's order and
/// the refusal of what two readers would read), telling `walker` what each
/// reader meets.
TensorCatalog walk(const Source& source, const OpenOptions& options, Walker& walker);

/// Tells `walker` what a loader more lenient than the reader of `format`
/// still reaches in `source` once that reader stopped (refused the file),
/// as swept parts: a zip's entries by their local headers, front to back,
/// as a reader that ignores the central directory finds them; a legacy
/// file or a pickle as one stream, pickle after pickle from its first
/// byte. Nothing for the other formats, whose readers tell every part as
/// they meet it. Only for a walker that lists parts.
void sweep(const Source& source, Format format, const OpenOptions& options, Walker& walker);

/// Reads a sharded checkpoint (`read_sharded`), telling `walker` what each
/// shard's reader meets between `enter(shard)` and `leave()`.
TensorCatalog walk_sharded(const std::filesystem::path& path, const OpenOptions& options,
                           Walker& walker);

}  // namespace torchport::formats
