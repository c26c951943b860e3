// torch.save's zip format (torch/serialization.py `_save`/`_load`, and
// caffe2/serialize/inline_container.cc for the archive layout): every record
// lives under one top-level folder (the archive name), `data.pkl` is the
// pickled object, tensor storages are `data/<key>` records, and
// `version` (or `.data/version`) is the archive's format version, which
// every torch reader checks. torch 2.x adds `byteorder` (how storage bytes
// are ordered; 2.x byte-swaps "big" files, 1.13 predates the record),
// `.format_version` and `.storage_alignment` (how its writer ordered and
// aligned the storage records: our reader takes each record where the
// directory says it is, so any alignment reads), and `.data/serialization_id`
// (an identifier of the save). TorchScript archives (torch.jit.save) add
// `constants.pkl` with storages under `constants/` and `code/`, which we
// never read.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "formats/read/readers.hpp"
#include "formats/read/registry.hpp"
#include "formats/read/torch_common.hpp"
#include "io/byte_reader.hpp"
#include "io/compression.hpp"
#include "io/zip.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport::formats {
namespace {

struct Archive {
  ZipArchive zip;
  std::string prefix;  // "name/" or "" for an archive without a folder
  bool big_endian = false;
  // torch.save names its storages 0, 1, ... under data/: when every record
  // there is stored and so named, this table (24 bytes a record) finds
  // them, and the directory (about 140 bytes an entry) goes before the
  // pickle runs. Empty otherwise: the directory finds them.
  struct Record {
    std::uint64_t data_offset = 0, size = 0;
    bool present = false;
    bool reserved = false;  // see reserved_record()
  };
  std::vector<Record> numbered;
};

// A key as torch.save writes storage keys: a decimal number, no sign, no
// leading zero.
bool decimal_key(std::string_view s, std::size_t& out) {
  if (s.empty() || s.size() > 18 || (s.size() > 1 && s[0] == '0')) return false;
  out = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<std::size_t>(c - '0');
  }
  return true;
}

// A storage record torch.serialization.skip_data() made: torch 2.x's
// `write_record_metadata` reserves the record's bytes (its local header, its
// size, a data descriptor) but never writes them, and declares a CRC-32 of
// 0. Bytes of a non-empty record whose CRC-32 really is 0 are rare (one in
// 2^32) and are told apart when the bytes are asked for.
bool reserved_record(const ZipEntry& e) {
  return e.method == 0 && e.size > 0 && e.crc32 == 0;
}

// Fills `a.numbered` when the storage records allow it (see Archive).
void number_records(Archive& a) {
  const std::string dir = a.prefix + "data/";
  const auto& entries = a.zip.entries();
  std::vector<Archive::Record> table;
  for (const ZipEntry& e : entries) {
    const std::string_view rel = std::string_view(e.name).substr(a.prefix.size());
    const bool under = rel.size() >= 5 && (rel[0] | 0x20) == 'd' && (rel[1] | 0x20) == 'a' &&
                       (rel[2] | 0x20) == 't' && (rel[3] | 0x20) == 'a' && rel[4] == '/';
    if (!under) continue;
    std::size_t k = 0;
    // A spelling of data/ in other case, a compressed record, a key torch
    // does not write or a sparse numbering: the directory decides.
    if (!e.name.starts_with(dir) || e.method != 0 || !decimal_key(rel.substr(5), k) ||
        k >= entries.size())
      return;
    if (table.size() <= k) table.resize(k + 1);
    table[k] = {e.data_offset, e.size, true, reserved_record(e)};
  }
  a.numbered = std::move(table);
}

// The text of a record (its first `max` bytes).
std::string record_text(const ZipArchive& zip, const ZipEntry& e, std::size_t max) {
  const Source rec = zip.read(e);
  return std::string(reinterpret_cast<const char*>(rec.bytes().data()),
                     std::min<std::size_t>(rec.size(), max));
}

// torch's readers accept archive versions 1..10 (caffe2/serialize/versions.h:
// kMinSupportedFileFormatVersion, kMaxSupportedFileFormatVersion; torch.save
// writes 3, TorchScript up to 10).
constexpr std::uint64_t kMinVersion = 1, kMaxVersion = 10;

