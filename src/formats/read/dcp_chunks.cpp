// The chunks of a distributed checkpoint's tensors, as both its layouts
// keep them (dcp.hpp): their geometry checked, their blobs read (stream
// transforms undone), the tensor assembled from them when first used.

#include "formats/read/dcp.hpp"

#include <algorithm>
#include <cstring>

#include "formats/read/readers.hpp"
#include "formats/read/shards.hpp"
#include "io/compression.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport::formats::dcp {

namespace fs = std::filesystem;

const Source& Folder::file(const std::string& name, const std::string& key) {
  if (auto it = files.find(name); it != files.end()) return it->second;
  if (!plain_file_name(name))
    fail(ErrorCode::corrupt,
         "storage file '" + name +
             "' is not a plain file name: a checkpoint may only name files in its own folder",
         key);
  Source s;
  try {
    s = opener ? opener(name) : Source::map_file(resolve_inside(root, dir / name), options.map);
  } catch (const Error& e) {
    fail(e.code(), "storage file '" + name + "': " + e.message(), key);
  }
  return files.emplace(name, std::move(s)).first->second;
}

void check_transform(const Folder& f, const std::string& descriptor, const std::string& key) {
  // torch's ExtensionRegistry.from_descriptor_list: the name before the
  // first '/', the version after it; ZStandard.from_descriptor reads any
  // version whose part before the first '.' is "1".
  const std::size_t slash = descriptor.find('/');
  const std::string name = descriptor.substr(0, slash);
  const std::string version = slash == std::string::npos ? "" : descriptor.substr(slash + 1);
  if (name != "stream.zstd")
    f.fail(ErrorCode::unsupported,
           "its data went through the stream transform '" + descriptor +
               "', which torchport does not undo (it reads 'stream.zstd/1' only)",
           key);
  if (version.substr(0, version.find('.')) != "1")
    f.fail(ErrorCode::unsupported,
           "its data went through the stream transform '" + descriptor +
               "', a version of stream.zstd torch's ZStandard extension does not read (it reads "
               "version 1)",
           key);
}

Source Folder::raw(const Blob& b, const std::string& key) {
  const Source& f = file(b.file, key);
  std::uint64_t end;
  if (!detail::add_ok(b.offset, b.length, end) || end > f.size())
    fail(ErrorCode::corrupt,
         "its data is at bytes " + std::to_string(b.offset) + ".." + std::to_string(end) + " of '" +
             b.file + "', which has " + std::to_string(f.size()) +
             " bytes; truncated or tampered checkpoint?",
         key);
  return f.slice(b.offset, b.length, f.name() + "@" + std::to_string(b.offset));
}

Source Folder::blob(const Blob& b, const std::string& key) {
  Source s = raw(b, key);
  // torch's FileSystemReader undoes the transforms in the order listed
  // (_StorageReaderTransforms.transform_load_stream), reading each whole.
  for (const std::string& t : b.transforms) {
    check_transform(*this, t, key);
    const std::uint64_t n = s.size();
    // A compressed blob is read whole (it is decoded whole).
    Decompressed d =
        decompress(Compression::zstd, s.fetch(0, n).bytes(), inflate_cap(n, options.limits),
                   inflate_cap_reason(n, options.limits), s.name());
    if (d.error)
      throw Error(d.error->code(),
                  "its " + t + " data (" + std::to_string(n) + " bytes at " +
                      std::to_string(b.offset) + " of '" + b.file + "'): " + d.error->message(),
                  key, b.offset + d.error->offset().value_or(0), where);
    s = Source::from_buffer(std::move(d.bytes), s.name() + "!zstd");
  }
  return s;
}

