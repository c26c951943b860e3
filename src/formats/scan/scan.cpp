// scan(): the static analysis behind `torchport scan`. Every pickle runs
// through the VM with a persistent-id callback that only records kinds, so
// the VM's statistics say what Python would import, call and build; where
// the VM stops before Python would, an opcode walk lists the globals past
// that point. Then the file is opened lazily as open() would, to check its
// structure. Nothing is loaded and nothing can run.
//
// The verdict fails closed: a global outside the allow-list (and the user's
// patterns) makes a file unsafe whether or not it is on the deny-list, which
// only explains.

#include "torchport/formats/scan.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "formats/read/numpy.hpp"
#include "formats/read/readers.hpp"
#include "formats/read/strict_json.hpp"
#include "pickle/opcodes.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/io/byte_reader.hpp"
#include "torchport/io/tar.hpp"
#include "torchport/io/zip.hpp"

namespace torchport {
namespace {

namespace ops = pickle::ops;
namespace numpy = formats::numpy;

// How deep archives inside archives are followed, and how many bytes of
// members one scan inflates or copies in all.
constexpr int kMaxNesting = 3;

// 0x1950a86a20f9469cfc6c, as pickle's LONG1 stores it (pytorch_legacy.cpp).
constexpr unsigned char kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9,
                                          0x20, 0x6a, 0xa8, 0x50, 0x19};

bool is_legacy_magic(const Value& v) {
  if (!v.is(Value::Kind::BigInt)) return false;
  const std::string& b = v.as_bytes();
  return b.size() == sizeof kLegacyMagic &&
         std::equal(b.begin(), b.end(), std::begin(kLegacyMagic),
                    [](char c, unsigned char m) { return static_cast<unsigned char>(c) == m; });
}

std::string pid_kind(const Value& pid) {
  // The tar format's pickle names a storage by its key alone.
  if (pid.is(Value::Kind::Str)) return "key";
  const Value* first = &pid;
  if (pid.is(Value::Kind::Tuple) || pid.is(Value::Kind::List)) {
    if (pid.size() == 0) return "(empty)";
    first = &pid.items()[0];
  }
  if (first->is(Value::Kind::Str)) return first->as_str();
  if (first->is(Value::Kind::Bytes)) return first->as_bytes();
  if (first->is(Value::Kind::Global)) return "class";  // tar: (ModuleClass, file, source)
  return std::string(first->kind_name());
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string opcode_text(std::uint8_t op) {
  const std::string_view n = pickle::opcode_name(op);
  return n.empty() ? std::string() : std::string(n);
}

int rank(ScanVerdict v) {
  switch (v) {
    case ScanVerdict::unrecognized:
      return 0;
    case ScanVerdict::clean:
      return 1;
    case ScanVerdict::malformed:
      return 2;
    case ScanVerdict::unsafe:
      return 3;
  }
  return 3;
}

// Whether Python's unpickler stops where the VM stopped (the same bytes
// break it): otherwise Python may read on, and whatever follows is judged.
bool python_stops_too(const Error& e) {
  if (e.code() == ErrorCode::truncated) return true;
  const std::string& m = e.message();
  return m.starts_with("unknown opcode") || m.find("is not a number") != std::string::npos ||
         m.find("not a quoted literal") != std::string::npos ||
         m.find("bad escape") != std::string::npos || m.find("is not UTF-8") != std::string::npos ||
         m.starts_with("pickle protocol");
}

// The globals of the opcodes from `reader`'s position to STOP, read as
// pickletools.genops reads them (no stack): GLOBAL and INST name theirs,
// STACK_GLOBAL takes the two strings most recently pushed or fetched from
// the memo. `calls_after` is set for globals a calling opcode follows.
struct WalkedGlobal {
  std::string module, name;
  std::uint8_t opcode = 0;
  std::uint64_t offset = 0;
  bool called = false;
};

bool utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80             ? 1
                          : (c & 0xe0) == 0xc0 ? 2
                          : (c & 0xf0) == 0xe0 ? 3
                          : (c & 0xf8) == 0xf0 ? 4
                                               : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n;
  }
  return true;
}

