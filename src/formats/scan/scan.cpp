// scan(): the static analysis behind `torchport scan`, a consumer of the
// walk (formats/read/walk.hpp). A file is read by the reader open() would
// use, told to a `FileScan` as it reads: every pickle the reader runs is
// judged from the VM's statistics (what Python would import, call and
// build); every member of an archive the format does not read is judged by
// its content, as a file of its own; the bytes after a stream's last pickle
// are judged as a loader reading pickle after pickle would read them.
// Where the reader stops, what a more lenient loader could still reach is
// judged as the reader's sweep tells it (formats::sweep: the zip's local
// headers, a pickle stream from its start). Where the VM
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
#include <unordered_map>
#include <unordered_set>

#include "formats/read/numpy.hpp"
#include "formats/read/readers.hpp"
#include "formats/read/registry.hpp"
#include "formats/read/walk.hpp"
#include "formats/scan/scan_detail.hpp"
#include "io/byte_reader.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/detail/hash.hpp"
#include "torchport/detail/python_literal.hpp"
#include "torchport/detail/utf8.hpp"
#include "torchport/detail/work.hpp"
#include "torchport/formats/format.hpp"

namespace torchport {
namespace {

namespace numpy = formats::numpy;
using formats::Part;
using formats::PartBytes;
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

// The steps of a pickle's run, for the cost tests (detail::work()).
void count_run(const pickle::Stats& st) {
  std::uint64_t n = 1;
  for (const std::uint64_t c : st.opcodes) n += c;
  detail::count(detail::work().scan_steps, n + st.globals.size());
}

// A folded entry's globals by name (kept with the entry: rebuilt at each
// merge they made many pickles of distinct globals quadratic).
struct FoldIndex {
  detail::StringMap<std::size_t> uses, judged;
};

class Scanner;

// The scan of one file (or member): the walker its reader tells what it
// meets, and the sweeps after it.
class FileScan final : public formats::Walker {
 public:
  FileScan(Scanner& s, ScanReport& r, const Source& src, int depth)
      : s_(s), r_(r), src_(src), depth_(depth) {}

  void run(std::optional<Format> forced_format, bool torch_load);
  void walk_file(std::optional<Format> forced_format, bool torch_load);
  bool compressed(const open_detail::Wrapping& w);
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
  void member(const std::string& name, const Source& bytes, bool torch_load = false);
  void stream(const Source& bytes, const std::string& name, std::uint64_t base,
              std::uint64_t block = 0, bool other_reading = false);
  void joblib_reading();
  bool dbm_dumb();
  void dbm_dumb_records(const Source& dat, const std::string& index, const std::string& index_name);
  bool dbm_store();
  void proto_sweep(const Source& bytes, const std::string& name, std::uint64_t base);
  std::uint64_t dumb_blocks(const Source& bytes) const;
  std::uint64_t dumb_padding(const Source& bytes, std::uint64_t offset) const;
  void joblib_array(const Value& target, const Value& previous, ByteReader& r, bool in_frame,
                    std::uint64_t offset, const std::string& name);
  bool joblib_explains(std::uint64_t offset) const;
  void judge(PickleScan& p, const std::vector<pickle::GlobalUse>& after_error);
  void settle();
  void unscannable(std::string message, std::string where, std::optional<std::uint64_t> offset,
                   std::string reason = "unscannable") {
    add({ScanVerdict::unscannable, std::move(reason), "", false, std::move(message),
         std::move(where), offset});
  }
  void stopped(const Error& e, const std::string& what, const std::string& where);
  void add(ScanFinding f) {
    detail::count(detail::work().scan_steps);
    const std::string key =
        std::string(scan_verdict_name(f.severity)) + "|" + f.reason + "|" + f.global;
    if (++alike_[key] > kFindingsAlike) {
      ++unlisted_;
      unlisted_worst_ = worse(unlisted_worst_, f.severity);
      return;
    }
    r_.findings.push_back(std::move(f));
  }
  static void find_object_arrays(const Value& root, PickleScan& p);

  Scanner& s_;
  ScanReport& r_;
  const Source& src_;
  int depth_;
  std::vector<std::string> prefix_;  // shard names, while inside one
  std::set<std::uint64_t> covered_;  // offsets of the file's parts and pickles the walk met
  std::set<std::string> judged_;     // pickles judged ("prefix@offset"): a second run is not
  std::set<std::string> seen_;       // pickles the reader ran, as "what@offset"
  // Byte ranges of each source ("what") that stream() has swept.
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint64_t>>> swept_;
  bool seen(const std::string& what, std::uint64_t offset) const {
    if (seen_.count(what + "@" + std::to_string(offset))) return true;
    const auto it = swept_.find(what);
    if (it == swept_.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(),
                       [&](const auto& r) { return offset >= r.first && offset < r.second; });
  }
  // Past the first kPicklesListed of a report, pickles are folded into one
  // entry each for the reader's and the swept ones (their statistics
  // summed, their globals merged by name), and findings past
  // kFindingsAlike of one kind are counted, not kept: a file of 1,000,000
  // two-byte pickles cost a report of 4.7 GB.
  static constexpr std::size_t kPicklesListed = 64;
  static constexpr std::size_t kFindingsAlike = 8;
  void fold_last();
  std::optional<std::size_t> folded_[2];      // the folded entries (reader's, swept), by index
  FoldIndex fold_index_[2];                   // their globals by name
  std::map<std::string, std::size_t> alike_;  // findings per "severity|reason|global"
  std::uint64_t unlisted_ = 0;                // findings not kept
  ScanVerdict unlisted_worst_ = ScanVerdict::clean;
  std::vector<Part> reads_;  // records the reader reads itself, for the sweeps
  // joblib's reading (joblib_reading): stream() passes the NumpyArrayWrapper
  // hook while `joblib_` is set; the nested object-array pickles it reads
  // wait in `joblib_nested_` until their outer pickle is listed; the ranges
  // [start, end) of the pickles joblib read to their STOP past an array.
  bool joblib_ = false;
  bool joblib_array_read_ = false;
  std::vector<PickleScan> joblib_nested_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> joblib_ranges_;
};

class Scanner {
 public:
  explicit Scanner(const OpenOptions& o) : o_(o), left_(o.limits.max_scan_bytes) {
    o_.allow_unknown_globals = true;  // the scan judges; the reader only reads
    pickle::validate_profiles(o_.profiles);
  }
  const OpenOptions& options() const noexcept { return o_; }
  // The scanned file's name in its folder and its neighbours (empty for a
  // Source without a folder).
  std::string file_name;
  scan_detail::Beside beside;

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

  // `format`: read by that reader, not as the registry tells it;
  // `torch_load`: read as torch.load reads bytes handed to it in memory.
  ScanReport file(const Source& src, std::string path, int depth,
                  std::optional<Format> format = std::nullopt, bool torch_load = false) {
    ScanReport r;
    r.path = std::move(path);
    // A file read by ranges (a remote one) is scanned whole: the sweeps read
    // bytes no reader asks for.
    const Source whole =
        src.whole(o_.limits.max_whole_read_bytes, "Limits::max_whole_read_bytes", "a scan");
    FileScan f(*this, r, whole, depth);
    f.run(format, torch_load);
    finish(r);
    return r;
  }

