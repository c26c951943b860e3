// torchport.convert: what `torchport convert IN OUT` does for a file output
// (tools/torchport/cmd_convert.cpp), over the same library calls: the
// output format from the name or `format`, a .pt keeping the whole object,
// a tensor format refusing to drop values unless `tensors_only`, casts,
// shards, quantized and sparse tensors refused, split or converted.

#include <filesystem>
#include <optional>
#include <variant>

#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "binding.hpp"
#include "torchport/record/export.hpp"

namespace torchport::python {
namespace {

namespace fs = std::filesystem;

struct ConvertArgs {
  std::optional<std::string> format;
  std::optional<std::string> dtype;
  std::optional<std::string> top_level_key;
  std::variant<std::monostate, std::uint64_t, std::string> max_shard_size;
  bool tensors_only = false;
  bool dequantize = false;
  bool keep_quantized = false;
  bool densify = false;
  std::vector<std::string> allow;
};

nb::dict convert(const fs::path& in, const fs::path& out, const ConvertArgs& a) {
  std::optional<SaveFormat> format;
  TransformOptions t;
  SaveOptions s;
  const auto bad = [](const std::string& message) {
    throw Error(ErrorCode::invalid_argument, message);
  };
  if (a.format) {
    format = parse_save_format(*a.format);
    if (!format)
      bad("unknown format '" + *a.format +
          "' (safetensors, pytorch, or a record: torchport-mpk, torchport-json, torchport-bin, "
          "each maybe .gz)");
  }
  if (!format) format = save_format_for_path(out);
  if (!format)
    bad("cannot tell the output format from '" + out.filename().string() +
        "': name it .safetensors, .pt, .pth or .bin (or .mpk, .json, .tpb for torchport "
        "records), or pass format='safetensors' or 'pytorch'");
  if (std::holds_alternative<std::uint64_t>(a.max_shard_size))
    s.max_shard_size = std::get<std::uint64_t>(a.max_shard_size);
  else if (std::holds_alternative<std::string>(a.max_shard_size))
    s.max_shard_size = parse_byte_size(std::get<std::string>(a.max_shard_size));
  const bool sharded = !std::holds_alternative<std::monostate>(a.max_shard_size);
  if (is_record(*format) && sharded) bad("max_shard_size applies to safetensors and PyTorch output only");
  pickle::validate_allow_patterns(a.allow);
  if (a.dequantize && a.keep_quantized) bad("dequantize and keep_quantized exclude each other");
  if (a.dtype) {
    t.dtype = dtype_parse(*a.dtype);
    if (!t.dtype)
      bad("unknown dtype '" + *a.dtype + "' (try F16, BF16, F32, F64, F8_E4M3, F8_E5M2)");
    transform(TensorCatalog{}, t);  // refuses a dtype that is no cast target
  }

  nb::gil_scoped_release unlocked;
  try {
    OpenOptions o;
    o.allow = a.allow;
    TensorCatalog opened = open(in, o);
    // A record of a module keeps torchport's layout (Linear weights [in,
    // out]): a .pt or safetensors file gets PyTorch's, as the tool gives it
    // (or the same refusal, for a record that does not say where the
    // layouts differ).
    if (!is_record(*format)) opened = to_pytorch_layout(opened);
    if (a.top_level_key) opened = opened.select(*a.top_level_key);
    if (!a.tensors_only) {
      const DroppedValues dropped =
          opened.root_is_tensors() ? DroppedValues{} : dropped_values(opened.root());
      std::size_t count = dropped.count;
      const bool changes_tensors = a.dtype || a.dequantize || a.keep_quantized || a.densify;
      if (count > 0 && (format == SaveFormat::pytorch || is_record(*format))) {
        if (changes_tensors)
          bad("the input holds " + std::to_string(count) + " value(s) besides tensors (" +
              dropped.names() + "), which a " +
              (is_record(*format) ? "torchport record" : ".pt") +
              " keeps only as the whole object, with its tensors unchanged: "
              "dtype, dequantize, keep_quantized and densify need tensors_only=True (or "
              "top_level_key to convert one sub-tree)");
        s.keep_tree = true;
        s.allow = a.allow;
        count = 0;
      }
      if (count > 0)
        bad("the input holds " + std::to_string(count) +
            " value(s) besides tensors that the output would drop: " + dropped.names() +
            "; pass tensors_only=True to write the tensors alone (or top_level_key to convert "
            "one sub-tree)");
    }
    TensorCatalog cat = s.keep_tree ? std::move(opened) : transform(opened, t);
    opened = TensorCatalog();
    if (a.densify)
      cat = densify_tensors(cat);
    else if (format != SaveFormat::pytorch)
      refuse_sparse(cat, is_record(*format) ? "a torchport record" : "safetensors");
    if (a.dequantize)
      cat = dequantize_tensors(cat);
    else if (a.keep_quantized)
      cat = split_quantized(cat);
    else if (format != SaveFormat::pytorch)
      refuse_quantized(cat, is_record(*format) ? "a torchport record" : "safetensors");
    const std::size_t count = cat.size();
    const SaveResult res = save(std::move(cat), out, *format, s);
    nb::gil_scoped_acquire locked;
    nb::dict r;
    r["files"] = nb::cast(res.files);
    r["index"] = res.index.empty() ? nb::none() : nb::cast(res.index);
    r["tensors"] = count;
    r["tensor_bytes"] = res.tensor_bytes;
    r["format"] = std::string(save_format_name(*format));
    return r;
  } catch (...) {
    rethrow_as_error("convert", in.string());
  }
}

}  // namespace

void bind_convert(nb::module_& m) {
  using namespace nb::literals;
  m.def(
      "convert",
      [](const fs::path& in, const fs::path& out, const std::optional<std::string>& format,
         const std::optional<std::string>& dtype, const std::optional<std::string>& top_level_key,
         std::variant<std::monostate, std::uint64_t, std::string> max_shard_size, bool tensors_only,
         bool dequantize, bool keep_quantized, bool densify,
         const std::optional<std::vector<std::string>>& allow) {
        ConvertArgs a;
        a.format = format;
        a.dtype = dtype;
        a.top_level_key = top_level_key;
        a.max_shard_size = std::move(max_shard_size);
        a.tensors_only = tensors_only;
        a.dequantize = dequantize;
        a.keep_quantized = keep_quantized;
        a.densify = densify;
        if (allow) a.allow = *allow;
        return convert(in, out, a);
      },
      "src"_a, "dst"_a, nb::kw_only(), "format"_a = nb::none(), "dtype"_a = nb::none(),
      "top_level_key"_a = nb::none(), "max_shard_size"_a = nb::none(), "tensors_only"_a = false,
      "dequantize"_a = false, "keep_quantized"_a = false, "densify"_a = false,
      "allow"_a = nb::none());
}

}  // namespace torchport::python