std::vector<WalkedGlobal> walk_globals(ByteReader r, std::uint64_t max_ops) {
  std::vector<WalkedGlobal> out;
  std::deque<std::optional<std::string>> strings;  // the last few pushes, unknown ones as nullopt
  std::unordered_map<std::uint64_t, std::optional<std::string>> memo;
  auto push = [&](std::optional<std::string> s) {
    strings.push_back(std::move(s));
    if (strings.size() > 2) strings.pop_front();
  };
  auto put = [&](std::uint64_t i) {
    if (memo.size() < 65536) memo[i] = strings.empty() ? std::nullopt : strings.back();
  };
  auto get = [&](std::uint64_t i) {
    const auto it = memo.find(i);
    push(it == memo.end() ? std::nullopt : it->second);
  };
  std::uint64_t memo_count = 0;
  try {
    for (std::uint64_t n = 0; n < max_ops; ++n) {
      const std::uint64_t at = r.file_offset();
      const std::uint8_t op = r.u8("opcode");
      const pickle::OpInfo* info = pickle::opcode_info(op);
      if (info == nullptr) return out;  // not an opcode: Python stops here too
      const pickle::Operand a = pickle::read_operand(r, *info);
      switch (op) {
        case ops::STOP:
          return out;
        case ops::GLOBAL:
        case ops::INST: {
          std::string module(a.text), name(a.second);
          if (!utf8(module) || !utf8(name)) return out;  // Python's decode fails here
          out.push_back({std::move(module), std::move(name), op, at, op == ops::INST});
          push(std::nullopt);
          break;
        }
        case ops::STACK_GLOBAL: {
          const auto name = strings.size() >= 1 ? strings.back() : std::nullopt;
          const auto module = strings.size() >= 2 ? strings.front() : std::nullopt;
          out.push_back({module.value_or("?"), name.value_or("?"), op, at, false});
          push(std::nullopt);
          break;
        }
        case ops::REDUCE:
        case ops::NEWOBJ:
        case ops::NEWOBJ_EX:
        case ops::OBJ:
        case ops::BUILD:
          for (auto& g : out) g.called = true;  // conservatively: any global seen so far
          push(std::nullopt);
          break;
        case ops::STRING:
        case ops::UNICODE:
        case ops::SHORT_BINUNICODE:
        case ops::SHORT_BINSTRING:
        case ops::BINUNICODE:
        case ops::BINSTRING:
        case ops::BINUNICODE8:
          push(std::string(a.text));
          break;
        case ops::PUT:
        case ops::GET: {
          std::uint64_t i = 0;
          for (char c : a.text)
            if (c >= '0' && c <= '9') i = i * 10 + static_cast<std::uint64_t>(c - '0');
          if (op == ops::PUT)
            put(i);
          else
            get(i);
          break;
        }
        case ops::BINPUT:
        case ops::LONG_BINPUT:
          put(a.number);
          break;
        case ops::MEMOIZE:
          put(memo_count++);
          break;
        case ops::BINGET:
        case ops::LONG_BINGET:
          get(a.number);
          break;
        case ops::BINFLOAT:
        case ops::FRAME:
          break;
        default:  // any other value or operation: not a string
          push(std::nullopt);
          break;
      }
    }
  } catch (const Error&) {
    // Truncated: Python stops here too.
  }
  return out;
}

// Inflates raw deflate data (a zip entry) up to `cap` bytes; what it could.
std::vector<std::byte> inflate_raw(std::span<const std::byte> in, std::uint64_t cap) {
  std::vector<std::byte> out;
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) return out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size(), 0x7fffffff));
  constexpr std::size_t kChunk = 1 << 16;
  for (;;) {
    if (out.size() >= cap) break;
    const std::size_t old = out.size();
    const std::size_t grow = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, cap - old));
    out.resize(old + grow);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + old);
    z.avail_out = static_cast<uInt>(grow);
    const int rc = inflate(&z, Z_NO_FLUSH);
    out.resize(old + grow - z.avail_out);
    if (rc != Z_OK) break;  // the end, or damage: keep what came out
  }
  inflateEnd(&z);
  return out;
}

// One member of a zip as its local header describes it.
struct LocalEntry {
  std::string name;
  std::uint16_t method = 0;
  std::uint64_t offset = 0;  // of its data
  std::span<const std::byte> data;
};

// The local headers of a zip archive, walked from the front (what a
// refused archive's entries are, whatever its directory says).
std::vector<LocalEntry> local_entries(std::span<const std::byte> b, std::uint64_t max_entries) {
  std::vector<LocalEntry> out;
  auto u16 = [&](std::size_t at) {
    return static_cast<std::uint16_t>(static_cast<unsigned>(b[at]) |
                                      (static_cast<unsigned>(b[at + 1]) << 8));
  };
  auto u32 = [&](std::size_t at) {
    return static_cast<std::uint32_t>(u16(at)) | (static_cast<std::uint32_t>(u16(at + 2)) << 16);
  };
  std::size_t pos = 0;
  while (out.size() < max_entries && pos + 30 <= b.size()) {
    if (!(b[pos] == std::byte{'P'} && b[pos + 1] == std::byte{'K'} && b[pos + 2] == std::byte{3} &&
          b[pos + 3] == std::byte{4})) {
      ++pos;
      continue;
    }
    const std::uint16_t method = u16(pos + 8);
    const std::uint64_t csize = u32(pos + 18);
    const std::size_t name_len = u16(pos + 26), extra_len = u16(pos + 28);
    const std::size_t data = pos + 30 + name_len + extra_len;
    if (data > b.size()) break;
    LocalEntry e;
    e.name.assign(reinterpret_cast<const char*>(b.data() + pos + 30), name_len);
    e.method = method;
    e.offset = data;
    // A size of 0 (data descriptor) or past the end: the rest of the file
    // (a pickle stops at STOP, a deflate stream at its end).
    const std::uint64_t n = csize == 0 || csize > b.size() - data ? b.size() - data : csize;
    e.data = b.subspan(data, static_cast<std::size_t>(n));
    out.push_back(std::move(e));
    pos = csize == 0 || csize > b.size() - data ? data : static_cast<std::size_t>(data + csize);
  }
  return out;
}