  static void finish(ScanReport& r);

 private:
  OpenOptions o_;
  std::uint64_t left_;
};

std::string release_name(int minor) {
  return "2." + std::to_string(minor);
}

// torch 2.`minor`'s default torch.load on this file: refused formats, then
// each pickle torch.load runs (the reader's own, in order) opcode by
// opcode, container by container and global by global, as that release's
// torch/_weights_only_unpickler.py reads them.
TorchWeightsOnlyRange weights_only_at(const ScanReport& r, Format f, int minor) {
  TorchWeightsOnlyRange t;
  t.first = t.last = release_name(minor);
  if (f == Format::pytorch_tar) {
    t.why = "weights_only=True refuses the tar format of torch's first releases";
  } else if (f == Format::torchscript) {
    t.why = "weights_only=True refuses TorchScript archives (torch.jit.load reads them)";
  }
  detail::StringSet needed;  // (a search of `needs` made many globals quadratic)
  const auto need = [&](const std::string& name) {
    if (needed.insert(name).second) t.needs.push_back(name);
  };
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
    // From 2.10 (CVE-2026-24747) SETITEM and SETITEMS set items of a dict,
    // an OrderedDict or a Counter only; 2.6 to 2.9 set a list's item as
    // Python does.
    if (t.why.empty() && minor >= 10 && p.stats.list_setitems > 0)
      t.why = p.name + " SETITEMs a list (byte " +
              std::to_string(p.stats.first_list_setitem_offset) +
              "), which torch >= 2.10's weights_only unpickler refuses (\"Can only SETITEM for "
              "dict, collections.OrderedDict, collections.Counter\")";
    const auto judge = [&](const std::string& name, const std::string& as_python) {
      if (pickle::torch_weights_only_allows(name, minor)) return;
      if (as_python == "torch._utils._rebuild_sparse_csr_tensor" && t.why.empty())
        t.why = p.name + " names torch 1.13's " + as_python +
                ", which torch 2.x no longer has (it rebuilds CSR through _rebuild_sparse_tensor)";
      if (const int since = pickle::torch_global_since(name); since > minor && t.why.empty())
        t.why = p.name + " names " + name + ", which torch has only from " + release_name(since) +
                " on";
      need(name);
    };
    for (const auto& g : p.stats.globals) {
      const std::string as_python = g.module + "." + g.name;
      // Spelled as the weights_only unpickler looks it up (its own renames).
      judge(g.written_module.empty()
                ? as_python
                : pickle::torch_weights_only_name(g.written_module, g.written_name, minor),
            as_python);
      // BUILD on a numpy dtype needs the dtype's own class too
      // (numpy.dtypes.Float64DType, ...): torch builds only allow-listed
      // types. Which ones depends on the arrays, so all of that module.
      if (as_python == "numpy.dtype" && g.builds > 0) need("numpy.dtypes.*");
    }
    for (const auto& g : p.globals)  // those walked past where the VM stopped
      if (g.after_error) judge(g.name, g.name);
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

// Every release from 2.6 to the current one, in ranges of one answer.
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
  for (int minor = pickle::kTorchWeightsOnlyFirst; minor <= pickle::kTorchWeightsOnlyCurrent;
       ++minor) {
    TorchWeightsOnlyRange at = weights_only_at(r, *f, minor);
    if (!t.releases.empty()) {
      TorchWeightsOnlyRange& prev = t.releases.back();
      if (prev.loads == at.loads && prev.needs == at.needs && prev.why == at.why) {
        prev.last = at.last;
        continue;
      }
    }
    t.releases.push_back(std::move(at));
  }
  const TorchWeightsOnlyRange& current = t.releases.back();
  t.loads = current.loads;
  t.needs = current.needs;
  t.why = current.why;
  t.torch = current.last;
  t.since = current.first;
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
  // A sweep meets again what the reading met: judged once. (A swept
  // stream steps over the pickles judged itself: stream().)
  if (p.swept && p.role != PartRole::stream && in_file() && covered_.count(p.offset)) return;
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
  // Encrypted: a loader with the password reads what the scan cannot.
  // (Its bytes are still judged as they are: a flag alone hides nothing.)
  if (p.encrypted)
    unscannable(
        "the entry is encrypted: what a reader with the password unpickles cannot be judged", name,
        p.offset);
  // A stream's bytes are charged as its pickles are walked (stream()).
  if (p.role != PartRole::stream && !s_.take(p.size)) {
    unscannable(s_.budget_text(), name, p.offset);
    return;
  }
  PartBytes got;
  try {
    got = p.bytes();
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
  // Decoded bytes count against the budget beside the stored ones.
  if (p.method != 0 && !s_.take(got.bytes.size())) {
    unscannable(s_.budget_text(), name, p.offset);
    return;
  }
  // What decoded is judged, damaged or not; why it stopped is said too.
  if (got.stopped) {
    stopped(*got.stopped, got.what, name);
    if (got.bytes.size() == 0) return;
  }
  if (p.role == PartRole::stream) {
    // dbm.dumb's layouts (shelve): a whole file swept from its first byte
    // in 512-byte blocks, or the padding after a file's last pickle.
    const std::uint64_t block = !in_file()      ? 0
                                : p.offset == 0 ? dumb_blocks(got.bytes)
                                                : dumb_padding(got.bytes, p.offset);
    stream(got.bytes, name, p.offset, block);
  } else {
    member(name, got.bytes, p.torch_load);
  }
}

void FileScan::member(const std::string& name, const Source& bytes, bool torch_load) {
  if (depth_ + 1 > static_cast<int>(s_.options().limits.max_scan_depth)) {
    unscannable("nested " + std::to_string(depth_ + 1) +
                    " archives deep, deeper than Limits::max_scan_depth = " +
                    std::to_string(s_.options().limits.max_scan_depth),
                name, std::nullopt);
    return;
  }
  r_.members.push_back(s_.file(bytes, r_.path + "!" + name, depth_ + 1, std::nullopt, torch_load));
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
    if (index + 1 == r_.pickles.size()) fold_last();
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
    if (index + 1 == r_.pickles.size()) fold_last();
    throw;
  }
}

namespace {

void merge_use(pickle::GlobalUse& a, const pickle::GlobalUse& b) {
  a.count += b.count;
  if (a.calls == 0 && b.calls > 0) {
    a.first_call_offset = b.first_call_offset;
    a.call_opcode = b.call_opcode;
  }
  a.calls += b.calls;
  a.inert_calls += b.inert_calls;
  a.inert_builds += b.inert_builds;
  a.builds += b.builds;
  a.sets += b.sets;
  if (b.klass == pickle::GlobalClass::dangerous ||
      (b.klass == pickle::GlobalClass::unknown && a.klass == pickle::GlobalClass::allowed))
    a.klass = b.klass;
}

void merge_global(ScanGlobal& a, const ScanGlobal& b) {
  a.count += b.count;
  if (a.calls == 0 && b.calls > 0) {
    a.call_opcode = b.call_opcode;
    a.call_offset = b.call_offset;
  }
  a.calls += b.calls;
  a.builds += b.builds;
  a.sets += b.sets;
  a.allowed = a.allowed && b.allowed;
  a.known_dangerous = a.known_dangerous || b.known_dangerous;
  a.after_error = a.after_error || b.after_error;
  for (const auto& why : b.reasons)
    if (std::find(a.reasons.begin(), a.reasons.end(), why) == a.reasons.end())
      a.reasons.push_back(why);
}

// Folds `p` into `into`: what a report of one entry for many pickles says.
void merge_pickle(PickleScan& into, PickleScan&& p, FoldIndex& index) {
  detail::count(detail::work().scan_steps, 1 + p.stats.globals.size() + p.globals.size());
  pickle::Stats& a = into.stats;
  const pickle::Stats& b = p.stats;
  a.protocol = std::max(a.protocol, b.protocol);
  for (std::size_t i = 0; i < a.opcodes.size(); ++i) a.opcodes[i] += b.opcodes[i];
  a.calls += b.calls;
  a.persistent_ids += b.persistent_ids;
  if (a.other_calls == 0) a.first_other_call_offset = b.first_other_call_offset;
  a.other_calls += b.other_calls;
  a.extensions += b.extensions;
  a.tensor_builds += b.tensor_builds;
  if (a.list_setitems == 0) a.first_list_setitem_offset = b.first_list_setitem_offset;
  a.list_setitems += b.list_setitems;
  if (a.frame_straddles == 0) a.first_frame_straddle_offset = b.first_frame_straddle_offset;
  a.frame_straddles += b.frame_straddles;
  for (const auto& g : b.globals) {
    const auto [it, fresh] = index.uses.emplace(g.module + "." + g.name, a.globals.size());
    if (fresh)
      a.globals.push_back(g);
    else
      merge_use(a.globals[it->second], g);
  }
  for (auto& g : p.globals) {
    const auto [it, fresh] = index.judged.emplace(g.name, into.globals.size());
    if (fresh)
      into.globals.push_back(std::move(g));
    else
      merge_global(into.globals[it->second], g);
  }
  if (into.error.empty() && !p.error.empty()) into.error = p.error;
  into.python_reads_on = into.python_reads_on || p.python_reads_on;
  for (auto& o : p.object_arrays)
    if (into.object_arrays.size() < 16) into.object_arrays.push_back(std::move(o));
  into.object_array_count += p.object_array_count;
}

}  // namespace

void FileScan::fold_last() {
  if (r_.pickles.size() <= kPicklesListed) return;
  PickleScan p = std::move(r_.pickles.back());
  r_.pickles.pop_back();
  std::optional<std::size_t>& slot = folded_[p.swept ? 1 : 0];
  FoldIndex& index = fold_index_[p.swept ? 1 : 0];
  if (!slot) {
    // The first pickle folded starts its entry.
    slot = r_.pickles.size();
    p.name += " and the pickles after it (folded: statistics summed, globals merged)";
    for (std::size_t i = 0; i < p.stats.globals.size(); ++i)
      index.uses.emplace(p.stats.globals[i].module + "." + p.stats.globals[i].name, i);
    for (std::size_t i = 0; i < p.globals.size(); ++i) index.judged.emplace(p.globals[i].name, i);
    r_.pickles.push_back(std::move(p));
    return;
  }
  merge_pickle(r_.pickles[*slot], std::move(p), index);
}

// --- judging a pickle ------------------------------------------------------

void FileScan::judge(PickleScan& p, const std::vector<pickle::GlobalUse>& after_error) {
  count_run(p.stats);
  const OpenOptions& o = s_.options();
  std::set<std::string> seen;
  auto one = [&](const pickle::GlobalUse& g, bool after) {
    detail::count(detail::work().scan_steps);
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
    // As the VM judged it where that allows it (builtins.getattr called
    // only as an allowed Enum's member by name, Python 3.11's pickling of
    // Enum members; a class of an active profile used only in its
    // profile's form), else with the user's patterns.
    const pickle::GlobalClass klass = unresolved ? pickle::GlobalClass::unknown
                                      : g.klass == pickle::GlobalClass::allowed
                                          ? pickle::GlobalClass::allowed
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
  if (p.stats.frame_straddles)
    add({ScanVerdict::unsafe, "frame-straddle", "", false,
         std::to_string(p.stats.frame_straddles) +
             " opcode(s) whose argument runs past the end of its FRAME (or a FRAME begun inside "
             "another): CPython's C unpickler before 3.13.15 and 3.14.7 reads across the frame "
             "and runs what follows, its Python unpickler and later releases stop there "
             "(gh-154848); a scanner that honours frames misses what the loader runs",
         p.name, p.stats.first_frame_straddle_offset});
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
    // Stopped inside a pickle joblib reads to its end (past an array):
    // where pickle.load stops too, having run what was judged.
    if (!p.python_reads_on && joblib_explains(p.offset)) {
      kept.push_back(std::move(p));
      continue;
    }
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
  if (unlisted_ > 0) {
    r_.findings.push_back({unlisted_worst_, "alike", "", false,
                           std::to_string(unlisted_) +
                               " more finding(s) of kinds listed above (each kind is listed " +
                               std::to_string(kFindingsAlike) + " times)",
                           src_.name(), std::nullopt});
    unlisted_ = 0;
  }
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

// --- key-value stores (shelve) ---------------------------------------------

// shelve over dbm.dumb (Lib/dbm/dumb.py): NAME.dir lists each key as a
// line `'key', (pos, siz)` (read with ast.literal_eval, the file decoded as
// Latin-1, universal newlines, each line right-stripped); NAME.dat holds
// each value at `pos`, `siz` bytes, records starting on 512-byte blocks
// with zero padding between them; shelve unpickles each value. A file
// named NAME.dat or NAME.dir read beside its other half is read this way:
// every record the index lists (a key listed again keeps its last line;
// all are judged), then the whole .dat swept block by block. True when the
// file is such a half.
bool FileScan::dbm_dumb() {
  const std::string& file = s_.file_name;
  if (depth_ != 0 || !s_.beside || file.size() < 5) return false;
  const std::string stem = file.substr(0, file.size() - 4);
  const std::string ext = file.substr(file.size() - 4);
  if (ext != ".dat" && ext != ".dir") return false;
  std::optional<Source> other;
  try {
    other = s_.beside(stem + (ext == ".dat" ? ".dir" : ".dat"));
  } catch (const Error&) {
    return false;  // not readable beside it (a link out of the folder): judged alone
  }
  if (!other) return false;
  const Source& index = ext == ".dir" ? src_ : *other;
  const Source& dat = ext == ".dat" ? src_ : *other;
  // What dumb.py reads: Latin-1 text, split at \n, \r\n and \r.
  const auto b = index.bytes();
  std::string text;
  text.reserve(b.size());
  for (const std::byte c : b) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80) {
      text += static_cast<char>(u);
    } else {
      text += static_cast<char>(0xc0 | (u >> 6));
      text += static_cast<char>(0x80 | (u & 0x3f));
    }
  }
  // dumb.py's whichdb test: an empty index, or one whose first byte is a quote.
  if (!text.empty() && text[0] != '\'' && text[0] != '"') return false;
  r_.format = "dbm.dumb";
  r_.reading = "ok";
  // Either half scanned judges the records, with the .dat's bytes and name.
  dbm_dumb_records(dat, text, stem + ".dir");
  return true;
}

void FileScan::dbm_dumb_records(const Source& dat, const std::string& text,
                                const std::string& index_name) {
  const Source view = Source::borrow(dat.bytes(), dat.name());
  std::set<std::pair<std::uint64_t, std::uint64_t>> done;
  std::size_t line_no = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find_first_of("\r\n", at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end +
         (end < text.size() && text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n'
              ? 2
              : 1);
    ++line_no;
    // str.rstrip(): whitespace as Python's str knows it (Latin-1's too).
    while (!line.empty()) {
      const auto c = static_cast<unsigned char>(line.back());
      if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) {
        line.pop_back();
      } else if (line.size() >= 2 && static_cast<unsigned char>(line[line.size() - 2]) == 0xc2 &&
                 (c == 0x85 || c == 0xa0)) {
        line.resize(line.size() - 2);
      } else {
        break;
      }
    }
    const std::string where = index_name + " line " + std::to_string(line_no);
    Value entry;
    try {
      entry = detail::literal_eval(line);
    } catch (const Error& e) {
      // dumb.py raises here: shelve.open fails, nothing is unpickled.
      add({ScanVerdict::malformed, "malformed", "", false,
           "the dbm.dumb index does not read (ast.literal_eval refuses the line, so shelve.open "
           "fails): " +
               e.message(),
           where, std::nullopt});
      break;
    }
    const auto pair = [](const Value& v) {
      return (v.is(Value::Kind::Tuple) || v.is(Value::Kind::List)) && v.size() == 2;
    };
    if (!pair(entry) || !entry.items()[0].is(Value::Kind::Str)) {
      add({ScanVerdict::malformed, "malformed", "", false,
           "the dbm.dumb index line is " + entry.repr(3) +
               ", not ('key', (pos, siz)): shelve.open fails",
           where, std::nullopt});
      break;
    }
    const Value& ps = entry.items()[1];
    if (!pair(ps) || !ps.items()[0].is(Value::Kind::Int) || !ps.items()[1].is(Value::Kind::Int) ||
        ps.items()[0].as_int() < 0)
      continue;  // reading this key raises: nothing is unpickled from it
    const auto pos = static_cast<std::uint64_t>(ps.items()[0].as_int());
    const std::int64_t siz = ps.items()[1].as_int();
    if (pos >= dat.size()) continue;  // an empty value: EOFError
    // f.seek(pos); f.read(siz): to the end for a negative size.
    const std::uint64_t n =
        siz < 0 ? dat.size() - pos : std::min<std::uint64_t>(siz, dat.size() - pos);
    if (!done.insert({pos, n}).second) continue;
    std::string key = entry.items()[0].as_str();
    if (key.size() > 64) key = key.substr(0, 64) + "...";
    stream(Source::borrow(dat.bytes().subspan(pos, n), dat.name()),
           "shelve[" + Value::str(key).repr(1, 80) + "]", pos);
  }
  // Then every block of the .dat, as another index could list it.
  stream(view, "dbm.dumb record", 0, 512);
}

// The first pickle of `bytes` followed by zeros to a 512-byte boundary, and
// more after it: dbm.dumb's .dat layout, swept block by block (512), or 0.
std::uint64_t FileScan::dumb_blocks(const Source& bytes) const {
  const auto b = bytes.bytes();
  if (b.size() <= 512) return 0;
  ByteReader probe(b, bytes.name());
  const pickle::OpcodeWalk w = pickle::walk_opcodes(probe, s_.options().limits);
  if (!w.reached_stop || w.end == 0 || w.end % 512 == 0) return 0;
  const std::uint64_t to = (w.end + 511) / 512 * 512;
  if (to >= b.size()) return 0;
  for (std::uint64_t i = w.end; i < to; ++i)
    if (b[i] != std::byte{0}) return 0;
  return 512;
}

// Bytes after a file's last pickle, at `offset`, that are zeros to a
// 512-byte boundary with more after it: dbm.dumb's padding (512), or 0.
std::uint64_t FileScan::dumb_padding(const Source& bytes, std::uint64_t offset) const {
  const auto b = bytes.bytes();
  if (offset % 512 == 0) return 0;
  const std::uint64_t to = (offset + 511) / 512 * 512 - offset;
  if (to >= b.size()) return 0;
  for (std::uint64_t i = 0; i < to; ++i)
    if (b[i] != std::byte{0}) return 0;
  return 512;
}

// The other dbm back ends shelve opens (dbm.whichdb's magics): GNU dbm
// (0x13579ace, ...cd, ...cf, and the numsync ...d0, ...d1), Berkeley DB's
// hash (Debian's dbm.ndbm: 0x061561 at byte 12), SQLite (Python 3.13's
// dbm.sqlite3: its table Dict). Each value shelve.open unpickles is judged
// as a pickle stream, read as that back end's library reads it (dbm.cpp);
// cells of SQLite's other tables are searched for pickles by their PROTO
// header. A store not read to its end is unscannable, after the pickles
// its raw bytes hold by their PROTO header are judged (a payload among
// them is unsafe).
bool FileScan::dbm_store() {
  const auto b = src_.bytes();
  const auto u32 = [&](std::size_t at, bool big) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= static_cast<std::uint32_t>(b[at + static_cast<std::size_t>(i)])
           << (big ? 24 - 8 * i : 8 * i);
    return v;
  };
  std::string kind;
  if (b.size() >= 16 && std::memcmp(b.data(), "SQLite format 3\0", 16) == 0) {
    kind = "dbm.sqlite3";
  } else if (b.size() >= 4 && u32(0, false) >= 0x13579acd && u32(0, false) <= 0x13579ad1) {
    kind = "dbm.gnu";
  } else if (b.size() >= 16 && (u32(12, false) == 0x061561 || u32(12, true) == 0x061561)) {
    kind = "dbm.ndbm";
  } else {
    return false;
  }
  r_.format = kind;
  r_.reading = "ok";
  if (!s_.take(b.size())) {
    unscannable(s_.budget_text(), src_.name(), std::nullopt);
    return true;
  }
  std::size_t values = 0;
  const scan_detail::StoreVisit visit = [&](const scan_detail::StoreValue& v) {
    // The key as Python shows it: a str when it is UTF-8 (shelve decodes
    // it so), else bytes; a cell's place (table, row, column) likewise.
    const std::string key =
        detail::is_utf8(v.key) ? Value::str(v.key).repr(1, 80) : Value::bytes(v.key).repr(1, 80);
    const std::string name = v.shelve ? "shelve[" + key + "]" : kind + " cell " + key;
    // Bytes of the file are named by their place in it; others (an overflow
    // chain, a value libgdbm or libsqlite3 hands over) by the value.
    const Source bytes =
        v.offset ? Source::borrow(v.bytes, src_.name())
                 : Source::borrow(v.bytes, src_.name() + "!value " + std::to_string(++values));
    if (v.shelve) {
      stream(bytes, name, v.offset.value_or(0));
    } else {
      proto_sweep(bytes, name, v.offset.value_or(0));
    }
  };
  // Twice the file's bytes of values (and 64 KiB), as no store of its own
  // bytes lists more.
  const std::uint64_t cap = 2 * b.size() + (std::uint64_t{1} << 16);
  scan_detail::StoreRead got;
  if (kind == "dbm.gnu") {
    got = scan_detail::read_gdbm(b, src_.name(), cap, visit);
  } else if (kind == "dbm.ndbm") {
    got = scan_detail::read_berkeley_hash(b, cap, visit);
  } else {
    // SQLite reads a -wal or hot -journal file beside the database as
    // part of it (shelve.open's default flag "c" opens it writable).
    for (const char* side : {"-wal", "-journal"}) {
      std::optional<Source> other;
      try {
        if (s_.beside) other = s_.beside(s_.file_name + side);
      } catch (const Error&) {
      }
      if (other && other->size() > 0)
        unscannable("SQLite reads " + s_.file_name + side +
                        " beside it as part of the database, and the scan does not",
                    src_.name(), std::nullopt, "dbm-store");
    }
    got = scan_detail::read_sqlite(b, cap, visit);
    if (!got.is_store && !got.unreadable) r_.format = r_.pickles.empty() ? "" : "sqlite";
  }
  if (got.unreadable) {
    unscannable("a " + kind + " database not read to its end (" + *got.unreadable +
                    "): shelve.open unpickles each of its values",
                src_.name(), std::nullopt, "dbm-store");
    proto_sweep(src_, kind + " value", 0);
  }
  return true;
}

