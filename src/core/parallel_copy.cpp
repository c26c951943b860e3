#include "torchport/detail/parallel_copy.hpp"
#include "torchport/detail/work.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <thread>

namespace torchport::detail {

namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it (EINVAL), harmlessly
#endif

// Pieces end at 2 MiB boundaries of the destination, the span one page
// table page maps; a thread takes 16 MiB of destination at a time (aligned:
// two threads never fault pages under the same page-table lock) and faults
// it in 2 MiB at a time. Cold, 16 MiB of file in order per thread keeps the
// kernel's readahead going: with 2 MiB units the two threads' interleaved
// reads defeated it (15.6 s against 3.4 s for 6.1 GB, docs/loading.md).
constexpr std::uintptr_t kPage = std::uintptr_t{2} << 20;
constexpr std::uintptr_t kWindow = std::uintptr_t{16} << 20;

std::uintptr_t window_of(const std::byte* p, std::uintptr_t size) {
  return reinterpret_cast<std::uintptr_t>(p) / size;
}

// Faults in the pages under [first, last) for writing, in one call. Whole
// pages around it: a neighbour's bytes in the same page are ours too (one
// arena, or a heap page they already share). Failure is harmless (kernels
// before 5.14 refuse the advice): the copy then faults the pages itself.
void populate(const std::byte* first, const std::byte* last) noexcept {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(first) & ~(page - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(last) + page - 1) & ~(page - 1);
  count(work().page_advice);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

// A run: jobs that follow each other in one source, read together. Records
// smaller than kDirect, and the bytes between records (zip headers,
// padding: at most kRunGap), are read into a bounce buffer of up to kBounce
// bytes and copied out from there; larger pieces are read straight into
// their destination. A run spans at most kRunBytes of the source, so a
// thread still faults in and fills its destination 2 MiB at a time.
// From a mapped file a run is one system call (`FileBacking::read_run`);
// from a file read by ranges (`MapOptions::pread`), one read a large piece
// and one a stretch of the bounce buffer between them.
constexpr std::size_t kRunGap = 4096;
constexpr std::size_t kDirect = std::size_t{64} << 10;
constexpr std::size_t kBounce = std::size_t{1} << 20;
constexpr std::size_t kRunBytes = std::size_t{2} << 20;
constexpr std::size_t kRunPieces = 1024;  // IOV_MAX

// Where a job's bytes lie: in a mapped file (read_run), in what a range
// reader reads (a local file read by ranges; a remote source is batched by
// its callers instead), or neither (memory, a deferred storage).
struct Place {
  const FileBacking* file = nullptr;
  const RangeReader* reader = nullptr;
  std::uint64_t at = 0;  // address in the mapping, or offset in what the reader reads
  bool runs() const noexcept { return file != nullptr || reader != nullptr; }
};

Place place_of(const CopyJob& j) noexcept {
  Place p;
  if (j.src->reads_file()) {
    p.file = j.src->file().get();
    p.at = reinterpret_cast<std::uintptr_t>(j.src->file_data()) + j.offset;
  } else if (const RangeReader* r = j.src->range_reader(); r != nullptr && !r->batches()) {
    p.reader = r;
    p.at = j.src->range_offset() + j.offset;
  }
  return p;
}

// Whether a job at `p` may follow a run of `run`'s source that ends at `end`.
bool follows(const Place& p, const Place& run, std::uint64_t end) noexcept {
  return p.runs() && p.file == run.file && p.reader == run.reader && p.at >= end &&
         p.at - end <= kRunGap;
}

// What a thread reads runs with.
struct RunBuffers {
  std::vector<std::byte> bounce;
  std::vector<std::span<std::byte>> pieces;
};

// The end of the run that starts at job `first` (jobs up to `last`).
// `places`: each job's place, taken once before any copy (a deferred
// storage that another thread makes meanwhile stops reading its file, but
// its file's bytes stay where they were: a run keeps reading them).
std::size_t run_end(const std::vector<CopyJob>& jobs, const std::vector<Place>& places,
                    std::size_t first, std::size_t last) {
  const Place& p0 = places[first];
  if (!p0.runs()) return first + 1;
  // Pieces: each large record one, each stretch of the bounce buffer
  // between them one (counted with the large record before it).
  std::size_t end = first + 1, pieces = 2;
  std::size_t bounce = jobs[first].dst.size() < kDirect ? jobs[first].dst.size() : 0;
  std::uint64_t at = p0.at + jobs[first].dst.size();
  for (; end < last; ++end) {
    const CopyJob& j = jobs[end];
    const Place& p = places[end];
    if (!follows(p, p0, at)) break;
    const std::size_t gap = static_cast<std::size_t>(p.at - at);
    const std::size_t more = gap + (j.dst.size() < kDirect ? j.dst.size() : 0);
    const std::size_t more_pieces = j.dst.size() < kDirect ? 0 : 2;
    if (bounce + more > kBounce || pieces + more_pieces > kRunPieces ||
        p.at + j.dst.size() - p0.at > kRunBytes)
      break;
    bounce += more;
    pieces += more_pieces;
    at = p.at + j.dst.size();
  }
  return end;
}

// Copies the jobs [first, end), a run (see `run_end`).
void copy_run(const std::vector<CopyJob>& jobs, const std::vector<Place>& places, std::size_t first,
              std::size_t end, RunBuffers& buf) {
  const CopyJob& j0 = jobs[first];
  if (end == first + 1) {  // alone: straight into its destination
    j0.src->read_into(j0.offset, j0.dst);
    return;
  }
  const Place& p0 = places[first];
  // The pieces: each large record into its destination, everything else
  // (small records and the gaps between records) into consecutive bytes
  // of the bounce buffer.
  std::size_t bounce = 0;
  std::uint64_t at = p0.at;
  for (std::size_t k = first; k < end; ++k) {
    const std::uint64_t here = places[k].at;
    bounce += static_cast<std::size_t>(here - at);
    if (jobs[k].dst.size() < kDirect) bounce += jobs[k].dst.size();
    at = here + jobs[k].dst.size();
  }
  if (buf.bounce.size() < bounce) buf.bounce.resize(bounce);
  buf.pieces.clear();
  std::size_t used = 0, open = 0;  // bounce bytes taken; those of the piece being built
  const auto close = [&] {
    if (open != 0) buf.pieces.emplace_back(buf.bounce.data() + used - open, open);
    open = 0;
  };
  at = p0.at;
  for (std::size_t k = first; k < end; ++k) {
    const CopyJob& j = jobs[k];
    const std::uint64_t here = places[k].at;
    std::size_t n = static_cast<std::size_t>(here - at);
    if (j.dst.size() < kDirect) {
      n += j.dst.size();
    } else {
      open += n;
      used += n;
      n = 0;
      close();
      buf.pieces.push_back(j.dst);
    }
    open += n;
    used += n;
    at = here + j.dst.size();
  }
  close();
  if (p0.reader != nullptr) {
    std::uint64_t from = p0.at;
    for (const auto& piece : buf.pieces) {
      p0.reader->read(from, piece);
      from += piece.size();
    }
  } else if (!p0.file->read_run(reinterpret_cast<const std::byte*>(p0.at), buf.pieces)) {
    for (std::size_t k = first; k < end; ++k) jobs[k].src->read_into(jobs[k].offset, jobs[k].dst);
    return;
  }
  // The small records, out of the bounce buffer.
  used = 0;
  at = p0.at;
  for (std::size_t k = first; k < end; ++k) {
    const CopyJob& j = jobs[k];
    const std::uint64_t here = places[k].at;
    used += static_cast<std::size_t>(here - at);
    if (j.dst.size() < kDirect) {
      std::memcpy(j.dst.data(), buf.bounce.data() + used, j.dst.size());
      used += j.dst.size();
    }
    at = here + j.dst.size();
  }
}

}  // namespace

void split_copy(const Storage& src, std::span<std::byte> dst, std::vector<CopyJob>& jobs) {
  std::size_t at = 0;
  while (at < dst.size()) {
    const auto addr = reinterpret_cast<std::uintptr_t>(dst.data() + at);
    const std::size_t n = std::min<std::size_t>(kPage - addr % kPage, dst.size() - at);
    jobs.push_back({&src, at, dst.subspan(at, n)});
    at += n;
  }
}

void run_copies(const std::vector<CopyJob>& jobs, const CopyProgress& progress) {
  // Small windows are faulted by the copy itself: a system call costs more.
  constexpr std::size_t kPopulateFrom = std::size_t{64} << 10;
  std::uint64_t total = 0;
  for (const auto& j : jobs) total += j.dst.size();
  // Below ~64 MiB a second thread costs more than it saves.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = total < (std::uint64_t{64} << 20) ? 1u : std::min<unsigned>(cores, 8);
  // Consecutive jobs in one window go to one thread together. The last
  // `threads` windows' worth of destination goes in 2 MiB shares, so that
  // no thread is left alone with a whole 16 MiB at the end.
  const std::byte* last_end =
      jobs.empty() ? nullptr : jobs.back().dst.data() + jobs.back().dst.size();
  const auto tail =
      reinterpret_cast<std::uintptr_t>(last_end) -
      std::min<std::uintptr_t>(reinterpret_cast<std::uintptr_t>(last_end), threads * kWindow);
  auto key = [&](const std::byte* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return a < tail ? a / kWindow * 2 : a / kPage * 2 + 1;
  };
  // Small copies into scattered destinations (each tensor its own
  // allocation) stay together up to a window's worth, so that runs of
  // neighbouring records in the file are read together.
  std::vector<std::size_t> groups;  // first job of each group, then jobs.size()
  std::uint64_t in_group = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const bool small_run = i > 0 && jobs[i].dst.size() < kDirect &&
                           jobs[i - 1].dst.size() < kDirect && in_group < kWindow;
    if (i == 0 || (key(jobs[i].dst.data()) != key(jobs[i - 1].dst.data()) && !small_run)) {
      groups.push_back(i);
      in_group = 0;
    }
    in_group += jobs[i].dst.size();
  }
  groups.push_back(jobs.size());
  std::vector<Place> places(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) places[i] = place_of(jobs[i]);
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  // Entering a 2 MiB span of the destination at job `i`: fault in what the
  // group's jobs from `i` on write of it, in one call when that is enough.
  // (Destinations scattered over the heap, where a span holds a few small
  // copies among other memory, are left to fault: they were in use.)
  auto populate_span = [&](std::size_t i, std::size_t group_end) {
    const std::byte* lo = jobs[i].dst.data();
    const std::byte* hi = lo + jobs[i].dst.size();
    std::size_t bytes = jobs[i].dst.size();
    for (std::size_t k = i + 1;
         k < group_end && window_of(jobs[k].dst.data(), kPage) == window_of(lo, kPage); ++k) {
      const std::byte* at = jobs[k].dst.data();
      lo = std::min(lo, at);
      hi = std::max(hi, at + jobs[k].dst.size());
      bytes += jobs[k].dst.size();
    }
    if (bytes >= kPopulateFrom) populate(lo, hi);
  };
  // `report`: the calling thread's loop, the one that calls `progress`.
  auto work = [&](bool report) {
    RunBuffers buf;
    for (std::size_t g; (g = next.fetch_add(1)) + 1 < groups.size();) {
      if (failed.load()) return;
      if (report && progress) progress(done.load(), total);
      try {
        const std::size_t first = groups[g], last = groups[g + 1];
        std::size_t populated = first;  // jobs whose span was faulted in
        for (std::size_t i = first; i < last;) {
          const std::size_t end = run_end(jobs, places, i, last);
          for (; populated < end; ++populated)
            if (populated == first || window_of(jobs[populated].dst.data(), kPage) !=
                                          window_of(jobs[populated - 1].dst.data(), kPage))
              populate_span(populated, last);
          std::uint64_t bytes = 0;
          for (std::size_t k = i; k < end; ++k) bytes += jobs[k].dst.size();
          copy_run(jobs, places, i, end, buf);
          done += bytes;
          i = end;
        }
      } catch (...) {
        if (!failed.exchange(true)) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, false);
  work(true);
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (progress) progress(total, total);
}

}  // namespace torchport::detail