// A zip name's path below the archive's top folder, lower-cased: what
// torch's reader (miniz, case-insensitive) matches "code/" against.
std::string record_path(std::string_view name) {
  const auto slash = name.find('/');
  return lower(slash == std::string_view::npos ? name : name.substr(slash + 1));
}

bool is_code_record(std::string_view name) {
  const std::string rel = record_path(name), all = lower(name);
  return rel.starts_with("code/") || all.starts_with("code/") || all.ends_with(".py");
}

bool is_pickle_record(std::string_view name) {
  return lower(name).ends_with(".pkl");
}

// True for the numpy .npy magic.
bool looks_like_npy(std::span<const std::byte> b) {
  return b.size() >= 10 && std::memcmp(b.data(), "\x93NUMPY", 6) == 0;
}

ScanReport scan_source(const Source& source, const OpenOptions& options, int depth);

class Scanner {
 public:
  Scanner(ScanReport& report, const OpenOptions& options, int depth)
      : r_(report), o_(options), depth_(depth) {}

  // Lists the numpy object arrays of a pickle's value: one visit per node
  // (shared nodes once), paths cut at 256 characters.
  static void find_object_arrays(const Value& root, PickleScan& p) {
    std::unordered_set<const void*> seen;
    std::vector<std::pair<const Value*, std::string>> todo{{&root, "$"}};
    auto child = [](const std::string& at, const std::string& key) {
      std::string c = at == "$" ? key : at + "." + key;
      if (c.size() > 256) c.resize(256);
      return c;
    };
    while (!todo.empty()) {
      auto [v, at] = std::move(todo.back());
      todo.pop_back();
      if (!seen.insert(v->identity()).second) continue;
      switch (v->kind()) {
        case Value::Kind::List:
        case Value::Kind::Tuple:
        case Value::Kind::Set:
          for (std::size_t i = 0; i < v->items().size(); ++i)
            todo.emplace_back(&v->items()[i], child(at, std::to_string(i)));
          break;
        case Value::Kind::Dict:
          for (const auto& [k, x] : v->pairs())
            todo.emplace_back(&x, child(at, k.is(Value::Kind::Str) ? k.as_str() : k.repr(1, 64)));
          break;
        case Value::Kind::Object: {
          const Object& o = v->as_object();
          if (numpy::is_object_array(o)) {
            if (p.object_arrays.size() < 16) p.object_arrays.push_back(at);
            ++p.object_array_count;
          }
          todo.emplace_back(&o.args, at);
          todo.emplace_back(&o.state, at);
          break;
        }
        default:
          break;
      }
    }
  }

  // Runs one pickle from `reader`'s position; returns its value, or nothing
  // when it could not be read to its end (the error is then recorded).
  std::optional<Value> pickle(ByteReader& reader, std::string name) {
    PickleScan& p = r_.pickles.emplace_back();
    p.name = std::move(name);
    p.offset = reader.file_offset();
    const ByteReader start = reader;
    auto persistent = [&p](const Value& pid, std::uint64_t) -> Value {
      ++p.persistent_kinds[pid_kind(pid)];
      return Value();
    };
    try {
      Value v = pickle::unpickle(reader, o_.limits, persistent, &p.stats);
      if (numpy::referenced(p.stats)) find_object_arrays(v, p);
      return v;
    } catch (const Error& e) {
      p.error = e.what();
      if (!python_stops_too(e) && e.offset()) {
        // Python may read on where the VM refused: list what follows.
        ByteReader rest = start;
        const std::uint64_t from = *e.offset();
        if (from >= rest.file_offset() && from - rest.file_offset() <= rest.remaining()) {
          rest.seek(rest.pos() + (from - rest.file_offset()));
          walked_[r_.pickles.size() - 1] = walk_globals(rest, o_.limits.max_nodes);
        }
      }
      return std::nullopt;
    }
  }

