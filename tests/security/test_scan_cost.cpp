// Cost tests of `scan` (issue 39): for each shape of input that once cost
// more than its size, a generator at 1x, 4x and 16x, and an assertion that
// the work counted (detail::work(): scan steps, bytes inflated, output room
// made ready, items put into containers, characters of the JSON report)
// grows at most linearly with it. Counted, not timed: a loaded machine
// cannot fail them. The shapes: stacked pickles, compressed members (gzip
// and bzip2 streams), distinct globals (in one pickle, walked past the VM,
// and across folded pickles), folder depth, memo-shared containers given to
// allow-listed constructors, a key-value store whose items share pages.

#include <bzlib.h>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include <torchport/torchport.hpp>

#include "support/fixtures.hpp"
#include "torchport/detail/work.hpp"
#include "torchport/formats/scan_json.hpp"

namespace torchport::test {
namespace {

using detail::work;

constexpr std::array<int, 3> kScales = {1, 4, 16};

// Work at 4x may be at most 5 times the work at 1x (linear: 4; quadratic:
// 16), and likewise from 4x to 16x; `slack` absorbs constant costs.
void expect_linear(const std::array<std::uint64_t, 3>& w, const std::array<std::uint64_t, 3>& size,
                   const std::string& what, std::uint64_t slack = 4096) {
  for (int i = 0; i < 2; ++i)
    EXPECT_LE(w[i + 1], 5 * w[i] + slack) << what << ": " << w[i] << " at " << kScales[i] << "x, "
                                          << w[i + 1] << " at " << kScales[i + 1] << "x";
  for (int i = 0; i < 3; ++i)
    std::printf("%s at %2dx: %llu bytes in, %llu work\n", what.c_str(), kScales[i],
                static_cast<unsigned long long>(size[i]), static_cast<unsigned long long>(w[i]));
}

std::uint64_t all_work() {
  return work().scan_steps + work().bytes_inflated + work().bytes_zero_filled +
         work().items_inserted + work().items_moved;
}

// Scans each generated input; the work counted, plus the characters of the
// report's JSON (its size was the cost of stacked pickles: 4.7 GB).
void check(const std::string& what, const std::function<std::string(int)>& make,
           const OpenOptions& o = {}) {
  std::array<std::uint64_t, 3> w{}, size{};
  for (int i = 0; i < 3; ++i) {
    const std::string bytes = make(kScales[i]);
    size[i] = bytes.size();
    work().reset();
    const ScanReport r = scan(borrow(bytes, what), o);
    w[i] = all_work() + scan_json(r).size();
    EXPECT_NE(r.verdict, ScanVerdict::clean) << what << " at " << kScales[i] << "x";
  }
  expect_linear(w, size, what);
}

std::string gzip_of(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string bzip2_of(const std::string& in) {
  unsigned n = static_cast<unsigned>(in.size() + in.size() / 100 + 600);
  std::string out(n, '\0');
  EXPECT_EQ(BZ2_bzBuffToBuffCompress(out.data(), &n, const_cast<char*>(in.data()),
                                     static_cast<unsigned>(in.size()), 1, 0, 0),
            BZ_OK);
  out.resize(n);
  return out;
}

// A payload after all of them, so that each input is unsafe.
const std::string kPayload = "cposix\nsystem\n(S'true'\ntR.";

TEST(ScanCost, StackedPickles) {
  // 16,384 x k two-byte pickles (NONE, STOP), then the payload.
  check("stacked pickles", [](int k) {
    std::string s;
    for (int i = 0; i < 16384 * k; ++i) s += "N.";
    return s + kPayload;
  });
}

TEST(ScanCost, CompressedMembers) {
  // 256 x k gzip members, and as many bzip2 streams, of one small pickle each.
  check("gzip members", [](int k) {
    const std::string one = gzip_of("N.");
    std::string s;
    for (int i = 0; i < 256 * k; ++i) s += one;
    return s + gzip_of(kPayload);
  });
  check("bzip2 streams", [](int k) {
    const std::string one = bzip2_of("N.");
    std::string s;
    for (int i = 0; i < 256 * k; ++i) s += one;
    return s + bzip2_of(kPayload);
  });
}

// GLOBAL modI nameI, called with no arguments, popped: 256 x k distinct globals.
std::string distinct_globals(int k) {
  std::string s;
  for (int i = 0; i < 256 * k; ++i)
    s += "cmod" + std::to_string(i) + "\nname" + std::to_string(i) + "\n)R0";
  return s;
}

TEST(ScanCost, DistinctGlobals) {
  // Run by the VM.
  check("distinct globals (VM)", [](int k) { return "\x80\x02" + distinct_globals(k) + "N."; });
  // Walked opcode by opcode after the VM stops (BINPERSID: no loader behind it).
  check("distinct globals (walked)",
        [](int k) { return std::string("\x80\x02)Q", 4) + distinct_globals(k) + "N."; });
  // One each in many stacked pickles, past the 64 a report lists: folded.
  check("distinct globals (folded)", [](int k) {
    std::string s;
    for (int i = 0; i < 256 * k; ++i)
      s += "cmod" + std::to_string(i) + "\nname" + std::to_string(i) + "\n)R.";
    return s;
  });
}

TEST(ScanCost, MemoSharedContainers) {
  // One tuple of 1,024 x k ints, memoized, given to torch.Size 64 x k
  // times: shared, not copied (200 calls on a 100,000-int tuple: 1.26 GB).
  check("torch.Size of a memo-shared tuple", [](int k) {
    std::string s = "\x80\x02(";
    for (int i = 0; i < 1024 * k; ++i) s += "K\x01";
    s += std::string("tq\x01", 3) + "0(";
    for (int i = 0; i < 64 * k; ++i) s += std::string("ctorch\nSize\nh\x01\x85R", 16);
    return s + "l0" + kPayload;
  });
  // A memo-shared list given to set(): Python copies it each time; the
  // copies count against Limits::max_constructed_bytes, which bounds them.
  OpenOptions o;
  o.limits.max_constructed_bytes = 1 << 20;
  std::array<std::uint64_t, 3> w{};
  for (int i = 0; i < 3; ++i) {
    const int k = kScales[i];
    std::string s = "\x80\x02(";
    for (int j = 0; j < 1024 * k; ++j) s += "K\x01";
    s += std::string("lq\x01", 3) + "0(";
    for (int j = 0; j < 64 * k; ++j) s += std::string("cbuiltins\nset\nh\x01\x85R", 18);
    s += "l.";
    work().reset();
    const ScanReport r = scan(borrow(s, "set.pkl"), o);
    w[i] = work().items_inserted + work().items_moved;
    EXPECT_EQ(r.verdict, ScanVerdict::unscannable) << k << ": " << r.reason();  // the limit
  }
  for (int i = 0; i < 3; ++i)
    EXPECT_LE(w[i], 4 * (std::uint64_t{1} << 20) / sizeof(Value) + 64 * 1024 * 16) << w[i];
}

TEST(ScanCost, FolderDepth) {
  std::array<std::uint64_t, 3> w{}, size{};
  for (int i = 0; i < 3; ++i) {
    const int depth = 32 * kScales[i];
    const auto root = temp_dir("scan_cost_depth_" + std::to_string(depth));
    std::filesystem::path p = root;
    for (int d = 0; d < depth; ++d) p /= "d";
    std::filesystem::create_directories(p);
    std::ofstream(p / "payload.pkl", std::ios::binary) << kPayload;
    size[i] = static_cast<std::uint64_t>(depth);
    work().reset();
    const std::vector<ScanReport> rs = scan_directory(root);
    w[i] = work().scan_steps;
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].verdict, ScanVerdict::unsafe);
    std::filesystem::remove_all(root);
  }
  expect_linear(w, size, "folder depth", 256);
}

// Berkeley DB's hash (dbm.ndbm) whose 26 x 8k items all name one
// overflow chain of 8k pages: read whole, each item would cost the chain
// again (quadratic); the store's values are capped at twice its bytes.
// An inline payload item keeps each input from being clean.
std::string shared_overflow_store(int k) {
  constexpr std::size_t page = 512;
  const std::size_t hash_pages = 8 * static_cast<std::size_t>(k);
  const std::size_t chain = 8 * static_cast<std::size_t>(k);
  std::string f((1 + hash_pages + chain) * page, '\0');
  const auto put16 = [&](std::size_t at, std::size_t v) {
    f[at] = static_cast<char>(v & 0xff);
    f[at + 1] = static_cast<char>(v >> 8);
  };
  const auto put32 = [&](std::size_t at, std::size_t v) {
    for (std::size_t i = 0; i < 4; ++i) f[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put32(12, 0x061561);  // the metadata page: magic, version 9, page size, type 8
  put32(16, 9);
  put32(20, page);
  f[25] = 8;
  const std::size_t first_overflow = 1 + hash_pages;
  for (std::size_t p = 1; p <= hash_pages; ++p) {
    const std::size_t base = p * page;
    f[base + 25] = 13;  // P_HASH
    std::size_t end = page;
    std::size_t n = 0;
    const auto item = [&](const std::string& bytes) {
      end -= bytes.size();
      f.replace(base + end, bytes.size(), bytes);
      put16(base + 26 + 2 * n, end);
      ++n;
    };
    for (int pair = 0; pair < 26; ++pair) {
      item(std::string("\x01k", 2));  // H_KEYDATA "k"
      if (p == 1 && pair == 0) {
        item("\x01" + kPayload);  // H_KEYDATA: the payload
        continue;
      }
      std::string off(12, '\0');  // H_OFFPAGE: first page, total length
      off[0] = 3;
      for (std::size_t i = 0; i < 4; ++i) {
        off[4 + i] = static_cast<char>((first_overflow >> (8 * i)) & 0xff);
        off[8 + i] = static_cast<char>(((chain * 400) >> (8 * i)) & 0xff);
      }
      item(off);
    }
    put16(base + 20, n);
  }
  for (std::size_t c = 0; c < chain; ++c) {
    const std::size_t base = (first_overflow + c) * page;
    f[base + 25] = 7;  // P_OVERFLOW, 400 bytes on it, then the next page
    put16(base + 22, 400);
    if (c + 1 < chain) put32(base + 16, first_overflow + c + 1);
    if (c == 0) f.replace(base + 26, 2, "N.");
  }
  return f;
}

TEST(ScanCost, KeyValueStoreSharingOverflowPages) {
  check("Berkeley DB items sharing an overflow chain", shared_overflow_store);
}

}  // namespace
}  // namespace torchport::test
