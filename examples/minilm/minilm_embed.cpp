// minilm_embed --model DIR --reference reference.safetensors
//
// Sentence embeddings with a sentence-transformers BERT model folder (such as
// all-MiniLM-L6-v2) in C++: reads the folder's config.json, modules.json and
// 1_Pooling/config.json, loads its model.safetensors as shipped into the
// BertModel of minilm.hpp (strict: every field found, every key used), and
// embeds the token ids of the reference file (made by make_reference.py with
// the library's own tokenizer), then compares with the library's embeddings
// stored beside them. Exit status: 0 when every embedding agrees within the
// thresholds, 1 when one does not, 2 on an error.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torchport/torchport.hpp>

#include "minilm.hpp"

namespace {

using torchport::DType;
using torchport::Error;
using torchport::ErrorCode;
using torchport::Tensor;

// The reference file's tensor `name`, of `dtype` and rank 2.
Tensor reference_tensor(const torchport::TensorCatalog& cat, const std::string& file,
                        const char* name, DType dtype) {
  const Tensor* t = cat.find(name);
  if (t == nullptr)
    throw Error(ErrorCode::missing_key, file + ": no tensor named '" + name + "'", name);
  if (t->dtype() != dtype || t->dim() != 2)
    throw Error(ErrorCode::corrupt,
                file + ": '" + name + "' is " + t->description() + ", not a 2-d " +
                    std::string(torchport::dtype_name(dtype)),
                name);
  return t->contiguous();
}

struct Row {
  double dot = 0, ours = 0, theirs = 0, diff = 0;  // sums of products and squares
};

// Dot product, squared norms and squared difference of rows i of a and j of b.
Row compare_rows(std::span<const float> a, std::int64_t i, std::span<const float> b, std::int64_t j,
                 std::int64_t h) {
  Row r;
  for (std::int64_t k = 0; k < h; ++k) {
    const double x = a[static_cast<std::size_t>(i * h + k)];
    const double y = b[static_cast<std::size_t>(j * h + k)];
    r.dot += x * y;
    r.ours += x * x;
    r.theirs += y * y;
    r.diff += (x - y) * (x - y);
  }
  return r;
}

double cosine(const Row& r) {
  return r.dot / std::sqrt(r.ours * r.theirs);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Sentence embeddings with a BERT sentence-transformers model folder, in C++"};
  std::string model_dir, reference;
  double max_rel_error = 1e-5, min_cosine = 0.9999;
  int repeat = 5;
  app.add_option("--model", model_dir,
                 "the model folder (config.json, modules.json, model.safetensors, 1_Pooling/)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--reference", reference,
                 "safetensors file of input_ids, token_type_ids, attention_mask [n, t] and the "
                 "library's embeddings [n, hidden] (make_reference.py)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--max-rel-error", max_rel_error,
                 "largest ||ours - theirs|| / ||theirs|| accepted, per sentence")
      ->capture_default_str();
  app.add_option("--min-cosine", min_cosine, "smallest cosine(ours, theirs) accepted")
      ->capture_default_str();
  app.add_option("--repeat", repeat,
                 "forward passes to time (the embeddings of the first are compared)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    namespace fs = std::filesystem;
    const fs::path folder = model_dir;
    const minilm::BertConfig config = minilm::read_config(folder);
    minilm::SentenceEncoder model{minilm::BertModel::make(config), minilm::read_pipeline(folder)};
    std::printf(
        "%s: bert, %lld layers, hidden %lld, %lld heads, intermediate %lld, %s, "
        "layer_norm_eps %g, vocab %lld; mean pooling%s\n",
        (folder / "config.json").string().c_str(), static_cast<long long>(config.num_hidden_layers),
        static_cast<long long>(config.hidden_size),
        static_cast<long long>(config.num_attention_heads),
        static_cast<long long>(config.intermediate_size),
        config.hidden_act == "gelu" ? "gelu (exact, erf)" : config.hidden_act.c_str(),
        config.layer_norm_eps, static_cast<long long>(config.vocab_size),
        model.pipeline.normalize ? ", L2 normalisation" : "");

    const auto t0 = std::chrono::steady_clock::now();
    const torchport::LoadReport report =
        torchport::load(model.bert, folder / "model.safetensors", torchport::LoadArgs{}.strict());
    const auto t1 = std::chrono::steady_clock::now();
    std::printf("%s", report.summary().c_str());
    std::printf("load %.3f s\n", std::chrono::duration<double>(t1 - t0).count());
    if (const std::string note = model.bert.embeddings.check_position_ids(); !note.empty())
      std::printf("note: %s\n", note.c_str());

    const torchport::TensorCatalog ref = torchport::open(reference);
    const Tensor ids = reference_tensor(ref, reference, "input_ids", DType::I64);
    const Tensor types = reference_tensor(ref, reference, "token_type_ids", DType::I64);
    const Tensor mask = reference_tensor(ref, reference, "attention_mask", DType::I64);
    const Tensor theirs = reference_tensor(ref, reference, "embeddings", DType::F32);
    const std::int64_t n = ids.size(0), t = ids.size(1), h = config.hidden_size;
    if (types.shape() != ids.shape() || mask.shape() != ids.shape() || theirs.size(0) != n ||
        theirs.size(1) != h)
      throw Error(ErrorCode::corrupt, reference + ": input_ids " + ids.description() +
                                          ", token_type_ids " + types.description() +
                                          ", attention_mask " + mask.description() +
                                          " and embeddings " + theirs.description() +
                                          " do not fit [n, t] and [n, " + std::to_string(h) + "]");
    std::vector<std::string> sentences;
    if (const auto it = ref.metadata().find("sentences"); it != ref.metadata().end()) {
      const nlohmann::json s = nlohmann::json::parse(it->second, nullptr, false);
      if (s.is_array())
        for (const auto& v : s) sentences.push_back(v.is_string() ? v.get<std::string>() : "?");
    }
    sentences.resize(static_cast<std::size_t>(n), "?");

    Tensor ours;
    std::vector<double> seconds;
    for (int r = 0; r < repeat; ++r) {
      const auto a = std::chrono::steady_clock::now();
      Tensor e = model.encode(ids, types, mask);
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
      if (r == 0) ours = std::move(e);
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf(
        "forward: %lld sentences x %lld tokens (padded) in %.1f ms (fastest of %d; median "
        "%.1f ms)\n",
        static_cast<long long>(n), static_cast<long long>(t), seconds.front() * 1e3, repeat,
        seconds[seconds.size() / 2] * 1e3);

    const auto a = ours.span<float>();
    const auto b = theirs.span<float>();
    const auto m = mask.span<std::int64_t>();
    double worst_rel = 0, worst_cos = 1;
    std::printf("\n  #  tokens  1 - cosine  rel. error  sentence\n");
    for (std::int64_t i = 0; i < n; ++i) {
      const Row r = compare_rows(a, i, b, i, h);
      const double rel = std::sqrt(r.diff / r.theirs), cos = cosine(r);
      worst_rel = std::max(worst_rel, std::isnan(rel) ? INFINITY : rel);
      worst_cos = std::min(worst_cos, std::isnan(cos) ? -INFINITY : cos);
      std::int64_t tokens = 0;
      for (std::int64_t k = 0; k < t; ++k) tokens += m[static_cast<std::size_t>(i * t + k)];
      std::printf("%3lld  %6lld  %9.1e   %.2e    %s\n", static_cast<long long>(i),
                  static_cast<long long>(tokens), 1 - cos, rel,
                  sentences[static_cast<std::size_t>(i)].c_str());
    }

    struct Pair {
      double ours, theirs;
      std::int64_t i, j;
    };
    std::vector<Pair> pairs;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = i + 1; j < n; ++j)
        pairs.push_back(
            {cosine(compare_rows(a, i, a, j, h)), cosine(compare_rows(b, i, b, j, h)), i, j});
    std::sort(pairs.begin(), pairs.end(),
              [](const Pair& x, const Pair& y) { return x.ours > y.ours; });
    std::printf("\nmost similar pairs (cosine: ours / the library's):\n");
    for (std::size_t k = 0; k < std::min<std::size_t>(3, pairs.size()); ++k)
      std::printf("  %.4f / %.4f  \"%s\" ~ \"%s\"\n", pairs[k].ours, pairs[k].theirs,
                  sentences[static_cast<std::size_t>(pairs[k].i)].c_str(),
                  sentences[static_cast<std::size_t>(pairs[k].j)].c_str());

    const bool ok = worst_rel <= max_rel_error && worst_cos >= min_cosine;
    std::printf(
        "\nagreement with the library: max relative error %.2e (<= %g), min cosine 1 - %.1e "
        "(>= %g): %s\n",
        worst_rel, max_rel_error, 1 - worst_cos, min_cosine, ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minilm_embed: error: %s\n", e.what());
    return 2;
  }
}
