// Tensor views: bounds checks, strided copies, reshapes.

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "torchport/core/error.hpp"
#include "torchport/core/tensor.hpp"
#include "torchport/core/value.hpp"
#include "torchport/formats/prune.hpp"

using namespace torchport;

namespace {

Tensor arange(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor::from(std::span<const float>(v), {n});
}

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  auto s = c.span<float>();
  return {s.begin(), s.end()};
}

TEST(Tensor, TransposeAndNarrowAreViews) {
  const Tensor m = arange(6).reshape({2, 3});
  const Tensor t = m.transpose(0, 1);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.storage(), m.storage());
  EXPECT_EQ(values(t), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(values(m.narrow(1, 1, 2)), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(values(m.permute(std::vector<std::int64_t>{1, 0})), values(t));
}

// Whether writing a tensor's bytes could change another handle's (what an
// owned typed load asks before copying into a field in place).
TEST(Tensor, IsUnsharedUntilAnotherHandleOrViewShares) {
  Tensor t = Tensor::zeros(DType::F32, {2, 3});
  EXPECT_TRUE(t.is_unshared());
  {
    const Tensor copy = t;
    EXPECT_FALSE(t.is_unshared());
    EXPECT_FALSE(copy.is_unshared());
  }
  EXPECT_TRUE(t.is_unshared());
  {
    const Tensor view = t.reshape({3, 2});  // a new body over the same storage
    EXPECT_FALSE(t.is_unshared());
    EXPECT_FALSE(view.is_unshared());
  }
  EXPECT_TRUE(t.is_unshared());
  EXPECT_FALSE(Tensor().is_unshared());
}

TEST(Tensor, ZeroStrideExpands) {
  const Tensor col = arange(3);
  const Tensor e(DType::F32, {3, 2}, {1, 0}, 0, col.storage());
  EXPECT_EQ(values(e), (std::vector<float>{0, 0, 1, 1, 2, 2}));
}

TEST(Tensor, ViewsMustFitTheirStorage) {
  const Tensor x = arange(4);
  EXPECT_THROW(Tensor(DType::F32, {5}, {1}, 0, x.storage()), Error);
  EXPECT_THROW(Tensor(DType::F32, {2}, {1}, 3, x.storage()), Error);
  EXPECT_THROW(Tensor(DType::F64, {3}, {1}, 0, x.storage()), Error);
  EXPECT_THROW(Tensor(DType::F32, {2}, {-1}, 1, x.storage()), Error);
  EXPECT_THROW(Tensor(DType::F32, {1ll << 40, 1ll << 40}, {1, 1}, 0, x.storage()), Error);
  EXPECT_NO_THROW(
      Tensor(DType::F32, {0, 100}, {100, 1}, 0, x.storage()));  // empty: reaches nothing
  try {
    Tensor(DType::F32, {2, 3}, {3, 1}, 0, x.storage());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::corrupt);
    EXPECT_NE(std::string(e.what()).find("needs 6 elements but its storage has 16 bytes"),
              std::string::npos)
        << e.what();
  }
}

TEST(Tensor, ZeroDimAndEmpty) {
  const Tensor s = Tensor::scalar(2.5f);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.span<float>()[0], 2.5f);
  const Tensor e = Tensor::zeros(DType::F32, {2, 0});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_TRUE(e.bytes().empty());
  EXPECT_TRUE(e.equal(e.clone()));
}

TEST(Tensor, ReshapeChecksCounts) {
  EXPECT_EQ(arange(12).reshape({3, -1}).shape(), (Shape{3, 4}));
  EXPECT_THROW(arange(12).reshape({5, -1}), Error);
  EXPECT_THROW(arange(6).reshape({2, 3}).transpose(0, 1).reshape({6}), Error);
}

TEST(Tensor, TypedAccessChecksDtype) {
  const Tensor x = arange(2);
  EXPECT_THROW(x.span<double>(), Error);
  EXPECT_THROW(Tensor::from<float>({1.0f, 2.0f}, {3}), Error);
  const Tensor h = x.to(DType::F16);
  EXPECT_EQ(h.span<Half>().size(), 2u);
  EXPECT_EQ(h.span<std::uint16_t>()[1], 0x3c00u);  // 1.0
}

TEST(Value, DictsKeepOrderAndReplaceRepeatedKeys) {
  Value d = Value::dict();
  for (int i = 0; i < 20; ++i) d.insert(Value::integer(i), Value::str(std::to_string(i)));
  d.insert(Value::integer(3), Value::str("three"));
  d.insert(Value::boolean(true), Value::str("one"));  // True == 1 in Python
  EXPECT_EQ(d.size(), 20u);
  EXPECT_EQ(d.pairs()[3].second.as_str(), "three");
  EXPECT_EQ(d.pairs()[1].second.as_str(), "one");
}

TEST(Value, PruneTensorsKeepsScalars) {
  Value d = Value::dict();
  d.insert(Value::str("w"), Value::tensor(arange(2)));
  d.insert(Value::str("epoch"), Value::integer(3));
  Value inner = Value::dict();
  inner.insert(Value::str("b"), Value::tensor(arange(1)));
  d.insert(Value::str("sd"), inner);
  const Value p = prune_tensors(d);
  EXPECT_EQ(p.size(), 1u);
  EXPECT_EQ(p.find("epoch")->as_int(), 3);
  EXPECT_EQ(to_json(p), "{\"epoch\":3}");
}