// The archive version as PyTorchStreamReader::init reads it: `.data/version`
// when present, else `version` (required), parsed as std::stoull parses
// (leading white space, an optional sign, decimal digits, anything after
// them ignored; a minus negates modulo 2^64), then range-checked.
std::uint64_t archive_version(const ZipArchive& zip, const std::string& prefix,
                              const std::string& file) {
  const ZipEntry* e = zip.find(prefix + ".data/version");
  if (e == nullptr) e = zip.find(prefix + "version");
  if (e == nullptr)
    throw Error(ErrorCode::corrupt,
                "the archive has no '" + prefix + "version' record; torch's reader requires it", {},
                std::nullopt, file);
  // torch reads the record whole; it is parsed in place (never copied:
  // a record can be as large as the file).
  const Source rec = zip.read(*e);
  const auto text = rec.bytes();
  const auto at = [&](std::size_t k) { return static_cast<char>(text[k]); };
  std::size_t i = 0;
  while (i < text.size() && (at(i) == ' ' || (at(i) >= '\t' && at(i) <= '\r'))) ++i;
  bool negative = false;
  if (i < text.size() && (at(i) == '+' || at(i) == '-')) negative = at(i++) == '-';
  std::uint64_t v = 0;
  bool digits = false, overflow = false;
  for (; i < text.size() && at(i) >= '0' && at(i) <= '9'; ++i) {
    digits = true;
    const std::uint64_t d = static_cast<std::uint64_t>(at(i) - '0');
    if (v > (~std::uint64_t{0} - d) / 10) overflow = true;
    v = v * 10 + d;
  }
  const auto printable = [&] {
    std::string p;
    for (std::size_t k = 0; k < std::min<std::size_t>(text.size(), 32); ++k)
      p += (at(k) >= 0x20 && at(k) < 0x7f) ? at(k) : '?';
    return text.size() > 32 ? p + "..." : p;
  };
  if (!digits || overflow)
    throw Error(
        ErrorCode::corrupt,
        "the archive's version record '" + printable() + "' is not a version number torch reads",
        e->name, e->data_offset, file);
  if (negative) v = ~v + 1;
  if (v < kMinVersion || v > kMaxVersion)
    throw Error(v > kMaxVersion ? ErrorCode::unsupported : ErrorCode::corrupt,
                "the archive's format version is " + std::to_string(v) + "; torch reads versions " +
                    std::to_string(kMinVersion) + " to " + std::to_string(kMaxVersion),
                e->name, e->data_offset, file);
  return v;
}

// A record as a part, with its bytes (inflated and checked: size and
// CRC-32) where a scanner reads them: members and pickles by their content,
// deflated tensor data to check it (open() is lazy and would not see damage).
Part member_part(const std::shared_ptr<const Archive>& a, const ZipEntry& e, PartRole role) {
  Part p{role, e.name, e.data_offset, e.compressed_size, e.method, {}};
  if (role == PartRole::member || role == PartRole::read ||
      (role == PartRole::tensor_data && e.method != 0))
    p.bytes = [a, e] { return a->zip.read(e); };
  return p;
}

// Resolves storage references of one pickle to records under `dir`.
class StorageResolver {
 public:
  // `named` collects the records resolved, when a walker lists parts.
  StorageResolver(std::shared_ptr<const Archive> archive, const std::string& dir, Walker& walker,
                  std::vector<std::string>* named)
      : a_(std::move(archive)),
        name_(a_->prefix + dir),
        dir_len_(name_.size()),
        walker_(walker),
        named_(named),
        cache_(a_->numbered.empty() ? a_->zip.entries().size() : a_->numbered.size()) {}

  // The pickle being run, when it lies stored in a mapped file: the pages
  // it has left behind are dropped from the resident set as it goes.
  void reading(const Source& pickle, std::uint64_t file_offset) {
    if (pickle.file() == nullptr) return;
    pickle_ = pickle;
    begin_ = released_ = file_offset;
  }