  // A zip: its pickles and code records from the central directory, or
  // from the local headers when the archive is refused.
  void scan_zip(const Source& src) {
    std::vector<LocalEntry> entries;
    bool refused = false;
    ZipArchive zip;
    try {
      zip = ZipArchive::open(src, o_.limits);
      for (const ZipEntry& e : zip.entries()) {
        LocalEntry l;
        l.name = e.name;
        l.method = e.method;
        l.offset = e.data_offset;
        entries.push_back(std::move(l));
      }
    } catch (const Error&) {
      refused = true;  // open() says why, below
      entries = local_entries(src.bytes(), o_.limits.max_entries);
    }
    // A refused archive's records are all scanned by content: its
    // directory cannot say which are tensor data.
    const bool torch_like = !refused && std::ranges::any_of(entries, [](const LocalEntry& e) {
      const std::string rel = record_path(e.name);
      return rel == "data.pkl" || rel == "constants.pkl" || lower(e.name) == "data.pkl";
    });
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const LocalEntry& e = entries[i];
      if (is_code_record(e.name)) r_.code_records.push_back(e.name);
      const bool pkl = is_pickle_record(e.name);
      if (!pkl && torch_like) {
        // A deflated record is inflated and checked (size and CRC-32) and
        // dropped: open() is lazy and would not see a damaged one.
        if (!refused && e.method != 0 && !is_code_record(e.name)) {
          try {
            (void)zip.read(zip.entries()[i]);
          } catch (const Error& err) {
            add_malformed(err.what(), e.name, e.offset);
          }
        }
        continue;
      }
      if (!pkl && depth_ >= kMaxNesting) continue;
      // The entry's bytes: from the archive, or from its local header.
      Source bytes;
      try {
        if (!refused) {
          bytes = zip.read(zip.entries()[i]);
        } else if (e.method == 8) {
          bytes = Source::from_buffer(inflate_raw(e.data, o_.limits.max_pickle_bytes), e.name);
        } else {
          bytes = Source::borrow(e.data, e.name);
        }
      } catch (const Error& err) {
        PickleScan& p = r_.pickles.emplace_back();
        p.name = e.name;
        p.offset = e.offset;
        p.error = err.what();
        continue;
      }
      const bool in_place = refused ? e.method == 0 : zip.entries()[i].method == 0;
      if (pkl) {
        ByteReader reader(bytes.bytes(), e.name, in_place ? e.offset : 0);
        pickle(reader, e.name);
      } else {
        member(bytes, e.name);
      }
    }
    if (!r_.code_records.empty()) {
      std::string list;
      for (std::size_t i = 0; i < r_.code_records.size() && i < 8; ++i)
        list += (i ? ", '" : "'") + r_.code_records[i] + "'";
      if (r_.code_records.size() > 8) list += ", ...";
      add({ScanVerdict::unsafe, "torchscript-code", "", false,
           std::to_string(r_.code_records.size()) + " code record(s) (" + list +
               "): torch.jit.load compiles and runs them (and torch.load before 2.6 did too, even "
               "with "
               "weights_only: CVE-2025-32434); torchport never reads them",
           src.name(), std::nullopt});
    }
  }

  // A file inside an archive that is not a checkpoint, scanned on its own.
  void member(const Source& bytes, const std::string& name) {
    ScanReport sub = scan_source(bytes, o_, depth_ + 1);
    sub.path = r_.path + "!" + name;
    r_.members.push_back(std::move(sub));
  }

  // A legacy file's stacked pickles, or plain pickles: a reader that loads
  // pickles one after another (pickle.load in a loop) runs the ones after
  // the first, so each is scanned (at most 64); bytes after the last that
  // name nothing are ignored.
  void scan_pickles(const Source& src) {
    ByteReader reader(src.bytes(), src.name());
    const auto magic = pickle(reader, "pickle");
    if (!magic) return;
    if (!is_legacy_magic(*magic)) {
      for (int i = 1; i < 64 && !reader.at_end(); ++i) {
        if (pickle(reader, "pickle:" + std::to_string(i))) continue;
        if (names_nothing(r_.pickles.size() - 1)) {
          r_.pickles.pop_back();
          walked_.erase(r_.pickles.size());
        }
        break;
      }
      return;
    }
    r_.pickles.back().name = "legacy:magic_number";
    static const char* const kNames[] = {"legacy:protocol_version", "legacy:sys_info",
                                         "legacy:object", "legacy:storage_keys"};
    for (const char* name : kNames)
      if (!pickle(reader, name)) return;
  }

  void scan_tar(const Source& src) {
    TarArchive tar;
    try {
      tar = TarArchive::open(src, o_.limits);
    } catch (const Error&) {
      return;
    }
    // torch's tar format: any of its four members makes it one.
    const bool torch_like = std::ranges::any_of(
        std::initializer_list<const char*>{"sys_info", "pickle", "storages", "tensors"},
        [&tar](const char* n) { return tar.find(n) != nullptr; });
    if (!torch_like) {
      // A tar of other files: each member on its own.
      if (depth_ >= kMaxNesting) return;
      for (const TarMember& m : tar.members())
        member(Source::borrow(src.bytes().subspan(static_cast<std::size_t>(m.data_offset),
                                                  static_cast<std::size_t>(m.size)),
                              m.name),
               m.name);
      return;
    }
    // sys_info and pickle are one pickle each; storages and tensors
    // interleave pickled headers with raw data, which open() walks (and
    // refuses when a header references a dangerous global).
    for (const char* name : {"sys_info", "pickle"}) {
      const TarMember* m = tar.find(name);
      if (m == nullptr) continue;
      ByteReader reader(src.bytes().subspan(static_cast<std::size_t>(m->data_offset),
                                            static_cast<std::size_t>(m->size)),
                        name, m->data_offset);
      pickle(reader, std::string("tar:") + name);
    }
  }

  // A numpy .npy file: an object array's data is a pickle.
  void scan_npy(const Source& src) {
    const auto b = src.bytes();
    const unsigned major = static_cast<unsigned>(b[6]);
    std::uint64_t header = 0, start = 0;
    if (major == 1) {
      header = static_cast<unsigned>(b[8]) | (static_cast<unsigned>(b[9]) << 8);
      start = 10;
    } else if (b.size() >= 12) {
      std::uint32_t n;
      std::memcpy(&n, b.data() + 8, 4);
      header = n;
      start = 12;
    }
    if (header > b.size() - start) {
      add_malformed("the .npy header runs past the end of the file", src.name(), 8);
      return;
    }
    const std::string_view text(reinterpret_cast<const char*>(b.data() + start),
                                static_cast<std::size_t>(header));
    if (text.find("'O'") == std::string_view::npos && text.find("|O") == std::string_view::npos)
      return;
    ByteReader reader(b.subspan(static_cast<std::size_t>(start + header)), src.name(),
                      start + header);
    pickle(reader, "npy:object-array");
  }

  // A file no reader recognises: Python's unpickler would still run it, so
  // it is a pickle if it names anything. Returns true when it does.
  bool scan_unrecognized(const Source& src) {
    ByteReader reader(src.bytes(), src.name());
    pickle(reader, "pickle");
    if (!names_nothing(r_.pickles.size() - 1)) return true;
    r_.pickles.pop_back();
    walked_.erase(r_.pickles.size());
    return false;
  }

  // True when pickle `i` could not be read and named no global before it
  // broke (nor past it, nor by extension code, nor called a non-global).
  bool names_nothing(std::size_t i) const {
    const PickleScan& p = r_.pickles[i];
    const auto w = walked_.find(i);
    return !p.error.empty() && p.stats.globals.empty() && p.stats.extensions == 0 &&
           p.stats.other_calls == 0 && (w == walked_.end() || w->second.empty());
  }

  // The findings of the pickles' statistics.
  void judge_pickles() {
    for (std::size_t i = 0; i < r_.pickles.size(); ++i) {
      PickleScan& p = r_.pickles[i];
      for (const auto& g : p.stats.globals) {
        ScanGlobal s;
        s.name = g.module + "." + g.name;
        s.written = g.written;
        s.opcode = opcode_text(g.opcode);
        s.offset = g.first_offset;
        s.count = g.count;
        s.calls = g.calls;
        s.builds = g.builds;
        s.sets = g.sets;
        if (g.calls) {
          s.call_opcode = opcode_text(g.call_opcode);
          s.call_offset = g.first_call_offset;
        }
        judge(p, std::move(s), pickle::classify_global(g.module, g.name, o_.allow));
      }
      if (const auto w = walked_.find(i); w != walked_.end()) {
        std::set<std::string> seen;
        for (const auto& g : p.stats.globals) seen.insert(g.module + "." + g.name);
        for (const WalkedGlobal& g : w->second) {
          auto [module, name] = p.stats.protocol < 3
                                    ? pickle::compat_rename(g.module, g.name)
                                    : std::pair<std::string, std::string>{g.module, g.name};
          if (!seen.insert(module + "." + name).second) continue;
          ScanGlobal s;
          s.name = module + "." + name;
          if (module != g.module || name != g.name) s.written = g.module + "." + g.name;
          s.opcode = opcode_text(g.opcode);
          s.offset = g.offset;
          s.count = 1;
          s.calls = g.called ? 1 : 0;
          s.after_error = true;
          const bool unresolved = g.module == "?" || g.name == "?";
          judge(p, std::move(s),
                unresolved ? pickle::GlobalClass::unknown
                           : pickle::classify_global(module, name, o_.allow));
        }
      }
      if (p.stats.other_calls)
        add({ScanVerdict::unsafe, "call-of-non-global", "", false,
             std::to_string(p.stats.other_calls) +
                 " call(s) of something that is not a global (the result of another call, a value "
                 "from "
                 "the memo): Python would call it; the allow-list cannot vouch for it",
             p.name, p.stats.first_other_call_offset});
      if (p.stats.extensions)
        add({ScanVerdict::unsafe, "extension-code", "", false,
             "an EXT1/EXT2/EXT4 opcode names a global through copyreg's extension registry, which "
             "a "
             "scan cannot see",
             p.name, std::nullopt});
      for (const auto& [kind, n] : p.persistent_kinds)
        if (kind != "storage" && kind != "module" && kind != "class" && kind != "key")
          add_malformed(
              "persistent id of kind '" + kind + "' (" + std::to_string(n) +
                  " time(s)): torch writes only storages, and its loader refuses other kinds",
              p.name, std::nullopt);
      if (!p.error.empty())
        add_malformed("the pickle cannot be read to its end: " + p.error, p.name, std::nullopt);
    }
  }

  // Structure: open the file as open() would (lazily; no tensor bytes).
  void check_open(const Source& src, bool container_only) {
    OpenOptions o = o_;
    o.allow_unknown_globals = true;
    try {
      const TensorCatalog cat = open(src, o);
      r_.tensors = cat.size();
      r_.format =
          cat.format();  // more precise than the sniff: "torchscript", "pytorch-legacy", ...
      r_.reading = "ok";
    } catch (const Error& e) {
      r_.reading_error = e.what();
      if (e.code() == ErrorCode::ambiguous) {
        r_.reading = "ambiguous";
        add({ScanVerdict::unsafe, "ambiguous", "", false,
             "torch's readers and torchport's could read this file differently: " + e.message(),
             e.where().empty() ? src.name() : e.where(), e.offset()});
        return;
      }
      r_.reading = "refused";
      // An archive that holds no pickle (a zip of other files, an
      // encrypted archive of text) is no checkpoint torch could read, and
      // nothing in it is unpickled: its members speak for it.
      if (container_only) return;
      if (e.code() == ErrorCode::unsafe_global) {
        // Already judged when the scan reached it; a tar's storage headers
        // are read only here.
        if (std::ranges::any_of(r_.findings,
                                [](const ScanFinding& f) { return f.known_dangerous; }))
          return;
        add({ScanVerdict::unsafe, "imports", "", true, e.message(),
             e.where().empty() ? src.name() : e.where(), e.offset()});
        return;
      }
      add_malformed("open() refuses it: " + e.message(), e.where().empty() ? src.name() : e.where(),
                    e.offset());
    }
  }

  void add(ScanFinding f) {
    if (rank(f.severity) > rank(r_.verdict)) r_.verdict = f.severity;
    r_.findings.push_back(std::move(f));
  }
  void add_malformed(std::string message, std::string where, std::optional<std::uint64_t> offset) {
    add({ScanVerdict::malformed, "malformed", "", false, std::move(message), std::move(where),
         offset});
  }

  // The members' verdicts, into the file's.
  void fold_members() {
    for (const ScanReport& m : r_.members)
      if (m.verdict != ScanVerdict::unrecognized && m.verdict != ScanVerdict::clean)
        add({m.verdict, m.verdict == ScanVerdict::unsafe ? "member-unsafe" : "malformed", "", false,
             std::string(scan_verdict_name(m.verdict)) + ": " + m.reason(), m.path, std::nullopt});
  }

 private:
  void judge(PickleScan& p, ScanGlobal s, pickle::GlobalClass klass) {
    s.allowed = klass == pickle::GlobalClass::allowed;
    s.known_dangerous = klass == pickle::GlobalClass::dangerous;
    if (!s.allowed || s.sets > 0) {
      const bool runs = s.calls > 0 || s.builds > 0 || s.sets > 0;
      s.reasons.push_back(runs ? "calls" : "imports");
      if (s.known_dangerous) s.reasons.push_back("known-dangerous");
      std::string what;
      if (s.calls > 0 && s.builds > 0) {
        what = "calls '" + s.name + "' and BUILDs its result (" + std::to_string(s.calls) +
               " call(s))";
      } else if (s.calls > 0) {
        what = "calls '" + s.name + "' (" + std::to_string(s.calls) + " time(s)" +
               (s.call_opcode.empty() ? std::string() : ", first by " + s.call_opcode) + ")";
      } else if (s.sets > 0) {
        what = "BUILDs the global '" + s.name + "' itself: Python sets attributes of the live " +
               (s.allowed ? "(allowed) " : "") + "class, function or module";
      } else if (s.builds > 0) {
        what = "BUILDs '" + s.name + "' (Python sets its attributes or runs its __setstate__)";
      } else {
        what = "names '" + s.name + "'";
      }
      if (!s.written.empty())
        what += " (written '" + s.written + "', renamed as Python 3 renames protocol-2 names)";
      if (s.sets == 0 || !s.allowed)
        what += s.known_dangerous ? ": a known way to run code"
                                  : ": it is not on the allow-list, and Python would import it";
      if (s.after_error)
        what += " (past the point where the pickle stops being readable; Python may read on)";
      if (s.name.find('?') != std::string::npos)
        what = "STACK_GLOBAL of a name the scan cannot resolve" +
               std::string(" (past the point where the pickle stops being readable)");
      add({ScanVerdict::unsafe, s.reasons.front(), s.name, s.known_dangerous, what, p.name,
           s.call_offset && s.calls ? s.call_offset : std::optional<std::uint64_t>(s.offset)});
    }
    p.globals.push_back(std::move(s));
  }

  ScanReport& r_;
  const OpenOptions& o_;
  int depth_;
  std::map<std::size_t, std::vector<WalkedGlobal>> walked_;  // per pickle index
};

