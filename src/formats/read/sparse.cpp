#include "formats/read/sparse.hpp"

#include <map>
#include <memory>
#include <string>

#include "torchport/core/error.hpp"
#include "torchport/formats/densify.hpp"

namespace torchport::formats::sparse {
namespace {

[[noreturn]] void corrupt(const std::string& what) {
  throw Error(ErrorCode::corrupt, "torch._utils._rebuild_sparse_tensor: " + what);
}

Tensor tensor_arg(const Value& v, const char* what) {
  if (!v.is(Value::Kind::Tensor))
    corrupt(std::string(what) + " is a " + std::string(v.kind_name()) + ", not a tensor");
  return v.as_tensor();
}

SparseParts::Layout layout_of(const Value& v) {
  std::string name;
  if (v.is(Value::Kind::Global) && v.as_global().module == "torch") {
    name = "torch." + v.as_global().name;
  } else if (v.is(Value::Kind::Object) &&
             v.as_object().cls.is("torch.serialization", "_get_layout") &&
             v.as_object().args.size() == 1 && v.as_object().args.items()[0].is(Value::Kind::Str)) {
    name = v.as_object().args.items()[0].as_str();
  } else {
    corrupt("layout " + v.repr(3));
  }
  static const std::map<std::string, SparseParts::Layout> kLayouts = {
      {"torch.sparse_coo", SparseParts::Layout::coo},
      {"torch.sparse_csr", SparseParts::Layout::csr},
      {"torch.sparse_csc", SparseParts::Layout::csc},
      {"torch.sparse_bsr", SparseParts::Layout::bsr},
      {"torch.sparse_bsc", SparseParts::Layout::bsc}};
  auto it = kLayouts.find(name);
  if (it == kLayouts.end()) throw Error(ErrorCode::unsupported, "sparse layout " + name);
  return it->second;
}

Shape size_of(const Value& v) {
  if (!v.is(Value::Kind::Tuple) && !v.is(Value::Kind::List)) corrupt("size " + v.repr(3));
  Shape s;
  for (const auto& x : v.items()) {
    if (!x.is(Value::Kind::Int) || x.as_int() < 0) corrupt("size " + v.repr(8));
    s.push_back(x.as_int());
  }
  return s;
}

}  // namespace

Tensor rebuild(const Value& args, const std::function<Value(const Value&)>& inner) {
  if (!args.is(Value::Kind::Tuple) || args.size() != 2 || !args.items()[1].is(Value::Kind::Tuple))
    corrupt("called with " + args.repr(3) + ", not (layout, data)");
  auto p = std::make_shared<SparseParts>();
  bool coalesced = false;
  p->layout = layout_of(args.items()[0]);
  const auto& d = args.items()[1].items();
  if (p->layout == SparseParts::Layout::coo) {
    if (d.size() != 3 && d.size() != 4)
      corrupt("COO data " + args.items()[1].repr(3) + " is not (indices, values, size)");
    p->indices = tensor_arg(inner(d[0]), "indices");
    p->values = tensor_arg(inner(d[1]), "values");
    p->size = size_of(d[2]);
    // torch 2.x saves whether the tensor was coalesced (None: unknown).
    if (d.size() == 4 && !d[3].is_none() && !d[3].is(Value::Kind::Bool))
      corrupt("is_coalesced " + d[3].repr(2) + " is not a bool");
    coalesced = d.size() == 4 && d[3].is(Value::Kind::Bool) && d[3].as_bool();
  } else {
    if (d.size() != 4)
      corrupt("compressed data " + args.items()[1].repr(3) +
              " is not (compressed_indices, plain_indices, values, size)");
    p->compressed_indices = tensor_arg(inner(d[0]), "compressed indices");
    p->plain_indices = tensor_arg(inner(d[1]), "plain indices");
    p->values = tensor_arg(inner(d[2]), "values");
    p->size = size_of(d[3]);
  }
  // torch.load validates what it rebuilt (_validate_loaded_sparse_tensors;
  // see SparseParts::validate for which releases do): an index outside the
  // size would make later reads (to_dense) reach outside the values.
  validated(*p, coalesced,
            "torch 1.13 to 2.7 always, torch >= 2.14 by default; torch 2.8 to 2.13 load it "
            "unchecked");
  return Tensor::sparse_tensor(std::move(p));
}

void validated(const SparseParts& parts, bool is_coalesced, std::string_view who) {
  try {
    parts.validate(is_coalesced);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::corrupt) throw;
    throw Error(ErrorCode::corrupt,
                e.message() + " (torch.load refuses it too: " + std::string(who) + ")");
  }
}

