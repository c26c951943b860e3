// How to fill fresh memory with a file's bytes, measured one way per
// process: the experiment behind the owned load's allocation and fill
// strategy (docs/loading.md). bench/fill_strategies.py runs it in each
// memory regime.
//
//   fill_bench [--pages huge|small|adaptive|split] [--populate none|write|touch|piece]
//              [--threads N] [--chunk MiB] [--read pread|mmap|direct|none]
//              [--order shared|spans] [--fadvise none|seq|willneed]
//              FILE...
//
// --pages     huge: the arena is advised MADV_HUGEPAGE; small: MADV_NOHUGEPAGE;
//             adaptive: huge pages while they come fast: each thread
//             populates its piece (MADV_POPULATE_WRITE) and times it; once
//             huge pages average slower than 0.6 ms per 2 MiB (plus 8 ms of
//             slack), the rest of the arena turns to 4 KiB pages;
//             split: the first 256 MiB in 4 KiB pages, the rest huge.
// --populate  none: pages are faulted by the reads; write: one
//             MADV_POPULATE_WRITE over the arena first; touch: each thread
//             writes one byte per page of its pieces before reading them;
//             piece: each thread MADV_POPULATE_WRITEs its piece before reading it.
// --threads   how many threads read (pieces handed out in file order).
// --chunk     the piece size in MiB.
// --read      pread: pread(2) into the arena; mmap: memcpy from a read-only
//             mapping of the file; direct: pread with O_DIRECT; none: one
//             byte is written per page of the pieces (after --populate), and
//             nothing read: what fresh memory costs, without the copy.
// --order     shared: threads take the next piece in file order; spans: each
//             thread reads its own contiguous share of the pieces in order.
// --fadvise   none, seq (POSIX_FADV_SEQUENTIAL) or willneed (POSIX_FADV_WILLNEED
//             over each whole file before reading).
// Prints one JSON object: {"seconds", "bytes"}.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

struct Options {
  std::string pages = "huge";
  std::string populate = "none";
  unsigned threads = 2;
  std::size_t chunk = std::size_t{16} << 20;
  std::string read = "pread";
  std::string order = "shared";
  std::string fadvise = "none";
  std::vector<std::string> files;
};

struct Piece {
  int fd;
  const char* map;  // the file's mapping (--read mmap)
  off_t offset;
  char* dst;
  std::size_t n;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fill_bench: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fill_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--pages")
      o.pages = next();
    else if (a == "--populate")
      o.populate = next();
    else if (a == "--threads")
      o.threads = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--chunk")
      o.chunk = std::stoull(next()) << 20;
    else if (a == "--read")
      o.read = next();
    else if (a == "--order")
      o.order = next();
    else if (a == "--fadvise")
      o.fadvise = next();
    else
      o.files.push_back(a);
  }
  if (o.files.empty()) {
    std::fprintf(stderr, "usage: fill_bench [options] FILE...\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Piece> pieces;
  std::size_t total = 0;
  std::vector<std::pair<int, std::size_t>> files;
  for (const auto& f : o.files) {
    const int fd = ::open(f.c_str(), O_RDONLY | (o.read == "direct" ? O_DIRECT : 0));
    if (fd < 0) die(f);
    struct stat st {};
    ::fstat(fd, &st);
    files.emplace_back(fd, static_cast<std::size_t>(st.st_size));
    if (o.fadvise == "seq") ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    if (o.fadvise == "willneed") ::posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    total += (static_cast<std::size_t>(st.st_size) + 4095) / 4096 * 4096;
  }
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  constexpr std::size_t kSplit = std::size_t{256} << 20;
  const std::size_t length = (total + kHuge - 1) / kHuge * kHuge;
  auto* arena = static_cast<char*>(
      ::mmap(nullptr, length + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (arena == MAP_FAILED) die("mmap");
  arena =
      reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(arena) + kHuge - 1) & ~(kHuge - 1));
  ::madvise(arena, length, o.pages == "small" ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
  if (o.pages == "split") ::madvise(arena, std::min(length, kSplit), MADV_NOHUGEPAGE);
  std::atomic<bool> switched{false};
  std::atomic<long long> huge_ns{0};
  std::atomic<std::size_t> huge_bytes{0};
  if (o.populate == "write" && ::madvise(arena, length, MADV_POPULATE_WRITE) != 0)
    die("MADV_POPULATE_WRITE");
  std::size_t at = 0;
  for (const auto& [fd, size] : files) {
    const char* map = nullptr;
    if (o.read == "mmap" && size > 0) {
      map = static_cast<const char*>(::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0));
      if (map == MAP_FAILED) die("mmap file");
    }
    for (std::size_t off = 0; off < size; off += o.chunk) {
      std::size_t n = std::min(o.chunk, size - off);
      if (o.read == "direct") n = (n + 4095) / 4096 * 4096;  // whole blocks; the tail reads short
      pieces.push_back({fd, map, static_cast<off_t>(off), arena + at + off, n});
    }
    at += (size + 4095) / 4096 * 4096;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::atomic<unsigned> thread_ids{0};
  auto work = [&] {
    const unsigned id = thread_ids.fetch_add(1);
    const std::size_t share = (pieces.size() + o.threads - 1) / o.threads;
    std::size_t own = id * share;
    const std::size_t own_end = std::min(pieces.size(), own + share);
    for (std::size_t i;;) {
      if (o.order == "spans") {
        if (own >= own_end) break;
        i = own++;
      } else if ((i = next.fetch_add(1)) >= pieces.size()) {
        break;
      }
      const Piece& p = pieces[i];
      if (o.populate == "touch")
        for (std::size_t b = 0; b < p.n; b += 4096) p.dst[b] = 0;
      if (o.pages == "adaptive" && !switched.load()) {
        const auto a0 = std::chrono::steady_clock::now();
        if (::madvise(p.dst, (p.n + 4095) / 4096 * 4096, MADV_POPULATE_WRITE) != 0)
          die("MADV_POPULATE_WRITE");
        const auto dt = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - a0)
                            .count();
        const auto spent = huge_ns += dt;
        const auto pages = (huge_bytes += p.n) / kHuge;
        // Huge pages pay while they average under 0.6 ms per 2 MiB (4 KiB
        // pages cost about 1 ms here); 8 ms of slack absorbs one stall.
        if (spent > static_cast<long long>(pages) * 600'000 + 8'000'000 && !switched.exchange(true))
          ::madvise(arena, length, MADV_NOHUGEPAGE);
      } else if (o.populate == "piece" &&
                 ::madvise(p.dst, (p.n + 4095) / 4096 * 4096, MADV_POPULATE_WRITE) != 0)
        die("MADV_POPULATE_WRITE");
      if (o.read == "none") {
        for (std::size_t b = 0; b < p.n; b += 4096) p.dst[b] = 1;
        done += p.n;
        continue;
      }
      if (o.read == "mmap") {
        std::memcpy(p.dst, p.map + p.offset, p.n);
        done += p.n;
        continue;
      }
      std::size_t got = 0;
      while (got < p.n) {
        const ssize_t r = ::pread(p.fd, p.dst + got, p.n - got, p.offset + static_cast<off_t>(got));
        if (r < 0) die("pread");
        if (r == 0) break;
        got += static_cast<std::size_t>(r);
      }
      done += got;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < o.threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"seconds\": %.6f, \"bytes\": %zu, \"switched\": %s}\n", s, done.load(),
              switched.load() ? "true" : "false");
  return 0;
}
