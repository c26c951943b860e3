// The key-value stores shelve opens besides dbm.dumb (scan.cpp reads that
// one through its index): every value a loader could unpickle, read as that
// loader reads it. Each reader hands each value to `visit` and answers why
// it could not read the store to its end, or nothing.
//
//   dbm.gnu     through libgdbm, the library Python's _gdbm reads it with
//               (as any store, our fuzzer feeds it damaged ones): every key the
//               store iterates, fetched.
//   dbm.ndbm    Debian's _dbm is Berkeley DB 5.3's ndbm interface over a hash
//               database (NAME.db). libdb was never hardened against hostile
//               files and is no longer maintained, so its hash pages are read
//               here: every data item of every hash page (inline, duplicate
//               sets, overflow chains), a superset of what a lookup returns.
//               What this reading does not cover (checksummed or encrypted
//               pages, off-page duplicate trees, partitions) is unreadable.
//   dbm.sqlite3 (Python 3.13) through libsqlite3, from memory, read-only and
//               defensive, its VM steps bounded: the column `value` of the
//               table Dict, as LOOKUP_KEY reads it; every other table's
//               text and blob cells are handed over as cells other loaders
//               (sqlitedict) may unpickle. A Dict that is a view is
//               unreadable: a view's values may differ from one query to
//               the next.
//
// Work is bounded by `cap` bytes of values (twice the file, and 64 KiB):
// a store whose index lists more than its bytes can hold (buckets or
// overflow pages shared between entries) is unreadable, never walked
// quadratically.

#include <gdbm.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include "formats/scan/scan_detail.hpp"
#include "torchport/detail/work.hpp"

namespace torchport::scan_detail {
namespace {

// The bytes of values read so far, against the cap.
struct Spent {
  std::uint64_t cap;
  std::uint64_t used = 0;
  bool take(std::uint64_t n) {
    detail::count(detail::work().scan_steps);
    used += n + 1;
    return used <= cap;
  }
};

std::string over_cap(std::uint64_t cap) {
  return "its entries list more than " + std::to_string(cap) +
         " bytes of values, more than the file can hold unless entries share their bytes: "
         "not read further";
}

// --- dbm.gnu -----------------------------------------------------------------

struct GdbmClose {
  void operator()(GDBM_FILE f) const { gdbm_close(f); }
};

}  // namespace

StoreRead read_gdbm(std::span<const std::byte> file, const std::string& name, std::uint64_t cap,
                    const StoreVisit& visit) {
  StoreRead out;
  // libgdbm reads a file descriptor: the bytes go to a memory file (they may
  // come from an archive or a remote source).
  const int fd = memfd_create("torchport-scan-gdbm", MFD_CLOEXEC);
  if (fd < 0) {
    out.unreadable = std::string("no memory file for libgdbm: ") + std::strerror(errno);
    return out;
  }
  for (std::size_t at = 0; at < file.size();) {
    const ssize_t n = ::write(fd, file.data() + at, file.size() - at);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      out.unreadable = std::string("writing the memory file for libgdbm: ") + std::strerror(errno);
      ::close(fd);
      return out;
    }
    at += static_cast<std::size_t>(n);
  }
  ::lseek(fd, 0, SEEK_SET);
  // As Python's dbm.gnu.open(NAME, "r") opens it (GDBM_READER); no lock on
  // a file of our own. GDBM_CLOERROR: the descriptor is closed on failure.
  std::unique_ptr<gdbm_file_info, GdbmClose> db(
      gdbm_fd_open(fd, name.c_str(), 0, GDBM_READER | GDBM_NOLOCK | GDBM_CLOERROR, nullptr));
  if (!db) {
    out.unreadable = std::string("libgdbm does not open it: ") + gdbm_strerror(gdbm_errno);
    return out;
  }
  Spent spent{cap};
  // A directory naming one bucket in places apart lists its keys again.
  std::set<std::string> keys;
  // Each key libgdbm hands out is ours to free, also when a visit throws.
  using Owned = std::unique_ptr<char, decltype(&std::free)>;
  datum key = gdbm_firstkey(db.get());
  for (Owned held(key.dptr, &std::free); key.dptr != nullptr;) {
    std::string k(key.dptr, static_cast<std::size_t>(key.dsize));
    if (!spent.take(k.size())) {
      out.unreadable = over_cap(cap);
      return out;
    }
    if (keys.insert(k).second) {
      datum value = gdbm_fetch(db.get(), key);
      if (value.dptr == nullptr) {
        if (gdbm_last_errno(db.get()) != GDBM_ITEM_NOT_FOUND) {
          out.unreadable = std::string("libgdbm stops at a value: ") + gdbm_db_strerror(db.get());
          return out;
        }
        gdbm_clear_error(db.get());
      } else {
        const Owned owned(value.dptr, &std::free);
        if (!spent.take(static_cast<std::uint64_t>(value.dsize))) {
          out.unreadable = over_cap(cap);
          return out;
        }
        visit({k,
               std::span(reinterpret_cast<const std::byte*>(value.dptr),
                         static_cast<std::size_t>(value.dsize)),
               std::nullopt, true});
      }
    }
    key = gdbm_nextkey(db.get(), key);
    held.reset(key.dptr);  // frees the key just read past
  }
  if (const gdbm_error e = gdbm_last_errno(db.get());
      e != GDBM_ITEM_NOT_FOUND && e != GDBM_NO_ERROR)
    out.unreadable = std::string("libgdbm stops listing its keys: ") + gdbm_db_strerror(db.get());
  return out;
}

