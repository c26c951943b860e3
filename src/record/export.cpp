#include "torchport/record/export.hpp"

#include <cstdio>

#include "torchport/core/error.hpp"

namespace torchport {
namespace detail {

Tensor export_tensor(const Tensor& t, const std::string& path, const ExportSettings& s) {
  Tensor out = t;
  for (auto it = s.adapters.rbegin(); it != s.adapters.rend(); ++it)
    out = (*it)->export_tensor(path, out);
  const DType target = precision_dtype(s.precision, out.dtype());
  try {
    return target == out.dtype() ? out : out.to(target);
  } catch (const Error& e) {
    throw Error(e.code(), e.message(), path);
  }
}

Value export_module(const ModuleInfo& module, Value node, const ExportSettings& s) {
  for (auto it = s.adapters.rbegin(); it != s.adapters.rend(); ++it)
    node = (*it)->export_module(module, node);
  return node;
}

}  // namespace detail

namespace {

struct Totals {
  std::uint64_t elements = 0;
  std::uint64_t bytes = 0;
};

Totals totals(const Value& v) {
  Totals t;
  if (v.is(Value::Kind::Tensor)) {
    t.elements = static_cast<std::uint64_t>(v.as_tensor().numel());
    t.bytes = v.as_tensor().nbytes();
  } else if (v.is(Value::Kind::Dict)) {
    for (const auto& [k, x] : v.pairs()) {
      const Totals c = totals(x);
      t.elements += c.elements;
      t.bytes += c.bytes;
    }
  } else if (v.is(Value::Kind::List) || v.is(Value::Kind::Tuple)) {
    for (const auto& x : v.items()) {
      const Totals c = totals(x);
      t.elements += c.elements;
      t.bytes += c.bytes;
    }
  }
  return t;
}

std::string amount(std::uint64_t elements, std::uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%llu elements, %llu bytes",
                static_cast<unsigned long long>(elements), static_cast<unsigned long long>(bytes));
  return buf;
}

void describe_into(const Value& v, const std::string& name, int depth, std::string& out) {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  if (v.is(Value::Kind::Tensor)) {
    out += indent + name + ": " + v.as_tensor().description() + "\n";
    return;
  }
  if (v.is(Value::Kind::Dict) || v.is(Value::Kind::List) || v.is(Value::Kind::Tuple)) {
    const Totals t = totals(v);
    out += indent + (name.empty() ? std::string("(root)") : name) + "  [" +
           amount(t.elements, t.bytes) + "]\n";
    if (v.is(Value::Kind::Dict)) {
      for (const auto& [k, x] : v.pairs())
        describe_into(x, k.is(Value::Kind::Str) ? k.as_str() : k.repr(), depth + 1, out);
    } else {
      std::size_t i = 0;
      for (const auto& x : v.items()) describe_into(x, std::to_string(i++), depth + 1, out);
    }
    return;
  }
  out += indent + name + ": " + v.repr() + "\n";
}

}  // namespace

std::string describe(const Value& tree) {
  std::string out;
  describe_into(tree, "", 0, out);
  return out;
}

bool records_equal(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Tensor:
      return a.as_tensor().equal(b.as_tensor());
    case Value::Kind::Dict: {
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i) {
        const auto& [ka, va] = a.pairs()[i];
        const auto& [kb, vb] = b.pairs()[i];
        if (!records_equal(ka, kb) || !records_equal(va, vb)) return false;
      }
      return true;
    }
    case Value::Kind::List:
    case Value::Kind::Tuple:
    case Value::Kind::Set: {
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (!records_equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Value::Kind::None:
      return true;
    case Value::Kind::Bool:
      return a.as_bool() == b.as_bool();
    case Value::Kind::Int:
      return a.as_int() == b.as_int();
    case Value::Kind::Float:
      return a.as_float() == b.as_float();
    case Value::Kind::Str:
      return a.as_str() == b.as_str();
    default:
      return a.repr() == b.repr();
  }
}

}  // namespace torchport