// Pickles found by their PROTO header (80 02 to 80 05), each judged once,
// the search going on after what each walked: linear in the bytes.
void FileScan::proto_sweep(const Source& bytes, const std::string& name, std::uint64_t base) {
  const auto b = bytes.bytes();
  const auto* data = reinterpret_cast<const unsigned char*>(b.data());
  for (std::size_t i = 0; i + 1 < b.size();) {
    const void* hit = std::memchr(data + i, 0x80, b.size() - i - 1);
    if (hit == nullptr) break;
    const auto j = static_cast<std::size_t>(static_cast<const unsigned char*>(hit) - data);
    if (data[j + 1] < 2 || data[j + 1] > 5) {
      i = j + 1;
      continue;
    }
    ByteReader probe(b, bytes.name(), base);
    probe.seek(j);
    const pickle::OpcodeWalk w = pickle::walk_opcodes(probe, s_.options().limits);
    const auto end = static_cast<std::size_t>(std::max<std::uint64_t>(w.end - base, j + 2));
    if (w.reached_stop || !w.globals.empty())
      stream(Source::borrow(b.subspan(j, end - j), bytes.name()), name, base + j);
    i = end;
  }
}

// --- joblib ----------------------------------------------------------------

// joblib's NumpyUnpickler (joblib/numpy_pickle.py: load_build, then
// NumpyArrayWrapper.read and read_array): after BUILD on a
// NumpyArrayWrapper it reads the array from the file, right after the
// BUILD's opcode: for a dtype that holds objects, one more pickle (a fresh
// Unpickler on the same file, judged here on its own); otherwise, when the
// wrapper has numpy_array_alignment_bytes (joblib >= 1.2; None or absent
// before), a byte giving the padding's length and that many bytes, then
// prod(shape) x itemsize raw bytes (the product in int64, wrapping, as
// numpy's multiply.reduce computes it). Its unpickling then goes on.
void FileScan::joblib_array(const Value& target, const Value& previous, ByteReader& r,
                            bool in_frame, std::uint64_t offset, const std::string& name) {
  const Object& o = target.as_object();
  if (!o.cls.is("joblib.numpy_pickle", "NumpyArrayWrapper")) return;
  const auto fail = [&](ErrorCode code, const std::string& why) {
    throw Error(code, "joblib's NumpyArrayWrapper " + why, {}, offset, r.what());
  };
  if (in_frame)
    fail(ErrorCode::unsupported,
         "is BUILT inside a FRAME that has bytes left: joblib reads its array from the file "
         "after the frame, which the scan does not follow");
  if (!o.args.is(Value::Kind::Tuple) || o.args.size() != 0)
    fail(ErrorCode::unsupported, "is made with arguments " + o.args.repr(3) +
                                     ": its __init__ sets attributes the scan does not follow");
  // Its attributes: BUILD updates the instance's __dict__ with a dict state
  // (or the first of (dict, slots), then sets the slots), on top of what an
  // earlier BUILD set.
  std::map<std::string, Value> attrs;
  const std::function<void(const Value&, bool)> add = [&](const Value& st, bool pair) {
    if (st.is_none()) return;
    if (st.is(Value::Kind::Dict)) {
      for (const auto& [k, v] : st.pairs()) {
        if (!k.is(Value::Kind::Str))
          fail(ErrorCode::corrupt, "has an attribute named " + k.repr(2));
        attrs[k.as_str()] = v;
      }
      return;
    }
    if (!pair && st.is(Value::Kind::Tuple) && st.size() == 2) {
      add(st.items()[0], true);
      add(st.items()[1], true);
      return;
    }
    fail(ErrorCode::corrupt, "is BUILT with the state " + st.repr(3) + ", which Python refuses");
  };
  add(previous, false);
  add(o.state, false);
  const auto get = [&](const char* key) -> const Value* {
    const auto it = attrs.find(key);
    return it == attrs.end() ? nullptr : &it->second;
  };
  const Value* dtype = get("dtype");
  const Value* shape = get("shape");
  if (dtype == nullptr || shape == nullptr)
    fail(ErrorCode::corrupt, "has no dtype or no shape: joblib stops there (AttributeError)");
  const std::optional<numpy::ElementLayout> layout = numpy::element_layout(*dtype);
  if (!layout)
    fail(ErrorCode::unsupported, "holds the dtype " + dtype->repr(3) +
                                     ", whose item size the scan cannot tell: it cannot find "
                                     "where joblib's reading goes on");
  joblib_array_read_ = true;
  if (layout->has_object) {
    PickleScan n;
    n.swept = true;
    n.offset = r.file_offset();
    n.name = name + ": joblib's object array at byte " + std::to_string(n.offset);
    try {
      const Value v =
          pickle::unpickle(r, s_.options().limits, {}, &n.stats, {}, {}, s_.options().profiles);
      if (numpy::referenced(n.stats)) find_object_arrays(v, n);
      judge(n, {});
      joblib_nested_.push_back(std::move(n));
    } catch (const Error& e) {
      n.error = e.what();
      n.python_reads_on = !python_stops_too(e);
      judge(n, {});
      joblib_nested_.push_back(std::move(n));
      throw;
    }
    return;
  }
  if (!shape->is(Value::Kind::Tuple) && !shape->is(Value::Kind::List))
    fail(ErrorCode::unsupported, "has the shape " + shape->repr(3) + ", not a tuple of ints");
  std::uint64_t count = 1;  // int64 arithmetic, wrapping as numpy's does
  for (const Value& x : shape->items()) {
    if (!x.is(Value::Kind::Int) && !x.is(Value::Kind::Bool))
      fail(ErrorCode::unsupported, "has the shape " + shape->repr(3) + ", not a tuple of ints");
    count *=
        static_cast<std::uint64_t>(x.is(Value::Kind::Bool) ? (x.as_bool() ? 1 : 0) : x.as_int());
  }
  if (static_cast<std::int64_t>(count) < 0)
    fail(ErrorCode::corrupt, "has the shape " + shape->repr(3) +
                                 ": a negative element count, which numpy.empty refuses");
  if (const Value* align = get("numpy_array_alignment_bytes"); align && !align->is_none()) {
    const std::uint8_t pad = r.u8("joblib's padding length");
    r.skip(pad, "joblib's array padding");
  }
  std::uint64_t bytes = 0;
  if (!detail::mul_ok(count, layout->itemsize, bytes) || bytes > r.remaining())
    fail(ErrorCode::truncated, "of " + std::to_string(count) + " elements of " +
                                   std::to_string(layout->itemsize) + " bytes runs past the end (" +
                                   std::to_string(r.remaining()) + " bytes left)");
  r.skip(bytes, "joblib's array bytes");
}