// --- dbm.ndbm (Berkeley DB's hash) -------------------------------------------

StoreRead read_berkeley_hash(std::span<const std::byte> file, std::uint64_t cap,
                             const StoreVisit& visit) {
  StoreRead out;
  const auto fail = [&](std::string why) {
    out.unreadable = std::move(why);
    return out;
  };
  if (file.size() < 512) return fail("shorter than Berkeley DB's 512-byte metadata page");
  const auto byte = [&](std::size_t at) { return static_cast<std::uint32_t>(file[at]); };
  // The magic in the file's byte order; Berkeley DB swaps pages of the
  // other order as it reads them.
  const bool swap = (byte(12) | byte(13) << 8 | byte(14) << 16 | byte(15) << 24) != 0x061561;
  const auto u16 = [&](std::size_t at) {
    return swap ? byte(at) << 8 | byte(at + 1) : byte(at) | byte(at + 1) << 8;
  };
  const auto u32 = [&](std::size_t at) {
    return swap ? byte(at) << 24 | byte(at + 1) << 16 | byte(at + 2) << 8 | byte(at + 3)
                : byte(at) | byte(at + 1) << 8 | byte(at + 2) << 16 | byte(at + 3) << 24;
  };
  // DBMETA: version at 16, pagesize at 20, encrypt_alg at 24, type at 25,
  // metaflags at 26 (DBMETA_CHKSUM 0x01), nparts at 36.
  const std::uint32_t version = u32(16);
  const std::uint32_t page = u32(20);
  if (byte(25) != 8)
    return fail("not a Berkeley DB hash database (metadata page type " + std::to_string(byte(25)) +
                ")");
  if (version < 8 || version > 9)
    return fail("Berkeley DB hash version " + std::to_string(version) +
                ", which Berkeley DB 5.3 reads only after an upgrade");
  if (page < 512 || page > 65536 || (page & (page - 1)) != 0)
    return fail("a page size of " + std::to_string(page) + " bytes");
  if (byte(24) != 0) return fail("encrypted pages");
  if ((byte(26) & 0x01) != 0) return fail("checksummed pages, which this reading does not cover");
  if (u32(36) > 1) return fail("a partitioned database (its other parts are other files)");
  if (file.size() % page != 0)
    return fail("not a whole number of " + std::to_string(page) + "-byte pages");
  const std::uint64_t pages = file.size() / page;
  Spent spent{cap};
  constexpr std::size_t kHeader = 26;  // SIZEOF_PAGE: the index array follows
  for (std::uint64_t p = 1; p < pages; ++p) {
    const std::size_t base = static_cast<std::size_t>(p * page);
    const std::uint32_t type = byte(base + 25);
    if (type != 13 && type != 2) continue;  // P_HASH, P_HASH_UNSORTED
    const std::uint32_t entries = u16(base + 20);
    const std::string where = "page " + std::to_string(p);
    if (kHeader + 2 * static_cast<std::size_t>(entries) > page)
      return fail(where + " lists " + std::to_string(entries) + " items, more than it holds");
    std::string key;
    for (std::uint32_t j = 0; j < entries; ++j) {
      const std::uint32_t at = u16(base + kHeader + 2 * j);
      const std::uint32_t end = j == 0 ? page : u16(base + kHeader + 2 * (j - 1));
      if (at < kHeader + 2 * entries || at >= end || end > page)
        return fail(where + " item " + std::to_string(j) + " lies outside its page");
      const auto item = file.subspan(base + at, end - at);
      const auto kind = static_cast<std::uint8_t>(item[0]);
      if (j % 2 == 0) {  // a key: named, never unpickled (shelve decodes it as text)
        key = kind == 1 ? std::string(reinterpret_cast<const char*>(item.data()) + 1,
                                      std::min<std::size_t>(item.size() - 1, 200))
                        : "(key " + std::to_string(j / 2) + " of " + where + ")";
        continue;
      }
      switch (kind) {
        case 1:  // H_KEYDATA
          if (!spent.take(item.size())) return fail(over_cap(cap));
          visit({key, item.subspan(1), base + at + 1, true});
          break;
        case 2: {  // H_DUPLICATE: len, element, len; each a value
          for (std::size_t d = 1; d < item.size();) {
            if (d + 2 > item.size()) return fail(where + ": a duplicate set ends mid-length");
            const std::size_t n = u16(base + at + d);
            if (d + 4 + n > item.size() || u16(base + at + d + 2 + n) != n)
              return fail(where + ": a duplicate set's lengths disagree");
            if (!spent.take(n)) return fail(over_cap(cap));
            visit({key, item.subspan(d + 2, n), base + at + d + 2, true});
            d += 4 + n;
          }
          break;
        }
        case 3: {  // H_OFFPAGE: type, 3 unused, first page, total length
          if (item.size() < 12) return fail(where + ": an overflow reference is short");
          std::uint32_t next = u32(base + at + 4);
          const std::uint32_t total = u32(base + at + 8);
          if (total > file.size()) return fail(where + ": an overflow value longer than the file");
          std::string bytes;
          bytes.reserve(total);
          for (std::uint64_t steps = 0; next != 0 && bytes.size() < total; ++steps) {
            if (next >= pages || steps >= pages)
              return fail(where + ": an overflow chain leaves the file or loops");
            const std::size_t ob = static_cast<std::size_t>(std::uint64_t{next} * page);
            if (byte(ob + 25) != 7)
              return fail(where + ": an overflow chain reaches page " + std::to_string(next) +
                          ", which is not an overflow page");
            const std::uint32_t len = u16(ob + 22);  // OV_LEN: the bytes on this page
            if (kHeader + len > page)
              return fail("overflow page " + std::to_string(next) + " claims more than it holds");
            const std::size_t take = std::min<std::size_t>(len, total - bytes.size());
            if (!spent.take(take)) return fail(over_cap(cap));
            bytes.append(reinterpret_cast<const char*>(file.data()) + ob + kHeader, take);
            next = u32(ob + 16);
          }
          if (bytes.size() < total)
            return fail(where + ": an overflow chain ends before its " + std::to_string(total) +
                        " bytes");
          visit({key, std::as_bytes(std::span(bytes)), std::nullopt, true});
          break;
        }
        case 4:
          return fail(where + ": off-page duplicates, which this reading does not cover");
        default:
          return fail(where + ": an item of type " + std::to_string(kind));
      }
    }
  }
  return out;
}