void check_chunks(const Folder& f, const TensorPlan& t, const std::string& fqn) {
  const std::int64_t numel = shape_numel(t.size);
  if (t.size.empty()) {
    if (t.chunks.size() != 1 || !t.chunks[0].offsets.empty() || !t.chunks[0].sizes.empty())
      f.fail(ErrorCode::corrupt, "a 0-d tensor must be one chunk without offsets", fqn);
    return;
  }
  std::int64_t covered = 0;
  std::vector<std::size_t> nonempty;
  for (std::size_t i = 0; i < t.chunks.size(); ++i) {
    const Chunk& c = t.chunks[i];
    if (c.offsets.size() != t.size.size() || c.sizes.size() != t.size.size())
      f.fail(ErrorCode::corrupt,
             "chunk " + std::to_string(i) + " has offsets " + shape_to_string(c.offsets) +
                 " and sizes " + shape_to_string(c.sizes) + " for a tensor of shape " +
                 shape_to_string(t.size),
             fqn);
    for (std::size_t d = 0; d < t.size.size(); ++d)
      if (c.offsets[d] > t.size[d] || c.sizes[d] > t.size[d] - c.offsets[d])
        f.fail(ErrorCode::corrupt,
               "chunk at offsets " + shape_to_string(c.offsets) + " of sizes " +
                   shape_to_string(c.sizes) + " reaches past the tensor's shape " +
                   shape_to_string(t.size),
               fqn);
    const std::int64_t volume = shape_numel(c.sizes);  // <= numel: inside the tensor
    if (!detail::add_ok(covered, volume, covered) || covered > numel)
      f.fail(ErrorCode::corrupt,
             "its chunks hold more elements than its " + std::to_string(numel) + " (they overlap)",
             fqn);
    if (volume > 0) nonempty.push_back(i);
  }
  if (covered != numel)
    f.fail(ErrorCode::corrupt,
           "its chunks cover " + std::to_string(covered) + " of its " + std::to_string(numel) +
               " elements (torch would leave the rest uninitialized)",
           fqn);
  // No two overlap, found by a sweep along the dimension with the most
  // distinct offsets: a chunk is compared only with those still open
  // along it (a row or column sharding compares each with none or few),
  // within a budget of comparisons real shardings stay far below.
  std::size_t sweep = 0, most = 0;
  for (std::size_t d = 0; d < t.size.size(); ++d) {
    std::vector<std::int64_t> at;
    at.reserve(nonempty.size());
    for (const std::size_t i : nonempty) at.push_back(t.chunks[i].offsets[d]);
    std::sort(at.begin(), at.end());
    const auto distinct = static_cast<std::size_t>(std::unique(at.begin(), at.end()) - at.begin());
    if (distinct > most) {
      most = distinct;
      sweep = d;
    }
  }
  std::sort(nonempty.begin(), nonempty.end(), [&](std::size_t a, std::size_t b) {
    return t.chunks[a].offsets[sweep] < t.chunks[b].offsets[sweep];
  });
  const std::uint64_t budget = 64 * std::uint64_t{nonempty.size()} + (std::uint64_t{1} << 20);
  std::uint64_t work = 0;
  std::vector<std::size_t> open;
  for (const std::size_t i : nonempty) {
    const Chunk& c = t.chunks[i];
    work += open.size();
    if (work > budget)
      f.fail(ErrorCode::limit_exceeded,
             "checking that its " + std::to_string(nonempty.size()) +
                 " chunks do not overlap takes more than " + std::to_string(budget) +
                 " comparisons (no sharding torch writes needs that many)",
             fqn);
    std::erase_if(open, [&](std::size_t j) {
      return t.chunks[j].offsets[sweep] + t.chunks[j].sizes[sweep] <= c.offsets[sweep];
    });
    for (const std::size_t j : open) {
      const Chunk& o = t.chunks[j];
      bool meet = true;
      for (std::size_t d = 0; meet && d < t.size.size(); ++d)
        meet = c.offsets[d] < o.offsets[d] + o.sizes[d] && o.offsets[d] < c.offsets[d] + c.sizes[d];
      if (meet)
        f.fail(ErrorCode::corrupt,
               "chunks at offsets " + shape_to_string(o.offsets) + " and " +
                   shape_to_string(c.offsets) + " overlap (torch would keep the later one)",
               fqn);
    }
    open.push_back(i);
  }
}

Tensor chunk_tensor(Folder& f, const Chunk& c, DType dtype, const std::string& fqn,
                    Walker& walker) {
  if (c.piece.defined()) {
    if (c.piece.dtype() != dtype || c.piece.shape() != c.sizes)
      f.fail(ErrorCode::corrupt,
             "its chunk at " + shape_to_string(c.offsets) + " in '" + c.blob.file + "' is a " +
                 std::string(dtype_name(c.piece.dtype())) + shape_to_string(c.piece.shape()) +
                 " tensor, not " + std::string(dtype_name(dtype)) + shape_to_string(c.sizes),
             fqn);
    return c.piece;
  }
  const Source blob = f.blob(c.blob, fqn);
  OpenOptions o = f.options;
  o.format.reset();
  walker.enter(c.blob.file);
  TensorCatalog cat;
  try {
    cat = read_pytorch_zip(blob, o, walker);
  } catch (...) {
    walker.leave();
    throw;
  }
  walker.leave();
  const Value& root = cat.root();
  if (!root.is(Value::Kind::Tensor))
    f.fail(ErrorCode::corrupt,
           "the blob of its chunk at " + shape_to_string(c.offsets) + " holds " + root.repr(2) +
               ", not a tensor",
           fqn);
  const Tensor& t = root.as_tensor();
  if (t.dtype() != dtype || t.shape() != c.sizes)
    f.fail(ErrorCode::corrupt,
           "the blob of its chunk at " + shape_to_string(c.offsets) + " holds a " +
               std::string(dtype_name(t.dtype())) + shape_to_string(t.shape()) + " tensor, not " +
               std::string(dtype_name(dtype)) + shape_to_string(c.sizes),
           fqn);
  return t;
}