// What a tensor file would drop: every value but tensors, numpy arrays
// included (torch.load gives them back as arrays), named as keys; a filter
// leaves out what the user dropped.
TEST(Value, DroppedValuesNamesWhatATensorFileWouldLose) {
  Value d = Value::dict();
  d.insert(Value::str("w"), Value::tensor(arange(2)));
  d.insert(Value::str("epoch"), Value::integer(3));
  d.insert(Value::str("none"), Value());
  Value opt = Value::list();
  for (int i = 0; i < 6; ++i) opt.append(Value::real(0.5));
  d.insert(Value::str("lr"), opt);
  d.insert(Value::str("mean"), Value::numpy_array(arange(2)));
  const DroppedValues all = dropped_values(d);
  EXPECT_EQ(all.count, 8u);
  ASSERT_EQ(all.first.size(), 5u);
  EXPECT_EQ(all.first[0], "epoch (3)");
  EXPECT_EQ(all.first[1], "lr.0 (0.5)");
  EXPECT_EQ(all.names(), "epoch (3), lr.0 (0.5), lr.1 (0.5), lr.2 (0.5), lr.3 (0.5), ...");
  const DroppedValues kept =
      dropped_values(d, [](std::string_view n) { return n.substr(0, 2) != "lr"; });
  EXPECT_EQ(kept.count, 2u);
  EXPECT_EQ(kept.names(), "epoch (3), mean (a numpy array)");
  EXPECT_EQ(dropped_values(Value::tensor(arange(1))).count, 0u);
}

// Moving a tensor to another storage keeps its view; an unshared body is
// reused, a shared one is not changed under its other holders.
TEST(Tensor, WithStorageKeepsTheViewAndNeverChangesASharedBody) {
  const auto src = Storage::allocate(16);
  const Tensor t(DType::F32, {2}, {2}, 0, src);
  const Tensor shared = t;  // a second holder of the body
  auto dst = Storage::allocate(16);
  Tensor moved = Tensor(t).with_storage(dst);
  EXPECT_EQ(moved.storage(), dst);
  EXPECT_EQ(t.storage(), src);
  EXPECT_EQ(shared.storage(), src);
  EXPECT_EQ(moved.shape(), (Shape{2}));
  EXPECT_EQ(moved.strides(), (Shape{2}));
  Tensor alone(DType::F32, {2}, {2}, 0, src);
  const Tensor again = std::move(alone).with_storage(dst);
  EXPECT_EQ(again.storage(), dst);
  EXPECT_EQ(again.strides(), (Shape{2}));
  // Too few bytes for the view: refused as the constructor refuses it.
  EXPECT_THROW((void)Tensor(t).with_storage(Storage::allocate(8)), Error);
}

}  // namespace

namespace {

// torch's conj/neg view bits: elements resolved on access, one resolved
// storage per file storage however many views name it (a file of many
// conj views of one storage must not cost a copy each).
TEST(ViewBits, ResolvedOnAccessAndSharedByEveryView) {
  const Tensor base = Tensor::from({1.f, 2.f}, {2});
  // complex64 [2] = (1, 2), (-3, 4) over raw float pairs
  auto st = Storage::allocate(16);
  const float raw[4] = {1.f, 2.f, -3.f, 4.f};
  std::memcpy(st->mutable_bytes().data(), raw, sizeof raw);
  const Tensor z(DType::C64, {2}, {1}, 0, st);
  const Tensor conj = z.with_view_bits(true, false);
  EXPECT_TRUE(conj.is_conj());
  EXPECT_FALSE(conj.is_neg());
  EXPECT_EQ(conj.file_storage(), st);
  const auto* v = reinterpret_cast<const float*>(conj.bytes().data());
  EXPECT_EQ(std::vector<float>(v, v + 4), (std::vector<float>{1.f, -2.f, -3.f, -4.f}));
  const Tensor both = z.with_view_bits(true, true);  // -(conj z) = (-re, im)
  const auto* w = reinterpret_cast<const float*>(both.bytes().data());
  EXPECT_EQ(std::vector<float>(w, w + 4), (std::vector<float>{-1.f, 2.f, 3.f, 4.f}));
  const Tensor plain = conj.with_view_bits(false, false);
  EXPECT_EQ(plain.storage(), st);
  EXPECT_FALSE(plain.is_conj());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(z.with_view_bits(true, false).storage(), conj.storage());
  const Tensor neg = base.with_view_bits(false, true);
  const auto* n = reinterpret_cast<const float*>(neg.bytes().data());
  EXPECT_EQ(std::vector<float>(n, n + 2), (std::vector<float>{-1.f, -2.f}));
  const Tensor ints =
      Tensor::from({std::int64_t{5}, std::int64_t{-7}}, {2}).with_view_bits(false, true);
  EXPECT_EQ(ints.span<std::int64_t>()[0], -5);
  EXPECT_EQ(ints.span<std::int64_t>()[1], 7);
  EXPECT_THROW((void)base.with_view_bits(true, false), Error);  // conj of a real tensor
}

}  // namespace