// --- dbm.sqlite3 --------------------------------------------------------------

namespace {

struct SqliteClose {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
struct StatementFinalize {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Statement = std::unique_ptr<sqlite3_stmt, StatementFinalize>;

// VM steps left: about 64 a byte of the file, enough for any read of a
// table's rows; a schema made to loop is stopped.
int progress(void* left) {
  auto& n = *static_cast<std::int64_t*>(left);
  n -= 1000;
  return n < 0 ? 1 : 0;
}

std::string quoted(const std::string& name) {
  std::string q = "\"";
  for (const char c : name) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

StoreRead read_sqlite(std::span<const std::byte> file, std::uint64_t cap, const StoreVisit& visit) {
  StoreRead out;
  out.is_store = false;
  sqlite3* raw = nullptr;
  if (sqlite3_open_v2(":memory:", &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    out.unreadable = "libsqlite3 does not open a connection";
    sqlite3_close(raw);
    return out;
  }
  const std::unique_ptr<sqlite3, SqliteClose> db(raw);
  const auto error = [&](const std::string& what) {
    out.unreadable = what + ": " + sqlite3_errmsg(db.get());
    return out;
  };
  sqlite3_db_config(db.get(), SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db.get(), SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  std::int64_t steps = 1'000'000 + 64 * static_cast<std::int64_t>(file.size());
  sqlite3_progress_handler(db.get(), 1000, progress, &steps);
  // A copy SQLite owns. Python's dbm.sqlite3 sets journal_mode=wal, so its
  // files say WAL (bytes 18 and 19 are 2); with no -wal file beside it (the
  // caller checks) the file alone is the database, which is what a
  // rollback-journal header (1) makes SQLite read from memory.
  auto* copy = static_cast<unsigned char*>(sqlite3_malloc64(file.size()));
  if (copy == nullptr) return error("no memory for the database");
  std::memcpy(copy, file.data(), file.size());
  if (file.size() > 19 && copy[18] == 2 && copy[19] == 2) copy[18] = copy[19] = 1;
  if (sqlite3_deserialize(db.get(), "main", copy, static_cast<sqlite3_int64>(file.size()),
                          static_cast<sqlite3_int64>(file.size()),
                          SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY) !=
      SQLITE_OK)
    return error("libsqlite3 does not read it");
  sqlite3_exec(db.get(), "PRAGMA cell_size_check = ON", nullptr, nullptr, nullptr);
  const auto prepare = [&](const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &s, nullptr);
    return Statement(s);
  };
  // The tables and views (SQLite's names are case-insensitive: Python's
  // "Dict" finds a table named "dict").
  Statement schema =
      prepare("SELECT type, name, sql FROM sqlite_schema WHERE type IN ('table', 'view')");
  if (!schema) return error("its schema does not read");
  struct Table {
    std::string name;
    bool dict;
  };
  std::vector<Table> tables;
  int rc = 0;
  while ((rc = sqlite3_step(schema.get())) == SQLITE_ROW) {
    const auto text = [&](int col) {
      const auto* t = sqlite3_column_text(schema.get(), col);
      return t == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(t));
    };
    const std::string type = text(0), name = text(1), sql = text(2);
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool dict = lower == "dict";
    if (dict && type == "view") {
      out.is_store = true;
      out.unreadable = "its Dict is a view, whose values may differ from one lookup to the next";
      return out;
    }
    std::string head = sql.substr(0, 32);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // Views are queries over tables (read here); a virtual table's module
    // is code of its own, and its storage is in ordinary shadow tables.
    if (type != "table" || lower.starts_with("sqlite_") ||
        head.find("virtual") != std::string::npos)
      continue;
    tables.push_back({name, dict});
    out.is_store = out.is_store || dict;
  }
  if (rc != SQLITE_DONE) return error("its schema does not read to its end");
  Spent spent{cap};
  for (const Table& t : tables) {
    // Dict: as LOOKUP_KEY reads each value; the rest: every cell.
    Statement rows = prepare(t.dict ? "SELECT key, value FROM " + quoted(t.name)
                                    : "SELECT * FROM " + quoted(t.name));
    if (!rows) return error("table " + t.name + " does not read");
    const int columns = sqlite3_column_count(rows.get());
    std::uint64_t row = 0;
    while ((rc = sqlite3_step(rows.get())) == SQLITE_ROW) {
      ++row;
      for (int c = t.dict ? 1 : 0; c < columns; ++c) {
        const int type = sqlite3_column_type(rows.get(), c);
        if (type != SQLITE_BLOB && type != SQLITE_TEXT) continue;
        const auto* data = static_cast<const std::byte*>(sqlite3_column_blob(rows.get(), c));
        const auto n = static_cast<std::size_t>(sqlite3_column_bytes(rows.get(), c));
        if (!spent.take(n)) {
          out.unreadable = over_cap(cap);
          return out;
        }
        std::string key;
        if (t.dict) {
          const auto* k = static_cast<const char*>(sqlite3_column_blob(rows.get(), 0));
          key =
              k == nullptr
                  ? std::string()
                  : std::string(k, std::min<std::size_t>(200, sqlite3_column_bytes(rows.get(), 0)));
        } else {
          key = t.name + " row " + std::to_string(row) + " " + sqlite3_column_name(rows.get(), c);
        }
        visit({key, data == nullptr ? std::span<const std::byte>() : std::span(data, n),
               std::nullopt, t.dict});
      }
    }
    if (rc != SQLITE_DONE)
      return error(steps < 0 ? "table " + t.name + " takes more steps than its bytes allow"
                             : "table " + t.name + " does not read to its end");
  }
  return out;
}

}  // namespace torchport::scan_detail
