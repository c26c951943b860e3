// The allow-list and the deny-list of pickle globals, Python's protocol-2
// renames, and the user's allow patterns.
//
// The allow-list is torch 2.14's weights_only list exactly
// (torch/_weights_only_unpickler.py, _get_allowed_globals: kTorchWeightsOnly)
// plus ours (kAllowedExact: numpy's arrays, torch 1.13's spellings, layouts)
// and the storage and dtype globals torch.* names. It alone decides: `scan` calls a file
// clean only when every global is on it (or on the user's patterns). The
// deny-list ("known-dangerous") names globals that are known ways to run
// code from a pickle (fickling's catalogue, picklescan's and modelscan's
// advisories, the CVEs in docs/security.md); it explains a finding and makes
// `open()` refuse the file, but a name missing from it is never trusted.
// Everything else is "unknown": `open()` keeps it inert, `scan` calls it unsafe.

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <string>

#include "pickle/unpickler.hpp"
#include "torchport/core/dtype.hpp"
#include "torchport/core/error.hpp"

#include "pickle/names.hpp"
#include "pickle/opcodes.hpp"

namespace torchport::pickle {
namespace {

// torch 2.14.1's weights_only allow-list, exactly: what `torch.load` accepts
// by default. Printed by the current torch (tests/interop/check_weights_only.py
// compares it with the torch it runs under, release by release):
//   scripts/torch.sh current python3 -c "import torch._weights_only_unpickler as w;
//     print(*sorted(w._get_allowed_globals()), sep=chr(10))"
// Names later releases added carry their first release in kWeightsOnlySince.
constexpr std::string_view kTorchWeightsOnly[] = {
    "_codecs.encode",
    "builtins.bytearray",
    "builtins.complex",
    "builtins.set",
    "collections.Counter",
    "collections.OrderedDict",
    "torch.BFloat16Storage",
    "torch.BFloat16Tensor",
    "torch.BoolStorage",
    "torch.BoolTensor",
    "torch.ByteStorage",
    "torch.ByteTensor",
    "torch.CharStorage",
    "torch.CharTensor",
    "torch.ComplexDoubleStorage",
    "torch.ComplexFloatStorage",
    "torch.DoubleStorage",
    "torch.DoubleTensor",
    "torch.FloatStorage",
    "torch.FloatTensor",
    "torch.HalfStorage",
    "torch.HalfTensor",
    "torch.IntStorage",
    "torch.IntTensor",
    "torch.LongStorage",
    "torch.LongTensor",
    "torch.QInt32Storage",
    "torch.QInt8Storage",
    "torch.QUInt2x4Storage",
    "torch.QUInt4x2Storage",
    "torch.QUInt8Storage",
    "torch.ShortStorage",
    "torch.ShortTensor",
    "torch.Size",
    "torch.Tensor",
    "torch._tensor._rebuild_from_type_v2",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor",
    "torch._utils._rebuild_device_tensor_from_numpy",
    "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_nested_tensor",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_qtensor",
    "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_wrapper_subclass",
    "torch.bcomplex32",
    "torch.bfloat16",
    "torch.bits16",
    "torch.bits1x8",
    "torch.bits2x4",
    "torch.bits4x2",
    "torch.bits8",
    "torch.bool",
    "torch.complex128",
    "torch.complex32",
    "torch.complex64",
    "torch.cuda.BFloat16Storage",
    "torch.cuda.BFloat16Tensor",
    "torch.cuda.BoolStorage",
    "torch.cuda.BoolTensor",
    "torch.cuda.ByteStorage",
    "torch.cuda.ByteTensor",
    "torch.cuda.CharStorage",
    "torch.cuda.CharTensor",
    "torch.cuda.ComplexDoubleStorage",
    "torch.cuda.ComplexFloatStorage",
    "torch.cuda.DoubleStorage",
    "torch.cuda.DoubleTensor",
    "torch.cuda.FloatStorage",
    "torch.cuda.FloatTensor",
    "torch.cuda.HalfStorage",
    "torch.cuda.HalfTensor",
    "torch.cuda.IntStorage",
    "torch.cuda.IntTensor",
    "torch.cuda.LongStorage",
    "torch.cuda.LongTensor",
    "torch.cuda.ShortStorage",
    "torch.cuda.ShortTensor",
    "torch.cuda.sparse.BFloat16Tensor",
    "torch.cuda.sparse.ByteTensor",
    "torch.cuda.sparse.CharTensor",
    "torch.cuda.sparse.DoubleTensor",
    "torch.cuda.sparse.FloatTensor",
    "torch.cuda.sparse.HalfTensor",
    "torch.cuda.sparse.IntTensor",
    "torch.cuda.sparse.LongTensor",
    "torch.cuda.sparse.ShortTensor",
    "torch.device",
    "torch.float16",
    "torch.float32",
    "torch.float4_e2m1fn_x2",
    "torch.float64",
    "torch.float8_e4m3fn",
    "torch.float8_e4m3fnuz",
    "torch.float8_e5m2",
    "torch.float8_e5m2fnuz",
    "torch.float8_e8m0fnu",
    "torch.int1",
    "torch.int16",
    "torch.int2",
    "torch.int3",
    "torch.int32",
    "torch.int4",
    "torch.int5",
    "torch.int6",
    "torch.int64",
    "torch.int7",
    "torch.int8",
    "torch.nn.parameter.Parameter",
    "torch.per_channel_affine",
    "torch.per_channel_affine_float_qparams",
    "torch.per_channel_symmetric",
    "torch.per_tensor_affine",
    "torch.per_tensor_symmetric",
    "torch.qint32",
    "torch.qint8",
    "torch.quint2x4",
    "torch.quint4x2",
    "torch.quint8",
    "torch.serialization._get_layout",
    "torch.sparse.BFloat16Tensor",
    "torch.sparse.ByteTensor",
    "torch.sparse.CharTensor",
    "torch.sparse.DoubleTensor",
    "torch.sparse.FloatTensor",
    "torch.sparse.HalfTensor",
    "torch.sparse.IntTensor",
    "torch.sparse.LongTensor",
    "torch.sparse.ShortTensor",
    "torch.storage.TypedStorage",
    "torch.storage.UntypedStorage",
    "torch.uint1",
    "torch.uint16",
    "torch.uint2",
    "torch.uint3",
    "torch.uint32",
    "torch.uint4",
    "torch.uint5",
    "torch.uint6",
    "torch.uint64",
    "torch.uint7",
    "torch.uint8",
};

static_assert(std::is_sorted(std::begin(kTorchWeightsOnly), std::end(kTorchWeightsOnly)),
              "kTorchWeightsOnly is searched by bisection");

// The names of kTorchWeightsOnly torch 2.6's list lacks, with the torch 2.x
// release that first allows each (the `_get_allowed_globals()` of 2.6.0 to
// 2.14.1 compared): 2.7 allows the sub-byte integer dtypes and
// float8_e8m0fnu, 2.8 float4_e2m1fn_x2, 2.14 bcomplex32; and the first
// release that has the attribute at all (torch 2.6 has torch.int1 to int7
// and uint1 to uint7 but not float8_e8m0fnu, 2.7 not float4_e2m1fn_x2,
// 2.13 not bcomplex32), before which no add_safe_globals can name it.
struct Since {
  std::string_view name;
  int allowed, exists;
};
constexpr Since kWeightsOnlySince[] = {
    {"torch.bcomplex32", 14, 14},   {"torch.float4_e2m1fn_x2", 8, 8},
    {"torch.float8_e8m0fnu", 7, 7}, {"torch.int1", 7, 6},
    {"torch.int2", 7, 6},           {"torch.int3", 7, 6},
    {"torch.int4", 7, 6},           {"torch.int5", 7, 6},
    {"torch.int6", 7, 6},           {"torch.int7", 7, 6},
    {"torch.uint1", 7, 6},          {"torch.uint2", 7, 6},
    {"torch.uint3", 7, 6},          {"torch.uint4", 7, 6},
    {"torch.uint5", 7, 6},          {"torch.uint6", 7, 6},
    {"torch.uint7", 7, 6},
};

// The opcodes torch's weights_only Unpickler.load reads (the same in 2.6.0
// to 2.14.1); any other stops it ("Unsupported operand").
constexpr std::uint8_t kTorchWeightsOnlyOpcodes[] = {
    ops::GLOBAL,          ops::NEWOBJ,      ops::REDUCE,     ops::BUILD,       ops::APPEND,
    ops::APPENDS,         ops::SETITEM,     ops::SETITEMS,   ops::MARK,        ops::TUPLE,
    ops::TUPLE1,          ops::TUPLE2,      ops::TUPLE3,     ops::NONE,        ops::NEWFALSE,
    ops::NEWTRUE,         ops::EMPTY_TUPLE, ops::EMPTY_LIST, ops::EMPTY_DICT,  ops::EMPTY_SET,
    ops::BININT,          ops::BININT1,     ops::BININT2,    ops::BINFLOAT,    ops::BINUNICODE,
    ops::SHORT_BINSTRING, ops::BINPERSID,   ops::BINGET,     ops::LONG_BINGET, ops::BINPUT,
    ops::LONG_BINPUT,     ops::LONG1,       ops::PROTO,      ops::STOP,
};

// Ours beyond torch's default list (kTorchWeightsOnly, also allowed):
// classify_global accepts a name on either.
constexpr std::string_view kAllowedExact[] = {
    // torch 1.13 spells the untyped storage class this way.
    "torch.UntypedStorage",
    // torch 1.13's CSR rebuild (2.x folded it into _rebuild_sparse_tensor):
    // torch's own builder, read like the others.
    "torch._utils._rebuild_sparse_csr_tensor",
    // numpy arrays, dtypes and scalars (read as data; numpy 1.x and 2.x spellings)
    "numpy.ndarray",
    "numpy.dtype",
    "numpy.core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar",
    "numpy.core.numeric._frombuffer",
    "numpy._core.multiarray._reconstruct",
    "numpy._core.multiarray.scalar",
    "numpy._core.numeric._frombuffer",
    // A distributed checkpoint's .metadata (torch.distributed.checkpoint):
    // dataclasses of plain fields (TensorProperties' __setstate__ only sets
    // them), an Enum by value, and the checkpoint's path.
    "torch.distributed.checkpoint.metadata.Metadata",
    "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
    "torch.distributed.checkpoint.metadata.TensorProperties",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
    "torch.distributed.checkpoint.metadata.MetadataIndex",
    "torch.distributed.checkpoint.metadata.StorageMeta",
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
    "torch.distributed.checkpoint.filesystem._StorageInfo",
    "pathlib.PosixPath",
    "pathlib._local.PosixPath",
    // joblib's placeholder for a numpy array (joblib.numpy_pickle): a plain
    // object whose attributes BUILD sets; joblib's unpickler then reads the
    // array's bytes (or a nested pickle, judged on its own) after it.
    "joblib.numpy_pickle.NumpyArrayWrapper",
    // layouts (_get_layout only maps a layout's name to the layout object)
    "torch.strided",
    "torch.sparse_coo",
    "torch.sparse_csr",
    "torch.sparse_csc",
    "torch.sparse_bsr",
    "torch.sparse_bsc",
};

// Modules whose every member can reach the OS, the interpreter, the network,
// the file system or another unpickler (fickling's catalogue; picklescan's
// and modelscan's advisories of 2024-2026).
constexpr std::string_view kDangerousModules[] = {
    "os",
    "posix",
    "nt",
    "subprocess",
    "sys",
    "socket",
    "shutil",
    "pty",
    "commands",
    "popen2",
    "webbrowser",
    "ctypes",
    "importlib",
    "runpy",
    "code",
    "codeop",
    "multiprocessing",
    "pickle",
    "_pickle",
    "cPickle",
    "dill",
    "marshal",
    "types",
    "functools",
    "operator",
    "_operator",
    "pdb",
    "timeit",
    "asyncio",
    "signal",
    "urllib",
    "http",
    "requests",
    "tempfile",
    "glob",
    "io",
    "_io",
    "numpy.testing",
    "torch.hub",
    "_posixsubprocess",
    "pkgutil",
    "cProfile",
    "profile",
    "pydoc",
    "zipimport",
    "imp",
    "bdb",
    "trace",
    "_ctypes",
    "numpy.ctypeslib",
    "torch.fx",
    "torch.utils.cpp_extension",
    "torch.package",
    "torch.serialization",
    "_thread",
    "threading",
    "gc",
    // Package installers and environments: pip.main, ensurepip._run_pip, venv.create, ...
    "pip",
    "ensurepip",
    "venv",
    "distutils",
    "setuptools",
    "pkg_resources",
    "site",
    // Run a command, a pager, a debugger or a test script: imaplib.IMAP4_stream,
    // _pyrepl.pager.pipe_pager, doctest.debug_script, test.support.script_helper, ...
    "imaplib",
    "_pyrepl",
    "doctest",
    "test.support",
    "idlelib",
    "lib2to3",
    "cgitb",
    "mailcap",
    "cmd",
    "_imp",
    "_frozen_importlib",
    "_frozen_importlib_external",
    "_winapi",
    "msvcrt",
    "winreg",
    // Network and mail clients and servers.
    "smtplib",
    "ftplib",
    "poplib",
    "nntplib",
    "telnetlib",
    "xmlrpc",
    "socketserver",
    "wsgiref",
    "cgi",
    "ssl",
    "select",
    "selectors",
    "asyncore",
    "asynchat",
    "smtpd",
    // Write or open files, databases, archives: logging.FileHandler,
    // logging.config.dictConfig (its '()' factories), shelve.open, ...
    "logging",
    "shelve",
    "dbm",
    "sqlite3",
    "tarfile",
    "zipfile",
    "fileinput",
    "mmap",
    // Import alone has side effects.
    "antigravity",
    // Other unpicklers and loaders.
    "joblib",
    "cloudpickle",
    "yaml",
    "pandas.io.pickle",
    "numpy.lib.npyio",
    "numpy.f2py",
    "numpy.distutils",
    // torch helpers that run commands, compile, download or load: collect_env.run,
    // bottleneck, inductor's codecache, model_zoo.load_url, the testing shell.
    "torch.utils.collect_env",
    "torch.utils.bottleneck",
    "torch._inductor",
    "torch.utils.model_zoo",
    "torch.testing",
    "torch.distributed",
    "torch._dynamo",
    "torch.utils.data.datapipes",
    "torch.multiprocessing",
};

// builtins that are plain data types; every other builtin (eval, exec,
// getattr, open, __import__, compile, ...) is dangerous.
constexpr std::string_view kHarmlessBuiltins[] = {
    "set",   "frozenset", "complex", "bytearray", "list",  "dict",  "tuple",  "int",
    "float", "str",       "bytes",   "bool",      "slice", "range", "object", "NoneType",
};

// Individual torch functions that load or run code.
constexpr std::string_view kDangerousExact[] = {
    "torch.storage._load_from_bytes",  // a pickle inside the pickle, unpickled without limits
    "torch.load",
    "torch.serialization.load",
    "torch.serialization._load",
    "torch.jit.load",
    "torch.jit._script.RecursiveScriptModule",
    "torch._C._jit_script_compile",
    "torch.package.package_importer.PackageImporter",
    "numpy.load",
    "numpy.lib.format.read_array",
    "numpy.fromfile",
    "numpy.save",
    "numpy.savetxt",
    "numpy.tofile",
    "torch._ops.ops",
    "torch.save",
    "torch.compile",
    "torch.from_file",
    "torch._C._load_for_lite_interpreter",
    "torch._C._load_for_lite_interpreter_from_buffer",
    "torch._C._get_model_bytecode_version",
    "uuid._get_command_stdout",
    "uuid._popen",
    "platform._syscmd_file",
    "platform._syscmd_ver",
    "platform.popen",
    "codecs.open",
    "codecs.EncodedFile",
    "gzip.open",
    "bz2.open",
    "lzma.open",
    "linecache.getline",
    "linecache.getlines",
    "linecache.updatecache",
    "pandas.read_pickle",
    "builtins.open",
};

struct ImportRename {
  std::string_view from, to;
};
struct NameRename {
  std::string_view module, name, to_module, to_name;
};

// CPython 3.11's Lib/_compat_pickle.py, as its unpickler uses it: the final
// contents of IMPORT_MAPPING and NAME_MAPPING (the module adds entries
// after defining them), sorted. tests/interop checks them against the
// installed Python.
constexpr ImportRename kImportMapping[] = {
    {"BaseHTTPServer", "http.server"},
    {"CGIHTTPServer", "http.server"},
    {"ConfigParser", "configparser"},
    {"Cookie", "http.cookies"},
    {"Dialog", "tkinter.dialog"},
    {"DocXMLRPCServer", "xmlrpc.server"},
    {"FileDialog", "tkinter.filedialog"},
    {"HTMLParser", "html.parser"},
    {"Queue", "queue"},
    {"ScrolledText", "tkinter.scrolledtext"},
    {"SimpleDialog", "tkinter.simpledialog"},
    {"SimpleHTTPServer", "http.server"},
    {"SimpleXMLRPCServer", "xmlrpc.server"},
    {"SocketServer", "socketserver"},
    {"StringIO", "io"},
    {"Tix", "tkinter.tix"},
    {"Tkconstants", "tkinter.constants"},
    {"Tkdnd", "tkinter.dnd"},
    {"Tkinter", "tkinter"},
    {"UserDict", "collections"},
    {"UserList", "collections"},
    {"UserString", "collections"},
    {"__builtin__", "builtins"},
    {"_abcoll", "collections.abc"},
    {"_elementtree", "xml.etree.ElementTree"},
    {"_winreg", "winreg"},
    {"anydbm", "dbm"},
    {"cPickle", "pickle"},
    {"cStringIO", "io"},
    {"commands", "subprocess"},
    {"cookielib", "http.cookiejar"},
    {"copy_reg", "copyreg"},
    {"dbhash", "dbm.bsd"},
    {"dbm", "dbm.ndbm"},
    {"dumbdbm", "dbm.dumb"},
    {"dummy_thread", "_dummy_thread"},
    {"gdbm", "dbm.gnu"},
    {"htmlentitydefs", "html.entities"},
    {"httplib", "http.client"},
    {"markupbase", "_markupbase"},
    {"repr", "reprlib"},
    {"robotparser", "urllib.robotparser"},
    {"test.test_support", "test.support"},
    {"thread", "_thread"},
    {"tkColorChooser", "tkinter.colorchooser"},
    {"tkCommonDialog", "tkinter.commondialog"},
    {"tkFileDialog", "tkinter.filedialog"},
    {"tkFont", "tkinter.font"},
    {"tkMessageBox", "tkinter.messagebox"},
    {"tkSimpleDialog", "tkinter.simpledialog"},
    {"ttk", "tkinter.ttk"},
    {"urllib2", "urllib.request"},
    {"urlparse", "urllib.parse"},
    {"whichdb", "dbm"},
    {"xmlrpclib", "xmlrpc.client"},
};
constexpr NameRename kNameMapping[] = {
    {"UserDict", "IterableUserDict", "collections", "UserDict"},
    {"UserDict", "UserDict", "collections", "UserDict"},
    {"UserList", "UserList", "collections", "UserList"},
    {"UserString", "UserString", "collections", "UserString"},
    {"__builtin__", "basestring", "builtins", "str"},
    {"__builtin__", "intern", "sys", "intern"},
    {"__builtin__", "long", "builtins", "int"},
    {"__builtin__", "reduce", "functools", "reduce"},
    {"__builtin__", "unichr", "builtins", "chr"},
    {"__builtin__", "unicode", "builtins", "str"},
    {"__builtin__", "xrange", "builtins", "range"},
    {"_multiprocessing", "Connection", "multiprocessing.connection", "Connection"},
    {"_socket", "fromfd", "socket", "fromfd"},
    {"exceptions", "ArithmeticError", "builtins", "ArithmeticError"},
    {"exceptions", "AssertionError", "builtins", "AssertionError"},
    {"exceptions", "AttributeError", "builtins", "AttributeError"},
    {"exceptions", "BaseException", "builtins", "BaseException"},
    {"exceptions", "BufferError", "builtins", "BufferError"},
    {"exceptions", "BytesWarning", "builtins", "BytesWarning"},
    {"exceptions", "DeprecationWarning", "builtins", "DeprecationWarning"},
    {"exceptions", "EOFError", "builtins", "EOFError"},
    {"exceptions", "EnvironmentError", "builtins", "EnvironmentError"},
    {"exceptions", "Exception", "builtins", "Exception"},
    {"exceptions", "FloatingPointError", "builtins", "FloatingPointError"},
    {"exceptions", "FutureWarning", "builtins", "FutureWarning"},
    {"exceptions", "GeneratorExit", "builtins", "GeneratorExit"},
    {"exceptions", "IOError", "builtins", "IOError"},
    {"exceptions", "ImportError", "builtins", "ImportError"},
    {"exceptions", "ImportWarning", "builtins", "ImportWarning"},
    {"exceptions", "IndentationError", "builtins", "IndentationError"},
    {"exceptions", "IndexError", "builtins", "IndexError"},
    {"exceptions", "KeyError", "builtins", "KeyError"},
    {"exceptions", "KeyboardInterrupt", "builtins", "KeyboardInterrupt"},
    {"exceptions", "LookupError", "builtins", "LookupError"},
    {"exceptions", "MemoryError", "builtins", "MemoryError"},
    {"exceptions", "NameError", "builtins", "NameError"},
    {"exceptions", "NotImplementedError", "builtins", "NotImplementedError"},
    {"exceptions", "OSError", "builtins", "OSError"},
    {"exceptions", "OverflowError", "builtins", "OverflowError"},
    {"exceptions", "PendingDeprecationWarning", "builtins", "PendingDeprecationWarning"},
    {"exceptions", "ReferenceError", "builtins", "ReferenceError"},
    {"exceptions", "RuntimeError", "builtins", "RuntimeError"},
    {"exceptions", "RuntimeWarning", "builtins", "RuntimeWarning"},
    {"exceptions", "StandardError", "builtins", "Exception"},
    {"exceptions", "StopIteration", "builtins", "StopIteration"},
    {"exceptions", "SyntaxError", "builtins", "SyntaxError"},
    {"exceptions", "SyntaxWarning", "builtins", "SyntaxWarning"},
    {"exceptions", "SystemError", "builtins", "SystemError"},
    {"exceptions", "SystemExit", "builtins", "SystemExit"},
    {"exceptions", "TabError", "builtins", "TabError"},
    {"exceptions", "TypeError", "builtins", "TypeError"},
    {"exceptions", "UnboundLocalError", "builtins", "UnboundLocalError"},
    {"exceptions", "UnicodeDecodeError", "builtins", "UnicodeDecodeError"},
    {"exceptions", "UnicodeEncodeError", "builtins", "UnicodeEncodeError"},
    {"exceptions", "UnicodeError", "builtins", "UnicodeError"},
    {"exceptions", "UnicodeTranslateError", "builtins", "UnicodeTranslateError"},
    {"exceptions", "UnicodeWarning", "builtins", "UnicodeWarning"},
    {"exceptions", "UserWarning", "builtins", "UserWarning"},
    {"exceptions", "ValueError", "builtins", "ValueError"},
    {"exceptions", "Warning", "builtins", "Warning"},
    {"exceptions", "ZeroDivisionError", "builtins", "ZeroDivisionError"},
    {"itertools", "ifilter", "builtins", "filter"},
    {"itertools", "ifilterfalse", "itertools", "filterfalse"},
    {"itertools", "imap", "builtins", "map"},
    {"itertools", "izip", "builtins", "zip"},
    {"itertools", "izip_longest", "itertools", "zip_longest"},
    {"multiprocessing", "AuthenticationError", "multiprocessing.context", "AuthenticationError"},
    {"multiprocessing", "BufferTooShort", "multiprocessing.context", "BufferTooShort"},
    {"multiprocessing", "ProcessError", "multiprocessing.context", "ProcessError"},
    {"multiprocessing", "TimeoutError", "multiprocessing.context", "TimeoutError"},
    {"multiprocessing.forking", "Popen", "multiprocessing.popen_fork", "Popen"},
    {"multiprocessing.process", "Process", "multiprocessing.context", "Process"},
    {"socket", "_socketobject", "socket", "SocketType"},
    {"urllib", "ContentTooShortError", "urllib.error", "ContentTooShortError"},
    {"urllib", "getproxies", "urllib.request", "getproxies"},
    {"urllib", "pathname2url", "urllib.request", "pathname2url"},
    {"urllib", "quote", "urllib.parse", "quote"},
    {"urllib", "quote_plus", "urllib.parse", "quote_plus"},
    {"urllib", "unquote", "urllib.parse", "unquote"},
    {"urllib", "unquote_plus", "urllib.parse", "unquote_plus"},
    {"urllib", "url2pathname", "urllib.request", "url2pathname"},
    {"urllib", "urlcleanup", "urllib.request", "urlcleanup"},
    {"urllib", "urlencode", "urllib.parse", "urlencode"},
    {"urllib", "urlopen", "urllib.request", "urlopen"},
    {"urllib", "urlretrieve", "urllib.request", "urlretrieve"},
    {"urllib2", "HTTPError", "urllib.error", "HTTPError"},
    {"urllib2", "URLError", "urllib.error", "URLError"},
    {"whichdb", "whichdb", "dbm", "whichdb"},
};

// compat_rename without copying: views of the table or of the arguments.
std::pair<std::string_view, std::string_view> compat_lookup(std::string_view module,
                                                            std::string_view name) {
  for (const NameRename& r : kNameMapping)
    if (r.module == module && r.name == name) return {r.to_module, r.to_name};
  for (const ImportRename& r : kImportMapping)
    if (r.from == module) return {r.to, name};
  return {module, name};
}

bool in_module(std::string_view module, std::string_view root) {
  return module == root ||
         (module.size() > root.size() && module.starts_with(root) && module[root.size()] == '.');
}

}  // namespace

std::pair<std::string, std::string> compat_rename(std::string_view module, std::string_view name) {
  const auto [m, n] = compat_lookup(module, name);
  return {std::string(m), std::string(n)};
}

bool allow_pattern_matches(std::string_view pattern, std::string_view module,
                           std::string_view name) noexcept {
  if (name.find('.') != std::string_view::npos || module.empty() || name.empty()) return false;
  if (pattern.ends_with(".*")) return in_module(module, pattern.substr(0, pattern.size() - 2));
  return pattern.size() == module.size() + 1 + name.size() && pattern.starts_with(module) &&
         pattern[module.size()] == '.' && pattern.ends_with(name);
}

bool allow_patterns_match(std::span<const std::string> patterns, std::string_view module,
                          std::string_view name) noexcept {
  return std::ranges::any_of(
      patterns, [&](const std::string& p) { return allow_pattern_matches(p, module, name); });
}

void validate_allow_patterns(std::span<const std::string> patterns) {
  for (const std::string& p : patterns) {
    const std::string_view body =
        std::string_view(p).substr(0, p.ends_with(".*") ? p.size() - 2 : p.size());
    bool ok = !body.empty() && (p.ends_with(".*") || body.find('.') != std::string_view::npos);
    bool start = true;  // at the start of an identifier
    for (char c : body) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '.') {
        ok = ok && !start;
        start = true;
      } else if (std::isalpha(u) || c == '_' || (!start && std::isdigit(u)) || u >= 0x80) {
        start = false;
      } else {
        ok = false;
      }
    }
    if (!ok || start)
      throw Error(ErrorCode::invalid_argument,
                  "allow pattern '" + p +
                      "' is neither 'module.name' nor 'module.*' (identifiers separated by dots)");
  }
}

