// prune_tensors: the non-tensor part of a value tree, as `torchport
// inspect` shows it.

#include "torchport/formats/prune.hpp"

#include <unordered_map>

#include "torchport/detail/work.hpp"

namespace torchport {

namespace {

// Both walks below remember each shared node's answer, so a DAG costs its
// distinct nodes, not its expansion.
struct Pruner {
  std::unordered_map<const void*, bool> only;
  std::unordered_map<const void*, Value> pruned;

  // True when a subtree holds at least one tensor and nothing else but containers.
  bool only_tensors(const Value& v) {
    detail::count(detail::work().values_printed);
    switch (v.kind()) {
      case Value::Kind::Tensor:
        return true;
      case Value::Kind::List:
      case Value::Kind::Tuple:
      case Value::Kind::Set:
      case Value::Kind::Dict:
        break;
      default:
        return false;
    }
    if (const auto it = only.find(v.identity()); it != only.end()) return it->second;
    bool r = v.size() > 0;
    if (v.is(Value::Kind::Dict)) {
      for (const auto& [k, x] : v.pairs())
        if (r && !only_tensors(x)) r = false;
    } else {
      for (const auto& i : v.items())
        if (r && !only_tensors(i)) r = false;
    }
    only.emplace(v.identity(), r);
    return r;
  }

  Value prune(const Value& v) {
    if (only_tensors(v)) return Value();
    if (!v.is(Value::Kind::Dict) && !v.is(Value::Kind::List) && !v.is(Value::Kind::Tuple) &&
        !v.is(Value::Kind::Object))
      return v;
    if (const auto it = pruned.find(v.identity()); it != pruned.end()) return it->second;
    Value out;
    switch (v.kind()) {
      case Value::Kind::Dict: {
        out = Value::dict();
        for (const auto& [k, x] : v.pairs())
          if (!only_tensors(x)) out.insert(k, prune(x));
        break;
      }
      case Value::Kind::List:
      case Value::Kind::Tuple: {
        // Keep positions: a tensor item shows as its description.
        Value::Items items;
        items.reserve(v.items().size());
        for (const auto& i : v.items())
          items.push_back(i.is(Value::Kind::Tensor)
                              ? Value::str("<tensor " + i.as_tensor().description() + ">")
                              : prune(i));
        out = v.is(Value::Kind::List) ? Value::list(std::move(items))
                                      : Value::tuple(std::move(items));
        break;
      }
      default: {
        const auto& o = v.as_object();
        out = Value::object(o.cls, o.args, o.offset, o.newobj);
        if (!o.state.is_none()) out.set_state(prune(o.state));
        break;
      }
    }
    pruned.emplace(v.identity(), out);
    return out;
  }
};

}  // namespace

Value prune_tensors(const Value& v) {
  Pruner p;
  return p.prune(v);
}

namespace {

void add_dropped(const Value& v, std::string& name,
                 const std::function<bool(std::string_view)>& keep, DroppedValues& out) {
  const std::size_t n = name.size();
  const auto child = [&](const std::string& key, const Value& x) {
    if (!name.empty()) name += '.';
    name += key;
    add_dropped(x, name, keep, out);
    name.resize(n);
  };
  // `what` is made only for the first five (a repr costs its value's size).
  const auto dropped = [&](const auto& what) {
    if (name.empty() || (keep && !keep(name))) return;
    if (++out.count <= 5) out.first.push_back(name + " (" + what() + ")");
  };
  switch (v.kind()) {
    case Value::Kind::None:
      return;
    case Value::Kind::Tensor:
      if (v.is_numpy_array()) dropped([] { return std::string("a numpy array"); });
      return;
    case Value::Kind::Dict:
      for (const auto& [k, x] : v.pairs())
        child(k.is(Value::Kind::Str) ? k.as_str() : k.repr(2), x);
      return;
    case Value::Kind::List:
    case Value::Kind::Tuple:
    case Value::Kind::Set: {
      std::size_t i = 0;
      for (const auto& x : v.items()) child(std::to_string(i++), x);
      return;
    }
    case Value::Kind::Object: {
      // A module: its tensors are the catalogue. An object with a state (a
      // nested tensor's components, an argparse.Namespace's fields): what
      // that state holds. Otherwise the object is one value.
      const Value& state = v.as_object().state;
      if (state.is(Value::Kind::Dict) && state.find("_parameters") && state.find("_modules"))
        return;
      if (state.is_container()) {
        add_dropped(state, name, keep, out);
        return;
      }
      [[fallthrough]];
    }
    default:
      dropped([&] { return v.repr(1).substr(0, 40); });
  }
}

}  // namespace

std::string DroppedValues::names() const {
  std::string s;
  for (const auto& n : first) s += (s.empty() ? "" : ", ") + n;
  return s + (count > first.size() ? ", ..." : "");
}

DroppedValues dropped_values(const Value& root, const std::function<bool(std::string_view)>& keep) {
  DroppedValues out;
  std::string name;
  add_dropped(root, name, keep, out);
  return out;
}

}  // namespace torchport
