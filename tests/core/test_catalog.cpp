// TensorCatalog::from_value takes a state dict apart as it lists it (the
// tree and the list are never both whole), and only a state dict no one
// else holds: root() then makes an equal dict again. Any other tree is
// kept as it is.

#include <string>

#include <gtest/gtest.h>

#include <torchport/torchport.hpp>

#include "support/expect_error.hpp"

namespace torchport::test {
namespace {

Tensor filled(float x) {
  Tensor t = Tensor::empty(DType::F32, {2});
  t.mutable_data<float>()[0] = x;
  t.mutable_data<float>()[1] = -x;
  return t;
}

// Two trees made alike, one to give away and one to compare with.
Value state_dict(bool ordered, const Tensor& a, const Tensor& b) {
  Value d = ordered ? Value::ordered_dict() : Value::dict();
  d.insert(Value::str("layer.weight_with_a_long_name"), Value::tensor(a));
  d.insert(Value::str("b"), Value::tensor(b));
  return d;
}

TEST(CatalogFromValue, AStateDictIsTakenApartAndMadeAgainAlike) {
  for (const bool ordered : {true, false}) {
    const Tensor a = filled(1), b = filled(2);
    const Value expected = state_dict(ordered, a, b);
    const TensorCatalog c = TensorCatalog::from_value(Format::value, state_dict(ordered, a, b));
    EXPECT_TRUE(c.root_is_tensors());
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c.tensors()[0].name, "layer.weight_with_a_long_name");
    EXPECT_EQ(c.tensors()[1].name, "b");
    EXPECT_EQ(c.find("b")->data<float>()[1], -2.f);
    EXPECT_EQ(c.root().is_ordered_dict(), ordered);
    EXPECT_EQ(c.root().repr(), expected.repr());
    EXPECT_EQ(to_json(c.root()), to_json(expected));
    EXPECT_EQ(c.root().find("b")->as_tensor().data<float>(), b.data<float>());
    EXPECT_EQ(c.values().repr(), prune_tensors(expected).repr());
  }
  // With no tensors at all, as prune_tensors has it too.
  const TensorCatalog none = TensorCatalog::from_tensors(Format::value, {});
  ASSERT_TRUE(none.root_is_tensors());
  EXPECT_EQ(none.values().repr(), prune_tensors(Value::dict()).repr());
}

TEST(CatalogFromValue, ATreeTheCallerStillHoldsIsKept) {
  const Value d = state_dict(true, filled(1), filled(2));
  const std::string before = d.repr();
  const TensorCatalog c = TensorCatalog::from_value(Format::value, d);
  EXPECT_FALSE(c.root_is_tensors());
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(d.repr(), before);
  EXPECT_EQ(d.size(), 2u);
  EXPECT_TRUE(d.find("b")->is(Value::Kind::Tensor));
}

TEST(CatalogFromValue, OtherTreesAreKept) {
  // A tensor reached twice (torch gives one object under both keys).
  Value shared = Value::ordered_dict();
  {
    const Value t = Value::tensor(filled(1));
    shared.insert(Value::str("a"), t);
    shared.insert(Value::str("b"), t);
  }
  // A value besides tensors, a key that is not a string, a storage.
  Value epoch = state_dict(true, filled(1), filled(2));
  epoch.insert(Value::str("epoch"), Value::integer(3));
  Value int_key = Value::dict();
  int_key.insert(Value::integer(0), Value::tensor(filled(1)));
  Value storage = Value::dict();
  storage.insert(Value::str("s"), Value::storage(filled(1)));
  for (Value* v : {&shared, &epoch, &int_key, &storage}) {
    const std::string before = v->repr();
    const TensorCatalog c = TensorCatalog::from_value(Format::value, std::move(*v));
    EXPECT_FALSE(c.root_is_tensors()) << before;
    EXPECT_EQ(c.root().repr(), before);
  }
}

TEST(CatalogFromValue, LimitsHoldForAStateDictTakenApart) {
  Limits few;
  few.max_tensors = 1;
  expect_error(
      [&] {
        (void)TensorCatalog::from_value(Format::value, state_dict(true, filled(1), filled(2)), few);
      },
      ErrorCode::limit_exceeded, "max_tensors");
  Limits short_names;
  short_names.max_name_bytes = 8;
  expect_error(
      [&] {
        (void)TensorCatalog::from_value(Format::value, state_dict(true, filled(1), filled(2)),
                                        short_names);
      },
      ErrorCode::limit_exceeded, "max_name_bytes");
}

}  // namespace
}  // namespace torchport::test
