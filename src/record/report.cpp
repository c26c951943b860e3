#include "torchport/record/report.hpp"

#include <cstdio>

namespace torchport {
namespace {

std::string count(std::uint64_t n) {
  char buf[32];
  if (n >= 1000000)
    std::snprintf(buf, sizeof buf, "%.1fM", static_cast<double>(n) / 1e6);
  else if (n >= 1000)
    std::snprintf(buf, sizeof buf, "%.1fk", static_cast<double>(n) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  return buf;
}

}  // namespace

std::string LoadReport::summary() const {
  std::string s = "loaded " + std::to_string(tensors) +
                  (tensors == 1 ? " tensor (" : " tensors (") + count(elements) +
                  (elements == 1 ? " element, " : " elements, ") + count(bytes) + "B";
  if (zero_copy_bytes) s += ", " + count(zero_copy_bytes) + "B zero-copy";
  s += ")";
  if (!source.empty()) s += " from " + source;
  s += "\n";
  if (shard) {
    std::size_t split = 0;
    for (const auto& r : shard->reads) split += r.kind != "replicate";
    s += "rank " + std::to_string(shard->rank) + " of " + std::to_string(shard->world) + " read " +
         count(shard->bytes) + "B of " + count(shard->file_bytes) + "B of tensors (" +
         std::to_string(split) + " split, " + std::to_string(shard->reads.size() - split) +
         " read whole)\n";
  }
  if (clean()) return s + "every field found, every key used\n";
  if (!missing.empty()) {
    s += "missing " + std::to_string(missing.size()) + ":\n";
    for (const auto& m : missing) {
      s += "  " + m.path + " (" + m.type + ")";
      if (!m.did_you_mean.empty()) {
        s += "  did you mean";
        for (std::size_t i = 0; i < m.did_you_mean.size(); ++i)
          s += (i ? ", '" : " '") + m.did_you_mean[i] + "'";
        s += "?";
      }
      s += "\n";
    }
  }
  if (!unused.empty()) {
    s += "unused " + std::to_string(unused.size()) + ":\n";
    for (const auto& u : unused) s += "  " + u + "\n";
  }
  if (!mismatched.empty()) {
    s += "shape mismatches " + std::to_string(mismatched.size()) + ":\n";
    for (const auto& m : mismatched) {
      s += "  " + m.path + ": expected " + shape_to_string(m.expected) + ", file '" + m.source +
           "' has " + shape_to_string(m.file_shape);
      if (m.found != m.file_shape)
        s += " (" + shape_to_string(m.found) + " in the module's layout)";
      s += "\n";
    }
  }
  if (!warnings.empty()) {
    s += "warnings " + std::to_string(warnings.size()) + ":\n";
    for (const auto& w : warnings) s += "  " + w.message + "\n";
  }
  return s;
}

std::string LoadReport::key_listing() const {
  std::string s;
  for (const auto& k : keys)
    s += k.original + " -> " + (k.remapped.empty() ? std::string("(filtered out)") : k.remapped) +
         "  " + k.dtype +
         (k.dtype.starts_with("scalar") ? std::string() : shape_to_string(k.shape)) + "\n";
  return s;
}

std::string LoadReport::shard_listing() const {
  if (!shard) return {};
  std::string s;
  for (const auto& r : shard->reads) {
    s += r.key + "  " + r.kind;
    if (r.dim >= 0) s += "(" + std::to_string(r.dim) + ")";
    s += "  " + shape_to_string(r.file_shape) + " -> " + shape_to_string(r.shape) + "  " +
         std::to_string(r.bytes) + " of " + std::to_string(r.file_bytes) + " bytes";
    s += r.rule.empty() ? std::string("  (no rule)") : "  [" + r.rule + "]";
    s += "\n";
  }
  return s;
}

}  // namespace torchport
