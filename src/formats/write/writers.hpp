#pragma once
// The file writers behind `save()`. Each writes one file from a list of
// named tensors and empties the list as it goes, so tensors (and lazily
// made bytes) are released once written.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "formats/write/write_common.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/io/atomic_file.hpp"

namespace torchport::formats {

/// Bytes of tensor data a safetensors file of `tensors` holds.
std::uint64_t safetensors_data_bytes(const std::vector<NamedTensor>& tensors);
/// Writes one safetensors file (see `save`). Checks every name and dtype
/// before writing a byte.
void write_safetensors(std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata, AtomicFile& out,
                       DataStreamer& data);

/// Bytes of tensor data a torch.save archive of `tensors` holds (each
/// distinct storage once).
std::uint64_t pytorch_data_bytes(const std::vector<NamedTensor>& tensors);
/// Writes one torch.save zip archive whose folder is named after
/// `out.target()`'s stem (see `save`). A nested tensor the readers listed as
/// components (metadata `torchport.nested.NAME` = N: NAME.0 ... NAME.N-1,
/// in order, views of one storage) is written back as one nested tensor
/// named NAME, as torch writes it.
void write_pytorch(std::vector<NamedTensor>& tensors,
                   const std::map<std::string, std::string>& metadata, AtomicFile& out,
                   DataStreamer& data);

/// Writes one torch.save zip archive of the whole tree `root` (`save` with
/// `SaveOptions::keep_tree`): containers, numbers, strings, objects and
/// tensors as torch.load returns them. Refuses, before writing a byte, a
/// global or object class that is not on the allow-list (nor matched by
/// `allow`, nor a class of an active profile in `profiles` used in its
/// profile's form), a pickled nn.Module, and nested tensors inside other
/// values. Objects are written as they were made (REDUCE or NEWOBJ); Enum
/// members as `builtins.getattr(cls, 'NAME')`; tensor subclasses as
/// `_rebuild_from_type_v2(_rebuild_wrapper_subclass, cls, args, state)`.
void write_pytorch_tree(const Value& root, std::span<const std::string> allow,
                        std::span<const std::string> profiles, AtomicFile& out, DataStreamer& data);

}  // namespace torchport::formats
