#include "security/hostile.hpp"

#include <cctype>
#include <cstring>
#include <stdexcept>

#include <zlib.h>

namespace torchport::test {
namespace {

void put_le(std::string& out, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
}

std::string repeat(std::string_view s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t k = 0; k < n; ++k) out += s;
  return out;
}

}  // namespace

Pk::Pk(int proto) {
  if (proto >= 2) {
    b_ += '\x80';
    b_ += static_cast<char>(proto);
  }
}
Pk& Pk::raw(std::string_view bytes) {
  b_ += bytes;
  return *this;
}
Pk& Pk::glob(std::string_view module, std::string_view name) {
  b_ += 'c';
  b_ += module;
  b_ += '\n';
  b_ += name;
  b_ += '\n';
  return *this;
}
Pk& Pk::stack_glob(std::string_view module, std::string_view name) {
  return s(module).s(name).op('\x93');
}
Pk& Pk::s(std::string_view text) {
  b_ += 'X';
  put_le(b_, text.size(), 4);
  b_ += text;
  return *this;
}
Pk& Pk::i(std::int64_t v) {
  if (v >= 0 && v < 256) {
    b_ += 'K';
    b_ += static_cast<char>(v);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    b_ += 'J';
    put_le(b_, static_cast<std::uint32_t>(v), 4);
  } else {
    b_ += "\x8a\x08";
    put_le(b_, static_cast<std::uint64_t>(v), 8);
  }
  return *this;
}
Pk& Pk::u32(std::uint32_t v) {
  put_le(b_, v, 4);
  return *this;
}
Pk& Pk::u64(std::uint64_t v) {
  put_le(b_, v, 8);
  return *this;
}
Pk& Pk::ordered_dict() {
  return glob("collections", "OrderedDict").op(')').reduce();
}
Pk& Pk::ints(const std::vector<std::int64_t>& values) {
  mark();
  for (auto v : values) i(v);
  return tuple();
}
Pk& Pk::storage(std::string_view cls, std::string_view key, std::int64_t numel) {
  return mark().s("storage").glob("torch", cls).s(key).s("cpu").i(numel).tuple().op('Q');
}
Pk& Pk::tensor_v2(std::string_view cls, std::string_view key, std::int64_t numel,
                  std::int64_t offset, const std::vector<std::int64_t>& size,
                  const std::vector<std::int64_t>& stride) {
  glob("torch._utils", "_rebuild_tensor_v2").mark();
  storage(cls, key, numel).i(offset).ints(size).ints(stride).op('\x89').ordered_dict();
  return tuple().reduce();
}
Pk& Pk::call(std::string_view module, std::string_view name, std::string_view arg) {
  return glob(module, name).mark().s(arg).tuple().reduce();
}
std::string Pk::stop() {
  b_ += '.';
  return b_;
}

std::string good_state_pickle() {
  Pk p;
  p.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 4, 0, {2, 2}, {2, 1});
  return p.setitems().stop();
}

