// Writes what torch.save(state_dict, f) writes (torch/serialization.py
// `_save`; caffe2/serialize/inline_container.cc for the archive):
//
//   <stem>/data.pkl     pickle protocol 2 of an OrderedDict whose values are
//                       torch._utils._rebuild_tensor_v2(storage, offset,
//                       size, stride, requires_grad=False, OrderedDict())
//                       with storage a persistent id
//                       ('storage', torch.FloatStorage, key, 'cpu', numel)
//   <stem>/.format_version     "1"
//   <stem>/.storage_alignment  "64"
//   <stem>/byteorder    "little"
//   <stem>/data/<key>   each storage's bytes, stored, aligned to 64, keyed
//                       0, 1, ... in the order the pickle names them
//   <stem>/version      "3\n"
//   <stem>/.data/serialization_id
//
// For dtypes without a legacy typed storage class (and complex32) torch 2.1+ pickles
// _rebuild_tensor_v3(untyped_storage, offset, size, stride, False,
// OrderedDict(), dtype) with ('storage', torch.storage.UntypedStorage, key, 'cpu',
// nbytes); we do the same (torch/_tensor.py `_reduce_ex_internal`).

#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "formats/write/writers.hpp"
#include "io/zip_writer.hpp"
#include "pickle/unpickler.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport::formats {
namespace {

// Pickle opcodes (Lib/pickletools.py), protocol 2 and below.
constexpr char kProto = '\x80';
constexpr char kGlobal = 'c';
constexpr char kBinPut = 'q';
constexpr char kLongBinPut = 'r';
constexpr char kBinGet = 'h';
constexpr char kLongBinGet = 'j';
constexpr char kMark = '(';
constexpr char kTuple = 't';
constexpr char kEmptyTuple = ')';
constexpr char kTuple1 = '\x85';
constexpr char kTuple2 = '\x86';
constexpr char kTuple3 = '\x87';
constexpr char kReduce = 'R';
constexpr char kBinPersId = 'Q';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kBinInt = 'J';
constexpr char kLong1 = '\x8a';
constexpr char kBinUnicode = 'X';
constexpr char kNewFalse = '\x89';
constexpr char kNewTrue = '\x88';
constexpr char kEmptyDict = '}';
constexpr char kSetItem = 's';
constexpr char kBinFloat = 'G';
constexpr char kSetItems = 'u';
constexpr char kStop = '.';
constexpr char kNewObj = '\x81';
constexpr char kNone = 'N';
constexpr char kEmptyList = ']';
constexpr char kAppends = 'e';

// pickle.Pickler batches SETITEMS 1,000 pairs at a time.
constexpr std::size_t kBatch = 1000;

class Pickler {
 public:
  void op(char c) { out_.push_back(c); }
  void proto2() {
    op(kProto);
    out_.push_back('\x02');
  }

  // A module-level name, memoized so repeated references cost 2-5 bytes.
  void global(const std::string& module, const std::string& name) {
    const std::string key = module + "\n" + name;
    if (auto it = memo_.find(key); it != memo_.end()) {
      memo_ref(it->second, kBinGet, kLongBinGet);
      return;
    }
    op(kGlobal);
    out_ += key;
    out_.push_back('\n');
    const std::uint32_t id = put();
    memo_.emplace(key, id);
  }

  // Memoizes the object on top of the stack; returns its memo index.
  std::uint32_t put() {
    const std::uint32_t id = next_id_++;
    memo_ref(id, kBinPut, kLongBinPut);
    return id;
  }
  // Pushes the object memoized as `id`.
  void get(std::uint32_t id) { memo_ref(id, kBinGet, kLongBinGet); }

  // LONG1 (LONG4 past 255 bytes) of little-endian two's complement bytes.
  void big_integer(std::string_view le_bytes) {
    if (le_bytes.size() < 256) {
      op(kLong1);
      out_.push_back(static_cast<char>(le_bytes.size()));
    } else {
      op('\x8b');  // LONG4
      le(le_bytes.size(), 4);
    }
    out_ += le_bytes;
  }

