// A program as a user of the installed (or vendored) library writes it:
// opens a checkpoint and loads a module.
#include <cstdio>

#include <torchport/torchport.hpp>

struct Net {
  torchport::nn::Linear fc1{2, 3};
  torchport::nn::Linear fc2{3, 4, false};
  TORCHPORT_FIELDS(fc1, fc2)
};

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  try {
    const torchport::TensorCatalog cat = torchport::open(argv[1]);
    Net net;
    const torchport::LoadReport r = torchport::load(net, cat);
    std::printf("torchport %s: %zu tensors in the file, %llu loaded%s\n", torchport::kVersion,
                cat.size(), static_cast<unsigned long long>(r.tensors), r.clean() ? ", clean" : "");
    return r.clean() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
