// torchport convert IN OUT [--format F] [--dtype D] [--top-level-key K]
//   [--remap PATTERN REPLACEMENT]... [--include RE]... [--exclude RE]...
//   [--max-shard-size S] [--max-materialized-bytes S] [--dequantize | --keep-quantized] [--densify]

#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "format.hpp"
#include "input.hpp"
#include "progress.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/densify.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/quantize.hpp"
#include "torchport/formats/record_file.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/transform.hpp"
#include "torchport/io/atomic_file.hpp"
#include "torchport/pickle/globals.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/remap.hpp"

namespace torchport::cli {
namespace {

namespace fs = std::filesystem;

struct ConvertArgs {
  std::string in;
  std::string out;
  std::string format;
  std::string dtype;
  std::string top_level_key;
  std::vector<std::pair<std::string, std::string>> remaps;
  std::vector<std::string> includes;
  std::vector<std::string> excludes;
  std::string max_shard_size;
  std::string max_materialized_bytes;
  bool dequantize = false;
  bool keep_quantized = false;
  bool densify = false;
  bool force = false;
  bool quiet = false;
  bool tensors_only = false;
  Trust trust;
};

// The file a directory output gets: Hugging Face's names (as
// save_pretrained: "pytorch_model.bin", "model.safetensors"), and "model"
// with the format's extension for a record.
std::string default_file_name(SaveFormat f) {
  if (f == SaveFormat::pytorch) return "pytorch_model.bin";
  return "model" + std::string(save_format_extension(f));
}

int run_convert(const ConvertArgs& a) {
  // Everything the user typed is checked before any input is read: a
  // mistake there is a usage error (exit 2).
  std::optional<SaveFormat> format;
  fs::path out = a.out;
  bool chosen_name = false;  // the output is a directory; the file name is ours
  TransformOptions t;
  SaveOptions s;
  std::shared_ptr<KeyFilter> filter;
  const bool to_stdout = a.out == "-";
  usage_checked([&] {
    if (!a.format.empty()) format = parse_save_format(a.format);
    std::error_code ec;
    if (to_stdout) {
      // Streamed: safetensors only (a PyTorch zip is patched after each
      // entry), one file, never to a terminal (as gzip refuses).
      if (!format) format = SaveFormat::safetensors;
      if (*format != SaveFormat::safetensors)
        throw Error(ErrorCode::invalid_argument,
                    std::string(*format == SaveFormat::pytorch
                                    ? "a PyTorch file cannot be written to standard output (its "
                                      "zip entries are patched once written)"
                                    : "a torchport record is written to a file") +
                        ": name a file, or stream --format safetensors");
      if (!a.max_shard_size.empty())
        throw Error(ErrorCode::invalid_argument,
                    "--max-shard-size needs files: standard output is one stream");
      if (::isatty(STDOUT_FILENO))
        throw Error(ErrorCode::invalid_argument,
                    "standard output is a terminal: redirect it (> FILE, | COMMAND) to write "
                    "binary data there");
    } else if (fs::is_directory(out, ec)) {
      // Like save_pretrained: a directory gets Hugging Face's file names,
      // said on stderr, and never written over a file there unless --force.
      if (!format) format = SaveFormat::safetensors;
      out /= default_file_name(*format);
      chosen_name = true;
      if (fs::exists(fs::symlink_status(out, ec)) && !a.force)
        throw Error(ErrorCode::invalid_argument,
                    "the output is a directory and '" + out.string() +
                        "', the name chosen in it, exists: pass --force to replace it, or name "
                        "the output file");
    }
    // Outputs are regular files: a symlink, FIFO, device or socket of that
    // name is refused, never replaced.
    if (!to_stdout) check_output_path(out);
    if (!to_stdout) {
      // Never over the input (it is read while the output is written), and
      // never over an existing file unless told, as for a directory.
      if (!is_stdin(a.in) && fs::exists(out, ec) && fs::equivalent(a.in, out, ec))
        throw Error(ErrorCode::invalid_argument,
                    "is the input as well as the output: name another output file", {},
                    std::nullopt, out.string());
      const fs::path index = out.parent_path() / (out.filename().string() + ".index.json");
      for (const fs::path& p : {out, index})
        if (!chosen_name && !a.force && fs::exists(fs::symlink_status(p, ec)) &&
            (p == out || !a.max_shard_size.empty()))
          throw Error(ErrorCode::invalid_argument,
                      "exists: pass --force to replace it (a convert never writes over a file "
                      "unasked)",
                      {}, std::nullopt, p.string());
    }
    // By extension: .safetensors, .pt/.pth/.bin, and our own records (.mpk,
    // .json, .tpb, each maybe .gz).
    if (!format) format = save_format_for_path(out);
    if (!format)
      throw Error(
          ErrorCode::invalid_argument,
          "cannot tell the output format from '" + out.filename().string() +
              "': name it .safetensors, .pt, .pth or .bin (or .mpk, .json, .tpb for torchport "
              "records), or pass --format safetensors|pytorch");
    if (is_record(*format) && !a.max_shard_size.empty())
      throw Error(ErrorCode::invalid_argument,
                  "--max-shard-size applies to safetensors and PyTorch output only");
    pickle::validate_allow_patterns(a.trust.allow);
    pickle::validate_profiles(a.trust.profiles);
    if (a.dequantize && a.keep_quantized)
      throw Error(ErrorCode::invalid_argument,
                  "--dequantize and --keep-quantized exclude each other");
    if (!a.dtype.empty()) {
      t.dtype = dtype_parse(a.dtype);
      if (!t.dtype)
        throw Error(ErrorCode::invalid_argument,
                    "unknown dtype '" + a.dtype + "' (try F16, BF16, F32, F64, F8_E4M3, F8_E5M2)");
      transform(TensorCatalog{}, t);  // refuses a dtype that is no cast target
    }
    t.top_level_key = a.top_level_key;
    auto remap = std::make_shared<KeyRemap>();
    for (const auto& [pattern, replacement] : a.remaps) remap->add(pattern, replacement);
    filter = std::make_shared<KeyFilter>();
    for (const auto& re : a.includes) filter->include(re);
    for (const auto& re : a.excludes) filter->exclude(re);
    if (!remap->empty()) t.rename = [remap](std::string_view k) { return remap->apply(k); };
    if (!filter->empty()) t.keep = [filter](std::string_view k) { return filter->accepts(k); };
    if (!a.max_shard_size.empty()) s.max_shard_size = parse_byte_size(a.max_shard_size);
    if (!a.max_materialized_bytes.empty())
      s.limits.max_materialized_bytes = parse_byte_size(a.max_materialized_bytes);
  });

  const auto t0 = std::chrono::steady_clock::now();
  // The opened catalogue is a temporary: once transformed, only the result
  // holds the tensors, and save() releases each as it is written.
  OpenOptions open_options;
  open_options.allow = a.trust.allow;
  open_options.profiles = a.trust.profiles;
  TensorCatalog opened = open_input(a.in, open_options);
  // A record of a module holds torchport's layout: a .pt or safetensors
  // file gets PyTorch's (what torch's load_state_dict takes).
  if (!is_record(*format)) opened = to_pytorch_layout(opened);
  if (!a.top_level_key.empty()) {  // selected here, so the check sees the sub-tree
    opened = opened.select(a.top_level_key);
    t.top_level_key.clear();
  }
  if (!a.tensors_only) {
    // Nothing dropped silently: a .pt keeps the whole object (its values
    // where they were); values a tensor file cannot hold refuse the convert.
    // (A root of tensors alone drops nothing, and is not made to find that out.)
    const DroppedValues dropped =
        opened.root_is_tensors() ? DroppedValues{}
        : filter->empty()
            ? dropped_values(opened.root())
            : dropped_values(opened.root(), [&](std::string_view n) { return filter->accepts(n); });
    std::size_t count = dropped.count;
    const bool changes_tensors = !a.remaps.empty() || !filter->empty() || !a.dtype.empty() ||
                                 a.dequantize || a.keep_quantized || a.densify;
    if (count > 0 && (format == SaveFormat::pytorch || is_record(*format))) {
      // The tree is written as it is: options that rename, drop or change
      // its tensors would leave it describing other tensors.
      if (changes_tensors)
        throw Error(ErrorCode::invalid_argument,
                    "the input holds " + counted(count, "value") + " besides tensors (" +
                        dropped.names() + "), which a " +
                        (is_record(*format) ? "torchport record" : ".pt") +
                        " keeps only as the whole object, with its tensors unchanged: --remap, "
                        "--include, --exclude, --dtype, --dequantize, --keep-quantized and "
                        "--densify need --tensors-only (or --top-level-key to convert one "
                        "sub-tree)");
      // (A record holds any value tree: epoch, args, param_groups.)
      s.keep_tree = true;
      s.allow = a.trust.allow;
      s.profiles = a.trust.profiles;
      count = 0;
    }
    if (count > 0)
      throw Error(ErrorCode::invalid_argument,
                  "the input holds " + counted(count, "value") +
                      " besides tensors that the output would drop: " + dropped.names() +
                      "; pass --tensors-only to write the tensors alone (or --top-level-key to "
                      "convert one sub-tree)");
  }
  TensorCatalog cat = s.keep_tree ? std::move(opened) : transform(opened, t);
  opened = TensorCatalog();  // only the result holds the tensors now
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
  if (count == 0)
    fmt::print(
        stderr,
        "torchport: warning: no tensors to write (check --include/--exclude/--top-level-key)\n");
  ProgressBar bar("writing");
  if (!a.quiet)
    s.progress = [&bar](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
  const SaveResult r = to_stdout
                           ? save_stream(std::move(cat), STDOUT_FILENO, "<stdout>", *format, s)
                           : save(std::move(cat), out, *format, s);
  bar.finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (a.quiet) return 0;
  // What was written, by the names written: shards and their index, or one file.
  const std::string what =
      r.index.empty() ? fmt::format("{}", r.files.front().string())
                      : fmt::format("{} + {}", counted(r.files.size(), "shard"), r.index.string());
  // Standard output holds the data: the summary goes to standard error.
  fmt::print(
      to_stdout ? stderr : stdout, "wrote {} ({}{}): {}, {} in {:.2f} s ({}/s)\n", what,
      save_format_name(*format), chosen_name ? "; the names chosen in the directory" : "",
      counted(count, "tensor"), human_bytes(r.tensor_bytes), secs,
      human_bytes(secs > 0 ? static_cast<std::uint64_t>(static_cast<double>(r.tensor_bytes) / secs)
                           : 0));
  return 0;
}

}  // namespace

Command add_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* sub = app.add_subcommand(
      "convert",
      "Convert a checkpoint to safetensors or PyTorch format (streamed, written atomically)");
  sub->add_option(
         "in", args->in,
         "Input: any checkpoint torchport reads (a file, an *.index.json or its directory; "
         "'-': standard input)")
      ->required();
  sub->add_option(
         "out", args->out,
         "Output file (.safetensors; .pt/.pth/.bin for PyTorch; .mpk/.json/.tpb[.gz] for torchport "
         "records), an existing directory, or '-': safetensors to standard output")
      ->required();
  sub->add_option("--format", args->format, "Output format when the name does not tell")
      ->check(CLI::IsMember({"safetensors", "pytorch", "torchport-mpk", "torchport-mpk.gz",
                             "torchport-json", "torchport-json.gz", "torchport-bin",
                             "torchport-bin.gz"}));
  sub->add_option(
      "--dtype", args->dtype,
      "Cast floating-point tensors to this dtype (F16, BF16, F32, F64, or a float8 kind: F8_E4M3, "
      "F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ, F8_E8M0; as torch's .to() rounds)");
  sub->add_option("--top-level-key", args->top_level_key,
                  "Convert only what lies under this key (e.g. state_dict), renamed without it");
  sub->add_option(
         "--remap", args->remaps,
         "Rename keys: PCRE2 PATTERN and REPLACEMENT ($1, ${name}); every match in a key is "
         "replaced; rules apply in order, each to the previous one's result")
      ->type_size(2)
      ->allow_extra_args(false);
  sub->add_option("--include", args->includes,
                  "Keep only keys matching this regex (any of several)");
  sub->add_option("--exclude", args->excludes, "Drop keys matching this regex");
  sub->add_option(
      "--max-materialized-bytes", args->max_materialized_bytes,
      "Safetensors and records have no views: each view is written whole. They may total 4x the "
      "distinct storage bytes plus this (default 1GiB; Limits::max_materialized_bytes)");
  sub->add_option(
      "--max-shard-size", args->max_shard_size,
      "Write Hugging Face shards of at most this size (5GB, 500MB, 2GiB) plus an index");
  sub->add_flag("--dequantize", args->dequantize,
                "Write quantized tensors as their real values (F32, as torch's dequantize())");
  sub->add_flag(
      "--keep-quantized", args->keep_quantized,
      "Write quantized tensors as their integers plus NAME.q_scale/.q_zero_point (per channel: "
      ".q_per_channel_scales/_zero_points/_axis) tensors");
  sub->add_flag("-q,--quiet", args->quiet, "Print nothing but errors and warnings");
  sub->add_option("--allow", args->trust.allow,
                  "Trust this global or class beyond the allow-list, reading the input (a tensor "
                  "subclass's class, say) and in a .pt keeping the input's values: an exact "
                  "module.name or module.* (repeatable; e.g. argparse.Namespace)");
  add_trust_options(sub, args->trust, false);
  sub->add_flag("--tensors-only", args->tensors_only,
                "Write the tensors alone, dropping the input's other values (epoch, args, an "
                "optimizer's param_groups); without it a .pt and a torchport record keep the "
                "whole object, and safetensors refuses such an input, naming the values");
  sub->add_flag("--force", args->force,
                "Replace an existing output file (with a directory as output, the file whose "
                "name torchport chose there); never the input");
  sub->add_flag("--densify", args->densify,
                "Write sparse tensors dense (safetensors and records have no sparse layout)");
  sub->footer(
      "Filters match the names after --top-level-key, before --remap.\n"
      "Examples:\n"
      "  torchport convert model.pt model.safetensors\n"
      "  torchport convert ckpt.pt model.safetensors --top-level-key state_dict --dtype BF16\n"
      "  torchport convert llama/ out.bin --remap '^model\\.' '' --exclude 'rotary_emb'\n"
      "  torchport convert model.safetensors out/ --max-shard-size 2GB");
  return {sub, [args] { return run_convert(*args); }};
}

}  // namespace torchport::cli