  void integer(std::int64_t v) {
    if (v >= 0 && v < 256) {
      op(kBinInt1);
      out_.push_back(static_cast<char>(v));
    } else if (v >= 0 && v < 65536) {
      op(kBinInt2);
      le(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op(kBinInt);
      le(static_cast<std::uint64_t>(static_cast<std::uint32_t>(static_cast<std::int32_t>(v))), 4);
    } else {
      // LONG1: the fewest little-endian two's complement bytes.
      std::string b;
      std::int64_t x = v;
      for (;;) {
        const auto byte = static_cast<unsigned char>(x & 0xFF);
        b.push_back(static_cast<char>(byte));
        x >>= 8;  // arithmetic shift
        if ((x == 0 && !(byte & 0x80)) || (x == -1 && (byte & 0x80))) break;
      }
      op(kLong1);
      out_.push_back(static_cast<char>(b.size()));
      out_ += b;
    }
  }

  // BINFLOAT: an IEEE double, big-endian.
  void real(double d) {
    op(kBinFloat);
    std::uint64_t bits;
    std::memcpy(&bits, &d, 8);
    for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
  }

  void str(std::string_view s) {
    op(kBinUnicode);
    le(s.size(), 4);
    out_ += s;
  }

  void int_tuple(const Shape& v) {
    if (v.size() > 3) op(kMark);
    for (std::int64_t x : v) integer(x);
    switch (v.size()) {
      case 0:
        op(kEmptyTuple);
        break;
      case 1:
        op(kTuple1);
        break;
      case 2:
        op(kTuple2);
        break;
      case 3:
        op(kTuple3);
        break;
      default:
        op(kTuple);
        break;
    }
  }

  // collections.OrderedDict() — the state dict itself and each tensor's
  // (empty) backward hooks.
  void ordered_dict() {
    global("collections", "OrderedDict");
    op(kEmptyTuple);
    op(kReduce);
  }

  std::string& bytes() { return out_; }

 private:
  void le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void memo_ref(std::uint32_t id, char short_op, char long_op) {
    if (id < 256) {
      op(short_op);
      out_.push_back(static_cast<char>(id));
    } else {
      op(long_op);
      le(id, 4);
    }
  }

  std::string out_;
  detail::StringMap<std::uint32_t> memo_;
  std::uint32_t next_id_ = 0;
};

// One `data/<key>` record.
struct Record {
  std::shared_ptr<Storage> storage;
  DType dtype = DType::U8;  // the storage's element type
  bool typed = true;        // a legacy typed storage class exists and fits
  bool quantized = false;   // viewed by quantized tensors: QInt8Storage, ...
  std::string key;          // "0", "1", ... given when the pickle first names it
};

// Keys records "0", "1", ... in the order the pickle first names them, as
// torch.save numbers its storages, and lists them in that order: the
// archive holds them so (torch 2.x's load, with calculate_storage_offsets,
// finds record k + 1 right after record k's data). A record no tensor of
// the pickle names is not written.
class RecordKeys {
 public:
  const std::string& key_of(Record& r) {
    if (r.key.empty()) {
      r.key = std::to_string(order_.size());
      order_.push_back(&r);
    }
    return r.key;
  }
  const std::vector<Record*>& order() const { return order_; }