std::optional<Tensor> legacy_constructor(const Global& g, const Value& args,
                                         const std::function<Value(const Value&)>& inner) {
  if ((g.module != "torch.sparse" && g.module != "torch.cuda.sparse") ||
      !g.name.ends_with("Tensor"))
    return std::nullopt;
  const std::string what = g.qualified();
  if (!dtype_from_storage_class(g.name.substr(0, g.name.size() - 6) + "Storage"))
    throw Error(ErrorCode::unsupported, what + ": not a sparse tensor class torch has");
  if (args.size() != 3)
    throw Error(ErrorCode::unsupported,
                what + " called with " + std::to_string(args.size()) +
                    " arguments: the legacy sparse constructor is read in its (indices, values, "
                    "size) form only (torch never writes it; its weights_only list allows it)");
  auto p = std::make_shared<SparseParts>();
  p->indices = tensor_arg(inner(args.items()[0]), "indices");
  p->values = tensor_arg(inner(args.items()[1]), "values");
  p->size = size_of(args.items()[2]);
  if (p->indices.dtype() != DType::I64)
    throw Error(ErrorCode::corrupt, what + ": indices must be an int64 tensor");
  // (The values keep their dtype, as the constructor keeps it.)
  try {
    validated(*p, false,
              "torch 1.13, 2.7 and, by default, >= 2.14; torch 2.6 and 2.8 to 2.13 load it "
              "unchecked");
  } catch (const Error& e) {
    throw Error(e.code(), what + ": " + e.message());
  }
  return Tensor::sparse_tensor(std::move(p));
}

void refuse_meta(const TensorCatalog& catalog, std::string_view target) {
  for (const auto& t : catalog.tensors())
    if (t.tensor.is_meta())
      throw Error(ErrorCode::invalid_argument,
                  "tensor is a meta tensor (" + t.tensor.description() +
                      "): a dtype and shape without data, which " + std::string(target) +
                      " cannot hold (a .pt file keeps it as torch saved it)",
                  t.name);
}

}  // namespace torchport::formats::sparse

namespace torchport {

TensorCatalog densify_tensors(const TensorCatalog& catalog) {
  std::vector<NamedTensor> out;
  out.reserve(catalog.size());
  for (const auto& t : catalog.tensors()) {
    try {
      out.push_back({t.name, t.tensor.is_sparse() ? t.tensor.to_dense() : t.tensor});
    } catch (const Error& e) {
      throw e.at_key(t.name);
    }
  }
  return catalog.with_tensors(std::move(out), catalog.metadata());
}

void refuse_sparse(const TensorCatalog& catalog, std::string_view target) {
  for (const auto& t : catalog.tensors())
    if (t.tensor.is_sparse())
      throw Error(ErrorCode::invalid_argument,
                  "tensor is sparse (" +
                      std::string(SparseParts::layout_name(t.tensor.sparse()->layout)) + ") and " +
                      std::string(target) +
                      " has no sparse layout: pass --densify (write it dense, densify_tensors)",
                  t.name);
}

void refuse_meta(const TensorCatalog& catalog, std::string_view target) {
  for (const auto& t : catalog.tensors())
    if (t.tensor.is_meta())
      throw Error(ErrorCode::invalid_argument,
                  "tensor is a meta tensor (" + t.tensor.description() +
                      "): a dtype and shape without data, which " + std::string(target) +
                      " cannot hold (a .pt file keeps it as torch saved it)",
                  t.name);
}

}  // namespace torchport
