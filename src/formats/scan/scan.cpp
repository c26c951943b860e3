// scan(): the static analysis behind `torchport scan`, a consumer of the
// walk (formats/read/walk.hpp). A file is read by the reader open() would
// use, told to a `FileScan` as it reads: every pickle the reader runs is
// judged from the VM's statistics (what Python would import, call and
// build); every member of an archive the format does not read is judged by
// its content, as a file of its own; the bytes after a stream's last pickle
// are judged as a loader reading pickle after pickle would read them.
// Where the reader stops, what a more lenient loader could still reach is
// swept (the zip's local headers, the rest of a pickle stream). Where the VM
// stops but Python would read on, the opcodes that follow are walked.
//
// The verdict fails closed: clean only when every place a loader could
// unpickle was read to its end and names only allowed globals (or the
// user's patterns). The deny-list only explains.

#include "torchport/formats/scan.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include "formats/read/numpy.hpp"
#include "formats/read/readers.hpp"
#include "formats/read/walk.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/io/byte_reader.hpp"
#include "torchport/io/compression.hpp"
#include "torchport/io/zip.hpp"

namespace torchport {
namespace {

namespace numpy = formats::numpy;
using formats::Part;
using formats::PartRole;

int rank(ScanVerdict v) {
  switch (v) {
    case ScanVerdict::not_a_model_file:
      return 0;
    case ScanVerdict::clean:
      return 1;
    case ScanVerdict::malformed:
      return 2;
    case ScanVerdict::truncated:
      return 3;
    case ScanVerdict::unscannable:
      return 4;
    case ScanVerdict::unsafe:
      return 5;
  }
  return 5;
}

std::string opcode_text(std::uint8_t op) {
  const std::string_view n = pickle::opcode_name(op);
  return n.empty() ? std::string() : std::string(n);
}

// Whether Python's unpickler stops where the VM stopped: the VM refuses
// with `truncated` or `corrupt` only what CPython refuses too (an
// `unsupported` or `limit_exceeded` refusal is the VM's own).
bool python_stops_too(const Error& e) {
  return e.code() == ErrorCode::truncated || e.code() == ErrorCode::corrupt;
}

class Scanner;

// The scan of one file (or member): the walker its reader tells what it
// meets, and the sweeps after it.
class FileScan final : public formats::Walker {
 public:
  FileScan(Scanner& s, ScanReport& r, const Source& src, int depth)
      : s_(s), r_(r), src_(src), depth_(depth) {}

  void run(const std::string& forced_format);
  void walk_file(const std::string& forced_format);
  bool compressed(Compression c);
  void run_sharded(const std::filesystem::path& path);

  // --- the walk --------------------------------------------------------
  bool lists_parts() const noexcept override { return true; }
  void part(Part part) override;
  Value pickle(std::string_view name, const ByteReader& start, pickle::Stats& stats,
               const std::function<Value()>& run) override;
  void enter(std::string_view file) override {
    prefix_.push_back(std::string(file) + ":");
    r_.shards.push_back(std::string(file));
  }
  void leave() override { prefix_.pop_back(); }

 private:
  std::string named(std::string_view name) const {
    std::string out;
    for (const auto& p : prefix_) out += p;
    return out + std::string(name);
  }
  void cover(std::uint64_t offset) {
    if (!prefix_.empty()) return;  // a shard's offsets are not this file's
    covered_.insert(offset);
  }
  bool in_file() const { return prefix_.empty(); }

  void reader_failed(const Error& e, std::optional<Format> format);
  void sweep_zip();
  void member(const std::string& name, const Source& bytes);
  void stream(const Source& bytes, const std::string& name, std::uint64_t base);
  void judge(PickleScan& p, const std::vector<pickle::GlobalUse>& after_error);
  void settle();
  void unscannable(std::string message, std::string where, std::optional<std::uint64_t> offset,
                   std::string reason = "unscannable") {
    add({ScanVerdict::unscannable, std::move(reason), "", false, std::move(message),
         std::move(where), offset});
  }
  void stopped(const Error& e, const std::string& what, const std::string& where);
  void add(ScanFinding f) { r_.findings.push_back(std::move(f)); }
  static void find_object_arrays(const Value& root, PickleScan& p);

  Scanner& s_;
  ScanReport& r_;
  const Source& src_;
  int depth_;
  std::vector<std::string> prefix_;  // shard names, while inside one
  std::set<std::uint64_t> covered_;  // offsets of the file's parts and pickles the walk met
  std::set<std::string> judged_;     // pickles judged ("prefix@offset"): a second run is not
  std::set<std::string> seen_;       // pickles judged, as "what@offset" of their reader
  std::vector<Part> reads_;          // records the reader reads itself, for the sweeps
};

class Scanner {
 public:
  explicit Scanner(const OpenOptions& o) : o_(o), left_(o.limits.max_scan_bytes) {
    o_.allow_unknown_globals = true;  // the scan judges; the reader only reads
  }
  const OpenOptions& options() const noexcept { return o_; }

