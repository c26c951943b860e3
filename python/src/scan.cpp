// torchport.scan: the library's scan() and its report, as they are.

#include <cstring>
#include <filesystem>
#include <optional>

#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "binding.hpp"

namespace torchport::python {
namespace {

OpenOptions scan_options(const std::optional<std::vector<std::string>>& allow,
                         const std::optional<std::string>& format) {
  OpenOptions o;
  if (allow) o.allow = *allow;
  if (format) o.format = format_from_name(*format);
  return o;
}

nb::dict weights_only_dict(const ScanReport& r, const TorchWeightsOnly& t) {
  nb::dict d;
  d["loads"] = t.loads ? nb::object(nb::bool_(*t.loads)) : nb::none();
  d["needs"] = nb::cast(t.needs);
  d["why"] = t.why;
  d["add_safe_globals"] = add_safe_globals_line(r, t.needs);  // "" unless the file is clean
  return d;
}

}  // namespace

void bind_scan(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<ScanGlobal>(m, "ScanGlobal")
      .def_ro("name", &ScanGlobal::name)
      .def_ro("written", &ScanGlobal::written)
      .def_ro("opcode", &ScanGlobal::opcode)
      .def_ro("offset", &ScanGlobal::offset)
      .def_ro("count", &ScanGlobal::count)
      .def_ro("calls", &ScanGlobal::calls)
      .def_ro("call_opcode", &ScanGlobal::call_opcode)
      .def_ro("call_offset", &ScanGlobal::call_offset)
      .def_ro("builds", &ScanGlobal::builds)
      .def_ro("sets", &ScanGlobal::sets)
      .def_ro("allowed", &ScanGlobal::allowed)
      .def_ro("known_dangerous", &ScanGlobal::known_dangerous)
      .def_ro("after_error", &ScanGlobal::after_error)
      .def_ro("reasons", &ScanGlobal::reasons)
      .def("__repr__", [](const ScanGlobal& g) {
        return "<ScanGlobal " + g.name + (g.allowed ? " allowed" : " not allowed") + ">";
      });

  nb::class_<PickleScan>(m, "PickleScan")
      .def_ro("name", &PickleScan::name)
      .def_ro("offset", &PickleScan::offset)
      .def_prop_ro("protocol", [](const PickleScan& p) { return p.stats.protocol; })
      .def_prop_ro("persistent_ids", [](const PickleScan& p) { return p.stats.persistent_ids; })
      .def_ro("globals", &PickleScan::globals)
      .def_ro("error", &PickleScan::error)
      .def_ro("swept", &PickleScan::swept)
      .def_ro("python_reads_on", &PickleScan::python_reads_on)
      .def_ro("object_arrays", &PickleScan::object_arrays)
      .def_ro("object_array_count", &PickleScan::object_array_count)
      .def("__repr__", [](const PickleScan& p) {
        return "<PickleScan " + p.name + " at byte " + std::to_string(p.offset) + ">";
      });

  nb::class_<ScanFinding>(m, "ScanFinding")
      .def_prop_ro("severity",
                   [](const ScanFinding& f) { return std::string(scan_verdict_name(f.severity)); })
      .def_ro("reason", &ScanFinding::reason)
      .def_ro("global_name", &ScanFinding::global)
      .def_ro("known_dangerous", &ScanFinding::known_dangerous)
      .def_ro("message", &ScanFinding::message)
      .def_ro("where", &ScanFinding::where)
      .def_ro("offset", &ScanFinding::offset)
      .def("__repr__", [](const ScanFinding& f) {
        return "<ScanFinding " + std::string(scan_verdict_name(f.severity)) + " " + f.reason +
               (f.global.empty() ? "" : " " + f.global) +
               (f.offset ? " at byte " + std::to_string(*f.offset) : "") + ">";
      });

  nb::class_<ScanReport>(m, "ScanReport")
      .def_ro("path", &ScanReport::path)
      .def_ro("format", &ScanReport::format)
      .def_ro("reading", &ScanReport::reading)
      .def_ro("reading_error", &ScanReport::reading_error)
      .def_prop_ro("verdict",
                   [](const ScanReport& r) { return std::string(scan_verdict_name(r.verdict)); })
      .def_prop_ro("exit_code", [](const ScanReport& r) { return scan_exit_code(r.verdict); })
      .def_prop_ro("reason", &ScanReport::reason)
      .def_ro("pickles", &ScanReport::pickles)
      .def_ro("code_records", &ScanReport::code_records)
      .def_ro("shards", &ScanReport::shards)
      .def_ro("members", &ScanReport::members)
      .def_ro("tensor_records", &ScanReport::tensor_records)
      .def_ro("tensors", &ScanReport::tensors)
      .def_ro("findings", &ScanReport::findings)
      .def_prop_ro("torch_weights_only",
                   [](const ScanReport& r) -> nb::object {
                     if (!r.torch_weights_only) return nb::none();
                     return weights_only_dict(r, *r.torch_weights_only);
                   })
      .def(
          "json", [](const ScanReport& r, int indent) { return scan_json(r, indent); },
          "indent"_a = 2)
      .def("__repr__", [](const ScanReport& r) {
        return "<ScanReport " + r.path + ": " + std::string(scan_verdict_name(r.verdict)) + ">";
      });

  m.def(
      "scan",
      [](const std::filesystem::path& path, const std::optional<std::vector<std::string>>& allow,
         const std::optional<std::string>& format) {
        const OpenOptions o = scan_options(allow, format);
        nb::gil_scoped_release unlocked;
        try {
          return scan(path, o);
        } catch (...) {
          rethrow_as_error("scan", path.string());
        }
      },
      "path"_a, "allow"_a = nb::none(), "format"_a = nb::none());
  m.def(
      "scan_bytes",
      [](nb::bytes data, const std::string& name,
         const std::optional<std::vector<std::string>>& allow,
         const std::optional<std::string>& format) {
        const OpenOptions o = scan_options(allow, format);
        std::vector<std::byte> copy(data.size());
        if (!copy.empty()) std::memcpy(copy.data(), data.c_str(), copy.size());
        nb::gil_scoped_release unlocked;
        try {
          return scan(Source::from_buffer(std::move(copy), name), o);
        } catch (...) {
          rethrow_as_error("scan", name);
        }
      },
      "data"_a, "name"_a = "<bytes>", "allow"_a = nb::none(), "format"_a = nb::none());
  m.def(
      "scan_directory",
      [](const std::filesystem::path& path, const std::optional<std::vector<std::string>>& allow,
         const std::optional<std::vector<std::string>>& include,
         const std::optional<std::vector<std::string>>& exclude) {
        const OpenOptions o = scan_options(allow, std::nullopt);
        ScanFilter filter;
        if (include) filter.include = *include;
        if (exclude) filter.exclude = *exclude;
        nb::gil_scoped_release unlocked;
        try {
          return scan_directory(path, o, filter);
        } catch (...) {
          rethrow_as_error("scan", path.string());
        }
      },
      "path"_a, "allow"_a = nb::none(), "include"_a = nb::none(), "exclude"_a = nb::none());
}

}  // namespace torchport::python