GlobalClass classify_global(std::string_view module, std::string_view name,
                            std::span<const std::string> allow) {
  const GlobalClass c = classify_global(module, name);
  if (c == GlobalClass::unknown && allow_patterns_match(allow, module, name))
    return GlobalClass::allowed;
  return c;
}

GlobalClass classify_global(std::string_view module_in, std::string_view name_in) {
  // Judged as Python would import it (a protocol 0-2 pickle: every torch.save).
  const auto [module, name] = compat_lookup(module_in, name_in);
  // "module.name", on the stack when it fits (the VM classifies every call).
  char buf[256];
  std::string heap;
  std::string_view full;
  if (module.size() + name.size() + 1 <= sizeof buf) {
    std::memcpy(buf, module.data(), module.size());
    buf[module.size()] = '.';
    std::memcpy(buf + module.size() + 1, name.data(), name.size());
    full = std::string_view(buf, module.size() + name.size() + 1);
  } else {
    heap = std::string(module) + "." + std::string(name);
    full = heap;
  }
  // Ours, and everything torch's weights_only loader accepts by default
  // (its bits and sub-byte quantized dtypes, say): what torch calls safe is
  // never unsafe here.
  if (std::ranges::find(kAllowedExact, full) != std::end(kAllowedExact) ||
      torch_weights_only_allows(full))
    return GlobalClass::allowed;
  // A dotted name is an attribute chain (protocol 4 resolves "os.system" in
  // module "torch" to torch.os.system, that is os.system): it reaches
  // whatever the module imported, so nothing vouches for it.
  if (name.find('.') != std::string_view::npos) return GlobalClass::dangerous;
  if (module == "torch") {
    if (name.ends_with("Storage") && dtype_from_storage_class(name)) return GlobalClass::allowed;
    if (dtype_from_torch_name(name)) return GlobalClass::allowed;
  }
  if (std::ranges::find(kDangerousExact, full) != std::end(kDangerousExact))
    return GlobalClass::dangerous;
  if (module == "builtins")
    return std::ranges::find(kHarmlessBuiltins, name) != std::end(kHarmlessBuiltins)
               ? GlobalClass::unknown
               : GlobalClass::dangerous;
  if (module == "copyreg" && name != "_reconstructor") return GlobalClass::dangerous;
  // torch.jit loads and compiles code; TorchScript's own pickles use only
  // torch.jit._pickle's list and tensor builders, which stay unknown (inert).
  if (in_module(module, "torch.jit") && !in_module(module, "torch.jit._pickle"))
    return GlobalClass::dangerous;
  if (module == "torch._C" && (name.starts_with("_jit_") || name.starts_with("import_ir_module")))
    return GlobalClass::dangerous;
  for (std::string_view m : kDangerousModules)
    if (in_module(module, m) || full == m) return GlobalClass::dangerous;
  return GlobalClass::unknown;
}

