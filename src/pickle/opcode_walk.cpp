// walk_opcodes(): a pickle read as pickletools.genops reads it, for the
// scanner. No values are built; STACK_GLOBAL's operands are the two
// strings pushed (or fetched from the memo) last, which is what every
// pickler writes before it and what a hand-made pickle can hide only by
// building the strings with calls, which leaves the name unresolved.

#include <deque>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pickle/names.hpp"
#include "pickle/opcodes.hpp"
#include "pickle/unpickler.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"
#include "torchport/detail/utf8.hpp"
#include "torchport/detail/work.hpp"

namespace torchport::pickle {
namespace {

namespace o = ops;

// The string a pushing opcode's argument stands for, as far as the walk
// needs it (protocol 0's quoted STRING without its quotes; escapes are
// left: a module name has none).
std::string_view string_of(std::uint8_t op, std::string_view text) {
  if (op == o::STRING && text.size() >= 2 && (text.front() == '\'' || text.front() == '"'))
    return text.substr(1, text.size() - 2);
  return text;
}

}  // namespace

OpcodeWalk walk_opcodes(ByteReader& r, const Limits& limits) {
  OpcodeWalk w;
  std::deque<std::optional<std::string_view>> last;  // the last two pushes, unknown ones as nullopt
  std::unordered_map<std::uint64_t, std::optional<std::string_view>, detail::SeededHash> memo;
  detail::StringMap<std::size_t> index;
  std::uint64_t memo_count = 0;
  auto push = [&](std::optional<std::string_view> s) {
    last.push_back(s);
    if (last.size() > 2) last.pop_front();
  };
  auto put = [&](std::uint64_t i) {
    if (memo.size() < limits.max_memo) memo[i] = last.empty() ? std::nullopt : last.back();
  };
  // A GET of an index never PUT stops Python ("memo value not found"),
  // whatever the values: where the walk still knows every index.
  auto get = [&](std::uint64_t i) {
    const auto it = memo.find(i);
    if (it == memo.end() && memo.size() < limits.max_memo) return false;
    push(it == memo.end() ? std::nullopt : it->second);
    return true;
  };
  // Calls are counted for every global referenced before them: each global
  // keeps the counts at its first reference, and waits (once) for the first
  // call after it. Linear: a call does not visit the globals.
  std::uint64_t total_calls = 0, total_builds = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> at_reference;  // per global
  std::vector<std::size_t> waiting;  // globals that have seen no call yet
  std::uint64_t frame_end = 0;       // where the current FRAME ends (0: none)
  auto global = [&](std::string module, std::string name, std::uint8_t op, std::uint64_t at) {
    std::string written_module = module, written_name = name;
    GlobalName g = python_global_name(std::move(module), std::move(name), w.protocol);
    const std::string key = g.module + "." + g.name;
    auto [it, fresh] = index.emplace(key, w.globals.size());
    if (fresh) {
      GlobalUse use;
      use.written_module = std::move(written_module);
      use.written_name = std::move(written_name);
      use.module = std::move(g.module);
      use.name = std::move(g.name);
      use.written = std::move(g.written);
      use.klass = use.module == "?" ? GlobalClass::unknown : classify_global(use.module, use.name);
      use.first_offset = at;
      use.opcode = op;
      w.globals.push_back(std::move(use));
      at_reference.emplace_back(total_calls, total_builds);
      waiting.push_back(w.globals.size() - 1);
    }
    ++w.globals[it->second].count;
  };
  auto called = [&](std::uint8_t op, std::uint64_t at) {
    ++w.calls;
    if (op == o::BUILD) {
      ++total_builds;
      return;
    }
    ++total_calls;
    detail::count(detail::work().scan_steps, waiting.size());
    for (std::size_t i : waiting) {
      w.globals[i].first_call_offset = at;
      w.globals[i].call_opcode = op;
    }
    waiting.clear();
  };
  auto stop = [&](std::uint64_t at, std::string why) {
    w.end = at;
    w.stopped = std::move(why);
  };
  auto finish = [&] {
    detail::count(detail::work().scan_steps, w.opcodes + w.globals.size());
    for (std::size_t i = 0; i < w.globals.size(); ++i) {
      w.globals[i].calls = total_calls - at_reference[i].first;
      w.globals[i].builds = total_builds - at_reference[i].second;
    }
  };
  [&] {
    for (;;) {
      const std::uint64_t at = r.file_offset();
      if (r.at_end()) {
        stop(at, "the pickle ends before its STOP opcode");
        return;
      }
      std::uint8_t op = 0;
      Operand a;
      const OpInfo* info = nullptr;
      try {
        op = r.u8("opcode");
        info = opcode_info(op);
        if (info == nullptr) {
          stop(at, "byte 0x" + std::string(1, "0123456789abcdef"[op >> 4]) +
                       std::string(1, "0123456789abcdef"[op & 15]) + " is no pickle opcode");
          return;
        }
        if (op == o::NEXT_BUFFER) {
          stop(at, "NEXT_BUFFER: out-of-band data, which a loader without buffers refuses");
          return;
        }
        if (op == o::EXT1 || op == o::EXT2 || op == o::EXT4) ++w.extensions;
        if (frame_end != 0 && at >= frame_end) frame_end = 0;
        a = read_operand(r, *info);
        // An argument past its frame's end (Stats::frame_straddles).
        if (frame_end != 0 && r.file_offset() > frame_end) {
          ++w.frame_straddles;
          frame_end = 0;
        }
      } catch (const Error& e) {
        stop(at, e.message());
        return;
      }
      ++w.opcodes;
      switch (op) {
        case o::STOP:
          w.reached_stop = true;
          w.end = r.file_offset();
          return;
        case o::PROTO:
          w.protocol = static_cast<int>(a.number);
          break;
        case o::GLOBAL:
        case o::INST: {
          // Python decodes GLOBAL's names as UTF-8 and INST's as ASCII, then
          // imports the module: names that fail either stop it here.
          if (!detail::is_utf8(a.text) || !detail::is_utf8(a.second)) {
            stop(at, std::string(info->name) + " names a module or name that is not UTF-8");
            return;
          }
          if (!importable_module(a.text)) {
            stop(at, std::string(info->name) + " names '" + std::string(a.text.substr(0, 64)) +
                         "', which is no module Python could import");
            return;
          }
          global(std::string(a.text), std::string(a.second), op, at);
          if (op == o::INST) called(op, at);
          push(std::nullopt);
          break;
        }
        case o::STACK_GLOBAL: {
          const auto name = last.size() >= 1 ? last.back() : std::nullopt;
          const auto module = last.size() >= 2 ? last.front() : std::nullopt;
          if (module && name) {
            if (!importable_module(*module)) {
              stop(at, "STACK_GLOBAL names '" + std::string(module->substr(0, 64)) +
                           "', which is no module Python could import");
              return;
            }
            global(std::string(*module), std::string(*name), op, at);
          } else {
            ++w.unresolved;
            global("?", "?", op, at);
          }
          push(std::nullopt);
          break;
        }
        case o::REDUCE:
        case o::NEWOBJ:
        case o::NEWOBJ_EX:
        case o::OBJ:
        case o::BUILD:
          called(op, at);
          push(std::nullopt);
          break;
        case o::PERSID:
        case o::BINPERSID:
          ++w.persistent_ids;
          push(std::nullopt);
          break;
        case o::STRING:
        case o::UNICODE:
        case o::SHORT_BINUNICODE:
        case o::SHORT_BINSTRING:
        case o::BINUNICODE:
        case o::BINSTRING:
        case o::BINUNICODE8:
          push(string_of(op, a.text));
          break;
        case o::PUT:
        case o::GET: {
          std::uint64_t i = 0;
          for (char c : a.text)
            if (c >= '0' && c <= '9') i = i * 10 + static_cast<std::uint64_t>(c - '0');
          if (op == o::PUT) {
            put(i);
          } else if (!get(i)) {
            stop(at, "GET of memo entry " + std::to_string(i) + ", which was never stored");
            return;
          }
          break;
        }
        case o::BINPUT:
        case o::LONG_BINPUT:
          put(a.number);
          break;
        case o::MEMOIZE:
          put(memo_count++);
          break;
        case o::BINGET:
        case o::LONG_BINGET:
          if (!get(a.number)) {
            stop(at, std::string(info->name) + " of memo entry " + std::to_string(a.number) +
                         ", which was never stored");
            return;
          }
          break;
        case o::FRAME:
          if (frame_end != 0 && r.file_offset() < frame_end) ++w.frame_straddles;
          frame_end = r.file_offset() + a.number;
          break;
        case o::MARK:
          break;
        default:  // any other value or operation: not a string
          push(std::nullopt);
          break;
      }
    }
  }();
  finish();
  return w;
}

}  // namespace torchport::pickle