// joblib.load reads a pickle whose arrays follow their NumpyArrayWrapper in
// the file, where pickle.load and torch.load read on as opcodes: when a
// pickle names a NumpyArrayWrapper, the bytes are read again as joblib
// reads them (and judged: what joblib runs after an array no opcode reading
// reaches). The other readings' stops inside what joblib read to its STOP
// are explained: pickle.load stops there, having run what was judged.
void FileScan::joblib_reading() {
  if (!in_file() || src_.bytes().empty()) return;
  const auto wrapper = [](const PickleScan& p) {
    return std::any_of(p.globals.begin(), p.globals.end(), [](const ScanGlobal& g) {
      return g.name == "joblib.numpy_pickle.NumpyArrayWrapper";
    });
  };
  if (std::none_of(r_.pickles.begin(), r_.pickles.end(), wrapper)) return;
  const Source view = Source::borrow(src_.bytes(), src_.name() + " (as joblib.load reads it)");
  joblib_ = true;
  stream(view, "joblib", 0);
  joblib_ = false;
  if (joblib_ranges_.empty()) return;
  r_.format = "joblib";
  std::erase_if(r_.findings, [&](const ScanFinding& f) {
    return f.reason == "malformed" && f.offset && joblib_explains(*f.offset);
  });
}

bool FileScan::joblib_explains(std::uint64_t offset) const {
  return std::any_of(joblib_ranges_.begin(), joblib_ranges_.end(),
                     [&](const auto& r) { return offset >= r.first && offset < r.second; });
}