  // Takes `n` bytes of the scan's budget; false once it is spent.
  bool take(std::uint64_t n) {
    if (n > left_) {
      left_ = 0;
      return false;
    }
    left_ -= n;
    return true;
  }
  std::string budget_text() const {
    return "the scan's budget of " + std::to_string(o_.limits.max_scan_bytes) +
           " bytes (Limits::max_scan_bytes) is spent";
  }

  ScanReport file(const Source& src, std::string path, int depth, const std::string& format = {}) {
    ScanReport r;
    r.path = std::move(path);
    FileScan f(*this, r, src, depth);
    f.run(format);
    finish(r);
    return r;
  }

  static void finish(ScanReport& r);

 private:
  OpenOptions o_;
  std::uint64_t left_;
};

// torch >= 2.6's default torch.load on this file: refused formats, then
// each pickle torch.load runs (the reader's own, in order) opcode by opcode
// and global by global, as torch/_weights_only_unpickler.py reads them.
std::optional<TorchWeightsOnly> torch_weights_only(const ScanReport& r) {
  const std::optional<Format> f = parse_format(r.format);
  if (!f || (*f != Format::pytorch_zip && *f != Format::pytorch_legacy &&
             *f != Format::pytorch_tar && *f != Format::torchscript))
    return std::nullopt;
  // A file our reader refuses (damaged, ambiguous) is not judged: torch may
  // read it in its own way (a legacy file missing a storage's record loads
  // there with uninitialised memory), and we cannot say how.
  if (r.reading != "ok") return std::nullopt;
  TorchWeightsOnly t;
  if (*f == Format::pytorch_tar) {
    t.why = "weights_only=True refuses the tar format of torch's first releases";
  } else if (*f == Format::torchscript) {
    t.why = "weights_only=True refuses TorchScript archives (torch.jit.load reads them)";
  }
  for (const auto& p : r.pickles) {
    if (p.swept) continue;  // torch.load stops before it
    if (t.why.empty() && !p.error.empty())
      t.why = p.name + " could not be read to its end: " + p.error;
    for (std::size_t op = 0; op < p.stats.opcodes.size() && t.why.empty(); ++op)
      if (p.stats.opcodes[op] != 0 &&
          !pickle::torch_weights_only_reads(static_cast<std::uint8_t>(op)))
        t.why = p.name + " uses opcode " +
                std::string(pickle::opcode_name(static_cast<std::uint8_t>(op))) +
                " (pickle protocol " + std::to_string(p.stats.protocol) +
                "), which torch's weights_only unpickler does not read";
    const auto need = [&](const std::string& name) {
      if (std::find(t.needs.begin(), t.needs.end(), name) == t.needs.end()) t.needs.push_back(name);
    };
    for (const auto& g : p.globals) {
      if (pickle::torch_weights_only_allows(g.name)) continue;
      if (g.name == "torch._utils._rebuild_sparse_csr_tensor" && t.why.empty())
        t.why = p.name + " names torch 1.13's " + g.name +
                ", which torch 2.x no longer has (it rebuilds CSR through _rebuild_sparse_tensor)";
      need(g.name);
      // BUILD on a numpy dtype needs the dtype's own class too
      // (numpy.dtypes.Float64DType, ...): torch builds only allow-listed
      // types. Which ones depends on the arrays, so all of that module.
      if (g.name == "numpy.dtype" && g.builds > 0) need("numpy.dtypes.*");
    }
  }
  if (!t.why.empty() || !t.needs.empty()) {
    t.loads = false;
    return t;
  }
  // BUILD on a tensor: the weights_only unpickler applies the state as
  // Tensor.set_(*state), torch's full unpickler (and ours) as __setstate__;
  // whether the state fits set_ is not something the scan knows.
  for (const auto& p : r.pickles)
    if (!p.swept && p.stats.tensor_builds > 0) {
      t.why = p.name +
              " BUILDs a tensor, which the weights_only unpickler applies as "
              "Tensor.set_(*state): not judged";
      return t;
    }
  t.loads = true;
  return t;
}

void Scanner::finish(ScanReport& r) {
  r.torch_weights_only = torch_weights_only(r);
  ScanVerdict v = ScanVerdict::clean;
  for (const auto& f : r.findings) v = worse(v, f.severity);
  for (const auto& m : r.members)
    if (m.verdict != ScanVerdict::clean && m.verdict != ScanVerdict::not_a_model_file) {
      v = worse(v, m.verdict);
      r.findings.push_back({m.verdict, "member", "", false,
                            std::string(scan_verdict_name(m.verdict)) + ": " + m.reason(), m.path,
                            std::nullopt});
    }
  if (v == ScanVerdict::clean && r.format.empty() && r.pickles.empty() && r.members.empty())
    v = ScanVerdict::not_a_model_file;
  r.verdict = v;
  std::stable_sort(r.findings.begin(), r.findings.end(),
                   [](const ScanFinding& a, const ScanFinding& b) {
                     if (rank(a.severity) != rank(b.severity))
                       return rank(a.severity) > rank(b.severity);
                     // the deny-list's names and code records explain best
                     const auto explains = [](const ScanFinding& f) {
                       return f.known_dangerous || f.reason == "torchscript-code";
                     };
                     return explains(a) && !explains(b);
                   });
}

// --- what the reader meets -------------------------------------------------

void FileScan::part(Part p) {
  cover(p.offset);
  switch (p.role) {
    case PartRole::tensor_data:
      ++r_.tensor_records;
      // Deflated tensor bytes are inflated and checked (size, CRC-32), then
      // dropped: open() is lazy, and damage would otherwise go unseen.
      if (p.bytes) {
        if (!s_.take(p.size)) {
          unscannable(s_.budget_text(), named(p.name), p.offset);
          return;
        }
        try {
          (void)p.bytes();
        } catch (const Error& e) {
          const bool truncated = e.code() == ErrorCode::truncated;
          add({truncated ? ScanVerdict::truncated : ScanVerdict::malformed,
               truncated ? "truncated" : "malformed", "", false,
               "tensor data cannot be read: " + e.message(), named(p.name), p.offset});
        }
      }
      return;
    case PartRole::metadata:
      return;
    case PartRole::read:
      // Judged as the reader runs it; swept by content if the reader stops first.
      if (p.bytes && in_file()) reads_.push_back(std::move(p));
      return;
    case PartRole::code:
      r_.code_records.push_back(named(p.name));
      return;
    case PartRole::member:
    case PartRole::stream:
      break;
  }
  const std::string name = named(p.name);
  if (!s_.take(p.size)) {
    unscannable(s_.budget_text(), name, p.offset);
    return;
  }
  Source bytes;
  try {
    bytes = p.bytes();
  } catch (const Error& e) {
    // A member no reader can read (damaged, a compression torch's zip
    // reader refuses, past a limit) is no place anything is unpickled from
    // only if every loader refuses it too; the scan cannot tell.
    const bool truncated = e.code() == ErrorCode::truncated;
    if (truncated || e.code() == ErrorCode::corrupt)
      add({truncated ? ScanVerdict::truncated : ScanVerdict::malformed,
           truncated ? "truncated" : "malformed", "", false,
           "the member cannot be read: " + e.message(), name, p.offset});
    else
      unscannable("the member cannot be read: " + e.message(), name, p.offset);
    return;
  }
  if (p.role == PartRole::stream)
    stream(bytes, name, p.offset);
  else
    member(name, bytes);
}

void FileScan::member(const std::string& name, const Source& bytes) {
  if (depth_ + 1 > static_cast<int>(s_.options().limits.max_scan_depth)) {
    unscannable("nested " + std::to_string(depth_ + 1) +
                    " archives deep, deeper than Limits::max_scan_depth = " +
                    std::to_string(s_.options().limits.max_scan_depth),
                name, std::nullopt);
    return;
  }
  r_.members.push_back(s_.file(bytes, r_.path + "!" + name, depth_ + 1));
}

Value FileScan::pickle(std::string_view name_in, const ByteReader& start, pickle::Stats& stats,
                       const std::function<Value()>& run) {
  const std::string name = named(name_in);
  // A pickle the reader runs twice (the legacy object: once to learn its
  // storages, once to build them) is judged once.
  const std::string key = (prefix_.empty() ? std::string() : name) + "@" +
                          std::to_string(start.file_offset()) + "@" + start.what();
  if (!judged_.insert(key).second) return run();
  PickleScan& p = r_.pickles.emplace_back();
  const std::size_t index = r_.pickles.size() - 1;
  p.name = name;
  p.offset = start.file_offset();
  seen_.insert(start.what() + "@" + std::to_string(p.offset));
  try {
    Value v = run();
    r_.pickles[index].stats = stats;
    if (numpy::referenced(stats)) find_object_arrays(v, r_.pickles[index]);
    judge(r_.pickles[index], {});
    return v;
  } catch (const Error& e) {
    PickleScan& q = r_.pickles[index];
    q.stats = stats;
    q.error = e.what();
    // What follows is walked whatever stopped the VM: where it is a
    // check of the reader's (a storage's size, a rebuild), Python reads on.
    std::vector<pickle::GlobalUse> after;
    q.python_reads_on = !python_stops_too(e);
    if (e.offset()) {
      ByteReader rest = start;
      const std::uint64_t from = *e.offset();
      if (from >= rest.file_offset() && from - rest.file_offset() <= rest.remaining()) {
        rest.seek(rest.pos() + (from - rest.file_offset()));
        const pickle::OpcodeWalk w = pickle::walk_opcodes(rest, s_.options().limits);
        after = w.globals;
        if (w.extensions) q.stats.extensions += w.extensions;
      }
    }
    judge(q, after);
    throw;
  }
}

// --- judging a pickle ------------------------------------------------------

void FileScan::judge(PickleScan& p, const std::vector<pickle::GlobalUse>& after_error) {
  const OpenOptions& o = s_.options();
  std::set<std::string> seen;
  auto one = [&](const pickle::GlobalUse& g, bool after) {
    ScanGlobal s;
    s.name = g.module + "." + g.name;
    if (!seen.insert(s.name).second) return;
    s.written = g.written;
    s.opcode = opcode_text(g.opcode);
    s.offset = g.first_offset;
    s.count = g.count;
    s.calls = g.calls;
    if (g.calls) {
      s.call_opcode = opcode_text(g.call_opcode);
      s.call_offset = g.first_call_offset;
    }
    s.builds = g.builds;
    s.sets = g.sets;
    s.after_error = after;
    const bool unresolved = g.module == "?";
    const pickle::GlobalClass klass = unresolved
                                          ? pickle::GlobalClass::unknown
                                          : pickle::classify_global(g.module, g.name, o.allow);
    s.allowed = klass == pickle::GlobalClass::allowed;
    s.known_dangerous = klass == pickle::GlobalClass::dangerous;
    if (!s.allowed || s.sets > 0) {
      const bool runs = s.calls > 0 || s.builds > 0 || s.sets > 0;
      s.reasons.push_back(runs ? "calls" : "imports");
      if (s.known_dangerous) s.reasons.push_back("known-dangerous");
      std::string what;
      if (unresolved) {
        what =
            "a STACK_GLOBAL whose module and name the scan cannot tell (built by calls, past "
            "the point where the VM stops): Python would import whatever they are";
      } else {
        if (s.calls > 0 && s.builds > 0)
          what = "calls '" + s.name + "' and BUILDs its result (" + std::to_string(s.calls) +
                 " call(s))";
        else if (s.calls > 0)
          what = "calls '" + s.name + "' (" + std::to_string(s.calls) + " time(s)" +
                 (s.call_opcode.empty() ? std::string() : ", first by " + s.call_opcode) + ")";
        else if (s.sets > 0)
          what = "BUILDs the global '" + s.name + "' itself: Python sets attributes of the live " +
                 (s.allowed ? "(allowed) " : "") + "class, function or module";
        else if (s.builds > 0)
          what = "BUILDs '" + s.name + "' (Python sets its attributes or runs its __setstate__)";
        else
          what = "names '" + s.name + "'";
        if (!s.written.empty())
          what += " (written '" + s.written + "', renamed as Python 3 renames protocol-2 names)";
        if (s.sets == 0 || !s.allowed)
          what += s.known_dangerous ? ": a known way to run code"
                                    : ": it is not on the allow-list, and Python would import it";
        if (after)
          what +=
              " (past the point where the VM stops; Python reads on; calls counted "
              "conservatively)";
      }
      add({ScanVerdict::unsafe, s.reasons.front(), s.name, s.known_dangerous, what, p.name,
           s.call_offset && s.calls ? s.call_offset : std::optional<std::uint64_t>(s.offset)});
    }
    p.globals.push_back(std::move(s));
  };
  for (const auto& g : p.stats.globals) one(g, false);
  for (const auto& g : after_error) one(g, true);
  if (p.stats.other_calls)
    add({ScanVerdict::unsafe, "call-of-non-global", "", false,
         std::to_string(p.stats.other_calls) +
             " call(s) of something that is not a global (the result of another call, a value "
             "from the memo): Python would call it; the allow-list cannot vouch for it",
         p.name, p.stats.first_other_call_offset});
  if (p.stats.extensions)
    add({ScanVerdict::unsafe, "extension-code", "", false,
         "an EXT1/EXT2/EXT4 opcode names a global through copyreg's extension registry, which a "
         "scan cannot see",
         p.name, std::nullopt});
  // (Why it broke is said by `settle()`, once the reading is known.)
}

// The pickles that could not be read to their end: unscannable where Python
// reads on, else truncated or malformed. When the file was read (another
// reader's reading, say: a record whose first byte is a pickle opcode), a
// pickle that broke where Python breaks too and named nothing was a
// reading that did not hold, and is dropped.
void FileScan::settle() {
  std::vector<PickleScan> kept;
  for (PickleScan& p : r_.pickles) {
    if (p.error.empty()) {
      kept.push_back(std::move(p));
      continue;
    }
    const bool named = !p.globals.empty() || p.stats.other_calls || p.stats.extensions;
    if (r_.reading == "ok" && !p.python_reads_on && !named) continue;
    if (p.python_reads_on) {
      unscannable("torchport's VM stops in this pickle (" + p.error +
                      ") where Python's unpickler reads on; what follows was walked opcode by "
                      "opcode, which cannot vouch for it",
                  p.name, std::nullopt);
    } else {
      const bool truncated = p.error.starts_with("[truncated]");
      add({truncated ? ScanVerdict::truncated : ScanVerdict::malformed,
           truncated ? "truncated" : "malformed", "", false,
           "the pickle cannot be read to its end (Python stops there too): " + p.error, p.name,
           std::nullopt});
    }
    kept.push_back(std::move(p));
  }
  r_.pickles = std::move(kept);
}

// Lists the numpy object arrays of a pickle's value: one visit per node
// (shared nodes once), paths cut at 256 characters.
void FileScan::find_object_arrays(const Value& root, PickleScan& p) {
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
    if (v->identity() != nullptr && !seen.insert(v->identity()).second) continue;
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

// --- sweeps ----------------------------------------------------------------

// Pickle after pickle, as a loader that calls pickle.load in a loop reads
// them, until the bytes stop being a pickle Python would read on from.
// Bytes that name nothing and end no pickle are where such a loader stops
// with an error, having run nothing.
void FileScan::stream(const Source& bytes, const std::string& name, std::uint64_t base) {
  const OpenOptions& o = s_.options();
  ByteReader rd(bytes.bytes(), bytes.name(), base);
  for (std::uint64_t i = 0; !rd.at_end(); ++i) {
    // Is what follows a pickle at all?
    ByteReader probe = rd;
    const pickle::OpcodeWalk w = pickle::walk_opcodes(probe, o.limits);
    const bool proto = static_cast<unsigned char>(bytes.bytes()[rd.pos()]) == 0x80;
    // (A call needs a callable, which only a global or an extension names.)
    if (!w.reached_stop && w.globals.empty() && w.extensions == 0 && !proto)
      return;  // nothing a loader would run: it stops here
    if (seen_.count(rd.what() + "@" + std::to_string(rd.file_offset()))) {
      // Judged when the reader ran it: step over it.
      if (!w.reached_stop) return;
      rd.seek(rd.pos() + (w.end - rd.file_offset()));
      continue;
    }
    if (!s_.take(w.end > rd.file_offset() ? w.end - rd.file_offset() : 1)) {
      unscannable(s_.budget_text(), name, rd.file_offset());
      return;
    }
    seen_.insert(rd.what() + "@" + std::to_string(rd.file_offset()));
    PickleScan& p = r_.pickles.emplace_back();
    p.swept = true;
    p.name = i == 0 ? name : name + ":" + std::to_string(i);
    p.offset = rd.file_offset();
    const ByteReader start = rd;
    // Persistent ids have no loader behind them here: Python's pickle.load
    // refuses them (UnpicklingError), so the VM stops there too.
    try {
      Value v = pickle::unpickle(rd, o.limits, {}, &p.stats);
      if (numpy::referenced(p.stats)) find_object_arrays(v, p);
      judge(p, {});
      continue;
    } catch (const Error& e) {
      p.error = e.what();
      std::vector<pickle::GlobalUse> after;
      bool next = false;
      p.python_reads_on = !python_stops_too(e);
      if (e.offset()) {
        ByteReader rest = start;
        const std::uint64_t from = *e.offset();
        if (from >= rest.file_offset() && from - rest.file_offset() <= rest.remaining()) {
          rest.seek(rest.pos() + (from - rest.file_offset()));
          const pickle::OpcodeWalk after_walk = pickle::walk_opcodes(rest, o.limits);
          after = after_walk.globals;
          p.stats.extensions += after_walk.extensions;
          if (after_walk.reached_stop && p.python_reads_on) {
            rd = rest;  // a loader goes on after this pickle's STOP
            next = true;
          }
        }
      }
      // A broken pickle that named nothing after a first good one is where
      // a loader reading on stops: nothing more to judge.
      if (i > 0 && !p.python_reads_on && p.stats.globals.empty() && after.empty() &&
          p.stats.other_calls == 0 && p.stats.extensions == 0) {
        r_.pickles.pop_back();
        return;
      }
      judge(p, after);
      if (!next) return;
    }
  }
}

// The local headers of a zip whose reader stopped: each entry the walk did
// not meet, judged by its content.
void FileScan::sweep_zip() {
  const OpenOptions& o = s_.options();
  for (const ZipLocalEntry& e : zip_local_entries(src_.bytes(), o.limits.max_entries)) {
    if (covered_.count(e.offset)) continue;
    covered_.insert(e.offset);
    // Encrypted: a loader with the password reads what the scan cannot.
    // (Its bytes are still judged as they are: a flag alone hides nothing.)
    if (e.flags & 1)
      unscannable(
          "the entry is encrypted: what a reader with the password unpickles cannot be "
          "judged",
          e.name, e.offset);
    if (!s_.take(e.data.size())) {
      unscannable(s_.budget_text(), e.name, e.offset);
      return;
    }
    const std::string what = src_.name() + ":" + e.name;
    if (e.method == 0) {
      member(e.name, Source::borrow(e.data, what));
      continue;
    }
    if (!zip_method_read(e.method, ZipMethods::python)) {
      unscannable("zip " + zip_method_name(e.method) +
                      " data, which the scan does not decode: a reader that does (Python 3.14's "
                      "zipfile reads zstd) unpickles what cannot be judged",
                  e.name, e.offset, "unknown-compression");
      continue;
    }
    Decompressed d = decompress_zip_data(e.method, e.data, o.limits.max_pickle_bytes, what);
    if (!s_.take(d.bytes.size())) {
      unscannable(s_.budget_text(), e.name, e.offset);
      return;
    }
    // What decoded is judged, damaged or not; why it stopped is said too.
    if (d.error) stopped(*d.error, zip_method_name(e.method) + " data", e.name);
    if (!d.bytes.empty()) member(e.name, Source::from_buffer(std::move(d.bytes), what));
  }
}

// Why decompressing stopped before the end, as a finding.
void FileScan::stopped(const Error& e, const std::string& what, const std::string& where) {
  switch (e.code()) {
    case ErrorCode::truncated:
      add({ScanVerdict::truncated, "truncated", "", false, what + " ends early: " + e.message(),
           where, e.offset()});
      break;
    case ErrorCode::corrupt:
      add({ScanVerdict::malformed, "malformed", "", false, what + " is damaged: " + e.message(),
           where, e.offset()});
      break;
    case ErrorCode::unsupported:
      unscannable(e.message(), where, e.offset(), "unknown-compression");
      break;
    default:
      unscannable(what + " cannot be read to its end: " + e.message(), where, e.offset());
      break;
  }
}

// The reader stopped: say why, then sweep what a more lenient loader could
// still reach.
void FileScan::reader_failed(const Error& e, std::optional<Format> format) {
  r_.reading = e.code() == ErrorCode::ambiguous ? "ambiguous" : "refused";
  r_.reading_error = e.what();
  const std::string where = e.where().empty() ? src_.name() : e.where();
  const bool container = format == Format::pytorch_zip || format == Format::pytorch_tar;
  switch (e.code()) {
    case ErrorCode::ambiguous:
      add({ScanVerdict::unsafe, "ambiguous", "", false,
           "torch's readers and torchport's could read this file differently: " + e.message(),
           where, e.offset()});
      break;
    case ErrorCode::truncated:
      add({ScanVerdict::truncated, "truncated", "", false, e.message(), where, e.offset()});
      break;
    case ErrorCode::limit_exceeded:
      unscannable(e.message(), where, e.offset());
      break;
    case ErrorCode::unsupported:
      // Not a verdict on its own: what the reader met was judged, and the
      // sweeps below judge what it did not reach.
      break;
    case ErrorCode::unsafe_global:
      add({ScanVerdict::unsafe, "imports", "", true, e.message(), where, e.offset()});
      break;
    case ErrorCode::not_a_checkpoint:
      // Local headers without the end record that closes a zip: the end
      // of the file is missing.
      if (format == Format::pytorch_zip &&
          e.message().find("end-of-central-directory") != std::string::npos) {
        add({ScanVerdict::truncated, "truncated", "", false,
             "a zip without its end-of-central-directory record: truncated? (" + e.message() + ")",
             where, e.offset()});
        break;
      }
      // An archive of other files: its members speak for it.
      if (container) break;
      [[fallthrough]];
    default:
      add({ScanVerdict::malformed, "malformed", "", false, "the reader refuses it: " + e.message(),
           where, e.offset()});
      break;
  }
  // The records the reader reads itself, where it did not get to (or through).
  for (const Part& p : reads_) {
    Source bytes;
    try {
      bytes = p.bytes();
    } catch (const Error& bad) {
      // No reader gets a pickle out of it either; but it is not judged.
      stopped(bad, "the record", p.name);
      continue;
    }
    if (!s_.take(bytes.size())) {
      unscannable(s_.budget_text(), p.name, p.offset);
      break;
    }
    // Named and placed as the reader reads it, so what it judged is skipped.
    stream(Source::borrow(bytes.bytes(), src_.name() + ":" + p.name), p.name,
           p.method == 0 ? p.offset : 0);
  }
  if (format == Format::pytorch_zip || format == Format::torchscript) {
    sweep_zip();
  } else if (format == Format::pytorch_legacy || format == Format::pickle) {
    // Pickle after pickle from the start, stepping over those judged.
    stream(src_, "pickle", 0);
  }
}

// A compressed file (joblib's, a gzipped pickle, a .pt.xz): what it holds,
// judged as a file of its own; what decoded before damage, judged too.
// False when a weak magic (zlib's, .lzma's) was no such stream.
bool FileScan::compressed(Compression c) {
  const OpenOptions& o = s_.options();
  const std::string name(compression_name(c));
  const std::uint64_t cap = std::min(o.limits.max_inflate_bytes, o.limits.max_scan_bytes);
  Decompressed d = decompress(
      c, src_.bytes(), cap, "Limits::max_inflate_bytes or max_scan_bytes = " + std::to_string(cap),
      src_.name());
  if (weak_magic(c) && d.bytes.empty() && d.error) return false;
  r_.format = name;
  r_.reading = "ok";
  if (!s_.take(d.bytes.size())) {
    unscannable(s_.budget_text(), src_.name(), 0);
    return true;
  }
  if (d.error) stopped(*d.error, name + " data", src_.name());
  if (!d.bytes.empty() || !d.error)
    member(name, Source::from_buffer(std::move(d.bytes), src_.name() + "!" + name));
  return true;
}

void FileScan::run(const std::string& forced_format) {
  walk_file(forced_format);
  settle();
}

void FileScan::walk_file(const std::string& forced_format) {
  const OpenOptions& o = s_.options();
  std::optional<Format> format;
  if (!forced_format.empty()) {
    format = parse_format(forced_format);
  } else {
    format = sniff(src_);
  }
  // Compressed: a file of its own inside. (gzip is also how our record
  // files are compressed: those are read as records, below.)
  if (const auto c = forced_format.empty() ? sniff_compression(src_.bytes()) : std::nullopt;
      c && !(c == Compression::gzip && format == Format::torchport_record)) {
    if (compressed(*c)) return;
  }
  // A legacy pickle is sniffed by its first byte alone, which text shares
  // ("License ..." starts with LONG): bytes that do not start with PROTO,
  // name nothing and end no pickle are no pickle any loader runs.
  if (format == Format::pytorch_legacy && forced_format.empty() && !src_.bytes().empty() &&
      static_cast<unsigned char>(src_.bytes()[0]) != 0x80) {
    ByteReader probe(src_.bytes(), src_.name());
    const pickle::OpcodeWalk w = pickle::walk_opcodes(probe, o.limits);
    if (!w.reached_stop && w.globals.empty() && w.extensions == 0) return;
  }
  if (!format) {
    // No format: a pickle in disguise (Python's unpickler would run it
    // whatever the name), or nothing any loader unpickles.
    stream(src_, "pickle", 0);
    if (!r_.pickles.empty()) r_.format = "pickle";
    return;
  }
  r_.format = std::string(format_name(*format));
  try {
    OpenOptions ro = o;
    ro.format = forced_format;
    const TensorCatalog cat = formats::walk(src_, ro, *this);
    r_.reading = "ok";
    r_.format = cat.format();  // more precise than the sniff: "torchscript", "pickle", ...
    r_.tensors = cat.size();
  } catch (const Error& e) {
    // A gzip stream the record reader refuses: a compressed file (of a
    // pickle, say), judged by what it holds.
    if (format == Format::torchport_record && looks_like_gzip(src_.bytes())) {
      r_.reading.clear();
      compressed(Compression::gzip);
      return;
    }
    if (e.code() == ErrorCode::not_a_checkpoint && format == Format::pytorch_zip) r_.format = "zip";
    if (e.code() == ErrorCode::not_a_checkpoint && format == Format::pytorch_tar) r_.format = "tar";
    reader_failed(e, format);
  }
  if (!r_.code_records.empty()) {
    std::string list;
    for (std::size_t i = 0; i < r_.code_records.size() && i < 8; ++i)
      list += (i ? ", '" : "'") + r_.code_records[i] + "'";
    if (r_.code_records.size() > 8) list += ", ...";
    const bool compiled = std::any_of(r_.code_records.begin(), r_.code_records.end(),
                                      [](const std::string& n) { return n.ends_with(".so"); });
    add({ScanVerdict::unsafe, compiled ? "compiled-code" : "torchscript-code", "", false,
         std::to_string(r_.code_records.size()) + " code record(s) (" + list +
             (compiled ? "): torch's AOTInductor package loader loads and runs these shared "
                         "objects; torchport never reads them"
                       : "): torch.jit.load compiles and runs them (and torch.load before 2.6 "
                         "did too, even with weights_only: CVE-2025-32434); torchport never "
                         "reads them"),
         src_.name(), std::nullopt});
  }
}

void FileScan::run_sharded(const std::filesystem::path& path) {
  r_.format = formats::is_dcp_path(path) ? "dcp" : "sharded";
  try {
    const TensorCatalog cat = formats::walk_sharded(path, s_.options(), *this);
    r_.reading = "ok";
    r_.format = cat.format();
    r_.tensors = cat.size();
  } catch (const Error& e) {
    reader_failed(e, std::nullopt);
  }
  settle();
}

}  // namespace

// --- the API -----------------------------------------------------------------

std::string_view scan_verdict_name(ScanVerdict v) noexcept {
  switch (v) {
    case ScanVerdict::clean:
      return "clean";
    case ScanVerdict::not_a_model_file:
      return "not-a-model-file";
    case ScanVerdict::unsafe:
      return "unsafe";
    case ScanVerdict::unscannable:
      return "unscannable";
    case ScanVerdict::truncated:
      return "truncated";
    case ScanVerdict::malformed:
      return "malformed";
  }
  return "?";
}

int scan_exit_code(ScanVerdict v) noexcept {
  switch (v) {
    case ScanVerdict::clean:
    case ScanVerdict::not_a_model_file:
      return 0;
    case ScanVerdict::unsafe:
      return 1;
    default:
      return 2;
  }
}

ScanVerdict worse(ScanVerdict a, ScanVerdict b) noexcept {
  return rank(a) >= rank(b) ? a : b;
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
  Scanner s(options);
  return s.file(source, source.name(), 0, options.format);
} catch (...) {
  rethrow_as_error("scan", source.name());  // no bare std:: exception leaves the library
}

ScanReport scan(const std::filesystem::path& path, const OpenOptions& options) try {
  pickle::validate_allow_patterns(options.allow);
  const std::optional<Format> format = parse_format(options.format);
  const bool sharded =
      (options.format.empty() && (formats::is_sharded_path(path) || formats::is_dcp_path(path))) ||
      (format && (is_sharded(*format) || *format == Format::dcp));
  Scanner s(options);
  if (!sharded) {
    ScanReport r = s.file(Source::map_file(path, options.map), path.string(), 0, options.format);
    r.path = path.string();
    return r;
  }
  ScanReport r;
  r.path = path.string();
  const Source none;
  FileScan f(s, r, none, 0);
  f.run_sharded(path);
  Scanner::finish(r);
  return r;
} catch (...) {
  rethrow_as_error("scan", path.string());  // no bare std:: exception leaves the library
}

std::string add_safe_globals_line(const std::vector<std::string>& needs) {
  if (needs.empty()) return {};
  // The names come from the file: only dotted Python identifiers go into
  // a line a user pastes (a quote in a name would let the file write code).
  for (const std::string& n : needs) {
    const std::string_view body =
        n.ends_with(".*") ? std::string_view(n).substr(0, n.size() - 2) : std::string_view(n);
    if (body.empty() || body.front() == '.' || body.back() == '.' ||
        std::isdigit(static_cast<unsigned char>(body.front())) ||
        !std::all_of(body.begin(), body.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
        }))
      return {};
  }
  std::string line = "import importlib, torch; torch.serialization.add_safe_globals([";
  for (std::size_t i = 0; i < needs.size(); ++i) {
    const std::string& n = needs[i];
    const std::size_t dot = n.rfind('.');
    if (i) line += ", ";
    if (n.size() > 2 && n.ends_with(".*")) {  // every class of a module
      const std::string module = n.substr(0, n.size() - 2);
      line += "*[(c, \"" + module + ".\" + c.__name__) for c in vars(importlib.import_module(\"" +
              module + "\")).values() if isinstance(c, type)]";
      continue;
    }
    const std::string module = dot == std::string::npos ? "builtins" : n.substr(0, dot);
    const std::string name = dot == std::string::npos ? n : n.substr(dot + 1);
    line +=
        "(getattr(importlib.import_module(\"" + module + "\"), \"" + name + "\"), \"" + n + "\")";
  }
  return line + "])";
}

}  // namespace torchport