namespace {

// Copies a contiguous chunk into its box of the contiguous output.
void place(std::byte* out, const Shape& size, const Chunk& c, const std::byte* in,
           std::size_t elem) {
  const std::size_t n = size.size();
  if (n == 0) {
    std::memcpy(out, in, elem);
    return;
  }
  const Shape stride = contiguous_strides(size);
  const std::size_t row = static_cast<std::size_t>(c.sizes[n - 1]) * elem;
  Shape at(n, 0);  // index within the chunk, last dimension excluded
  const std::int64_t rows = shape_numel(c.sizes) / std::max<std::int64_t>(c.sizes[n - 1], 1);
  if (shape_numel(c.sizes) == 0) return;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t pos = c.offsets[n - 1];
    for (std::size_t d = 0; d + 1 < n; ++d) pos += (c.offsets[d] + at[d]) * stride[d];
    std::memcpy(out + static_cast<std::size_t>(pos) * elem, in, row);
    in += row;
    for (std::size_t d = n - 1; d-- > 0;) {
      if (++at[d] < c.sizes[d]) break;
      at[d] = 0;
    }
  }
}

// Reads a slice from the chunks it overlaps only (a tensor-parallel rank's
// part), placing each overlap where it falls in the slice.
class ChunkSlicer final : public TensorSlicer {
 public:
  ChunkSlicer(std::shared_ptr<Folder> f, std::shared_ptr<const TensorPlan> plan, std::string fqn)
      : f_(std::move(f)), plan_(std::move(plan)), fqn_(std::move(fqn)) {}

  Tensor read(std::size_t dim, std::span<const std::pair<std::int64_t, std::int64_t>> ranges,
              const std::function<void(std::uint64_t)>& count) const override {
    const TensorPlan& p = *plan_;
    Shape shape = p.size;
    std::int64_t total = 0;
    for (const auto& r : ranges) total += r.second;
    shape[dim] = total;
    Tensor out = Tensor::empty(p.dtype, shape);
    LoadWalker walker(f_->options);
    for (const Chunk& c : p.chunks) {
      if (shape_numel(c.sizes) == 0) continue;
      Tensor blob;
      std::int64_t at = 0;  // where the range starts in the slice
      for (const auto& [start, length] : ranges) {
        const std::int64_t lo = std::max(start, c.offsets[dim]);
        const std::int64_t hi = std::min(start + length, c.offsets[dim] + c.sizes[dim]);
        if (lo < hi) {
          if (!blob.defined()) {
            blob = chunk_tensor(*f_, c, p.dtype, fqn_, walker);
            count(c.piece.defined() ? c.piece.nbytes() : c.blob.length);
          }
          const Tensor piece =
              blob.narrow(static_cast<std::int64_t>(dim), lo - c.offsets[dim], hi - lo)
                  .contiguous();
          Chunk box{c.offsets, c.sizes, c.blob, {}};
          box.offsets[dim] = at + (lo - start);
          box.sizes[dim] = hi - lo;
          place(out.mutable_bytes().data(), shape, box, piece.bytes().data(), dtype_size(p.dtype));
        }
        at += length;
      }
    }
    return out;
  }

 private:
  std::shared_ptr<Folder> f_;
  std::shared_ptr<const TensorPlan> plan_;
  std::string fqn_;
};

}  // namespace

Tensor lazy_tensor(const std::shared_ptr<Folder>& f, TensorPlan plan, const std::string& fqn) {
  std::uint64_t nbytes;
  if (!detail::mul_ok(static_cast<std::uint64_t>(shape_numel(plan.size)), dtype_size(plan.dtype),
                      nbytes))
    f->fail(ErrorCode::corrupt, "shape " + shape_to_string(plan.size) + " is too large", fqn);
  Shape size = plan.size;
  const DType dtype = plan.dtype;
  auto shared = std::make_shared<const TensorPlan>(std::move(plan));
  auto storage = Storage::deferred(nbytes, [f, shared, fqn, nbytes] {
    auto out = Storage::allocate(nbytes);
    LoadWalker walker(f->options);
    for (const Chunk& c : shared->chunks) {
      const Tensor t = chunk_tensor(*f, c, shared->dtype, fqn, walker).contiguous();
      place(out->mutable_bytes().data(), shared->size, c, t.bytes().data(),
            dtype_size(shared->dtype));
    }
    return out;
  });
  Shape strides = contiguous_strides(size);
  return Tensor(dtype, std::move(size), std::move(strides), 0, std::move(storage))
      .with_slicer(std::make_shared<ChunkSlicer>(f, std::move(shared), fqn));
}

}  // namespace torchport::formats::dcp