  Value operator()(const Value& pid, std::uint64_t offset) {
    release_behind(offset);
    const StorageRef ref = parse_storage_ref(pid);
    // As torch's persistent_load (loaded_storages): the first reference to
    // a key builds its typed storage; later ones get that same storage,
    // whatever dtype and size they declare.
    // The cache keeps the storage, not its value: a value lives only as long
    // as the pickle holds it (a tensor built over it keeps the Storage).
    name_.resize(dir_len_);
    name_ += ref.key;
    const std::string& name = name_;
    const ZipEntry* e = nullptr;
    Cached* slot = nullptr;
    std::uint64_t data_offset = 0, size = 0;
    bool reserved = false;
    if (!a_->numbered.empty()) {
      std::size_t k = 0;
      if (decimal_key(ref.key, k) && k < a_->numbered.size() && a_->numbered[k].present) {
        slot = &cache_[k];
        data_offset = a_->numbered[k].data_offset;
        size = a_->numbered[k].size;
        reserved = a_->numbered[k].reserved;
      }
    } else if ((e = a_->zip.find(name)) != nullptr) {
      // torch's cache is by key; two keys find one record only when they
      // differ in case (the directory ignores it, as miniz does), and each
      // then builds its own storage, as in torch.
      slot = e->name == name ? &cache_[static_cast<std::size_t>(e - a_->zip.entries().data())]
                             : &other_case_[ref.key];
      data_offset = e->data_offset;
      size = e->size;
      reserved = reserved_record(*e);
    }
    if (slot == nullptr)
      throw Error(ErrorCode::corrupt, "the pickle refers to storage '" + ref.key +
                                          "' but the archive has no record '" + name +
                                          "'; truncated or corrupt archive?");
    Cached& cached = *slot;
    if (cached.storage)
      return storage_value(cached.dtype, cached.numel, cached.storage, cached.packed_bits);
    // The record must hold exactly what the pickle declares, as torch >=
    // 2.10 checks (get_storage_from_record: "record size ... does not match
    // expected size"). Before 2.10 torch built the storage of the declared
    // size over the record's bytes: a larger one reached past them (with a
    // SETITEM on its tensor, wrote past them: CVE-2026-24747), a smaller one
    // dropped the rest.
    if (size != ref.nbytes)
      throw Error(ErrorCode::corrupt,
                  "storage '" + ref.key + "' is declared as " + std::to_string(ref.numel) + " " +
                      std::string(dtype_name(ref.dtype)) + " elements (" +
                      std::to_string(ref.nbytes) + " bytes) but record '" +
                      (e != nullptr ? e->name : name) + "' has " + std::to_string(size) +
                      " bytes (torch >= 2.10 refuses it too: record size does not match "
                      "expected size); truncated or tampered file?",
                  {}, data_offset);
    if (named_ != nullptr && e != nullptr) {
      named_->push_back(e->name);
      walker_.part(member_part(a_, *e, PartRole::tensor_data));
    }
    std::shared_ptr<Storage> st;
    if (reserved) {
      st = reserved_storage(
          ZipEntry{e != nullptr ? e->name : name, 0, size, size, 0, 0, data_offset}, ref.dtype);
    } else if (e == nullptr || e->method == 0) {
      st = record_storage(a_->zip.source(), data_offset, size, ref.dtype, a_->big_endian);
    } else {
      auto archive = a_;
      const ZipEntry entry = *e;
      const DType dtype = ref.dtype;
      st = Storage::deferred(e->size, [archive, entry, dtype] {
        const Source inflated = archive->zip.read(entry);
        auto s = record_storage(inflated, 0, inflated.size(), dtype, archive->big_endian);
        s->bytes();
        return s;
      });
    }
    cached = Cached{st, ref.numel, ref.dtype, static_cast<std::uint8_t>(ref.packed_bits)};
    return storage_value(ref.dtype, ref.numel, std::move(st), ref.packed_bits);
  }

