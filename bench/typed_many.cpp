// A typed load of many small tensors (bench/many_tensors.py's checkpoints:
// N tensors of 16 float32s named layers.L.experts.E.w, 64 experts a layer)
// into a module that declares them, as a mixture-of-experts model would.
//
//   typed_many FILE N [owned|mapped]
//
// Builds the module (N fields of shape [16]), loads FILE into it through
// the whole typed path (unflatten, field matching, shape and dtype checks,
// the report), checks every field was loaded, and exits. Measured as a
// whole process by many_tensors.py; it also prints, as JSON on its last
// line, its resident set once the module is built ("baseline") and the
// most it held during the load ("peak"; VmHWM, reset after the module is
// built), both in bytes, and the load's own seconds.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <torchport/torchport.hpp>

namespace {

struct Expert {
  torchport::Tensor w;
  TORCHPORT_FIELDS(w)
};

struct Layer {
  std::vector<Expert> experts;
  TORCHPORT_FIELDS(experts)
};

struct Experts {
  std::vector<Layer> layers;
  TORCHPORT_FIELDS(layers)
};

Experts make(std::size_t n) {
  Experts m;
  m.layers.resize((n + 63) / 64);
  for (std::size_t i = 0; i < n; ++i) {
    Layer& l = m.layers[i / 64];
    l.experts.push_back({torchport::Tensor::empty(torchport::DType::F32, {16})});
  }
  return m;
}

// A field of /proc/self/status in bytes (-1 when absent).
long long status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0) return std::atoll(line.c_str() + field.size()) * 1024;
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: typed_many FILE N [owned|mapped]\n");
    return 2;
  }
  const std::size_t n = std::strtoull(argv[2], nullptr, 10);
  const bool mapped = argc > 3 && std::string(argv[3]) == "mapped";
  try {
    Experts m = make(n);
    // Reset the peak to the resident set now (Linux: "5" to clear_refs).
    std::ofstream("/proc/self/clear_refs") << "5";
    const long long baseline = status_bytes("VmRSS:");
    const auto t0 = std::chrono::steady_clock::now();
    const auto report =
        torchport::load(m, argv[1],
                        torchport::LoadArgs{}.strict().residence(
                            mapped ? torchport::Residence::mapped : torchport::Residence::owned));
    if (report.tensors != n || !report.clean()) {
      std::fprintf(stderr, "typed_many: %llu of %zu fields loaded\n%s",
                   static_cast<unsigned long long>(report.tensors), n, report.summary().c_str());
      return 1;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%zu tensors, %llu bytes\n", n, static_cast<unsigned long long>(report.bytes));
    std::printf("{\"baseline\": %lld, \"peak\": %lld, \"seconds\": %.6f}\n", baseline,
                status_bytes("VmHWM:"), seconds);
  } catch (const torchport::Error& e) {
    std::fprintf(stderr, "typed_many: %s\n", e.what());
    return 1;
  }
  return 0;
}