void finish(ScanReport& r) {
  std::stable_sort(r.findings.begin(), r.findings.end(),
                   [](const ScanFinding& a, const ScanFinding& b) {
                     if (rank(a.severity) != rank(b.severity))
                       return rank(a.severity) > rank(b.severity);
                     return a.known_dangerous &&
                            !b.known_dangerous;  // the deny-list's names first: they explain best
                   });
}

ScanReport scan_source(const Source& source, const OpenOptions& options, int depth) {
  ScanReport r;
  r.path = source.name();
  Scanner s(r, options, depth);
  const std::optional<Format> format =
      options.format.empty() ? sniff(source) : parse_format(options.format);
  r.format = !options.format.empty() ? options.format
             : format                ? std::string(format_name(*format))
                                     : std::string();
  bool container_only = false;
  if (format == Format::pytorch_zip || format == Format::torchscript) {
    s.scan_zip(source);
    container_only = r.pickles.empty() && r.code_records.empty();
  } else if (format == Format::pytorch_tar) {
    s.scan_tar(source);
    container_only = r.pickles.empty() && r.code_records.empty();
  } else if (format == Format::pytorch_legacy || format == Format::pickle) {
    s.scan_pickles(source);
    // Text that starts like a protocol 0 pickle (a LICENSE: 'L' is LONG) and
    // names nothing before it breaks: nothing in it can run.
    if (options.format.empty() && r.pickles.size() == 1 && s.names_nothing(0) &&
        !source.bytes().empty() && source.bytes()[0] != std::byte{0x80}) {
      r.pickles.clear();
      r.format.clear();
      r.verdict = ScanVerdict::unrecognized;
      return r;
    }
  } else if (r.format.empty() && looks_like_npy(source.bytes())) {
    r.format = "numpy";
    s.scan_npy(source);
    s.judge_pickles();
    r.reading = "ok";
    finish(r);
    return r;
  } else if (r.format.empty()) {
    // No format: a pickle in disguise, or nothing torch would read.
    if (!s.scan_unrecognized(source)) {
      r.verdict = ScanVerdict::unrecognized;
      return r;
    }
    r.format = "pickle";
  }
  // safetensors and our records hold no pickle: their structure is all.
  s.judge_pickles();
  s.fold_members();
  s.check_open(source, container_only);
  if (container_only && r.reading == "refused" && r.verdict == ScanVerdict::clean &&
      // an archive of files none of which is a model: nothing torch reads
      std::ranges::all_of(
          r.members, [](const ScanReport& m) { return m.verdict == ScanVerdict::unrecognized; }))
    r.verdict = ScanVerdict::unrecognized;
  finish(r);
  return r;
}

}  // namespace