 private:
  std::vector<Record*> order_;
};

// The legacy typed storage class torch pickles for `d`, or "" for the dtypes
// torch/storage.py `_new_dtypes()` serializes as UntypedStorage + dtype:
// uint16/32/64, the float8 kinds, float4_e2m1fn_x2, the bits, bcomplex32
// and complex32 (torch never had a ComplexHalfStorage it could save).
std::string_view legacy_storage_class(DType d) {
  return d == DType::C32 ? std::string_view() : dtype_storage_class(d);
}

// torch names the archive folder after the file, up to its first dot
// (PyTorchStreamWriter's constructor).
std::string archive_name(const std::filesystem::path& target) {
  std::string name = target.filename().string();
  name = name.substr(0, name.find('.'));
  return name.empty() ? "archive" : name;
}

// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False,
// OrderedDict()), or _v3(..., dtype) over an untyped storage.
void plain_tensor(Pickler& p, RecordKeys& keys, const Tensor& t, Record& r) {
  p.global("torch._utils", r.typed ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
  p.op(kMark);
  // The persistent id: ('storage', class, key, 'cpu', numel).
  p.op(kMark);
  p.str("storage");
  if (r.typed) {
    p.global("torch", std::string(legacy_storage_class(r.dtype)));
    p.str(keys.key_of(r));
    p.str("cpu");
    p.integer(static_cast<std::int64_t>(r.storage->nbytes() / dtype_size(r.dtype)));
  } else {
    // torch 2.x pickles the class by its defining module; its weights_only
    // allow-list knows only that spelling (torch 1.13 has no such dtypes).
    p.global("torch.storage", "UntypedStorage");
    p.str(keys.key_of(r));
    p.str("cpu");
    p.integer(static_cast<std::int64_t>(r.storage->nbytes()));
  }
  p.op(kTuple);
  p.op(kBinPersId);
  p.integer(t.storage_offset());
  p.int_tuple(t.shape());
  p.int_tuple(t.strides());
  p.op(kNewFalse);   // requires_grad
  p.ordered_dict();  // backward hooks
  if (!r.typed) p.global("torch", std::string(dtype_torch_name(t.dtype())));
  if (t.is_conj() || t.is_neg()) {
    // torch._utils.get_tensor_metadata: the view bits over the file's
    // storage (the record holds file_storage(), unresolved).
    p.op(kEmptyDict);
    for (const auto& [key, on] : {std::pair{"conj", t.is_conj()}, std::pair{"neg", t.is_neg()}})
      if (on) {
        p.str(key);
        p.op(kNewTrue);
        p.op(kSetItem);
      }
  }
  p.op(kTuple);
  p.op(kReduce);
}

// torch._utils._rebuild_qtensor(storage, offset, size, stride,
// quantizer_params, False, OrderedDict()) over a QInt8Storage (QUInt8,
// QInt32, QUInt4x2, QUInt2x4), as torch/_tensor.py `_reduce_ex_internal`
// writes it.
void quantized_tensor(Pickler& p, RecordKeys& keys, const Tensor& t, Record& r,
                      std::vector<Record>& records,
                      const std::unordered_map<const Storage*, std::size_t>& record_of) {
  const Quantization& q = *t.quantization();
  p.global("torch._utils", "_rebuild_qtensor");
  p.op(kMark);
  p.op(kMark);
  p.str("storage");
  // The record of a quint4x2 (quint2x4) tensor is its packed storage
  // (file_storage()), a byte per element as torch counts it.
  const std::string_view qd = Quantization::qdtype_name(r.dtype, q.bits);
  p.global("torch", qd == "qint8"      ? "QInt8Storage"
                    : qd == "quint8"   ? "QUInt8Storage"
                    : qd == "quint4x2" ? "QUInt4x2Storage"
                    : qd == "quint2x4" ? "QUInt2x4Storage"
                                       : "QInt32Storage");
  p.str(keys.key_of(r));
  p.str("cpu");
  p.integer(static_cast<std::int64_t>(r.storage->nbytes() / dtype_size(r.dtype)));
  p.op(kTuple);
  p.op(kBinPersId);
  p.integer(t.storage_offset());
  p.int_tuple(t.shape());
  p.int_tuple(t.strides());
  if (q.scheme == Quantization::Scheme::per_tensor_affine) {
    p.global("torch", "per_tensor_affine");
    p.real(q.scale);
    p.integer(q.zero_point);
    p.op(kTuple3);
  } else {
    p.op(kMark);
    p.global("torch", "per_channel_affine");  // for float qparams too, as torch writes it
    plain_tensor(p, keys, q.scales, records[record_of.at(q.scales.storage().get())]);
    plain_tensor(p, keys, q.zero_points, records[record_of.at(q.zero_points.storage().get())]);
    p.integer(q.axis);
    p.op(kTuple);
  }
  p.op(kNewFalse);   // requires_grad
  p.ordered_dict();  // backward hooks
  p.op(kTuple);
  p.op(kReduce);
}

// torch._utils._rebuild_sparse_tensor(layout, (indices, values, size)) for
// COO and (compressed, plain, values, size) for CSR, CSC, BSR and BSC, as
// torch 2.x writes them, the layout as
// torch.serialization._get_layout('torch.sparse_coo'). torch 1.13 wrote CSR
// through _rebuild_sparse_csr_tensor, which torch 2.x no longer has and its
// weights_only loader refuses; 1.13's _rebuild_sparse_tensor reads COO only,
// so a compressed layout we write loads in torch >= 2.0 (we read both).
void sparse_tensor(Pickler& p, RecordKeys& keys, const Tensor& t, std::vector<Record>& records,
                   const std::unordered_map<const Storage*, std::size_t>& record_of) {
  const SparseParts& sp = *t.sparse();
  auto part = [&](const Tensor& x) {
    plain_tensor(p, keys, x, records[record_of.at(x.storage().get())]);
  };
  p.global("torch._utils", "_rebuild_sparse_tensor");
  p.global("torch.serialization", "_get_layout");
  p.str("torch." + std::string(SparseParts::layout_name(sp.layout)));
  p.op(kTuple1);
  p.op(kReduce);
  p.op(kMark);
  if (sp.layout == SparseParts::Layout::coo) {
    part(sp.indices);
  } else {
    part(sp.compressed_indices);
    part(sp.plain_indices);
  }
  part(sp.values);
  p.global("torch", "Size");
  p.int_tuple(sp.size);
  p.op(kTuple1);
  p.op(kReduce);
  p.op(kTuple);
  p.op(kTuple2);
  p.op(kReduce);
}

// torch._utils._rebuild_meta_tensor_no_storage(dtype, size, stride,
// requires_grad), as torch writes a tensor of device "meta": no record.
void meta_tensor(Pickler& p, const Tensor& t) {
  p.global("torch._utils", "_rebuild_meta_tensor_no_storage");
  p.op(kMark);
  p.global("torch", std::string(dtype_torch_name(t.dtype())));
  p.int_tuple(t.shape());
  p.int_tuple(t.strides());
  p.op(kNewFalse);
  p.op(kTuple);
  p.op(kReduce);
}

// A nested tensor to write back: its components are tensors[first, first + n).
struct Nested {
  std::size_t first = 0, n = 0;
  Tensor buffer, sizes, strides, offsets;  // _rebuild_nested_tensor's arguments
};

// The nested tensors `metadata` names whose components are in `tensors` as
// the readers list them: consecutive plain tensors of one dtype and rank.
// Views of one storage keep it as the buffer; others (read back from
// safetensors, say) are copied one after another into a new buffer. Any
// other tensors stay the component tensors they are.
std::vector<Nested> nested_groups(const std::vector<NamedTensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  std::vector<Nested> out;
  constexpr std::string_view kKey = "torchport.nested.";
  detail::StringViewMap<std::size_t> count;
  for (auto it = metadata.lower_bound(std::string(kKey));
       it != metadata.end() && it->first.starts_with(kKey); ++it) {
    std::size_t n = 0;
    const auto& v = it->second;
    const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
    if (r.ec == std::errc() && r.ptr == v.data() + v.size() && n > 0)
      count.emplace(std::string_view(it->first).substr(kKey.size()), n);
  }
  if (count.empty()) return out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string& first = tensors[i].name;
    if (!first.ends_with(".0")) continue;
    const auto c = count.find(std::string_view(first).substr(0, first.size() - 2));
    if (c == count.end() || c->second > tensors.size() - i) continue;
    const std::string base(c->first);
    const Tensor& t0 = tensors[i].tensor;
    bool ok = true, shared = true;
    for (std::size_t k = 0; ok && k < c->second; ++k) {
      const Tensor& t = tensors[i + k].tensor;
      ok = tensors[i + k].name == base + "." + std::to_string(k) && t.defined() && !t.is_meta() &&
           !t.is_sparse() && !t.is_quantized() && !t.is_conj() && !t.is_neg() &&
           t.dtype() == t0.dtype() && t.dim() == t0.dim();
      shared = shared && t.storage() == t0.storage();
    }
    if (!ok) continue;
    Nested g;
    g.first = i;
    g.n = c->second;
    const auto n = static_cast<std::int64_t>(g.n), dims = t0.dim();
    g.sizes = Tensor::empty(DType::I64, {n, dims});
    g.strides = Tensor::empty(DType::I64, {n, dims});
    g.offsets = Tensor::empty(DType::I64, {n});
    auto* sz = g.sizes.mutable_data<std::int64_t>();
    auto* st = g.strides.mutable_data<std::int64_t>();
    auto* off = g.offsets.mutable_data<std::int64_t>();
    std::int64_t total = 0;
    for (std::size_t k = 0; k < g.n; ++k) {
      const Tensor& t = tensors[i + k].tensor;
      const Shape strides = shared ? t.strides() : contiguous_strides(t.shape());
      std::copy(t.shape().begin(), t.shape().end(), sz + k * static_cast<std::size_t>(dims));
      std::copy(strides.begin(), strides.end(), st + k * static_cast<std::size_t>(dims));
      off[k] = shared ? t.storage_offset() : total;
      total += t.numel();
    }
    if (shared) {
      // All of the storage from its start, so the offsets are the components' own.
      g.buffer = Tensor(
          t0.dtype(), {static_cast<std::int64_t>(t0.storage()->nbytes() / dtype_size(t0.dtype()))},
          {1}, 0, t0.storage());
    } else {
      g.buffer = Tensor::empty(t0.dtype(), {total});
      const auto b = g.buffer.mutable_bytes();
      std::size_t at = 0;
      for (std::size_t k = 0; k < g.n; ++k) {
        const Tensor& t = tensors[i + k].tensor;
        t.copy_to(b.subspan(at, t.nbytes()));
        at += t.nbytes();
      }
    }
    out.push_back(std::move(g));
    i += c->second - 1;
  }
  return out;
}

// torch._utils._rebuild_nested_tensor(buffer, sizes, strides, offsets), as
// torch/_tensor.py `_reduce_ex_internal` writes a nested tensor.
void nested_tensor(Pickler& p, RecordKeys& keys, const Nested& g, std::vector<Record>& records,
                   const std::unordered_map<const Storage*, std::size_t>& record_of) {
  p.global("torch._utils", "_rebuild_nested_tensor");
  p.op(kMark);
  for (const Tensor* t : {&g.buffer, &g.sizes, &g.strides, &g.offsets})
    plain_tensor(p, keys, *t, records[record_of.at(t->storage().get())]);
  p.op(kTuple);
  p.op(kReduce);
}

// torch.save's storage alignment (torch.utils.serialization.config.save.
// storage_alignment, 64 unless a user changes it), recorded in the archive.
constexpr std::uint32_t kStorageAlignment = 64;

// The archive around a pickle as torch 2.14 writes it, record by record and
// byte by byte in layout (torch/serialization.py `_save`, miniz's
// writer): data.pkl, .format_version "1" (its storages numbered in the
// order the pickle names them), .storage_alignment "64", byteorder, each
// record (released once written), version and serialization_id, every
// record's data at a multiple of 64 with a data descriptor after it. torch
// 1.13 and 2.6 ignore the two dot records.
void write_archive(const std::string& pkl, const std::vector<Record*>& records, AtomicFile& out,
                   DataStreamer& data) {
  const std::string prefix = archive_name(out.target()) + "/";
  ZipWriterOptions layout;
  layout.alignment = kStorageAlignment;
  layout.torch_layout = true;
  ZipWriter zip(out, layout);
  const auto text = [&zip, &prefix](const std::string& name, std::string_view value) {
    zip.add_entry(prefix + name, std::as_bytes(std::span<const char>(value.data(), value.size())));
  };
  text("data.pkl", pkl);
  text(".format_version", "1");
  text(".storage_alignment", std::to_string(kStorageAlignment));
  text("byteorder", "little");
  const ByteSink sink = [&zip](std::span<const std::byte> b) { zip.write(b); };
  for (Record* r : records) {
    zip.begin_entry(prefix + "data/" + r->key, r->storage->nbytes());
    try {
      data.write_storage(*r->storage, sink);
    } catch (const Error& e) {
      throw e.in("storage '" + r->key + "'");
    }
    zip.end_entry();
    r->storage.reset();  // release it (and whatever it made) now
  }
  text("version", "3\n");
  // torch >= 2.1 ends with .data/serialization_id: 20 digits of a hash of
  // the record names, then 20 of the combined CRC-32 of their data
  // (PyTorchStreamWriter::writeSerializationId). torch hashes the names with
  // its C++ library's std::hash, which no file format fixes; ours is
  // FNV-1a. No reader checks it; it tells saves apart.
  std::uint64_t names = 0xcbf29ce484222325u;
  const auto mix = [&names](std::string_view n) {
    for (const char c : n) names = (names ^ static_cast<unsigned char>(c)) * 0x100000001b3u;
  };
  for (const char* name : {"data.pkl", ".format_version", ".storage_alignment", "byteorder"})
    mix(prefix + name);
  for (const Record* r : records) mix(prefix + "data/" + r->key);
  mix(prefix + "version");
  char id_text[48];
  const int id_len = std::snprintf(id_text, sizeof id_text, "%020llu%020llu",
                                   static_cast<unsigned long long>(names),
                                   static_cast<unsigned long long>(zip.combined_crc32()));
  const std::string id(id_text, static_cast<std::size_t>(id_len));
  zip.add_entry(prefix + ".data/serialization_id",
                std::as_bytes(std::span<const char>(id.data(), id.size())));
  zip.finish();
}

}  // namespace

std::uint64_t pytorch_data_bytes(const std::vector<NamedTensor>& tensors) {
  std::unordered_map<const Storage*, bool> seen;
  std::uint64_t n = 0;
  auto add = [&](const Tensor& t) {
    if (t.defined() && seen.emplace(t.file_storage().get(), true).second)
      n += t.file_storage()->nbytes();
  };
  for (const auto& t : tensors) {
    if (t.tensor.is_meta()) continue;  // no data, no record
    if (t.tensor.is_sparse()) {        // its parts are the records
      const SparseParts& sp = *t.tensor.sparse();
      for (const Tensor* part :
           {&sp.indices, &sp.compressed_indices, &sp.plain_indices, &sp.values})
        add(*part);
      continue;
    }
    add(t.tensor);
    if (t.tensor.is_quantized()) {  // per-channel scales and zero points are records too
      add(t.tensor.quantization()->scales);
      add(t.tensor.quantization()->zero_points);
    }
  }
  return n;
}

void write_pytorch(std::vector<NamedTensor>& tensors,
                   const std::map<std::string, std::string>& metadata, AtomicFile& out,
                   DataStreamer& data) {
  const std::string where = out.target().string();
  const std::vector<Nested> nested = nested_groups(tensors, metadata);
  // One record per distinct storage (keyed as the pickle names them).
  std::vector<Record> records;
  std::unordered_map<const Storage*, std::size_t> record_of;
  std::vector<std::size_t> tensor_record(tensors.size());
  auto record_for = [&](const Tensor& t) {
    // The storage as torch holds it: a conj or neg view's is unresolved.
    auto [it, fresh] = record_of.emplace(t.file_storage().get(), records.size());
    if (fresh) records.push_back({t.file_storage(), t.dtype(), true, false, {}});
    Record& r = records[it->second];
    // torch refuses to save one storage under two dtypes; we fall back to
    // an untyped storage that each view reinterprets (v3 rebuild).
    if (r.dtype != t.dtype()) r.typed = false;
    return it->second;
  };
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    if (!t.defined())
      throw Error(ErrorCode::invalid_argument, "undefined tensor", name, std::nullopt, where);
    check_name(name, "a pickle");
    if (t.is_meta()) {  // no data, no record
      tensor_record[i] = SIZE_MAX;
      continue;
    }
    if (t.is_sparse()) {  // no storage of its own: its parts are records
      const SparseParts& sp = *t.sparse();
      for (const Tensor* part :
           {&sp.indices, &sp.compressed_indices, &sp.plain_indices, &sp.values})
        if (part->defined()) record_for(*part);
      tensor_record[i] = SIZE_MAX;
      continue;
    }
    tensor_record[i] = record_for(t);
    if (t.is_quantized()) {
      records[tensor_record[i]].quantized = true;
      if (t.quantization()->scheme != Quantization::Scheme::per_tensor_affine) {
        record_for(t.quantization()->scales);
        record_for(t.quantization()->zero_points);
      }
    }
  }
  for (const Nested& g : nested) {
    check_name(tensors[g.first].name.substr(0, tensors[g.first].name.size() - 2), "a pickle");
    for (const Tensor* t : {&g.buffer, &g.sizes, &g.strides, &g.offsets}) record_for(*t);
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensor_record[i] == SIZE_MAX) continue;  // sparse or meta
    const Record& r = records[tensor_record[i]];
    if (r.quantized && (!tensors[i].tensor.is_quantized() || !r.typed))
      throw Error(ErrorCode::invalid_argument,
                  "a quantized tensor shares its storage with a tensor that is not quantized "
                  "(or of another dtype); torch cannot save that",
                  tensors[i].name, std::nullopt, where);
  }
  for (Record& r : records)
    r.typed = r.typed && !legacy_storage_class(r.dtype).empty() &&
              r.storage->nbytes() % dtype_size(r.dtype) == 0;

  Pickler p;
  RecordKeys keys;
  p.proto2();
  p.ordered_dict();
  auto next_nested = nested.begin();
  for (std::size_t start = 0; start < tensors.size(); start += kBatch) {
    p.op(kMark);
    for (std::size_t i = start; i < std::min(tensors.size(), start + kBatch); ++i) {
      const auto& [name, t] = tensors[i];
      if (next_nested != nested.end() && i >= next_nested->first) {
        // NAME.0 ... NAME.N-1 are one nested tensor NAME.
        if (i == next_nested->first) {
          p.str(name.substr(0, name.size() - 2));
          nested_tensor(p, keys, *next_nested, records, record_of);
        }
        if (i + 1 == next_nested->first + next_nested->n) ++next_nested;
        continue;
      }
      p.str(name);
      if (t.is_meta())
        meta_tensor(p, t);
      else if (t.is_sparse())
        sparse_tensor(p, keys, t, records, record_of);
      else if (t.is_quantized())
        quantized_tensor(p, keys, t, records[tensor_record[i]], records, record_of);
      else
        plain_tensor(p, keys, t, records[tensor_record[i]]);
    }
    p.op(kSetItems);
  }
  p.op(kStop);
  // Only the storages are needed from here on.
  tensors.clear();

  write_archive(p.bytes(), keys.order(), out, data);
}

}  // namespace torchport::formats

