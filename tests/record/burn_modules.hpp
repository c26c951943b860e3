#pragma once
// The C++ modules of Burn's pytorch-tests cases (tests/record/cases/*.py),
// shared by the record and recorder tests.

#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "torchport/nn/modules.hpp"
#include "torchport/nn/ops.hpp"
#include "torchport/record/fields.hpp"

namespace burn_cases {

using namespace torchport;

/// tests/record/fixtures/<name>.
inline std::filesystem::path case_file(const std::string& name) {
  return std::filesystem::path(TORCHPORT_FIXTURES_DIR) / ".." / "record" / "fixtures" / name;
}

struct BatchNormNet {
  nn::BatchNorm2d norm1{5};
  TORCHPORT_FIELDS(norm1)
};

struct BufferNet {
  Tensor buffer;
  TORCHPORT_FIELDS(buffer)
};

struct ConvBlock {
  nn::Conv2d conv;
  nn::BatchNorm2d norm;
  TORCHPORT_FIELDS(conv, norm)
  Tensor forward(const Tensor& x) const { return norm.forward(conv.forward(x)); }
};

struct ComplexNet {
  std::vector<ConvBlock> conv_blocks;
  nn::BatchNorm2d norm1;
  nn::Linear fc1;
  nn::Linear fc2;
  TORCHPORT_FIELDS(conv_blocks, norm1, fc1, fc2)

  static ComplexNet make(DType dtype = DType::F32) {
    ComplexNet n;
    n.conv_blocks = {
        {nn::Conv2d(2, 4, {3, 2}, 1, 0, 1, 1, true, dtype), nn::BatchNorm2d(4, 1e-5, true, dtype)},
        {nn::Conv2d(4, 6, {3, 2}, 1, 0, 1, 1, true, dtype), nn::BatchNorm2d(6, 1e-5, true, dtype)}};
    n.norm1 = nn::BatchNorm2d(6, 1e-5, true, dtype);
    n.fc1 = nn::Linear(120, 12, true, dtype);
    n.fc2 = nn::Linear(12, 10, true, dtype);
    return n;
  }
  Tensor forward(Tensor x) const {
    for (const auto& b : conv_blocks) x = b.forward(x);
    x = nn::flatten(norm1.forward(x), 1);
    x = nn::relu(fc1.forward(x));
    return nn::log_softmax(fc2.forward(x), 1);
  }
};

struct PartialNet {
  ConvBlock conv1;
  TORCHPORT_FIELDS(conv1)
};

struct NetWithExtra {
  std::vector<ConvBlock> conv_blocks;
  nn::BatchNorm2d norm1;
  nn::Linear fc1, fc2;
  std::optional<ConvBlock> extra;  // absent from the file
  TORCHPORT_FIELDS(conv_blocks, norm1, fc1, fc2, extra)
};

struct SomeDict {
  std::string some_key;
  TORCHPORT_FIELDS(some_key)
};

struct ModelConfig {
  std::int64_t n_head = 0;
  std::int64_t n_layer = 0;
  std::int64_t d_model = 0;
  double some_float = 0;
  int some_int = 0;
  bool some_bool = false;
  std::string some_str;
  std::vector<std::int64_t> some_list_int;
  std::vector<std::string> some_list_str;
  std::vector<double> some_list_float;
  SomeDict some_dict;
  TORCHPORT_FIELDS(n_head, n_layer, d_model, some_float, some_int, some_bool, some_str,
                   some_list_int, some_list_str, some_list_float, some_dict)
};

template <class C>
struct TwoConvs {
  C conv1, conv2;
  TORCHPORT_FIELDS(conv1, conv2)
  Tensor forward(const Tensor& x) const { return conv2.forward(conv1.forward(x)); }
};

struct EmbeddingNet {
  nn::Embedding embed{10, 3};
  TORCHPORT_FIELDS(embed)
};

struct DwsConv {
  nn::Conv2d dconv;
  nn::Conv2d pconv;
  TORCHPORT_FIELDS(dconv, pconv)
};

struct EnumNet {
  std::variant<DwsConv, nn::Conv2d> conv;
  TORCHPORT_FIELDS(conv)
  Tensor forward(const Tensor& x) const {
    if (const auto* d = std::get_if<DwsConv>(&conv)) return d->pconv.forward(d->dconv.forward(x));
    return std::get<nn::Conv2d>(conv).forward(x);
  }
};

struct GroupNormNet {
  nn::GroupNorm norm1{2, 6};
  TORCHPORT_FIELDS(norm1)
};

struct LayerNormNet {
  nn::LayerNorm norm1{{2}, 1e-5, true, /*with_bias*/ false};  // torch's LayerNorm(2, bias=False)
  TORCHPORT_FIELDS(norm1)
};

struct LinearNet {
  nn::Linear fc1{2, 3};
  nn::Linear fc2{3, 4, false};
  TORCHPORT_FIELDS(fc1, fc2)
  Tensor forward(const Tensor& x) const { return fc2.forward(nn::relu(fc1.forward(x))); }
};

struct ChainedNet {
  nn::Conv2d conv1{2, 2, 2};
  nn::Conv2d conv2{2, 2, 2, 1, 0, 1, 1, false};
  nn::Linear fc{2, 3};
  TORCHPORT_FIELDS(conv1, conv2, fc)
};

struct ModuleMissingNet {
  nn::Conv2d conv1;
  std::vector<nn::Linear> heads;
  TORCHPORT_FIELDS(conv1, heads)
};

struct SequentialNet {
  std::vector<nn::Conv2d> variable_layers;
  TORCHPORT_FIELDS(variable_layers)
};

struct AttentionNet {
  nn::MultiheadAttention attn{8, 2};
  nn::MultiheadAttention cross{8, 2, true, true, 6, 4};
  TORCHPORT_FIELDS(attn, cross)
};

struct RecurrentNet {
  nn::LSTM lstm{4, 6, 2, true, true};
  nn::GRU gru{3, 5};
  TORCHPORT_FIELDS(lstm, gru)
};

struct DataParallelNet {
  nn::Linear fc1{2, 3};
  nn::BatchNorm1d norm{3};
  TORCHPORT_FIELDS(fc1, norm)
};

}  // namespace burn_cases