 private:
  // A record reserved by skip_data (reserved_record) holds no tensor bytes:
  // torch.load (mmap or not) gives whatever lies there, zeros unless a later
  // pass wrote them, and nothing in the file tells which. It is listed (its
  // pickle is whole), and its bytes are refused when asked for, naming
  // skip_data: never read as zeros. Bytes that do match the CRC-32 of 0 are
  // an ordinary record.
  std::shared_ptr<Storage> reserved_storage(const ZipEntry& record, DType dtype) const {
    return Storage::deferred(record.size, [archive = a_, record, dtype] {
      try {
        archive->zip.verify_crc(record);
      } catch (const Error& x) {
        if (x.code() != ErrorCode::corrupt) throw;
        throw Error(ErrorCode::unsupported,
                    "storage record of " + std::to_string(record.size) +
                        " bytes was reserved by torch.serialization.skip_data(), which writes "
                        "no tensor bytes (its CRC-32 is 0 and its bytes do not match it): the "
                        "file holds no data for this tensor (torch.load would give whatever "
                        "bytes lie there, zeros unless a later pass wrote them)",
                    record.name, record.data_offset, archive->zip.source().name());
      }
      auto st = record_storage(archive->zip.source(), record.data_offset, record.size, dtype,
                               archive->big_endian);
      (void)st->bytes();
      return st;
    });
  }

  // Torch's pickle names a storage for each tensor, front to back: what
  // lies more than 4 MiB behind (whole 2 MiB blocks, as FileBacking drops
  // them) is read and leaves the resident set (the page cache keeps it; a
  // later read faults it back in), so a file of many small tensors does not
  // hold all of its pickle beside the tree built from it.
  void release_behind(std::uint64_t offset) {
    constexpr std::uint64_t kBehind = 4u << 20, kStep = 8u << 20;
    if (pickle_.file() == nullptr || offset < released_ + kBehind + kStep) return;
    const std::byte* base = pickle_.bytes().data() - begin_;
    pickle_.file()->release(base + released_, base + offset - kBehind);
    released_ = offset - kBehind;
  }

  std::shared_ptr<const Archive> a_;
  Source pickle_;
  std::uint64_t begin_ = 0, released_ = 0;  // file offsets
  std::string name_;                        // "<archive>/<dir>", then the record's name
  std::size_t dir_len_;
  Walker& walker_;
  std::vector<std::string>* named_;
  // By directory entry: the typed storage its first reference built (a
  // vector, not a map by key: 32 bytes a record instead of a node and a key
  // string each, for files of many small tensors).
  struct Cached {
    std::shared_ptr<Storage> storage;
    std::uint64_t numel = 0;
    DType dtype = DType::U8;
    std::uint8_t packed_bits = 0;  // 0, or 4 or 2 (a packed quantized storage)
  };
  std::vector<Cached> cache_;
  detail::StringMap<Cached> other_case_;  // keys spelt unlike their record
};

Value read_pickle(const std::shared_ptr<const Archive>& a, const ZipEntry& entry,
                  const std::string& storage_dir, const OpenOptions& options, Walker& walker,
                  std::vector<std::string>* named) {
  if (entry.size > options.limits.max_pickle_bytes)
    throw Error(
        ErrorCode::limit_exceeded,
        "pickle of " + std::to_string(entry.size) + " bytes exceeds Limits::max_pickle_bytes", {},
        entry.data_offset, entry.name);
  const Source pkl = a->zip.read(entry);
  ByteReader r(pkl.bytes(), a->zip.source().name() + ":" + entry.name,
               entry.method == 0 ? entry.data_offset : 0);
  StorageResolver resolve(a, storage_dir, walker, named);
  if (entry.method == 0) resolve.reading(pkl, entry.data_offset);
  Value v = run_torch_pickle(walker, entry.name, r, options, std::ref(resolve));
  // The pickle is read once: its pages leave the resident set (the page
  // cache keeps them), so a file of many small tensors does not hold its
  // pickle in memory beside the catalogue built from it.
  if (entry.method == 0 && pkl.file())
    pkl.file()->release(pkl.bytes().data(), pkl.bytes().data() + pkl.size());
  // torch reads one pickle of the record; a loader reading on reads what follows.
  if (walker.lists_parts() && !r.at_end()) {
    const std::uint64_t at = r.pos(), n = r.remaining();
    walker.part({PartRole::stream, entry.name + " (after its pickle)", r.file_offset(), n, 0,
                 [pkl, at, n] { return pkl.slice(at, n, pkl.name()); }});
  }
  return v;
}