std::string_view scan_verdict_name(ScanVerdict v) noexcept {
  switch (v) {
    case ScanVerdict::clean:
      return "clean";
    case ScanVerdict::unsafe:
      return "unsafe";
    case ScanVerdict::malformed:
      return "malformed";
    case ScanVerdict::unrecognized:
      return "unrecognized";
  }
  return "?";
}

std::string ScanReport::reason() const {
  for (const auto& f : findings)
    if (f.severity == verdict)
      return f.where + ": " + f.reason +
             (f.known_dangerous && f.reason != "known-dangerous" ? ", known-dangerous" : "") +
             ": " + f.message;
  return {};
}

ScanReport scan(const Source& source, const OpenOptions& options) try {
  pickle::validate_allow_patterns(options.allow);
  return scan_source(source, options, 0);
} catch (...) {
  rethrow_as_error("scan", source.name());  // no bare std:: exception leaves the library
}

ScanReport scan(const std::filesystem::path& path, const OpenOptions& options) try {
  pickle::validate_allow_patterns(options.allow);
  const std::optional<Format> format = parse_format(options.format);
  const bool sharded =
      (options.format.empty() && formats::is_sharded_path(path)) || (format && is_sharded(*format));
  if (!sharded) {
    ScanReport r = scan_source(Source::map_file(path, options.map), options, 0);
    r.path = path.string();
    return r;
  }

  ScanReport r;
  r.path = path.string();
  r.format = "sharded";
  Scanner s(r, options, 0);
  // The shards the index names, each scanned as a file of its own; then the
  // whole checkpoint opened as open() would.
  std::filesystem::path index = path;
  try {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end;
           it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() > 11 && name.ends_with(".index.json")) index = it->path();
      }
    }
    const Source src = Source::map_file(index, options.map);
    if (src.size() <= options.limits.max_header_bytes) {
      const std::string_view text(reinterpret_cast<const char*>(src.bytes().data()), src.size());
      const auto root =
          formats::parse_strict_json(text, "index", 0, src.name(), 8, options.limits.max_nodes);
      std::set<std::string> seen;
      if (const auto wm = root.find("weight_map");
          root.is_object() && wm != root.end() && wm->is_object())
        for (const auto& [name, v] : wm->items())
          if (v.is_string() && seen.insert(v.get<std::string>()).second)
            r.shards.push_back(v.get<std::string>());
    }
  } catch (const Error&) {
    // read_sharded below says what is wrong with the index.
  }
  for (const std::string& shard : r.shards) {
    const std::filesystem::path file = index.parent_path() / shard;
    if (shard.find('/') != std::string::npos || shard == ".." ||
        !std::filesystem::is_regular_file(file))
      continue;  // read_sharded refuses it
    ScanReport sub;
    try {
      sub = scan_source(Source::map_file(file, options.map), options, 0);
    } catch (const Error& e) {
      s.add_malformed(e.what(), shard, std::nullopt);
      continue;
    }
    for (auto& p : sub.pickles) {
      p.name = shard + ":" + p.name;
      r.pickles.push_back(std::move(p));
    }
    for (auto& c : sub.code_records) r.code_records.push_back(shard + ":" + c);
    for (auto& f : sub.findings) {
      f.where = shard + ":" + f.where;
      s.add(std::move(f));
    }
    if (sub.verdict == ScanVerdict::unrecognized)
      s.add_malformed("not a checkpoint format", shard, std::nullopt);
  }
  try {
    OpenOptions o = options;
    o.allow_unknown_globals = true;
    const TensorCatalog cat = formats::read_sharded(path, o);
    r.tensors = cat.size();
    r.format = cat.format();
    r.reading = "ok";
  } catch (const Error& e) {
    r.reading = e.code() == ErrorCode::ambiguous ? "ambiguous" : "refused";
    r.reading_error = e.what();
    const bool judged =
        std::ranges::any_of(r.findings, [](const ScanFinding& f) { return f.known_dangerous; });
    if (e.code() == ErrorCode::ambiguous)
      s.add({ScanVerdict::unsafe, "ambiguous", "", false, e.message(), e.where(), e.offset()});
    else if (e.code() == ErrorCode::unsafe_global && !judged)
      s.add({ScanVerdict::unsafe, "imports", "", true, e.message(), e.where(), e.offset()});
    else if (e.code() != ErrorCode::unsafe_global)
      s.add_malformed(std::string("open() refuses it: ") + e.what(), e.where(), e.offset());
  }
  finish(r);
  return r;
} catch (...) {
  rethrow_as_error("scan", path.string());  // no bare std:: exception leaves the library
}

