// The pickle VM on arbitrary bytes, twice: bare (no persistent ids), and as
// torch's readers run it, with storages for every persistent id (sized as
// the id declares, up to 64 KiB) and tensors rebuilt from the inert calls,
// then listed and materialised. Also the opcode statistics scan uses.

#include "formats/read/torch_common.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace torchport;
  const auto bytes = fuzz::as_bytes(data, size);
  const OpenOptions options = fuzz::small_options();
  try {
    ByteReader r(bytes, "fuzz.pkl");
    pickle::Stats stats;
    const Value v = pickle::unpickle(r, options.limits, {}, &stats);
    (void)v.repr();
    (void)to_json(prune_tensors(v));
  } catch (const Error&) {
  }
  try {
    ByteReader r(bytes, "fuzz.pkl");
    auto storages = [](const Value& pid, std::uint64_t) -> Value {
      const formats::StorageRef ref = formats::parse_storage_ref(pid);
      if (ref.nbytes > (64u << 10))
        throw Error(ErrorCode::limit_exceeded, "fuzz: storage too large");
      auto st = Storage::allocate(ref.nbytes);
      auto b = st->mutable_bytes();
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(i);
      return formats::storage_value(ref.dtype, ref.numel, st);
    };
    formats::LoadWalker walker(options);
    const Value root = formats::run_torch_pickle(walker, "fuzz.pkl", r, options, storages);
    fuzz::exercise(TensorCatalog::from_value(Format::pickle, root, options.limits));
  } catch (const Error&) {
  }
  return 0;
}
