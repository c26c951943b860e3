// torchport._core: the Python binding of torchport's public C++ API
// (python/torchport/ is the package around it; docs/python.md the guide).
// Every call that reads or writes files releases the GIL.

#include <filesystem>
#include <optional>

#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "binding.hpp"

namespace torchport::python {
namespace {

PyObject* error_class = nullptr;  // torchport.TorchportError, kept for the process

OpenOptions open_options(const std::optional<std::vector<std::string>>& allow,
                         const std::optional<std::string>& format, bool verify) {
  OpenOptions o;
  if (allow) o.allow = *allow;
  if (format) o.format = format_from_name(*format);
  o.verify_crc = verify;
  // Views handed to torch must accept writes (torch has no read-only
  // tensors): private copy-on-write pages, as torch.load(mmap=True) maps.
  o.map.copy_on_write = true;
  return o;
}

TensorCatalog open_catalog(const std::filesystem::path& path, const OpenOptions& o) {
  nb::gil_scoped_release unlocked;
  try {
    return open(path, o);
  } catch (...) {
    rethrow_as_error("open", path.string());
  }
}

/// One tensor's slice, as safetensors' `get_slice` gives it: indexing reads
/// (maps) only the elements it selects.
class Slice {
 public:
  Slice(Tensor t, std::string name, Framework fw)
      : t_(std::move(t)), name_(std::move(name)), fw_(fw) {}
  std::vector<std::int64_t> shape() const { return t_.shape(); }
  std::string dtype() const { return std::string(dtype_name(t_.dtype())); }

  nb::object getitem(nb::handle key) const {
    if (t_.is_sparse() || t_.is_quantized() || t_.is_meta() || t_.slicer() != nullptr)
      throw Error(ErrorCode::unsupported,
                  "get_slice of a " + t_.description() + (t_.is_quantized() ? " quantized" : "") +
                      " tensor: only dense tensors are sliced in place; get(name) gives it whole",
                  name_);
    std::vector<nb::handle> items;
    if (nb::isinstance<nb::tuple>(key)) {
      for (nb::handle h : nb::borrow<nb::tuple>(key)) items.push_back(h);
    } else {
      items.push_back(key);
    }
    const auto rank = static_cast<std::size_t>(t_.dim());
    std::size_t explicit_dims = 0;
    bool ellipsis = false;
    for (nb::handle h : items) {
      if (h.is(nb::ellipsis())) {
        if (ellipsis) fail("an index can hold one Ellipsis");
        ellipsis = true;
      } else {
        ++explicit_dims;
      }
    }
    if (explicit_dims > rank)
      fail("too many indices: " + std::to_string(explicit_dims) + " for a tensor of " +
           std::to_string(rank) + " dimension(s)");
    Shape shape, strides;
    std::int64_t offset = t_.storage_offset();
    std::size_t d = 0;
    for (nb::handle h : items) {
      if (h.is(nb::ellipsis())) {
        for (std::size_t n = rank - explicit_dims; n > 0; --n, ++d) {
          shape.push_back(t_.shape()[d]);
          strides.push_back(t_.strides()[d]);
        }
        continue;
      }
      const std::int64_t size = t_.shape()[d], stride = t_.strides()[d];
      if (nb::isinstance<nb::slice>(h)) {
        const auto [start, stop, step, length] =
            nb::borrow<nb::slice>(h).compute(static_cast<std::size_t>(size));
        (void)stop;
        if (step <= 0) fail("a slice step must be positive (torch has no negative strides)");
        shape.push_back(static_cast<std::int64_t>(length));
        strides.push_back(stride * static_cast<std::int64_t>(step));
        if (length > 0) offset += static_cast<std::int64_t>(start) * stride;
      } else if (PyIndex_Check(h.ptr())) {
        std::int64_t i = nb::cast<std::int64_t>(nb::int_(h));
        if (i < 0) i += size;
        if (i < 0 || i >= size)
          fail("index " + std::to_string(nb::cast<std::int64_t>(nb::int_(h))) +
               " is out of range for dimension " + std::to_string(d) + " of size " +
               std::to_string(size));
        offset += i * stride;
      } else {
        fail("indices are ints, slices and ..., not " +
             nb::cast<std::string>(nb::str(h.type().attr("__name__"))));
      }
      ++d;
    }
    for (; d < rank; ++d) {
      shape.push_back(t_.shape()[d]);
      strides.push_back(t_.strides()[d]);
    }
    // The view's extent lies inside the tensor's, which the reader checked.
    const Tensor view(t_.dtype(), std::move(shape), std::move(strides), offset, t_.storage());
    return tensor_to_python(view, fw_, false, name_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw Error(ErrorCode::invalid_argument, "get_slice: " + message, name_);
  }
  Tensor t_;
  std::string name_;
  Framework fw_;
};

/// An open checkpoint: torchport.open's catalogue.
class File {
 public:
  File(const std::filesystem::path& path, const std::string& framework,
       const std::optional<std::vector<std::string>>& allow,
       const std::optional<std::string>& format, bool verify)
      : fw_(parse_framework(framework)), name_(path.string()) {
    cat_ = open_catalog(path, open_options(allow, format, verify));
  }

