#pragma once
/// \file
/// Typed modules saved to and loaded from our own record files (named
/// MessagePack, pretty JSON and a compact binary, each optionally gzipped,
/// in files or in memory): `save_record`, `save_record_to_bytes`,
/// `load_record_from_bytes`. (`save` writes a catalogue to safetensors or
/// PyTorch files: `torchport/formats/save.hpp`.)
///
/// \code
/// torchport::save_record(net, "model.mpk", torchport::NamedMpk{}, torchport::Precision::Half);
/// Net again = make_net(config);
/// torchport::load(again, "model.mpk");   // converts to the module's dtypes
/// \endcode
///
/// Every recorder writes the same value tree (`to_value(module)`, or any
/// catalogue), so every recorder works with every module and with untyped
/// checkpoints, and `open()` reads them all back. The record files
/// themselves (`Recorder`, `write_record`, `read_record`) are declared in
/// `torchport/formats/record_file.hpp`, part of the `read` component.
/// Byte layouts are in docs/format.md.

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "torchport/formats/open.hpp"
#include "torchport/formats/record_file.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/load.hpp"
#include "torchport/record/precision.hpp"

namespace torchport {

/// Saves `module` in `recorder`'s format, converting tensors by `precision`.
/// The record keeps where the module's parts with a PyTorch layout are
/// (`kPyTorchLayoutKey`), so `torchport convert model.tpb model.pt` writes
/// PyTorch's names and layout (`to_pytorch_layout`).
template <class M>
void save_record(const M& module, const std::filesystem::path& path, const Recorder& recorder,
                 Precision precision = Precision::Full) {
  std::vector<std::pair<std::string, PyTorchLayout>> layouts;
  ExportSettings s;
  s.precision = precision;
  s.pytorch_layouts = &layouts;
  const Value tree = to_value(module, s);
  write_record(tree, path, recorder,
               {std::string(),
                std::string(precision_name(precision)),
                type_name<M>(),
                {{std::string(kPyTorchLayoutKey), pytorch_layout_text(layouts)}}});
}

/// Saves `module` into record bytes (to embed, send, or keep in memory).
template <class M>
std::vector<std::byte> save_record_to_bytes(const M& module, const Recorder& recorder = NamedMpk{},
                                            Precision precision = Precision::Full) {
  std::vector<std::pair<std::string, PyTorchLayout>> layouts;
  ExportSettings s;
  s.precision = precision;
  s.pytorch_layouts = &layouts;
  const Value tree = to_value(module, s);
  return record_to_bytes(tree, recorder,
                         {std::string(),
                          std::string(precision_name(precision)),
                          type_name<M>(),
                          {{std::string(kPyTorchLayoutKey), pytorch_layout_text(layouts)}}});
}

/// Loads `module` from record bytes (a `static const` array of embedded
/// weights, say), touching no file. With the compact binary format the
/// module's tensors view `bytes`, which must then outlive the module.
template <class M>
LoadReport load_record_from_bytes(M& module, std::span<const std::byte> bytes, LoadArgs args = {}) {
  const Source source = Source::borrow(bytes, "embedded record");
  return load(module, open(source, args.open_options()), args);
}

}  // namespace torchport