// --- sweeps ----------------------------------------------------------------

// Pickle after pickle, as a loader that calls pickle.load in a loop reads
// them, until the bytes stop being a pickle Python would read on from.
// Bytes that name nothing and end no pickle are where such a loader stops
// with an error, having run nothing.
void FileScan::stream(const Source& bytes, const std::string& name, std::uint64_t base,
                      std::uint64_t block, bool other_reading) {
  const OpenOptions& o = s_.options();
  ByteReader rd(bytes.bytes(), bytes.name(), base);
  // With `block` (dbm.dumb's .dat: records at multiples of 512 bytes, zero
  // padding between them), where a loader reading on would stop, the sweep
  // goes on at the next block after what it walked.
  const auto next_block = [&](std::uint64_t walked_to) {
    if (block == 0) return false;
    const std::uint64_t at = std::max(rd.file_offset() + 1, walked_to);
    const std::uint64_t next = (at + block - 1) / block * block;  // blocks of the file
    if (next - base >= bytes.size()) return false;
    rd.seek(next - base);
    return true;
  };
  for (std::uint64_t i = 0; !rd.at_end(); ++i) {
    detail::count(detail::work().scan_steps);
    // Is what follows a pickle at all?
    ByteReader probe = rd;
    const pickle::OpcodeWalk w = pickle::walk_opcodes(probe, o.limits);
    const bool proto = static_cast<unsigned char>(bytes.bytes()[rd.pos()]) == 0x80;
    // (A call needs a callable, which only a global or an extension names.)
    if (!w.reached_stop && w.globals.empty() && w.extensions == 0 && !proto) {
      if (next_block(w.end)) continue;
      return;  // nothing a loader would run: it stops here
    }
    if (seen(rd.what(), rd.file_offset())) {
      // Judged when the reader ran it: step over it.
      if (!w.reached_stop) {
        if (next_block(w.end)) continue;
        return;
      }
      rd.seek(rd.pos() + (w.end - rd.file_offset()));
      continue;
    }
    if (!s_.take(w.end > rd.file_offset() ? w.end - rd.file_offset() : 1)) {
      unscannable(s_.budget_text(), name, rd.file_offset());
      return;
    }
    {
      auto& ranges = swept_[rd.what()];
      if (ranges.empty() || ranges.back().second != rd.file_offset())
        ranges.emplace_back(rd.file_offset(), rd.file_offset());
      ranges.back().second = std::max(ranges.back().second, w.end + (w.end == rd.file_offset()));
    }
    PickleScan& p = r_.pickles.emplace_back();
    p.swept = true;
    p.name = i == 0 ? name : name + ":" + std::to_string(i);
    p.offset = rd.file_offset();
    const ByteReader start = rd;
    // Persistent ids have no loader behind them here: Python's pickle.load
    // refuses them (UnpicklingError), so the VM stops there too.
    // joblib's reading: the hook reads what joblib's unpickler reads after
    // BUILD on a NumpyArrayWrapper (p stays in place: nested pickles wait
    // in joblib_nested_, listed after p once it is judged and folded).
    joblib_array_read_ = false;
    const std::string pname = p.name;
    const pickle::AfterBuildHook hook =
        joblib_ ? pickle::AfterBuildHook([&](const Value& target, const Value& previous,
                                             ByteReader& r, bool in_frame, std::uint64_t at) {
          joblib_array(target, previous, r, in_frame, at, pname);
        })
                : pickle::AfterBuildHook();
    const auto nested = [&] {
      for (PickleScan& n : joblib_nested_) {
        r_.pickles.push_back(std::move(n));
        fold_last();
      }
      joblib_nested_.clear();
    };
    try {
      Value v = pickle::unpickle(rd, o.limits, {}, &p.stats, {}, {}, o.profiles, hook);
      if (numpy::referenced(p.stats)) find_object_arrays(v, p);
      judge(p, {});
      if (joblib_array_read_) joblib_ranges_.emplace_back(p.offset, rd.file_offset());
      fold_last();
      nested();
      continue;
    } catch (const Error& e) {
      struct Later {  // the nested pickles, after p is judged and folded
        std::function<void()> f;
        ~Later() { f(); }
      } later{nested};
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
      // a loader reading on stops: nothing more to judge (and so is one
      // of `other_reading`, the bytes of another format read as a pickle).
      if ((i > 0 || other_reading) && !p.python_reads_on && p.stats.globals.empty() &&
          after.empty() && p.stats.other_calls == 0 && p.stats.extensions == 0) {
        r_.pickles.pop_back();
        if (next_block(start.file_offset() + 1)) continue;
        return;
      }
      judge(p, after);
      fold_last();
      if (!next && !next_block(start.file_offset() + 1)) return;
    }
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

namespace {

// The declared and the recorded bytes of a storage the zip reader refused
// as larger than its record (pytorch_zip.cpp's message: "... (N bytes) but
// record '...' has M bytes ..."), when N > M.
std::optional<std::pair<std::uint64_t, std::uint64_t>> oversized_storage(const Error& e) {
  const std::string& m = e.message();
  const std::size_t declared = m.find(" bytes) but record '");
  const std::size_t open = m.rfind('(', declared);
  const std::size_t has = m.find("' has ", declared);
  if (declared == std::string::npos || open == std::string::npos || has == std::string::npos)
    return std::nullopt;
  try {
    const std::uint64_t n = std::stoull(m.substr(open + 1, declared - open - 1));
    const std::uint64_t r = std::stoull(m.substr(has + 6));
    if (n > r) return std::make_pair(n, r);
  } catch (...) {
  }
  return std::nullopt;
}

}  // namespace

// The reader stopped: say why, then sweep what a more lenient loader could
// still reach.
void FileScan::reader_failed(const Error& e, std::optional<Format> format) {
  r_.reading = e.code() == ErrorCode::ambiguous ? "ambiguous" : "refused";
  r_.reading_error = e.what();
  const std::string where = e.where().empty() ? src_.name() : e.where();
  const bool container = format == Format::pytorch_zip || format == Format::pytorch_tar;
  // A tar without any of the members of torch's layout (sys_info,
  // storages, tensors, pickle: torch.load raises KeyError before it
  // unpickles anything) is an archive of other files, a SageMaker
  // model.tar.gz say: its members, judged by their content, speak for it.
  // (With some of them it is a damaged checkpoint: malformed.)
  const bool tar_archive =
      format == Format::pytorch_tar &&
      (e.code() == ErrorCode::corrupt || e.code() == ErrorCode::not_a_checkpoint) && reads_.empty();
  if (tar_archive) {
    r_.format = "tar";
    r_.reading.clear();  // no reader reads it: an archive
  }
  // CVE-2026-24747: a storage declared larger than its data/<key> record.
  // torch >= 2.10 refuses it (as the zip reader does); 2.6 to 2.9 built
  // the storage of the declared size over the record's bytes, and a
  // SETITEM on its tensor (which their weights_only unpickler ran on any
  // object) wrote past them. Not a damaged file: an attack on the loader.
  if (const auto over = oversized_storage(e); over && e.code() == ErrorCode::corrupt) {
    add({ScanVerdict::unsafe, "oversized-storage", "", false,
         "a storage is declared larger than its record (" + std::to_string(over->first) +
             " bytes over " + std::to_string(over->second) +
             "): torch 2.6 to 2.9 build it over the record's bytes and read, or with a SETITEM "
             "on its tensor write, past them (CVE-2026-24747); torch >= 2.10 refuses it",
         where, e.offset()});
  }
  switch (tar_archive ? ErrorCode::unsupported : e.code()) {
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
      bytes = p.bytes().bytes;
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
  // What a more lenient loader still reaches, as the format's reader
  // tells it (a zip's local headers; a pickle stream from its first byte,
  // stepping over what was judged).
  if (format) formats::sweep(src_, *format, s_.options(), *this);
}

// A compressed file (joblib's, a gzipped pickle, a .pt.xz): what it holds,
// judged as a file of its own; what decoded before damage, judged too.
// False when a weak magic (zlib's, .lzma's) was no such stream.
bool FileScan::compressed(const open_detail::Wrapping& w) {
  const OpenOptions& o = s_.options();
  const std::uint64_t cap = std::min(o.limits.max_inflate_bytes, o.limits.max_scan_bytes);
  PartBytes d = open_detail::unwrap(
      src_, w, cap, "Limits::max_inflate_bytes or max_scan_bytes = " + std::to_string(cap));
  // (A stream refused for the memory its header asks is one: judged.)
  if (w.weak && d.bytes.size() == 0 && d.stopped && d.stopped->code() != ErrorCode::limit_exceeded)
    return false;
  const std::string name(w.name);
  r_.format = w.label.empty() ? name : std::string(w.label);
  r_.reading = "ok";
  if (!s_.take(d.bytes.size())) {
    unscannable(s_.budget_text(), src_.name(), w.at);
    return true;
  }
  if (d.stopped) stopped(*d.stopped, d.what, src_.name());
  if (d.bytes.size() != 0 || !d.stopped) member(name, d.bytes);
  return true;
}

void FileScan::run(std::optional<Format> forced_format, bool torch_load) {
  walk_file(forced_format, torch_load);
  joblib_reading();
  settle();
}

void FileScan::walk_file(std::optional<Format> forced_format, bool torch_load) {
  const OpenOptions& o = s_.options();
  // Bytes torch.load reads from memory are a zip or a pickle to it,
  // whatever else they may look like: read so, and nothing else.
  if (torch_load) forced_format = formats::torch_load_format(src_);
  const bool sniffed = !forced_format;
  const std::optional<Format> format = forced_format ? forced_format : sniff(src_);
  // Compressed: a file of its own inside. (gzip is also how our record
  // files are compressed: those are read as records, below.)
  // Key-value stores of pickles (shelve): read through their index, or
  // named unscannable.
  if (sniffed && (dbm_dumb() || dbm_store())) return;
  // Whatever a decompressor reads, the bytes as they are are what
  // pickle.load and torch.load read: a polyglot (a skippable frame that
  // is a pickle's string) is judged both ways.
  // (What wraps a file is the registry's to say, as what the file is.)
  const auto wrap = open_detail::wrapping(src_.bytes());
  bool guessed = false;
  if (sniffed && wrap &&
      !(wrap->compression == Compression::gzip && format == Format::torchport_record)) {
    // (joblib's "ZF" header is no weak guess: joblib runs what follows it,
    // so the bytes are judged as a pickle whether or not its zlib decodes.)
    if (compressed(*wrap) || !wrap->label.empty()) {
      // A weak magic is a guess: what the registry tells the bytes as (a
      // tar of zero blocks is a valid .lzma header too) is read as well,
      // and the bytes as pickle.load reads them after that reading.
      guessed = wrap->weak && format;
      if (!guessed) {
        stream(src_, "pickle", 0, 0, true);
        return;
      }
    }
  }
  // A legacy pickle is sniffed by its first byte alone, which text shares
  // ("License ..." starts with LONG): bytes that do not start with PROTO,
  // name nothing and end no pickle are no pickle any loader runs.
  if (format == Format::pytorch_legacy && sniffed && !src_.bytes().empty() &&
      static_cast<unsigned char>(src_.bytes()[0]) != 0x80) {
    ByteReader probe(src_.bytes(), src_.name());
    const pickle::OpcodeWalk w = pickle::walk_opcodes(probe, o.limits);
    if (!w.reached_stop && w.globals.empty() && w.extensions == 0) return;
  }
  if (!format) {
    // No format: a pickle in disguise (Python's unpickler would run it
    // whatever the name), or nothing any loader unpickles.
    stream(src_, "pickle", 0, dumb_blocks(src_));
    if (!r_.pickles.empty()) r_.format = "pickle";
    return;
  }
  r_.format = std::string(format_name(*format));
  try {
    OpenOptions ro = o;
    ro.format = torch_load ? std::nullopt : forced_format;
    const TensorCatalog cat =
        torch_load ? formats::read_as_torch_load(src_, ro, *this) : formats::walk(src_, ro, *this);
    r_.reading = "ok";
    r_.format = cat.format_name();  // more precise than the sniff: "torchscript", "pickle", ...
    r_.tensors = cat.size();
  } catch (const Error& e) {
    // A gzip stream the record reader refuses: a compressed file (of a
    // pickle, say), judged by what it holds.
    if (format == Format::torchport_record && wrap && wrap->compression == Compression::gzip) {
      r_.reading.clear();
      compressed(*wrap);
      return;
    }
    if (e.code() == ErrorCode::not_a_checkpoint && format == Format::pytorch_zip) r_.format = "zip";
    if (e.code() == ErrorCode::not_a_checkpoint && format == Format::pytorch_tar) r_.format = "tar";
    reader_failed(e, format);
  }
  // Every reading a loader would take: pickle.load reads any file as
  // opcodes, and so does torch.load's legacy path for what is neither zip
  // nor a tar it can read. A MessagePack record whose first byte is a
  // pickle opcode (0x8a, fixmap of 10: LONG1, whose length skips into a
  // string of the record), a tar whose first member's name is a pickle,
  // or a file a weak magic only guessed compressed is judged both ways.
  // (A zip starts with PERSID, which pickle.load refuses; safetensors,
  // .npy and JSON records start no pickle.)
  if (guessed || format == Format::torchport_record || format == Format::pytorch_tar)
    stream(src_, "pickle", 0, 0, true);
  if (!r_.code_records.empty()) {
    std::string list;
    for (std::size_t i = 0; i < r_.code_records.size() && i < 8; ++i)
      list += (i ? ", '" : "'") + r_.code_records[i] + "'";
    if (r_.code_records.size() > 8) list += ", ...";
    // AOTInductor's files (a PT2 archive's data/aotinductor/<model>/):
    // torch.export.load and aoti_load_package hand them to
    // AOTIModelPackageLoader, which compiles the C++ and loads the shared
    // objects (torch/export/pt2_archive/_package.py, load_pt2).
    const bool compiled =
        std::any_of(r_.code_records.begin(), r_.code_records.end(), [](const std::string& n) {
          return n.ends_with(".so") || n.find("/aotinductor/") != std::string::npos;
        });
    add({ScanVerdict::unsafe, compiled ? "compiled-code" : "torchscript-code", "", false,
         std::to_string(r_.code_records.size()) + " code record(s) (" + list +
             (compiled ? "): torch.export.load and torch._inductor.aoti_load_package hand them "
                         "to AOTInductor's package loader, which compiles the generated C++ "
                         "and loads and runs the shared objects; torchport never reads them"
                       : "): torch.jit.load compiles and runs them (and torch.load before 2.6 "
                         "did too, even with weights_only: CVE-2025-32434); torchport never "
                         "reads them"),
         src_.name(), std::nullopt});
  }
}

void FileScan::run_sharded(const std::filesystem::path& path) {
  const std::optional<Format> format =
      s_.options().format ? s_.options().format : formats::path_format(path);
  r_.format = format && *format != Format::sharded_safetensors ? format_name(*format) : "sharded";
  try {
    const TensorCatalog cat = formats::walk_sharded(path, s_.options(), *this);
    r_.reading = "ok";
    r_.format = cat.format_name();
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

std::string add_safe_globals_line(const ScanReport& report, const std::vector<std::string>& needs) {
  if (report.verdict != ScanVerdict::clean) return {};
  return add_safe_globals_line(needs);
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
  const std::optional<Format> format = options.format ? options.format : formats::path_format(path);
  const bool sharded = format && formats::read_from_path(*format);
  Scanner s(options);
  if (is_url(path.string())) {  // one remote file, read whole (Scanner::file)
    if (!options.remote)
      throw Error(ErrorCode::unsupported,
                  "a URL: scanning remote files needs the torchport::remote component "
                  "(OpenOptions::remote)");
    ScanReport r = s.file(options.remote->open(path.string(), options.limits), path.string(), 0,
                          options.format);
    r.path = path.string();
    return r;
  }
  if (!sharded) {
    s.file_name = path.filename().string();
    const std::filesystem::path folder = path.parent_path();
    const MapOptions map = options.map;
    s.beside = [folder, map](const std::string& name) -> std::optional<Source> {
      std::error_code ec;
      const std::filesystem::path p = folder / name;
      if (!std::filesystem::is_regular_file(p, ec)) return std::nullopt;
      return Source::map_file(p, map);
    };
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

namespace scan_detail {

ScanReport scan_beside(const Source& source, const OpenOptions& options,
                       const std::string& file_name, const Beside& beside) {
  pickle::validate_allow_patterns(options.allow);
  Scanner s(options);
  s.file_name = file_name;
  s.beside = beside;
  return s.file(source, source.name(), 0, options.format);
}

}  // namespace scan_detail

std::string add_safe_globals_line(const std::vector<std::string>& needs) {
  if (needs.empty()) return {};
  // Never a line that trusts a known way to run code, however the dotted
  // name splits into module and attribute ("pathlib.os.system").
  for (const std::string& n : needs) {
    if (n.ends_with(".*")) continue;
    for (std::size_t dot = n.find('.'); dot != std::string::npos; dot = n.find('.', dot + 1))
      if (pickle::classify_global(n.substr(0, dot), n.substr(dot + 1)) ==
          pickle::GlobalClass::dangerous)
        return {};
    if (n.find('.') == std::string::npos &&
        pickle::classify_global("builtins", n) == pickle::GlobalClass::dangerous)
      return {};
  }
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