// A name's start and end as miniz compares names (zip_same_name), without
// a lowered copy: every record's kind is asked, and a checkpoint may hold
// 100,000 records.
bool starts_ci(std::string_view s, std::string_view lower_text) {
  return s.size() >= lower_text.size() && zip_same_name(s.substr(0, lower_text.size()), lower_text);
}
bool ends_ci(std::string_view s, std::string_view lower_text) {
  return s.size() >= lower_text.size() &&
         zip_same_name(s.substr(s.size() - lower_text.size()), lower_text);
}

// What a record is to torch's readers, by its path below the archive's
// folder, as miniz matches it (ignoring ASCII case).
enum class Kind { pickle, storage, code, metadata, other };

Kind record_kind(std::string_view all) {
  const auto slash = all.find('/');
  const std::string_view rel = slash == std::string_view::npos ? all : all.substr(slash + 1);
  if (starts_ci(rel, "data/") || starts_ci(rel, "constants/")) return Kind::storage;
  if (zip_same_name(rel, "data.pkl") || zip_same_name(rel, "constants.pkl")) return Kind::pickle;
  // TorchScript's code (and its debug pickles, which torch.jit.load reads
  // with the code), and the Python sources of a torch.package archive.
  if (starts_ci(rel, "code/") || ends_ci(all, ".py")) return Kind::code;
  if (zip_same_name(rel, "version") || zip_same_name(rel, "byteorder") ||
      zip_same_name(rel, ".format_version") || zip_same_name(rel, ".storage_alignment") ||
      starts_ci(rel, ".data/"))
    return Kind::metadata;
  return Kind::other;
}

}  // namespace