namespace torchport::formats {
namespace {

// Python's pickle at protocol 2 (torch.save's), for an inert tree: each
// container, object and tensor once, later references by memo, so a tree
// whose shared references would expand exponentially writes in linear time.
class TreeWriter {
 public:
  TreeWriter(std::span<const std::string> allow, std::span<const std::string> profiles,
             const std::string& where)
      : allow_(allow), profiles_(profiles), where_(where) {}

  // Pass 1: every record, in the order pass 2 refers to them (torch numbers
  // storages in first use), and every refusal before a byte is written.
  void collect(const Value& v, std::string& path) {
    if (v.identity() != nullptr && !seen_.insert(v.identity()).second) return;
    const std::size_t n = path.size();
    const auto child = [&](const std::string& key, const Value& x) {
      if (!path.empty()) path += '.';
      path += key;
      collect(x, path);
      path.resize(n);
    };
    switch (v.kind()) {
      case Value::Kind::List:
      case Value::Kind::Tuple:
      case Value::Kind::Set: {
        std::size_t i = 0;
        for (const Value& x : v.items()) child(std::to_string(i++), x);
        return;
      }
      case Value::Kind::Dict:
        for (const auto& [k, x] : v.pairs()) {
          collect(k, path);
          child(k.is(Value::Kind::Str) ? k.as_str() : k.repr(2), x);
        }
        return;
      case Value::Kind::Global:
        check_global(v.as_global(), path);
        return;
      case Value::Kind::Object: {
        const Object& o = v.as_object();
        const Value& state = o.state;
        if (o.cls.is("torch._utils", "_rebuild_nested_tensor"))
          refuse(path,
                 "is a nested tensor inside other values, which torchport writes back only "
                 "in a state dict of tensors");
        if (state.is(Value::Kind::Dict) && state.find("_parameters") && state.find("_modules"))
          refuse(path, "is a pickled torch.nn module (" + o.cls.qualified() +
                           "): a .pt holding it makes torch import and run its class");
        if (const pickle::ProfileClass* c =
                pickle::profile_class(profiles_, o.cls.module, o.cls.name)) {
          // Written only in the form its profile lists (NEWOBJ with no
          // arguments, BUILD of a dict), in which Python runs none of its code.
          const bool attributes =
              state.is_none() ||
              (state.is(Value::Kind::Dict) &&
               std::all_of(state.pairs().begin(), state.pairs().end(),
                           [](const auto& kv) { return kv.first.is(Value::Kind::Str); }));
          if (c->use != pickle::ProfileUse::object || !o.newobj || o.args.size() != 0 ||
              !attributes)
            refuse(path, "is a " + o.cls.qualified() +
                             " made otherwise than its profile lists (NEWOBJ with no "
                             "arguments, then a dict of attributes): torch would run its code");
        }
        check_global(o.cls, path);
        collect(o.args, path);
        collect(state, path);
        return;
      }
      case Value::Kind::Tensor:
        if (v.is_storage()) refuse(path, "is a bare storage, which torchport does not write");
        if (v.is_numpy_array()) {
          // Written back as numpy pickles it, its bytes in the pickle.
          if (numpy_code(v.as_tensor().dtype()).empty())
            refuse(path, "is a numpy array of " + std::string(dtype_name(v.as_tensor().dtype())) +
                             ", which numpy has no dtype for");
          return;
        }
        tensor_records(v.as_tensor(), path);
        return;
      default:
        return;
    }
  }