bool allowed_enum_member(std::string_view module, std::string_view cls,
                         std::string_view member) noexcept {
  // torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING (a DCP
  // .metadata's TensorProperties.memory_format), its members as 2.6 to
  // 2.14 define them.
  constexpr std::string_view kMemFormat[] = {"TORCH_CONTIGUOUS_FORMAT", "TORCH_CHANNELS_LAST",
                                             "TORCH_PRESERVE_FORMAT"};
  return module == "torch.distributed.checkpoint.metadata" && cls == "_MEM_FORMAT_ENCODING" &&
         std::ranges::find(kMemFormat, member) != std::end(kMemFormat);
}

bool torch_weights_only_allows(std::string_view full_name, int minor) noexcept {
  if (minor < kTorchWeightsOnlyFirst ||
      !std::binary_search(std::begin(kTorchWeightsOnly), std::end(kTorchWeightsOnly), full_name))
    return false;
  for (const Since& s : kWeightsOnlySince)
    if (s.name == full_name) return minor >= s.allowed;
  return true;
}

int torch_global_since(std::string_view full_name) noexcept {
  for (const Since& s : kWeightsOnlySince)
    if (s.name == full_name) return s.exists;
  return 0;
}

// torch._utils' IMPORT_MAPPING and NAME_MAPPING, which the weights_only
// unpickler applies to every GLOBAL (whatever the protocol): a subset of
// CPython's _compat_pickle tables (kImportMapping, kNameMapping), widened
// in 2.14 by every Python 2 exception (`exceptions.X` -> `builtins.X`).
std::string torch_weights_only_name(std::string_view module, std::string_view name, int minor) {
  static constexpr std::string_view kTorchImports[] = {
      "Queue",   "StringIO",  "UserDict", "UserList", "UserString", "__builtin__",
      "_abcoll", "cStringIO", "copy_reg", "repr",     "whichdb"};
  static constexpr std::string_view kTorchNameModules[] = {"UserDict", "UserList", "UserString",
                                                           "__builtin__", "itertools"};
  const auto has = [](const auto& list, std::string_view m) {
    return std::find(std::begin(list), std::end(list), m) != std::end(list);
  };
  for (const NameRename& r : kNameMapping)
    if (r.module == module && r.name == name &&
        (has(kTorchNameModules, module) ||
         (module == "exceptions" && (name == "StandardError" || minor >= 14))))
      return std::string(r.to_module) + "." + std::string(r.to_name);
  if (has(kTorchImports, module))
    for (const ImportRename& r : kImportMapping)
      if (r.from == module) return std::string(r.to) + "." + std::string(name);
  return std::string(module) + "." + std::string(name);
}