TensorCatalog read_pytorch_zip(const Source& source, const OpenOptions& options, Walker& walker) {
  auto archive = std::make_shared<Archive>();
  // Read as Python's zipfile reads it (np.load's .npz may hold bzip2 and
  // LZMA members); a torch checkpoint is then held to what miniz reads.
  archive->zip = ZipArchive::open(source, options.limits, ZipMethods::python);
  const auto& entries = archive->zip.entries();
  // Every record, before anything is checked: what torch never reads is
  // still there for any other reader of the zip. Storage records are
  // named as the pickles resolve them; those no pickle names, at the end.
  // What the zip holds is the registry's to say: numpy's .npz (a zip of
  // .npy arrays), torch.export.save's .pt2 (torch.save archives inside a
  // zip), else torch.save's own.
  switch (open_detail::zip_kind(archive->zip)) {
    case open_detail::ZipKind::npz:
      return read_npz(archive->zip, options, walker);
    case open_detail::ZipKind::torch_export:
      return read_torch_export(std::shared_ptr<const ZipArchive>(archive, &archive->zip), options,
                               walker);
    case open_detail::ZipKind::torch:
      break;
  }
  const bool parts = walker.lists_parts();
  if (parts)
    for (const ZipEntry& e : entries) switch (record_kind(e.name)) {
        case Kind::code:
          walker.part(member_part(archive, e, PartRole::code));
          break;
        case Kind::metadata:
          walker.part(member_part(archive, e, PartRole::metadata));
          break;
        case Kind::other:
          walker.part(member_part(archive, e, PartRole::member));
          break;
        case Kind::pickle:
          walker.part(member_part(archive, e, PartRole::read));
          break;
        case Kind::storage:
          break;
      }
  for (const ZipEntry& e : entries) {
    if (!zip_method_read(e.method, ZipMethods::torch))
      throw Error(ErrorCode::unsupported,
                  "compression method " + std::to_string(e.method) + " (" +
                      zip_method_name(e.method) +
                      "): torch's reader (miniz) reads only stored and deflate",
                  e.name, e.header_offset, source.name());
    if (zip_torch_refuses_archive(e))
      throw Error(ErrorCode::unsupported,
                  "the entry's local header is flagged as masked (general purpose bit 13, "
                  "central directory encryption), which torch's reader refuses (miniz: "
                  "unsupported encryption)",
                  e.name, e.header_offset, source.name());
  }
  if (entries.empty())
    throw Error(ErrorCode::not_a_checkpoint, "the zip archive is empty", {}, std::nullopt,
                source.name());
  // No data.pkl in any folder: a zip of something else, whatever its layout.
  if (std::none_of(entries.begin(), entries.end(),
                   [](const ZipEntry& e) { return record_kind(e.name) == Kind::pickle; }))
    throw Error(ErrorCode::not_a_checkpoint,
                "zip archive without data.pkl; not a PyTorch checkpoint (a zip of something "
                "else?)",
                {}, std::nullopt, source.name());
  // As torch's reader (PyTorchFileReader::init) does: the folder of the
  // first record in the directory names the archive, and every record is
  // looked up under it (miniz ignoring ASCII case); a first record outside
  // any folder is an archive torch refuses.
  const std::string& first = entries.front().name;
  const auto slash = first.find('/');
  if (slash == std::string::npos)
    throw Error(ErrorCode::corrupt,
                "the zip's first record '" + first +
                    "' is not in a folder; torch's reader refuses such archives (it takes the "
                    "first record's folder "
                    "as the archive name)",
                first, entries.front().header_offset, source.name());
  archive->prefix = first.substr(0, slash + 1);
  // torch.load lists every record (get_all_records, to tell TorchScript) and
  // refuses an archive with one outside that folder, comparing bytes with
  // case: "file in archive is not in a subdirectory".
  for (const auto& e : entries)
    if (!e.name.starts_with(archive->prefix))
      throw Error(ErrorCode::corrupt,
                  "record '" + e.name + "' is not in the archive's folder '" + archive->prefix +
                      "' (case counts); torch's reader refuses such archives",
                  e.name, e.header_offset, source.name());
  // Every entry checked, and every mismatch named (the first eight in the
  // message). Damaged storage records are refused once the pickle has
  // named their tensors; any other damaged record at once.
  std::vector<const ZipEntry*> bad;
  const auto damaged = [&](const TensorCatalog* cat) {
    // The tensors over a damaged record: those whose mapped storage lies in
    // its bytes (torch stores storages uncompressed and aligned, so mapped).
    std::map<const ZipEntry*, std::vector<std::string>> tensors_of;
    if (cat != nullptr && source.contiguous()) {
      const std::byte* base = source.bytes().data();
      for (const auto& [name, t] : cat->tensors()) {
        const auto& st = t.file_storage();
        if (!st || !st->file_backed() || st->nbytes() == 0) continue;
        const std::byte* p = st->bytes().data();
        for (const ZipEntry* e : bad)
          if (p >= base + e->data_offset && p < base + e->data_offset + e->size)
            tensors_of[e].push_back(name);
      }
    }
    std::string names;
    for (std::size_t i = 0; i < bad.size() && i < 8; ++i) {
      names += (i ? ", '" : "'") + bad[i]->name + "'";
      const auto it = tensors_of.find(bad[i]);
      if (it == tensors_of.end()) continue;
      names += " (" + it->second.front();
      if (it->second.size() > 1) names += " and " + std::to_string(it->second.size() - 1) + " more";
      names += ")";
    }
    if (bad.size() > 8) names += ", ...";
    return Error(ErrorCode::corrupt,
                 "CRC-32 mismatch in " + std::to_string(bad.size()) + " of " +
                     std::to_string(entries.size()) + " entries (" + names +
                     "): their data was altered or damaged",
                 bad.front()->name, bad.front()->data_offset, source.name());
  };
  if (options.verify_crc) {
    for (const auto& e : entries) try {
        archive->zip.verify_crc(e);
      } catch (const Error& x) {
        if (x.code() != ErrorCode::corrupt) throw;
        // A record skip_data reserved is not damaged: it has no bytes
        // (refused, naming skip_data, when they are asked for).
        if (record_kind(e.name) == Kind::storage && reserved_record(e)) continue;
        bad.push_back(&e);
      }
    for (const ZipEntry* e : bad)
      if (record_kind(e->name) != Kind::storage) throw damaged(nullptr);
  }

  // As torch 2.x's _load: the record says exactly "little" or "big"
  // (anything else is a ValueError there); big-endian storages are swapped.
  if (const ZipEntry* bo = archive->zip.find(archive->prefix + "byteorder")) {
    const std::string order = record_text(archive->zip, *bo, 8);
    if (order == "big")
      archive->big_endian = true;
    else if (order != "little")
      throw Error(ErrorCode::corrupt,
                  "the byteorder record is not \"little\" or \"big\" (torch 2.x refuses it: "
                  "unknown endianness)",
                  bo->name, bo->data_offset, source.name());
  }
  // Informative records of torch 2.x, kept as the catalogue's metadata
  // (printable, at most 64 bytes each); nothing depends on them.
  std::map<std::string, std::string> metadata;
  for (const auto& [rec, key] : {std::pair{".data/serialization_id", "pytorch.serialization_id"},
                                 std::pair{".format_version", "pytorch.format_version"},
                                 std::pair{".storage_alignment", "pytorch.storage_alignment"}})
    if (const ZipEntry* e = archive->zip.find(archive->prefix + rec)) {
      std::string text = record_text(archive->zip, *e, 64);
      for (char& c : text)
        if (c < 0x20 || c >= 0x7f) c = '?';
      metadata[key] = std::move(text);
    }
  // A torch.serialization.skip_data() save: its storage records hold no
  // tensor bytes (see reserved_record), which the catalogue says without
  // reading them (a record whose bytes do have CRC-32 0 is told apart only
  // when they are read).
  std::size_t storages = 0, reserved = 0;
  for (const ZipEntry& e : entries)
    if (record_kind(e.name) == Kind::storage) {
      ++storages;
      reserved += reserved_record(e);
    }
  if (reserved > 0)
    metadata["pytorch.skip_data"] =
        std::to_string(reserved) + " of " + std::to_string(storages) +
        " storage records declare CRC-32 0, as torch.serialization.skip_data() reserves records "
        "without writing their bytes: reading them is refused unless their bytes match it";

  const ZipEntry* data = archive->zip.find(archive->prefix + "data.pkl");
  if (data == nullptr)
    throw Error(ErrorCode::not_a_checkpoint,
                "zip archive without '" + archive->prefix +
                    "data.pkl'; not a PyTorch checkpoint (a zip of something else?)",
                {}, std::nullopt, source.name());
  const ZipEntry* constants = archive->zip.find(archive->prefix + "constants.pkl");
  const bool torchscript = constants != nullptr;

  // Checked after data.pkl is found (a zip of something else is "not a
  // checkpoint") and after the pickles are read (a file naming a dangerous
  // global says so first); torch's reader checks it first, and refuses either way.
  const auto check_version = [&] { archive_version(archive->zip, archive->prefix, source.name()); };
  std::shared_ptr<const Archive> a = archive;
  // The storage records no pickle named, once the pickles have run.
  std::vector<std::string> named_storages;
  std::vector<std::string>* named = parts ? &named_storages : nullptr;
  const auto unread_storages = [&] {
    if (!parts) return;
    std::vector<bool> resolved(entries.size(), false);
    detail::StringMap<std::size_t> index;
    for (std::size_t i = 0; i < entries.size(); ++i) index.emplace(entries[i].name, i);
    for (const std::string& name : named_storages)
      if (const auto it = index.find(name); it != index.end()) resolved[it->second] = true;
    for (std::size_t i = 0; i < entries.size(); ++i)
      if (!resolved[i] && record_kind(entries[i].name) == Kind::storage)
        walker.part(member_part(a, entries[i], PartRole::member));
  };
  const Format format = torchscript ? Format::torchscript : Format::pytorch_zip;
  // When nothing after the pickle needs the directory (no parts listed, no
  // damaged entry, no TorchScript constants), the storage records are
  // numbered and the directory goes now: a file of many small tensors
  // does not hold it beside the tree the pickle builds.
  const ZipEntry data_entry = *data;
  std::exception_ptr version_error;
  bool numbered = false;
  if (!parts && bad.empty() && !torchscript) {
    number_records(*archive);
    numbered = !archive->numbered.empty();
    if (numbered) {
      try {
        check_version();
      } catch (const Error&) {
        version_error = std::current_exception();  // said after the pickle, as below
      }
      archive->zip.release_directory();
    }
  }
  Value tree, consts_tree;
  try {
    tree = read_pickle(a, data_entry, "data/", options, walker, named);
    // Constants are tensors baked into the TorchScript code; a frozen module
    // keeps all of its weights there. They follow the module's own tensors.
    if (torchscript) consts_tree = read_pickle(a, *constants, "constants/", options, walker, named);
  } catch (const Error&) {
    if (!bad.empty()) throw damaged(nullptr);  // the damage explains what failed
    throw;
  }
  unread_storages();
  std::vector<Archive::Record>().swap(archive->numbered);  // every storage is resolved
  if (version_error) std::rethrow_exception(version_error);
  if (!numbered) check_version();
  // Every record the catalogue needs is resolved: the directory (about 140
  // bytes an entry, as much as the catalogue's own bookkeeping for a file of
  // many small tensors) goes before the catalogue is built. Damage reports
  // and listed parts still point into it.
  if (!parts && bad.empty()) archive->zip.release_directory();
  TensorCatalog cat;
  try {
    cat = TensorCatalog::from_value(format, std::move(tree), options.limits, metadata);
  } catch (const Error&) {
    if (!bad.empty()) throw damaged(nullptr);
    throw;
  }
  if (!torchscript) {
    if (!bad.empty()) throw damaged(&cat);
    return cat;
  }
  const TensorCatalog consts =
      TensorCatalog::from_value(format, std::move(consts_tree), options.limits);
  std::vector<NamedTensor> all = cat.tensors();
  for (const auto& t : consts.tensors()) all.push_back({"constants." + t.name, t.tensor});
  TensorCatalog whole = consts.empty() ? std::move(cat)
                                       : TensorCatalog::from_tensors(format, std::move(all),
                                                                     cat.metadata(), cat.root());
  if (!bad.empty()) throw damaged(&whole);
  return whole;
}

