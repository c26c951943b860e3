// ResNet-50, batch 1, 224x224: torchport's forward (examples/resnet) against
// libtorch running the same weights as TorchScript, in one process, on the
// same input, with the same number of threads.
//
//   /usr/bin/python3 bench/make_resnet_bench.py      # bench/data/resnet/resnet50.{pt,ts}
//   build/bin/resnet_vs_libtorch [--dir bench/data/resnet] [--threads 1] [--runs 9] [--profile]
//
// Runs alternate (torchport, libtorch as loaded, libtorch after
// torch::jit::optimize_for_inference) so that load from other processes on a
// shared machine falls on all three alike; each gets two warm-up runs and the
// median of `runs` is reported, with the ratio torchport / libtorch. The
// logits are compared first: a benchmark of a wrong forward is worthless.
//
// Threads: OpenBLAS (torchport's sgemm, and libtorch's BLAS calls) through
// openblas_set_num_threads; libtorch's intra-op pool (OpenMP, which oneDNN
// uses) through at::set_num_threads.
//
// --profile times torchport's layers by kind (convolutions per shape class,
// batch norm, relu, adds, pooling, fc), to show what bounds the forward.

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/script.h>
#include <torchport/torchport.hpp>

#include "resnet.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Deterministic values in [-1, 1) (a linear congruential generator).
std::vector<float> pseudo_random(std::size_t n) {
  std::vector<float> v(n);
  std::uint32_t s = 12345;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

// torchport's ResNet forward with every op timed by kind.
class Profiler {
 public:
  template <class F>
  torchport::Tensor time(const std::string& kind, F&& f) {
    const auto t0 = Clock::now();
    torchport::Tensor y = f();
    seconds_[kind] += seconds_since(t0);
    return y;
  }
  void print(double total) const {
    std::vector<std::pair<double, std::string>> rows;
    for (const auto& [k, s] : seconds_) rows.emplace_back(s, k);
    std::sort(rows.rbegin(), rows.rend());
    for (const auto& [s, k] : rows)
      std::printf("  %-34s %8.2f ms  %5.1f%%\n", k.c_str(), s * 1e3, 100 * s / total);
  }

 private:
  std::map<std::string, double> seconds_;
};

std::string conv_kind(const torchport::nn::Conv2d& c) {
  const auto& w = c.weight;
  return "conv " + std::to_string(w.size(2)) + "x" + std::to_string(w.size(3)) + " stride " +
         std::to_string(c.stride->h);
}

torchport::Tensor profiled_forward(const resnet::ResNet& r, const torchport::Tensor& x,
                                   Profiler& p) {
  namespace nn = torchport::nn;
  using torchport::Tensor;
  const auto conv = [&](const nn::Conv2d& c, const Tensor& in) {
    return p.time(conv_kind(c), [&] { return c.forward(in); });
  };
  const auto bn = [&](const nn::BatchNorm2d& b, const Tensor& in) {
    return p.time("batch_norm", [&] { return b.forward(in); });
  };
  const auto relu = [&](const Tensor& in) { return p.time("relu", [&] { return nn::relu(in); }); };
  Tensor y = relu(bn(r.bn1, conv(r.conv1, x)));
  y = p.time("max_pool2d", [&] { return nn::max_pool2d(y, 3, {.stride = 2, .padding = 1}); });
  for (const auto* layer : {&r.layer1, &r.layer2, &r.layer3, &r.layer4})
    for (const auto& b : *layer) {
      Tensor z = relu(bn(b.bn1, conv(b.conv1, y)));
      z = bn(b.bn2, conv(b.conv2, z));
      if (b.conv3) z = bn(*b.bn3, conv(*b.conv3, relu(z)));
      const Tensor id = b.downsample ? bn(b.downsample->norm, conv(b.downsample->conv, y)) : y;
      y = relu(p.time("add", [&] { return nn::add(z, id); }));
    }
  y = p.time("avg_pool + flatten", [&] { return nn::flatten(nn::adaptive_avg_pool2d(y, 1), 1); });
  return p.time("fc", [&] { return r.fc.forward(y); });
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "bench/data/resnet";
  int threads = 1, runs = 9;
  bool profile = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--runs" && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (a == "--profile")
      profile = true;
    else {
      std::fprintf(stderr,
                   "usage: resnet_vs_libtorch [--dir D] [--threads N] [--runs R] [--profile]\n");
      return 2;
    }
  }
  if (threads < 1 || runs < 1) {
    std::fprintf(stderr, "resnet_vs_libtorch: --threads and --runs must be >= 1\n");
    return 2;
  }
  try {
    openblas_set_num_threads(threads);
    at::set_num_threads(threads);

    resnet::ResNet net = resnet::ResNet::make("resnet50");
    torchport::load(net, dir + "/resnet50.pt",
                    torchport::LoadArgs{}.residence(torchport::Residence::owned));
    torch::jit::Module scripted = torch::jit::load(dir + "/resnet50.ts");
    scripted.eval();
    torch::jit::Module optimized = torch::jit::optimize_for_inference(scripted);

    const std::vector<float> values = pseudo_random(3 * 224 * 224);
    const torchport::Tensor x =
        torchport::Tensor::from(std::span<const float>(values), {1, 3, 224, 224});
    const at::Tensor xt =
        torch::from_blob(const_cast<float*>(values.data()), {1, 3, 224, 224}).clone();
    c10::InferenceMode guard;
    const auto run_ours = [&] { return net.forward(x); };
    const auto run_script = [&] { return scripted.forward({xt}).toTensor(); };
    const auto run_optimized = [&] { return optimized.forward({xt}).toTensor(); };

    // The three agree (the scale is the logits' largest magnitude).
    const torchport::Tensor ours = run_ours();
    const at::Tensor theirs = run_script(), theirs_opt = run_optimized();
    double err = 0, err_opt = 0, scale = 0;
    const auto o = ours.span<float>();
    const float* t = theirs.data_ptr<float>();
    const float* t2 = theirs_opt.data_ptr<float>();
    for (std::size_t i = 0; i < o.size(); ++i) {
      err = std::max(err, static_cast<double>(std::fabs(o[i] - t[i])));
      err_opt = std::max(err_opt, static_cast<double>(std::fabs(o[i] - t2[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(t[i])));
    }
    std::printf("resnet50, batch 1, 3x224x224, %d thread(s), median of %d runs\n", threads, runs);
    std::printf("logits: max|torchport - libtorch| = %.2e (optimized: %.2e), max|logits| = %.2e\n",
                err, err_opt, scale);
    if (!(err <= 1e-4 * scale) || !(err_opt <= 1e-4 * scale)) {
      std::fprintf(stderr, "resnet_vs_libtorch: the forward passes disagree\n");
      return 1;
    }

    std::vector<double> t_ours, t_script, t_opt;
    for (int i = -2; i < runs; ++i) {  // two warm-up rounds
      auto t0 = Clock::now();
      run_ours();
      const double a = seconds_since(t0);
      t0 = Clock::now();
      run_script();
      const double b = seconds_since(t0);
      t0 = Clock::now();
      run_optimized();
      const double c = seconds_since(t0);
      if (i >= 0) t_ours.push_back(a), t_script.push_back(b), t_opt.push_back(c);
    }
    const double m_ours = median(t_ours), m_script = median(t_script), m_opt = median(t_opt);
    std::printf("torchport                               %8.1f ms\n", m_ours * 1e3);
    std::printf("libtorch (TorchScript, as loaded)       %8.1f ms   torchport / libtorch = %.2f\n",
                m_script * 1e3, m_ours / m_script);
    std::printf("libtorch (optimize_for_inference)       %8.1f ms   torchport / libtorch = %.2f\n",
                m_opt * 1e3, m_ours / m_opt);

    if (profile) {
      Profiler p;
      std::vector<double> totals;
      for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        profiled_forward(net, x, p);
        totals.push_back(seconds_since(t0));
      }
      double sum = 0;
      for (double s : totals) sum += s;
      std::printf("torchport by op (sums over %d runs):\n", runs);
      p.print(sum);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet_vs_libtorch: error: %s\n", e.what());
    return 1;
  }
}