  // Pass 2: the pickle.
  void write(const Value& v) {
    if (v.identity() != nullptr)
      if (const auto it = memo_.find(v.identity()); it != memo_.end()) return p_.get(it->second);
    switch (v.kind()) {
      case Value::Kind::None:
        return p_.op(kNone);
      case Value::Kind::Bool:
        return p_.op(v.as_bool() ? kNewTrue : kNewFalse);
      case Value::Kind::Int:
        return p_.integer(v.as_int());
      case Value::Kind::BigInt:
        return p_.big_integer(v.as_bytes());
      case Value::Kind::Float:
        return p_.real(v.as_float());
      case Value::Kind::Complex: {
        const auto [re, im] = v.as_complex();
        p_.global("builtins", "complex");
        p_.real(re);
        p_.real(im);
        p_.op(kTuple2);
        return p_.op(kReduce);
      }
      case Value::Kind::Str:
        return p_.str(v.as_str());
      case Value::Kind::Bytes:
        bytes(v.as_bytes());
        return memoize(v);
      case Value::Kind::List:
        p_.op(kEmptyList);
        memoize(v);
        return batches(v.items(), kAppends);
      case Value::Kind::Tuple:
        p_.op(kMark);
        for (const Value& x : v.items()) write(x);
        p_.op(kTuple);
        return memoize(v);
      case Value::Kind::Set:
        p_.global("builtins", "set");
        p_.op(kEmptyList);
        batches(v.items(), kAppends);
        p_.op(kTuple1);
        p_.op(kReduce);
        return memoize(v);
      case Value::Kind::Dict:
        if (v.is_ordered_dict())
          p_.ordered_dict();
        else
          p_.op(kEmptyDict);
        memoize(v);
        for (std::size_t start = 0; start < v.pairs().size(); start += kBatch) {
          p_.op(kMark);
          for (std::size_t i = start; i < std::min(v.pairs().size(), start + kBatch); ++i) {
            write(v.pairs()[i].first);
            write(v.pairs()[i].second);
          }
          p_.op(kSetItems);
        }
        return;
      case Value::Kind::Global:
        if (const auto member = enum_member(v.as_global())) {
          // An Enum member, as Python 3.11 pickles one: getattr(cls, 'NAME').
          p_.global("builtins", "getattr");
          p_.global(v.as_global().module, std::string(member->first));
          p_.str(std::string(member->second));
          p_.op(kTuple2);
          p_.op(kReduce);
          return;
        }
        p_.global(v.as_global().module, v.as_global().name);
        return;
      case Value::Kind::Object: {
        const Object& o = v.as_object();
        if (o.cls.is("torch._tensor", "_rebuild_from_type_v2") && o.args.size() == 3 &&
            o.state.is(Value::Kind::Dict)) {
          // A tensor subclass as the readers make it (torch_common.hpp,
          // rebuild_tensors): its state is the call's fourth argument, as
          // torch.Tensor._reduce_ex_internal writes it.
          p_.global(o.cls.module, o.cls.name);
          p_.op(kMark);
          for (const Value& x : o.args.items()) write(x);
          write(o.state);
          p_.op(kTuple);
          p_.op(kReduce);
          return memoize(v);
        }
        // cls(*args) (REDUCE) or cls.__new__(cls, *args) (NEWOBJ), as the
        // object was made, then BUILD with the state.
        p_.global(o.cls.module, o.cls.name);
        write(o.args);
        p_.op(o.newobj ? kNewObj : kReduce);
        memoize(v);
        if (!o.state.is_none()) {
          write(o.state);
          p_.op('b');  // BUILD
        }
        return;
      }
      case Value::Kind::Tensor: {
        const Tensor& t = v.as_tensor();
        if (v.is_numpy_array()) {
          numpy_array(t, v.numpy_core_module());
          return memoize(v);
        }
        if (t.is_meta())
          meta_tensor(p_, t);
        else if (t.is_sparse())
          sparse_tensor(p_, keys_, t, records_, record_of_);
        else if (t.is_quantized())
          quantized_tensor(p_, keys_, t, records_[record_of_.at(t.file_storage().get())], records_,
                           record_of_);
        else
          plain_tensor(p_, keys_, t, records_[record_of_.at(t.file_storage().get())]);
        return memoize(v);
      }
    }
  }