std::vector<ScanReport> scan_directory(const std::filesystem::path& dir,
                                       const OpenOptions& options) {
  pickle::validate_allow_patterns(options.allow);
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir, std::filesystem::directory_options::none,
                                                   ec),
      end;
  if (ec)
    throw Error(ErrorCode::io, "cannot list the directory: " + ec.message(), {}, std::nullopt,
                dir.string());
  for (; it != end; it.increment(ec)) {
    if (ec)
      throw Error(ErrorCode::io, "cannot list the directory: " + ec.message(), {}, std::nullopt,
                  dir.string());
    std::error_code fec;
    if (it->is_regular_file(fec) && !it->is_symlink(fec)) files.push_back(it->path());
    if (files.size() > options.limits.max_entries)
      throw Error(ErrorCode::limit_exceeded,
                  "more than " + std::to_string(options.limits.max_entries) +
                      " files: exceeds Limits::max_entries; scan a smaller directory",
                  {}, std::nullopt, dir.string());
  }
  std::sort(files.begin(), files.end());
  std::vector<ScanReport> out;
  out.reserve(files.size());
  for (const auto& f : files) {
    OpenOptions o = options;
    o.format.clear();
    try {
      ScanReport r = scan_source(Source::map_file(f, o.map), o, 0);
      r.path = f.string();
      out.push_back(std::move(r));
    } catch (const Error& e) {
      ScanReport r;
      r.path = f.string();
      r.verdict = ScanVerdict::malformed;
      r.findings.push_back(
          {ScanVerdict::malformed, "malformed", "", false, e.what(), f.string(), std::nullopt});
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace torchport