bool torch_weights_only_reads(std::uint8_t code) noexcept {
  return std::find(std::begin(kTorchWeightsOnlyOpcodes), std::end(kTorchWeightsOnlyOpcodes),
                   code) != std::end(kTorchWeightsOnlyOpcodes);
}

std::string_view global_class_name(GlobalClass c) noexcept {
  switch (c) {
    case GlobalClass::allowed:
      return "allowed";
    case GlobalClass::unknown:
      return "unknown";
    case GlobalClass::dangerous:
      return "dangerous";
  }
  return "?";
}

GlobalName python_global_name(std::string module, std::string name, int protocol) {
  GlobalName g;
  if (module == "torch.tensor") module = "torch._tensor";  // torch's own load_module_mapping
  if (protocol < 3) {
    auto renamed = compat_rename(module, name);
    if (renamed.first != module || renamed.second != name) {
      g.written = module + "." + name;
      module = std::move(renamed.first);
      name = std::move(renamed.second);
    }
  }
  // Python's find_class resolves a dotted name attribute by attribute only
  // from protocol 4 on; below it looks the whole name up as one attribute
  // and fails (so does torch.load). From protocol 4 on, an allowed whole
  // ("torch" / "_utils._rebuild_tensor_v2": torch's weights_only loader
  // matches globals by their full path) is named by its module and name.
  const bool dotted = name.find('.') != std::string::npos;
  if (dotted && protocol >= 4 && classify_global(module, name) == GlobalClass::allowed) {
    const auto dot = name.rfind('.');
    module += "." + name.substr(0, dot);
    name.erase(0, dot + 1);
  }
  g.dotted_below_4 = dotted && protocol < 4;
  g.module = std::move(module);
  g.name = std::move(name);
  return g;
}

bool importable_module(std::string_view module) noexcept {
  if (module.empty()) return false;
  bool start = true;
  for (const char ch : module) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '.') {
      if (start) return false;  // an empty component
      start = true;
      continue;
    }
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && !start)) return false;
    start = false;
  }
  return !start;
}

}  // namespace torchport::pickle