std::string legacy_head() {
  // pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2), pickle.dumps(1001, ...),
  // pickle.dumps({"little_endian": True}, ...).
  std::string magic =
      Pk().raw("\x8a\x0a").raw(std::string("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10)).stop();
  std::string proto = Pk().i(1001).stop();
  std::string sys = Pk().op('}').s("little_endian").op('\x88').op('s').stop();
  return magic + proto + sys;
}

std::string deflate_raw(const std::string& data) {
  z_stream zs{};
  if (deflateInit2(&zs, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string zip_archive(const std::vector<ZipMember>& members) {
  std::string out, central;
  for (const ZipMember& m : members) {
    const std::string comp = !m.raw_compressed.empty() ? m.raw_compressed
                             : m.method == 8           ? deflate_raw(m.data)
                                                       : m.data;
    const auto crc =
        m.crc >= 0
            ? static_cast<std::uint32_t>(m.crc)
            : static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(m.data.data()),
                                               static_cast<uInt>(m.data.size())));
    const std::uint64_t size =
        m.declared_size >= 0 ? static_cast<std::uint64_t>(m.declared_size) : m.data.size();
    const std::string local_name = m.local_name.empty() ? m.name : m.local_name;
    const std::uint64_t offset = m.offset >= 0 ? static_cast<std::uint64_t>(m.offset) : out.size();
    if (m.offset < 0) {
      put_le(out, 0x04034b50, 4);
      put_le(out, 20, 2);
      put_le(out, 0, 2);  // flags
      put_le(out, static_cast<std::uint64_t>(m.method), 2);
      put_le(out, 0, 4);  // time, date
      put_le(out, crc, 4);
      put_le(out, comp.size(), 4);
      put_le(out, size, 4);
      put_le(out, local_name.size(), 2);
      put_le(out, 0, 2);
      out += local_name;
      out += comp;
    }
    put_le(central, 0x02014b50, 4);
    put_le(central, 20, 2);
    put_le(central, 20, 2);
    put_le(central, 0, 2);
    put_le(central, static_cast<std::uint64_t>(m.method), 2);
    put_le(central, 0, 4);
    put_le(central, crc, 4);
    put_le(central, comp.size(), 4);
    put_le(central, size, 4);
    put_le(central, m.name.size(), 2);
    put_le(central, 0, 2);  // extra
    put_le(central, 0, 2);  // comment
    put_le(central, 0, 2);  // disk
    put_le(central, 0, 2);  // internal attributes
    put_le(central, 0, 4);  // external attributes
    put_le(central, offset, 4);
    central += m.name;
  }
  const std::uint64_t cd = out.size();
  out += central;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 4);
  put_le(out, members.size(), 2);
  put_le(out, members.size(), 2);
  put_le(out, central.size(), 4);
  put_le(out, cd, 4);
  put_le(out, 0, 2);
  return out;
}

std::string torch_zip(const std::string& pkl,
                      const std::vector<std::pair<std::string, std::string>>& records,
                      const std::string& prefix) {
  std::vector<ZipMember> m{{prefix + "data.pkl", pkl}};
  for (const auto& [k, v] : records) m.push_back({prefix + "data/" + k, v});
  m.push_back({prefix + "version", "3\n"});  // every torch reader requires it
  return zip_archive(m);
}

std::string tar_archive(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out;
  for (const auto& [name, data] : members) {
    std::string h(512, '\0');
    std::memcpy(h.data(), name.data(), std::min<std::size_t>(name.size(), 99));
    std::memcpy(h.data() + 100, "0000644", 7);
    std::memcpy(h.data() + 108, "0000000", 7);
    std::memcpy(h.data() + 116, "0000000", 7);
    char size[12];
    std::snprintf(size, sizeof size, "%011llo", static_cast<unsigned long long>(data.size()));
    std::memcpy(h.data() + 124, size, 11);
    std::memcpy(h.data() + 136, "00000000000", 11);
    h[156] = '0';
    std::memcpy(h.data() + 257, "ustar", 6);
    std::memcpy(h.data() + 263, "00", 2);
    std::memset(h.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : h) sum += static_cast<unsigned char>(c);
    char chk[8];
    std::snprintf(chk, sizeof chk, "%06o", sum);
    std::memcpy(h.data() + 148, chk, 7);
    out += h;
    out += data;
    out += std::string((512 - data.size() % 512) % 512, '\0');
  }
  out += std::string(1024, '\0');
  return out;
}

namespace {

std::string f32x4() {
  const float v[4] = {1, 2, 3, 4};
  return std::string(reinterpret_cast<const char*>(v), sizeof v);
}

// A torch tar checkpoint whose members can be replaced.
std::string torch_tar(const std::string& pickle_member, const std::string& storages_member = {}) {
  std::string storages = storages_member;
  if (storages.empty()) {
    storages = Pk().i(1).stop();
    storages += Pk().mark().s("0").s("cpu").glob("torch", "FloatStorage").tuple().stop();
    std::string count;
    put_le(count, 4, 8);
    storages += count + f32x4();
    storages += Pk().op(']').stop();
  }
  std::string tensors = Pk().i(0).stop();
  return tar_archive({{"sys_info", Pk().op('}').s("little_endian").op('\x88').op('s').stop()},
                      {"storages", storages},
                      {"tensors", tensors},
                      {"pickle", pickle_member}});
}

// Python's idea of 0x1950a86a20f9469cfc6c followed by the rest of a legacy file.
std::string legacy_file(const std::string& object_pickle,
                        const std::string& keys = Pk().op(']').stop(),
                        const std::string& tail = {}) {
  return legacy_head() + object_pickle + keys + tail;
}

}  // namespace

std::vector<HostileCase> hostile_cases() {
  std::vector<HostileCase> c;
  auto add = [&](std::string name, std::string bytes, std::string code, std::string message,
                 std::string scan) {
    // Names become test names: letters, digits and '_' only.
    for (char& ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    c.push_back(
        {std::move(name), std::move(bytes), std::move(code), std::move(message), std::move(scan)});
  };
  const std::string good = good_state_pickle();

  // --- code execution attempts: every opcode that calls, in every container.
  const std::pair<const char*, const char*> kRunners[] = {
      {"os", "system"},
      {"posix", "system"},
      {"nt", "system"},
      {"builtins", "eval"},
      {"builtins", "exec"},
      {"__builtin__", "exec"},
      {"builtins", "getattr"},
      {"builtins", "__import__"},
      {"builtins", "compile"},
      {"builtins", "open"},
      {"subprocess", "Popen"},
      {"subprocess", "check_output"},
      {"_posixsubprocess", "fork_exec"},
      {"pty", "spawn"},
      {"runpy", "_run_code"},
      {"importlib", "import_module"},
      {"pkgutil", "resolve_name"},
      {"pickle", "loads"},
      {"_pickle", "loads"},
      {"marshal", "loads"},
      {"types", "FunctionType"},
      {"functools", "partial"},
      {"operator", "attrgetter"},
      {"operator", "methodcaller"},
      {"shutil", "rmtree"},
      {"socket", "create_connection"},
      {"webbrowser", "open"},
      {"ctypes", "CDLL"},
      {"cProfile", "run"},
      {"profile", "run"},
      {"pydoc", "pipepager"},
      {"timeit", "timeit"},
      {"code", "InteractiveInterpreter"},
      {"zipimport", "zipimporter"},
      {"imp", "load_source"},
      {"torch.storage", "_load_from_bytes"},
      {"torch", "load"},
      {"torch.serialization", "load"},
      {"torch.jit", "load"},
      {"torch.hub", "load"},
      {"torch.fx.graph_module", "reduce_graph_module"},
      {"torch.utils.cpp_extension", "load_inline"},
      {"torch._C", "_jit_script_compile"},
      {"numpy", "load"},
      {"numpy.ctypeslib", "load_library"},
  };
  for (const auto& [module, name] : kRunners) {
    const std::string qual =
        std::string(module == std::string("__builtin__") ? "builtins" : module) + "." + name;
    add(std::string("zip_reduce_") + module + "_" + name, torch_zip(Pk().call(module, name).stop()),
        "unsafe_global", qual, "dangerous");
  }
  const std::string evil = Pk().call("os", "system").stop();
  add("raw_pickle_reduce_os_system", evil, "unsafe_global", "os.system", "dangerous");
  add("raw_pickle_protocol0_inst", "(S'echo pwned'\nisubprocess\ncheck_output\n.", "unsafe_global",
      "subprocess.check_output", "dangerous");
  add("raw_pickle_protocol0_reduce", "cposix\nsystem\n(S'echo pwned'\ntR.", "unsafe_global",
      "posix.system", "dangerous");
  add("zip_newobj_eval",
      torch_zip(Pk().glob("builtins", "eval").mark().s("1").tuple().op('\x81').stop()),
      "unsafe_global", "builtins.eval", "dangerous");
  add("zip_newobj_ex_exec",
      torch_zip(Pk(4).glob("builtins", "exec").mark().s("1").tuple().op('}').op('\x92').stop()),
      "unsafe_global", "builtins.exec", "dangerous");
  add("zip_obj_system", torch_zip(Pk().mark().glob("os", "system").s("echo").op('o').stop()),
      "unsafe_global", "os.system", "dangerous");
  add("zip_stack_global_system",
      torch_zip(Pk(4).stack_glob("os", "system").mark().s("echo").tuple().reduce().stop()),
      "unsafe_global", "os.system", "dangerous");
  // Protocol 4 resolves dotted names attribute by attribute: torch.os is os.
  add("zip_dotted_torch_os_system",
      torch_zip(Pk(4).stack_glob("torch", "os.system").mark().s("echo").tuple().reduce().stop()),
      "unsafe_global", "torch.os.system", "dangerous");
  add("zip_dotted_torch_hub_load",
      torch_zip(Pk(4).stack_glob("torch", "hub.load").mark().s("x").tuple().reduce().stop()),
      "unsafe_global", "torch.hub.load", "dangerous");
  add("zip_memo_global",
      torch_zip(Pk().glob("os", "system")
                    .op('q')
                    .op('\0')
                    .op('0')
                    .op('h')
                    .op('\0')
                    .mark()
                    .s("x")
                    .tuple()
                    .reduce()
                    .stop()),
      "unsafe_global", "os.system", "dangerous");
  add("zip_getattr_import",
      torch_zip(Pk().glob("builtins", "getattr")
                    .mark()
                    .glob("builtins", "__import__")
                    .mark()
                    .s("os")
                    .tuple()
                    .reduce()
                    .s("system")
                    .tuple()
                    .reduce()
                    .mark()
                    .s("echo")
                    .tuple()
                    .reduce()
                    .stop()),
      "unsafe_global", "builtins.getattr", "dangerous");
  // A payload hidden in a tensor's arguments, and in the state dict's values.
  add("zip_payload_in_tensor_args",
      torch_zip(Pk().ordered_dict()
                    .mark()
                    .s("w")
                    .glob("torch._utils", "_rebuild_tensor_v2")
                    .mark()
                    .storage("FloatStorage", "0", 4)
                    .i(0)
                    .ints({4})
                    .ints({1})
                    .op('\x89')
                    .call("os", "system")
                    .tuple()
                    .reduce()
                    .setitems()
                    .stop(),
                {{"0", f32x4()}}),
      "unsafe_global", "os.system", "dangerous");
  add("zip_payload_in_build_state",
      torch_zip(Pk().glob("mymodel", "Net").op(')').op('\x81').call("os", "system").op('b').stop()),
      "unsafe_global", "os.system", "dangerous");
  add("zip_nested_pickle_load_from_bytes",
      torch_zip(Pk().glob("torch.storage", "_load_from_bytes")
                    .mark()
                    .raw("C")
                    .op(static_cast<char>(evil.size()))
                    .raw(evil)
                    .tuple()
                    .reduce()
                    .stop()),
      "unsafe_global", "torch.storage._load_from_bytes", "dangerous");
  add("legacy_reduce_system", legacy_file(evil), "unsafe_global", "os.system", "dangerous");
  add("legacy_system_in_sys_info",
      Pk().raw("\x8a\x0a").raw(std::string("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10)).stop() +
          Pk().i(1001).stop() + evil,
      "unsafe_global", "os.system", "dangerous");
  add("legacy_system_in_keys", legacy_file(Pk().op('}').stop(), evil), "unsafe_global", "os.system",
      "dangerous");
  add("tar_system_in_pickle", torch_tar(evil), "unsafe_global", "os.system", "dangerous");
  {
    std::string storages =
        Pk().i(1).stop() + Pk().mark().s("0").s("cpu").glob("os", "system").tuple().stop();
    add("tar_system_in_storage_header", torch_tar(Pk().op('}').stop(), storages), "unsafe_global",
        "os.system", "dangerous");
  }
  // Classes that would need code: loaded inertly, flagged by scan.
  add("zip_unknown_class_call",
      torch_zip(Pk().glob("mymodel", "Net")
                    .op(')')
                    .op('\x81')
                    .op('}')
                    .s("w")
                    .op('\x88')
                    .op('s')
                    .op('b')
                    .stop()),
      "ok", "", "needs_code");
  add("zip_unknown_persistent_id", torch_zip(Pk().mark().s("module").s("x").tuple().op('Q').stop()),
      "corrupt", "persistent id ('module', 'x') is not a ('storage'", "malformed");

  // --- TorchScript with code/: weights load, code/ is never read (here it
  // is not even valid deflate: reading it would fail).
  {
    std::vector<ZipMember> m{{"archive/data.pkl", good},
                             {"archive/constants.pkl", Pk().op(')').stop()},
                             {"archive/data/0", f32x4()},
                             {"archive/code/__torch__.py", "import os\nos.system('echo pwned')\n",
                              8, -1, "", -1, -1, "\xff\xff\xff\xff garbage, not deflate"},
                             {"archive/version", "3\n"}};
    add("torchscript_with_code", zip_archive(m), "ok", "", "needs_code");
  }

  // --- resource exhaustion in the pickle VM.
  {
    // Billion laughs: each level a list of ten references to the previous.
    Pk p;
    p.op(']').op('q').op('\0');
    for (int level = 1; level < 40; ++level) {
      p.mark();
      for (int k = 0; k < 10; ++k) p.op('h').op(static_cast<char>(level - 1));
      p.op('l').op('q').op(static_cast<char>(level));
    }
    add("pickle_billion_laughs", p.stop(), "limit_exceeded", "max_nodes", "malformed");
  }
  add("pickle_deep_tuple1", Pk().op(']').raw(repeat("\x85", 1000000)).stop(), "limit_exceeded",
      "max_depth", "malformed");
  add("pickle_deep_list", Pk().raw(repeat("(", 1000000)).raw(repeat("l", 1000000)).stop(),
      "limit_exceeded", "max_stack", "malformed");
  add("pickle_mark_flood", Pk().raw(repeat("(", 1000000)).stop(), "limit_exceeded", "max_stack",
      "malformed");
  add("pickle_stack_flood", Pk().raw(repeat("N", 1000000)).stop(), "limit_exceeded", "max_stack",
      "malformed");
  add("pickle_dup_flood", Pk().op(']').raw(repeat("2", 1000000)).stop(), "limit_exceeded",
      "max_stack", "malformed");
  add("pickle_memo_flood", Pk().op('N').raw(repeat("\x94", 8500000)).stop(), "limit_exceeded",
      "max_memo", "malformed");
  {
    // LONG_BINPUT far past the count: each a set entry, bounded on its own.
    std::string puts;
    for (std::uint32_t k = 0; k < 1100000; ++k) {
      const std::uint32_t index = 0x40000000u + 3 * k;
      puts += 'r';
      for (int b = 0; b < 4; ++b) puts += static_cast<char>((index >> (8 * b)) & 0xFF);
    }
    add("pickle_memo_sparse_flood", Pk().op('N').raw(puts).stop(), "limit_exceeded",
        "numbered out of order", "malformed");
  }
  add("pickle_binunicode_2_32", Pk().op('X').u32(0xffffffffu).raw("abc").stop(), "limit_exceeded",
      "max_string_bytes", "malformed");
  add("pickle_binunicode8_2_64", Pk(4).op('\x8d').u64(~0ull).raw("abc").stop(), "limit_exceeded",
      "max_string_bytes", "malformed");
  add("pickle_binbytes8_2_63", Pk(4).op('\x8e').u64(1ull << 63).raw("abc").stop(), "limit_exceeded",
      "max_string_bytes", "malformed");
  add("pickle_long4_2_31", Pk().op('\x8b').u32(0x7fffffffu).raw("abc").stop(), "limit_exceeded",
      "max_string_bytes", "malformed");
  add("pickle_frame_2_64", Pk(4).op('\x95').u64(~0ull).op('N').stop(), "truncated", "frame",
      "malformed");
  add("pickle_long_binget_2_32", Pk().op('N').op('j').u32(0xffffffffu).stop(), "corrupt",
      "never stored", "malformed");
  add("pickle_long_binput_sparse",
      Pk().op('N').op('r').u32(0xfffffff0u).op('j').u32(0xfffffff0u).op('0').op('0').op('N').stop(),
      "ok", "", "clean");
  add("pickle_put_huge_index", Pk(0).op('N').raw("p99999999999999999999999\n").stop(),
      "unsupported", "does not fit", "malformed");
  add("pickle_long_million_digits", Pk(0).raw("L").raw(std::string(1000000, '7')).raw("L\n").stop(),
      "limit_exceeded", "digits", "malformed");
  {
    // A dict of 100,000 integer keys that share their low 32 bits (200,000
    // stack items, under Limits::max_stack).
    Pk p;
    p.op('}').mark();
    for (std::int64_t k = 0; k < 100000; ++k) p.i(k << 32).op('N');
    add("pickle_dict_colliding_keys", p.setitems().stop(), "ok", "", "clean");
  }

  // --- zip structure.
  add("zip_duplicate_names", zip_archive({{"archive/data.pkl", good}, {"archive/data.pkl", good}}),
      "ambiguous", "lists 'archive/data.pkl' twice", "malformed");
  add("zip_local_central_name",
      zip_archive({{"archive/data.pkl", good, 0, -1, "archive/data.pkX"}}), "corrupt",
      "different file", "malformed");
  add("zip_local_central_size",
      zip_archive({{"archive/data.pkl", good, 0, static_cast<std::int64_t>(good.size()) + 1}}),
      "corrupt", "", "malformed");
  {
    // The central directory says deflated, the local header stored.
    std::string z = zip_archive({{"archive/data.pkl", good}});
    const std::size_t central = z.rfind(std::string("PK\x01\x02", 4));
    z[central + 10] = 8;
    add("zip_local_central_method", z, "corrupt", "disagrees", "malformed");
  }
  add("zip_entry_size_2_32",
      zip_archive({{"archive/data.pkl", good, 0, 0xfffffffe, "", -1, -1, ""}}), "corrupt", "",
      "malformed");
  {
    std::string z = zip_archive({{"archive/data.pkl", good}});
    const std::size_t end = z.rfind(std::string("PK\x05\x06", 4));
    z[end + 8] = '\xfe';  // 65,534 entries in a directory of one
    z[end + 9] = '\xff';
    z[end + 10] = '\xfe';
    z[end + 11] = '\xff';
    add("zip_entry_count_lies", z, "corrupt", "cannot hold", "malformed");
    std::string z2 = zip_archive({{"archive/data.pkl", good}});
    const std::size_t end2 = z2.rfind(std::string("PK\x05\x06", 4));
    for (int k = 0; k < 4; ++k)
      z2[end2 + 16 + static_cast<std::size_t>(k)] = '\xfe';  // directory offset
    add("zip_directory_offset_2_32", z2, "corrupt", "central directory", "malformed");
  }
  {
    // Storage keys that look like paths resolve inside the archive only.
    Pk p;
    p.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "../../etc/passwd", 4, 0, {4}, {1});
    add("zip_storage_key_path", torch_zip(p.setitems().stop(), {{"0", f32x4()}}), "corrupt",
        "has no record 'archive/data/../../etc/passwd'", "malformed");
    Pk q;
    q.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "/etc/passwd", 4, 0, {4}, {1});
    add("zip_storage_key_absolute", torch_zip(q.setitems().stop(), {{"0", f32x4()}}), "corrupt",
        "has no record", "malformed");
  }
  {
    // Deflate bombs: one that declares 4 GiB, one that declares 1 GiB and
    // holds it (a 1 MiB entry of zeros), one that lies about its size.
    const std::string zeros(1u << 20, '\0');
    const std::string bomb = deflate_raw(std::string(64u << 20, '\0'));
    Pk p;
    p.ordered_dict().mark().s("w").tensor_v2("ByteStorage", "0", 1ll << 32, 0, {1ll << 32}, {1});
    add("zip_deflate_declares_4g",
        zip_archive({{"archive/data.pkl", p.setitems().stop()},
                     {"archive/data/0", zeros, 8, 1ll << 32, "", -1, -1, ""}}),
        // Without zip64 the 4 GiB wraps to 0 in the 32-bit size field: the
        // storage is then larger than its record, which open() refuses.
        "corrupt", "declared as 4294967296 U8 elements", "malformed");
    add("zip_deflated_pickle_declares_1g",
        zip_archive({{"archive/data.pkl", std::string(), 8, 1ll << 30, "", 0, -1, bomb}}),
        "limit_exceeded", "max_inflate_ratio", "malformed");
    Pk q;
    q.ordered_dict().mark().s("w").tensor_v2("ByteStorage", "0", 1ll << 30, 0, {1ll << 30}, {1});
    add("zip_deflate_honest_1g",
        zip_archive({{"archive/data.pkl", q.setitems().stop()},
                     {"archive/data/0", std::string(), 8, 1ll << 30, "", 0, -1, bomb}}),
        "limit_exceeded", "max_inflate_ratio", "malformed");
    add("zip_deflate_lies",
        zip_archive({{"archive/data.pkl", good},
                     {"archive/data/0", std::string(), 8, 16, "", 0, -1, bomb},
                     {"archive/version", "3\n"}}),
        "ok_lazy", "inflates past",
        "malformed");  // scan inflates deflated records: it sees the lie
  }

  // --- storages and views.
  {
    Pk p;  // CVE-2026-24747: a storage declared larger than its record
    p.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 1 << 20, 0, {1 << 20}, {1});
    add("zip_storage_larger_than_record", torch_zip(p.setitems().stop(), {{"0", f32x4()}}),
        "corrupt", "declared as 1048576 F32 elements", "unsafe");  // scan: oversized-storage
    Pk q;
    q.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 4, 0, {1ll << 40}, {1});
    add("zip_view_larger_than_storage", torch_zip(q.setitems().stop(), {{"0", f32x4()}}), "corrupt",
        "but its storage has 16 bytes", "malformed");
    Pk r;
    r.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 1ll << 62, 0, {4}, {1});
    add("zip_storage_numel_overflow", torch_zip(r.setitems().stop(), {{"0", f32x4()}}), "corrupt",
        "64 bits", "malformed");
    Pk s;
    s.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 4, 0, {1ll << 32, 1ll << 32},
                                             {1, 1});
    add("zip_view_numel_overflow", torch_zip(s.setitems().stop(), {{"0", f32x4()}}), "corrupt",
        "64 bits", "malformed");
    Pk t;
    t.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 4, -(1ll << 62), {2}, {1});
    add("zip_view_negative_offset", torch_zip(t.setitems().stop(), {{"0", f32x4()}}), "corrupt",
        "negative storage offset", "malformed");
    Pk u;
    u.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 4, 0, {2}, {-(1ll << 62)});
    add("zip_view_negative_stride", torch_zip(u.setitems().stop(), {{"0", f32x4()}}), "corrupt",
        "negative stride", "malformed");
    Pk v;
    v.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 4, 0, {-4}, {1});
    add("zip_view_negative_size", torch_zip(v.setitems().stop(), {{"0", f32x4()}}), "corrupt",
        "negative size", "malformed");
    Pk w;  // SETITEM on a tensor (the other half of CVE-2026-24747)
    w.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 4, 0, {4}, {1});
    w.s("x").s("y").op('s').setitems();  // SETITEM with the tensor under its key and value
    add("zip_setitem_on_tensor", torch_zip(w.stop(), {{"0", f32x4()}}), "ambiguous",
        "SETITEM on a tensor", "unsafe");
    // General purpose bit 13 on a record's central header: miniz refuses the
    // whole archive ("unsupported encryption"), Python's zipfile reads it.
    Pk m;
    m.ordered_dict().mark().s("w").tensor_v2("FloatStorage", "0", 4, 0, {4}, {1}).setitems();
    std::string masked = torch_zip(m.stop(), {{"0", f32x4()}});
    const std::size_t central = masked.rfind("PK\x01\x02");  // the last entry's (version)
    masked[central + 9] = static_cast<char>(masked[central + 9] | 0x20);
    add("zip_central_flag_masked_local", masked, "unsupported", "general purpose bit 13",
        "malformed");
  }
  {
    // Legacy: a storage declared larger than its record, and a count near 2^64.
    Pk obj;
    obj.ordered_dict().mark().s("w").glob("torch._utils", "_rebuild_tensor_v2").mark();
    obj.mark()
        .s("storage")
        .glob("torch", "FloatStorage")
        .s("k")
        .s("cpu")
        .i(1ll << 40)
        .op('N')
        .tuple()
        .op('Q');
    obj.i(0).ints({4}).ints({1}).op('\x89').ordered_dict().tuple().reduce().setitems();
    std::string count;
    put_le(count, 1ull << 40, 8);
    add("legacy_storage_larger_than_file",
        legacy_file(obj.stop(), Pk().mark().s("k").op('l').stop(), count + f32x4()), "truncated",
        "storage 'k' data", "malformed");
    Pk obj2;
    obj2.ordered_dict().mark().s("w").glob("torch._utils", "_rebuild_tensor_v2").mark();
    obj2.mark()
        .s("storage")
        .glob("torch", "DoubleStorage")
        .s("k")
        .s("cpu")
        .i(-1)
        .op('N')
        .tuple()
        .op('Q');
    obj2.i(0).ints({4}).ints({1}).op('\x89').ordered_dict().tuple().reduce().setitems();
    add("legacy_negative_numel", legacy_file(obj2.stop()), "corrupt", "not a non-negative integer",
        "malformed");
  }
  {
    // Tar: a storage whose element count is near 2^64.
    std::string storages =
        Pk().i(1).stop() +
        Pk().mark().s("0").s("cpu").glob("torch", "DoubleStorage").tuple().stop();
    std::string count;
    put_le(count, ~0ull / 4, 8);
    add("tar_storage_count_2_64", torch_tar(Pk().op('}').stop(), storages + count + f32x4()),
        "corrupt", "overflows", "malformed");
  }

  // --- safetensors.
  auto st = [](const std::string& header, const std::string& data) {
    std::string out;
    put_le(out, header.size(), 8);
    return out + header + data;
  };
  add("safetensors_offsets_2_64",
      st(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,18446744073709551615]}})", f32x4()),
      "corrupt", "", "malformed");
  add("safetensors_shape_overflow",
      st(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}})",
         f32x4()),
      "corrupt", "", "malformed");
  add("safetensors_negative_shape",
      st(R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", f32x4()), "corrupt", "",
      "malformed");
  add("safetensors_deep_json", st(std::string(1000000, '[') + std::string(1000000, ']'), ""), "",
      "", "malformed");
  {
    // A legitimate but huge header (2.8 MB): read in linear time, about 6 us
    // a tensor in a release build and 40 us under ASan, so 50,000 of them fit
    // the budget (1 s, 4 s sanitized) with room even beside other tests.
    std::string h = "{";
    for (int k = 0; k < 50000; ++k)
      h += (k ? "," : "") + std::string("\"t") + std::to_string(k) +
           R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
    h += "}";
    add("safetensors_50k_tensors", st(h, ""), "ok", "", "clean");
  }

  // --- records (named MessagePack, JSON, compact binary) nested a million deep.
  add("record_msgpack_deep", std::string(1000000, '\x91') + std::string(1, '\xc0'), "", "",
      "malformed");
  add("record_json_deep",
      "{\"torchport\":" + std::string(1000000, '[') + std::string(1000000, ']') + "}", "", "",
      "malformed");
  return c;
}

}  // namespace torchport::test
