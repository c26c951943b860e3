#pragma once
// What the scan's two files share (internal to src/formats/scan): a file
// scanned with access to the files beside it, which a loader reads together
// (shelve over dbm.dumb reads `NAME.dat` at the offsets `NAME.dir` lists).

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "torchport/formats/scan.hpp"

namespace torchport::scan_detail {

/// Opens the file named `name` in the folder of the file being scanned (a
/// name the scan makes, never one the file holds), or nothing when there
/// is no such regular file (or, in a folder's scan, it lies outside).
using Beside = std::function<std::optional<Source>(const std::string& name)>;

/// `scan(source, options)` of the file `file_name` (its name in its
/// folder), whose neighbours `beside` opens.
ScanReport scan_beside(const Source& source, const OpenOptions& options,
                       const std::string& file_name, const Beside& beside);

/// One value of a key-value store (dbm.cpp): its key (raw, for naming),
/// its bytes, their offset in the file when they lie there whole, and
/// whether shelve unpickles it (false: a cell other loaders may unpickle).
struct StoreValue {
  std::string key;
  std::span<const std::byte> bytes;
  std::optional<std::uint64_t> offset;
  bool shelve = true;
};
using StoreVisit = std::function<void(const StoreValue&)>;

/// What a store's reader got to: why it could not read it to its end, and
/// (SQLite) whether the file is a dbm.sqlite3 store at all (a table Dict).
struct StoreRead {
  std::optional<std::string> unreadable;
  bool is_store = true;
};

/// dbm.gnu, through libgdbm; dbm.ndbm as Debian's Python has it (Berkeley
/// DB's hash); dbm.sqlite3, through libsqlite3. `cap`: the bytes of values
/// read before the store is called unreadable.
StoreRead read_gdbm(std::span<const std::byte> file, const std::string& name, std::uint64_t cap,
                    const StoreVisit& visit);
StoreRead read_berkeley_hash(std::span<const std::byte> file, std::uint64_t cap,
                             const StoreVisit& visit);
StoreRead read_sqlite(std::span<const std::byte> file, std::uint64_t cap, const StoreVisit& visit);

}  // namespace torchport::scan_detail