  void finish_records() {
    for (Record& r : records_)
      r.typed = r.typed && !legacy_storage_class(r.dtype).empty() &&
                r.storage->nbytes() % dtype_size(r.dtype) == 0;
  }
  Pickler& pickler() { return p_; }
  // The records in the order the pickle named them (after write()).
  const std::vector<Record*>& records() const { return keys_.order(); }

 private:
  [[noreturn]] void refuse(const std::string& path, const std::string& what) const {
    throw Error(ErrorCode::unsupported,
                std::string(path.empty() ? "the whole object " : "the value ") + what, path,
                std::nullopt, where_);
  }
  // An Enum member the readers made of getattr(cls, 'NAME') (module "m",
  // name "Cls.NAME"), of an allowed Enum (a DCP one, or an active
  // profile's): the class's name and the member's.
  std::optional<std::pair<std::string_view, std::string_view>> enum_member(const Global& g) const {
    const std::string_view n = g.name;
    const auto dot = n.find('.');
    if (dot == std::string_view::npos || n.find('.', dot + 1) != std::string_view::npos)
      return std::nullopt;
    const std::string_view cls = n.substr(0, dot), member = n.substr(dot + 1);
    const pickle::ProfileClass* c = pickle::profile_class(profiles_, g.module, cls);
    if (pickle::allowed_enum_member(g.module, cls, member) ||
        (c != nullptr && c->use == pickle::ProfileUse::enum_member &&
         pickle::enum_member_name(member)))
      return std::pair{cls, member};
    return std::nullopt;
  }
  void check_global(const Global& g, const std::string& path) const {
    // A TorchScript class (__torch__.*) exists only inside torch.jit.load's
    // compilation unit: no Python loader can import it, allowed or not.
    if (g.module == "__torch__" || g.module.starts_with("__torch__."))
      refuse(path, "names the TorchScript class " + g.qualified() +
                       ", which only torch.jit.load makes (no torch.load can import it): a .pt "
                       "cannot hold it; write the tensors alone (--tensors-only)");
    if (enum_member(g) || pickle::profile_class(profiles_, g.module, g.name) != nullptr) return;
    if (pickle::classify_global(g.module, g.name, allow_) != pickle::GlobalClass::allowed)
      refuse(path, "names " + g.qualified() +
                       ", which is not on the allow-list: a .pt naming it would make torch "
                       "import and run it (trust it with --allow " +
                       g.qualified() + ")");
  }
  std::size_t record_for(const Tensor& t) {
    auto [it, fresh] = record_of_.emplace(t.file_storage().get(), records_.size());
    if (fresh) records_.push_back({t.file_storage(), t.dtype(), true, false, {}});
    Record& r = records_[it->second];
    if (r.dtype != t.dtype()) r.typed = false;  // one storage, two dtypes: untyped (v3)
    return it->second;
  }
  void tensor_records(const Tensor& t, const std::string& path) {
    if (!t.defined()) refuse(path, "is an undefined tensor");
    if (t.is_meta()) return;
    if (t.is_sparse()) {
      const SparseParts& sp = *t.sparse();
      for (const Tensor* part :
           {&sp.indices, &sp.compressed_indices, &sp.plain_indices, &sp.values})
        if (part->defined()) record_for(*part);
      return;
    }
    Record& r = records_[record_for(t)];
    if (t.is_quantized()) {
      r.quantized = true;
      if (t.quantization()->scheme != Quantization::Scheme::per_tensor_affine) {
        record_for(t.quantization()->scales);
        record_for(t.quantization()->zero_points);
      }
    } else if (r.quantized) {
      refuse(path, "shares its storage with a quantized tensor; torch cannot save that");
    }
  }
  void memoize(const Value& v) {
    if (v.identity() != nullptr) memo_.emplace(v.identity(), p_.put());
  }
  // Protocol 2 has no bytes opcode: Python writes
  // _codecs.encode(the bytes as latin-1 text, 'latin1').
  void bytes(std::string_view raw) {
    std::string text;
    text.reserve(raw.size());
    for (const char c : raw) {
      const auto b = static_cast<unsigned char>(c);
      if (b < 0x80) {
        text.push_back(c);
      } else {
        text.push_back(static_cast<char>(0xC0 | (b >> 6)));
        text.push_back(static_cast<char>(0x80 | (b & 0x3F)));
      }
    }
    p_.global("_codecs", "encode");
    p_.str(text);
    p_.str("latin1");
    p_.op(kTuple2);
    p_.op(kReduce);
  }
  // numpy's dtype code of a dtype numpy has, or "".
  static std::string_view numpy_code(DType d) noexcept {
    switch (d) {
      case DType::BOOL:
        return "b1";
      case DType::U8:
        return "u1";
      case DType::I8:
        return "i1";
      case DType::I16:
        return "i2";
      case DType::U16:
        return "u2";
      case DType::I32:
        return "i4";
      case DType::U32:
        return "u4";
      case DType::I64:
        return "i8";
      case DType::U64:
        return "u8";
      case DType::F16:
        return "f2";
      case DType::F32:
        return "f4";
      case DType::F64:
        return "f8";
      case DType::C64:
        return "c8";
      case DType::C128:
        return "c16";
      default:
        return "";
    }
  }
  // A numpy array as numpy's own __reduce__ pickles it at protocol 2:
  // _reconstruct(ndarray, (0,), b'b') then BUILD (1, shape, dtype,
  // is_fortran, raw bytes), the dtype as dtype(code, False, True) with BUILD
  // (3, byte order, None, None, None, -1, -1, 0). The module is spelled as
  // the input spelled it (`core`: numpy 2's numpy._core, or numpy.core,
  // which numpy 1 has and numpy 2 keeps as an alias): torch's weights_only
  // allow-list matches the name, and a library that allows numpy 2's
  // _reconstruct (transformers' safe_globals) allows only that spelling.
  // The elements are written in the host's (little-endian) order.
  void numpy_array(const Tensor& t, std::string_view core) {
    // A Fortran-ordered array (as numpy made it, its storage holding the
    // elements column by column) keeps its order; any other view is written
    // in C order.
    const bool fortran = t.dim() > 1 && t.storage_offset() == 0 && !t.is_contiguous() &&
                         t.strides() == fortran_strides(t.shape()) &&
                         t.storage()->nbytes() >= t.nbytes();
    const Tensor data = fortran ? t : t.contiguous();
    const auto raw = fortran ? t.storage()->bytes().subspan(0, t.nbytes()) : data.bytes();
    const std::string_view code = numpy_code(t.dtype());
    p_.global(std::string(core) + ".multiarray", "_reconstruct");
    p_.global("numpy", "ndarray");
    p_.integer(0);
    p_.op(kTuple1);
    bytes("b");
    p_.op(kTuple3);
    p_.op(kReduce);
    p_.op(kMark);
    p_.integer(1);
    p_.int_tuple(t.shape());
    p_.global("numpy", "dtype");
    p_.str(code);
    p_.op(kNewFalse);
    p_.op(kNewTrue);
    p_.op(kTuple3);
    p_.op(kReduce);
    p_.op(kMark);
    p_.integer(3);
    p_.str(dtype_size(t.dtype()) == 1 ? "|" : "<");
    p_.op(kNone);
    p_.op(kNone);
    p_.op(kNone);
    p_.integer(-1);
    p_.integer(-1);
    p_.integer(0);
    p_.op(kTuple);
    p_.op('b');  // BUILD
    p_.op(fortran ? kNewTrue : kNewFalse);
    bytes(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
    p_.op(kTuple);
    p_.op('b');  // BUILD
  }
  static Shape fortran_strides(const Shape& shape) {
    Shape s(shape.size(), 1);
    std::int64_t acc = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      s[i] = acc;
      acc *= std::max<std::int64_t>(shape[i], 1);
    }
    return s;
  }
  void batches(const Value::Items& items, char op) {
    for (std::size_t start = 0; start < items.size(); start += kBatch) {
      p_.op(kMark);
      for (std::size_t i = start; i < std::min(items.size(), start + kBatch); ++i) write(items[i]);
      p_.op(op);
    }
  }

  std::span<const std::string> allow_;
  std::span<const std::string> profiles_;
  const std::string& where_;
  Pickler p_;
  RecordKeys keys_;
  std::vector<Record> records_;
  std::unordered_map<const Storage*, std::size_t> record_of_;
  std::unordered_set<const void*> seen_;
  std::unordered_map<const void*, std::uint32_t> memo_;
};

}  // namespace

void write_pytorch_tree(const Value& root, std::span<const std::string> allow,
                        std::span<const std::string> profiles, AtomicFile& out,
                        DataStreamer& data) {
  const std::string where = out.target().string();
  TreeWriter w(allow, profiles, where);
  std::string path;
  w.collect(root, path);
  w.finish_records();
  Pickler& p = w.pickler();
  p.proto2();
  w.write(root);
  p.op(kStop);
  write_archive(p.bytes(), w.records(), out, data);
}

}  // namespace torchport::formats