  const TensorCatalog& cat() const {
    if (!cat_)
      throw Error(ErrorCode::invalid_argument,
                  "the file is closed (arrays taken from it stay valid)", {}, std::nullopt, name_);
    return *cat_;
  }
  const Tensor& tensor(const std::string& name) const {
    const Tensor* t = cat().find(name);
    if (t == nullptr) {
      std::string some;
      for (const auto& k : cat().top_level_keys()) {
        if (some.size() > 200) {
          some += ", ...";
          break;
        }
        some += (some.empty() ? "'" : ", '") + k + "'";
      }
      throw Error(ErrorCode::missing_key,
                  "no tensor named '" + name + "' (top-level keys: " + some + ")", name,
                  std::nullopt, name_);
    }
    return *t;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(cat().size());
    for (const auto& nt : cat().tensors()) out.push_back(nt.name);
    return out;
  }
  nb::object get(const std::string& name) const {
    return tensor_to_python(tensor(name), fw_, false, name);
  }
  nb::tuple get_raw(const std::string& name) const { return tensor_raw(tensor(name), false, name); }
  Slice get_slice(const std::string& name) const { return Slice(tensor(name), name, fw_); }
  nb::object object() const {
    ValueConverter c(fw_, false);
    return c.convert(cat().root(), "");
  }
  void close() { cat_.reset(); }
  bool closed() const { return !cat_; }

  Framework fw_;
  std::string name_;
  std::optional<TensorCatalog> cat_;
};

nb::object load(const std::filesystem::path& path, const std::string& framework, bool mmap,
                const std::optional<std::vector<std::string>>& allow,
                const std::optional<std::string>& format) {
  const Framework fw = parse_framework(framework);
  OpenOptions o = open_options(allow, format, false);
  // torch.load(weights_only=True) refuses every class outside its list; so
  // does load(), which builds Python objects: no inert objects here.
  TensorCatalog cat = open_catalog(path, o);
  if (cat.format() == Format::torchscript)
    throw Error(ErrorCode::unsupported,
                "a TorchScript archive, which torch.load gives as a ScriptModule (its code "
                "runs); torchport.open() lists its tensors",
                {}, std::nullopt, path.string());
  ValueConverter c(fw, !mmap);
  if (!mmap) {
    // Owned copies of every storage (tied tensors stay tied), put in the
    // tree's places: the tree itself is the file's.
    TensorCatalog owned;
    {
      nb::gil_scoped_release unlocked;
      try {
        owned = materialize(cat, Residence::owned);
      } catch (...) {
        rethrow_as_error("load", path.string());
      }
    }
    c.replace_tensors(cat.tensors(), owned.tensors());
  }
  return c.convert(cat.root(), "");
}

}  // namespace

void set_error_class(nb::handle cls) {
  Py_XINCREF(cls.ptr());
  error_class = cls.ptr();
}

void raise_error(const Error& e) {
  nb::object offset = e.offset() ? nb::object(nb::int_(*e.offset())) : nb::none();
  nb::object err = nb::borrow(error_class)(e.what(), std::string(error_code_name(e.code())),
                                           e.key(), offset, e.where(), e.message());
  PyErr_SetObject(error_class, err.ptr());
}

}  // namespace torchport::python

namespace tp = torchport::python;
namespace nb = nanobind;

NB_MODULE(_core, m) {
  using namespace nb::literals;
  using torchport::Error;
  m.doc() = "torchport's C++ core (see the torchport package for the API)";
  m.attr("__version__") = TORCHPORT_PY_VERSION;

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      if (tp::error_class == nullptr) throw;
      tp::raise_error(e);
    }
  });
  m.def("_set_error_class", [](nb::handle cls) { tp::set_error_class(cls); });

  nb::class_<tp::Slice>(m, "TensorSlice")
      .def("get_shape", &tp::Slice::shape)
      .def("get_dtype", &tp::Slice::dtype)
      .def_prop_ro("shape", &tp::Slice::shape)
      .def_prop_ro("dtype", &tp::Slice::dtype)
      .def("__getitem__", &tp::Slice::getitem);

  nb::class_<tp::File>(m, "File")
      .def(nb::init<const std::filesystem::path&, const std::string&,
                    const std::optional<std::vector<std::string>>&,
                    const std::optional<std::string>&, bool>(),
           "path"_a, "framework"_a = "numpy", "allow"_a = nb::none(), "format"_a = nb::none(),
           "verify"_a = false)
      .def("keys", &tp::File::keys)
      .def("get", &tp::File::get, "name"_a)
      .def("get_tensor", &tp::File::get, "name"_a)
      .def("get_raw", &tp::File::get_raw, "name"_a)
      .def("get_slice", &tp::File::get_slice, "name"_a)
      .def("object", &tp::File::object)
      .def("dtype",
           [](const tp::File& f, const std::string& n) {
             return std::string(torchport::dtype_name(f.tensor(n).dtype()));
           })
      .def("shape", [](const tp::File& f, const std::string& n) { return f.tensor(n).shape(); })
      .def_prop_ro("metadata", [](const tp::File& f) { return f.cat().metadata(); })
      .def_prop_ro("format", [](const tp::File& f) { return std::string(f.cat().format_name()); })
      .def_prop_ro("path", [](const tp::File& f) { return f.name_; })
      .def_prop_ro("closed", &tp::File::closed)
      .def("close", &tp::File::close)
      .def("__len__", [](const tp::File& f) { return f.cat().size(); })
      .def("__contains__",
           [](const tp::File& f, const std::string& n) { return f.cat().find(n) != nullptr; })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](tp::File& f, nb::args) { f.close(); });

  m.def("load", &tp::load, "path"_a, "framework"_a = "numpy", "mmap"_a = false,
        "allow"_a = nb::none(), "format"_a = nb::none());

  tp::bind_scan(m);
  tp::bind_convert(m);
}