// A lenient zip reader's view, once the reading stopped: every local
// header from the front, as a reader that ignores the central directory
// finds entries. torch's layout: beside each "<prefix>/data.pkl",
// "<prefix>/data/<key>" records hold raw tensor bytes, which torch reads as
// bytes and nothing unpickles: told as tensor data, not judged by their
// content (a truncated ResNet-18's float records were taken for tar
// archives, ambiguous, so unsafe). Every other entry is a member, its
// bytes stored or decoded as far as they go.
void sweep_zip(const Source& source, const OpenOptions& options, Walker& walker) {
  const std::vector<ZipLocalEntry> entries =
      zip_local_entries(source.bytes(), options.limits.max_entries);
  std::set<std::string> prefixes;
  for (const ZipLocalEntry& e : entries)
    if (e.name.ends_with("/data.pkl")) prefixes.insert(e.name.substr(0, e.name.size() - 8));
  const auto tensor_record = [&](const std::string& name) {
    const std::size_t slash = name.rfind("/data/");
    if (slash == std::string::npos || !prefixes.count(name.substr(0, slash + 1))) return false;
    const std::string key = name.substr(slash + 6);
    return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
  };
  const std::uint64_t max_bytes = options.limits.max_pickle_bytes;
  for (const ZipLocalEntry& e : entries) {
    const bool encrypted = e.flags & 1;
    Part p{encrypted || !tensor_record(e.name) ? PartRole::member : PartRole::tensor_data,
           e.name,
           e.offset,
           e.data.size(),
           e.method,
           {}};
    p.swept = true;
    p.encrypted = encrypted;
    if (p.role == PartRole::member)
      p.bytes = [source, data = e.data, method = e.method, name = e.name, at = e.offset,
                 max_bytes]() -> PartBytes {
        const std::string what = source.name() + ":" + name;
        if (method == 0) return Source::borrow(data, what);
        if (!zip_method_read(method, ZipMethods::python))
          return {Source(),
                  Error(ErrorCode::unsupported,
                        "zip " + zip_method_name(method) +
                            " data, which the scan does not decode: a reader that does (Python "
                            "3.14's zipfile reads zstd) unpickles what cannot be judged",
                        name, at, source.name()),
                  zip_method_name(method) + " data"};
        Decompressed d = decompress_zip_data(method, data, max_bytes, what);
        return {Source::from_buffer(std::move(d.bytes), what), std::move(d.error),
                zip_method_name(method) + " data"};
      };
    walker.part(std::move(p));
  }
}

}  // namespace torchport::formats
