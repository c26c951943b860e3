// A program that only reads checkpoints, as a user of the `read` component
// writes it: it includes <torchport/read.hpp>, links torchport::read (no
// PCRE2, no OpenBLAS), prints a checkpoint's tensors, saves them as a
// compact binary record and as safetensors, and reads both back.
#include <cstdio>
#include <filesystem>

#include <torchport/read.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: read_consumer CHECKPOINT OUT_DIR\n");
    return 2;
  }
  try {
    const torchport::TensorCatalog catalog = torchport::open(argv[1]);
    for (const auto& [name, tensor] : catalog.tensors())
      std::printf("%s %s\n", name.c_str(), tensor.description().c_str());
    const std::filesystem::path dir = argv[2];
    torchport::write_record(catalog, dir / "copy.tpb", torchport::CompactBin{});
    torchport::save(catalog, dir / "copy.safetensors", torchport::SaveFormat::safetensors);
    const torchport::TensorCatalog record = torchport::open(dir / "copy.tpb");
    const torchport::TensorCatalog safetensors = torchport::open(dir / "copy.safetensors");
    std::printf("torchport %s: %zu tensors, %zu in the record, %zu in the safetensors file\n",
                torchport::kVersion, catalog.size(), record.size(), safetensors.size());
    return record.size() == catalog.size() && safetensors.size() == catalog.size() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
