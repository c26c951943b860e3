#include "torchport/record/adapter.hpp"

#include <cstring>

#include "torchport/core/error.hpp"

namespace torchport {

Value Adapter::import_module(std::string_view, const Value& node, AdapterContext&) const {
  return node;
}
Value Adapter::export_module(std::string_view, const Value& node) const {
  return node;
}
Tensor Adapter::import_tensor(std::string_view, const Tensor& t) const {
  return t;
}
Tensor Adapter::export_tensor(std::string_view, const Tensor& t) const {
  return t;
}

namespace {

// A dict with `from` keys renamed to `to` keys (values shared); other
// entries kept in order.
Value rename(const Value& node,
             std::initializer_list<std::pair<std::string_view, std::string_view>> names) {
  if (!node.is(Value::Kind::Dict)) return node;
  Value out = Value::dict();
  for (const auto& [k, v] : node.pairs()) {
    std::string key = k.is(Value::Kind::Str) ? k.as_str() : k.repr();
    for (const auto& [from, to] : names)
      if (key == from) key = std::string(to);
    out.insert(Value::str(std::move(key)), v);
  }
  return out;
}

const Tensor* tensor_at(const Value& node, std::string_view key) {
  const Value* v = node.find(key);
  return v && v->is(Value::Kind::Tensor) ? &v->as_tensor() : nullptr;
}

Tensor transpose2d(const Tensor& t) {
  return t.dim() == 2 ? t.transpose(0, 1) : t;
}

// Row blocks [i * rows, (i + 1) * rows) of a fused [n * rows, ...] tensor.
Tensor chunk(const Tensor& t, std::int64_t n, std::int64_t i, std::string_view what) {
  if (t.dim() < 1 || t.size(0) % n != 0)
    throw Error(ErrorCode::shape_mismatch,
                std::string(what) + " of shape " + shape_to_string(t.shape()) +
                    " does not split into " + std::to_string(n) + " equal parts");
  const std::int64_t rows = t.size(0) / n;
  return t.narrow(0, i * rows, rows);
}

// Concatenates tensors along dim 0 into a fresh contiguous tensor.
Tensor concat0(const std::vector<Tensor>& parts) {
  Shape shape = parts.front().shape();
  std::int64_t rows = 0;
  for (const auto& p : parts) {
    if (p.dtype() != parts.front().dtype() || p.dim() != parts.front().dim())
      throw Error(ErrorCode::shape_mismatch, "cannot fuse tensors of different dtypes or ranks");
    rows += p.size(0);
  }
  shape[0] = rows;
  Tensor out = Tensor::empty(parts.front().dtype(), shape);
  auto dst = out.mutable_bytes();
  std::size_t at = 0;
  for (const auto& p : parts) {
    const std::size_t n = static_cast<std::size_t>(p.nbytes());
    p.copy_to(dst.subspan(at, n));
    at += n;
  }
  return out;
}

Value dict_of(std::initializer_list<std::pair<const char*, Value>> items) {
  Value d = Value::dict();
  for (const auto& [k, v] : items)
    if (!v.is_none()) d.insert(Value::str(k), v);
  return d;
}

Value import_mha(const Value& node, AdapterContext& ctx) {
  const char* names[] = {"query", "key", "value"};
  Value weights[3], biases[3];
  const Value* in_w = node.find("in_proj_weight");
  const Value* in_b = node.find("in_proj_bias");
  for (int i = 0; i < 3; ++i) {
    if (in_w && in_w->is(Value::Kind::Tensor)) {
      weights[i] = ctx.derive(chunk(in_w->as_tensor(), 3, i, "in_proj_weight"), *in_w);
    } else if (const Value* sep = node.find(std::string(1, "qkv"[i]) + "_proj_weight")) {
      weights[i] = *sep;
    }
    if (in_b && in_b->is(Value::Kind::Tensor))
      biases[i] = ctx.derive(chunk(in_b->as_tensor(), 3, i, "in_proj_bias"), *in_b);
  }
  Value out = Value::dict();
  for (int i = 0; i < 3; ++i)
    out.insert(Value::str(names[i]), dict_of({{"weight", weights[i]}, {"bias", biases[i]}}));
  for (const auto& [key, v] : node.pairs()) {
    const std::string s = key.is(Value::Kind::Str) ? key.as_str() : key.repr();
    if (s == "in_proj_weight" || s == "in_proj_bias" || s == "q_proj_weight" ||
        s == "k_proj_weight" || s == "v_proj_weight")
      continue;
    out.insert(Value::str(s == "out_proj" ? "output" : s), v);
  }
  return out;
}

Value export_mha(const Value& node) {
  const char* names[] = {"query", "key", "value"};
  std::vector<Tensor> w, b;
  for (const char* n : names) {
    const Value* lin = node.find(n);
    if (!lin) return node;
    if (const Tensor* t = tensor_at(*lin, "weight")) w.push_back(*t);
    if (const Tensor* t = tensor_at(*lin, "bias")) b.push_back(*t);
  }
  Value out = Value::dict();
  const bool same_dims =
      w.size() == 3 && w[0].shape() == w[1].shape() && w[1].shape() == w[2].shape();
  if (same_dims) {
    out.insert(Value::str("in_proj_weight"), Value::tensor(concat0(w)));
  } else {
    for (std::size_t i = 0; i < w.size(); ++i)
      out.insert(Value::str(std::string(1, "qkv"[i]) + "_proj_weight"), Value::tensor(w[i]));
  }
  if (b.size() == 3) out.insert(Value::str("in_proj_bias"), Value::tensor(concat0(b)));
  for (const auto& [key, v] : node.pairs()) {
    const std::string s = key.as_str();
    if (s == "query" || s == "key" || s == "value") continue;
    out.insert(Value::str(s == "output" ? "out_proj" : s), v);
  }
  return out;
}

// LSTM (gates i, f, g, o) and GRU (r, z, n): torch fuses each layer's gates
// into weight_ih_l{k} [G * hidden, in] and friends.
struct Recurrent {
  std::vector<const char*> gates;
};
const Recurrent kLstm{{"input_gate", "forget_gate", "cell_gate", "output_gate"}};
const Recurrent kGru{{"reset_gate", "update_gate", "new_gate"}};

Value import_recurrent(const Recurrent& r, const Value& node, AdapterContext& ctx) {
  const auto g = static_cast<std::int64_t>(r.gates.size());
  Value layers = Value::list();
  Value rest = Value::dict();
  for (int k = 0;; ++k) {
    const std::string sfx = "_l" + std::to_string(k);
    const Value* wih = node.find("weight_ih" + sfx);
    if (!wih) break;
    const Value* whh = node.find("weight_hh" + sfx);
    const Value* bih = node.find("bias_ih" + sfx);
    const Value* bhh = node.find("bias_hh" + sfx);
    auto part = [&](const Value* v, std::int64_t i, const std::string& what) -> Value {
      if (!v || !v->is(Value::Kind::Tensor)) return Value();
      return ctx.derive(chunk(v->as_tensor(), g, i, what), *v);
    };
    Value layer = Value::dict();
    for (std::int64_t i = 0; i < g; ++i) {
      Value gate = Value::dict();
      gate.insert(Value::str("input_transform"),
                  dict_of({{"weight", part(wih, i, "weight_ih" + sfx)},
                           {"bias", part(bih, i, "bias_ih" + sfx)}}));
      gate.insert(Value::str("hidden_transform"),
                  dict_of({{"weight", part(whh, i, "weight_hh" + sfx)},
                           {"bias", part(bhh, i, "bias_hh" + sfx)}}));
      layer.insert(Value::str(r.gates[static_cast<std::size_t>(i)]), gate);
    }
    layers.append(layer);
  }
  Value out = Value::dict();
  out.insert(Value::str("layers"), layers);
  for (const auto& [key, v] : node.pairs()) {
    const std::string s = key.is(Value::Kind::Str) ? key.as_str() : key.repr();
    const bool fused = s.starts_with("weight_ih_l") || s.starts_with("weight_hh_l") ||
                       s.starts_with("bias_ih_l") || s.starts_with("bias_hh_l");
    // Reverse-direction weights (bidirectional) are not consumed: they stay
    // under their own names, so the report lists them as unused.
    if (!fused || s.ends_with("_reverse")) out.insert(Value::str(s), v);
  }
  return out;
}

Value export_recurrent(const Recurrent& r, const Value& node) {
  const Value* layers = node.find("layers");
  if (!layers || !layers->is(Value::Kind::List)) return node;
  Value out = Value::dict();
  for (std::size_t k = 0; k < layers->size(); ++k) {
    const Value& layer = layers->items()[k];
    const std::string sfx = "_l" + std::to_string(k);
    for (const char* side : {"input_transform", "hidden_transform"}) {
      for (const char* param : {"weight", "bias"}) {
        std::vector<Tensor> parts;
        for (const char* gate : r.gates)
          if (const Value* gv = layer.find(gate))
            if (const Value* tv = gv->find(side))
              if (const Tensor* t = tensor_at(*tv, param)) parts.push_back(*t);
        if (parts.size() != r.gates.size()) continue;
        const std::string name =
            std::string(param) + (std::strcmp(side, "input_transform") == 0 ? "_ih" : "_hh") + sfx;
        out.insert(Value::str(name), Value::tensor(concat0(parts)));
      }
    }
  }
  for (const auto& [key, v] : node.pairs())
    if (key.as_str() != "layers") out.insert(key, v);
  return out;
}

bool is_norm(std::string_view kind) {
  return kind == "BatchNorm1d" || kind == "BatchNorm2d" || kind == "LayerNorm" ||
         kind == "GroupNorm";
}

}  // namespace

Value PyTorchAdapter::import_module(std::string_view kind, const Value& node,
                                    AdapterContext& ctx) const {
  if (!node.is(Value::Kind::Dict)) return node;
  if (kind == "Linear") {
    const Value* w = node.find("weight");
    if (!w || !w->is(Value::Kind::Tensor) || w->as_tensor().dim() != 2) return node;
    Value out = Value::dict();
    for (const auto& [k, v] : node.pairs())
      out.insert(k, k.is(Value::Kind::Str) && k.as_str() == "weight"
                        ? ctx.derive(transpose2d(v.as_tensor()), v)
                        : v);
    return out;
  }
  if (is_norm(kind)) return rename(node, {{"weight", "gamma"}, {"bias", "beta"}});
  if (kind == "RMSNorm") return rename(node, {{"weight", "gamma"}});
  if (kind == "PReLU") return rename(node, {{"weight", "alpha"}});
  if (kind == "MultiheadAttention") return import_mha(node, ctx);
  if (kind == "LSTM") return import_recurrent(kLstm, node, ctx);
  if (kind == "GRU") return import_recurrent(kGru, node, ctx);
  return node;
}

Value PyTorchAdapter::export_module(std::string_view kind, const Value& node) const {
  if (!node.is(Value::Kind::Dict)) return node;
  if (kind == "Linear") {
    Value out = Value::dict();
    for (const auto& [k, v] : node.pairs())
      out.insert(k, k.as_str() == "weight" && v.is(Value::Kind::Tensor)
                        ? Value::tensor(transpose2d(v.as_tensor()).contiguous())
                        : v);
    return out;
  }
  if (is_norm(kind)) return rename(node, {{"gamma", "weight"}, {"beta", "bias"}});
  if (kind == "RMSNorm") return rename(node, {{"gamma", "weight"}});
  if (kind == "PReLU") return rename(node, {{"alpha", "weight"}});
  if (kind == "MultiheadAttention") return export_mha(node);
  if (kind == "LSTM") return export_recurrent(kLstm, node);
  if (kind == "GRU") return export_recurrent(kGru, node);
  return node;
}

PermuteAdapter& PermuteAdapter::add(std::string_view pattern, std::vector<std::int64_t> order) {
  std::vector<bool> seen(order.size(), false);
  for (std::int64_t d : order) {
    if (d < 0 || d >= static_cast<std::int64_t>(order.size()) || seen[static_cast<std::size_t>(d)])
      throw Error(ErrorCode::invalid_argument,
                  "permute order " + shape_to_string(order) + " is not a permutation");
    seen[static_cast<std::size_t>(d)] = true;
  }
  Rule r;
  r.match.include(pattern);
  r.order = std::move(order);
  rules_.push_back(std::move(r));
  return *this;
}

Tensor PermuteAdapter::import_tensor(std::string_view path, const Tensor& t) const {
  for (const auto& r : rules_)
    if (r.match.accepts(path)) {
      if (static_cast<std::size_t>(t.dim()) != r.order.size())
        throw Error(ErrorCode::shape_mismatch,
                    "permute order " + shape_to_string(r.order) + " for a tensor of shape " +
                        shape_to_string(t.shape()),
                    std::string(path));
      return t.permute(r.order);
    }
  return t;
}

Tensor PermuteAdapter::export_tensor(std::string_view path, const Tensor& t) const {
  for (const auto& r : rules_)
    if (r.match.accepts(path) && static_cast<std::size_t>(t.dim()) == r.order.size()) {
      std::vector<std::int64_t> inverse(r.order.size());
      for (std::size_t i = 0; i < r.order.size(); ++i)
        inverse[static_cast<std::size_t>(r.order[i])] = static_cast<std::int64_t>(i);
      return t.permute(inverse).contiguous();
    }
  return t;
}

}  // namespace torchport
