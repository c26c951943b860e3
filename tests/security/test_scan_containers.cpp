// scan() reads each container as the Python loader that opens it reads
// it (issue 39): joblib's LZ4 frames and its "ZF" files before 0.10,
// .lzma as liblzma's auto decoder takes it, a skippable frame that is also
// a pickle (both readings judged); and the advisory corpus
// (tests/security/advisory, make_advisory_corpus.py: each payload verified
// to run in its real consumer): every case flagged as its entry says, every
// benign twin clean (or, where a store holds what the scan does not read,
// unscannable), and no line of trust offered for any flagged file; the
// dbm stores shelve opens, damaged byte by byte.

#include <gtest/gtest.h>

#include <lz4frame.h>
#include <sqlite3.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>
#include <torchport/torchport.hpp>

#include "security/scan_text.hpp"
#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

bool finds(const ScanReport& r, const std::string& reason, const std::string& global);

bool names(const ScanReport& r, const std::string& global) {
  for (const auto& f : r.findings)
    if (f.global == global) return true;
  for (const auto& m : r.members)
    if (names(m, global)) return true;
  return false;
}

// A protocol 0 pickle calling posix.system, and a clean protocol 2 one.
const std::string kPayload = "cposix\nsystem\n(S'true'\ntR.";
const std::string kClean = std::string("\x80\x02}q\x00X\x01\x00\x00\x00", 10) + "aK\x01s.";

std::string lz4_frame(const std::string& in) {
  LZ4F_preferences_t prefs{};
  std::string out(LZ4F_compressFrameBound(in.size(), &prefs), '\0');
  const std::size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
  EXPECT_FALSE(LZ4F_isError(n));
  out.resize(n);
  return out;
}

std::string zlib_of(const std::string& in) {
  uLongf n = compressBound(in.size());
  std::string out(n, '\0');
  EXPECT_EQ(compress(reinterpret_cast<Bytef*>(out.data()), &n,
                     reinterpret_cast<const Bytef*>(in.data()), in.size()),
            Z_OK);
  out.resize(n);
  return out;
}

TEST(ScanContainers, Lz4FramesAreDecoded) {
  const ScanReport bad = scan(borrow(lz4_frame(kPayload), "payload.pkl.lz4"));
  EXPECT_EQ(bad.verdict, ScanVerdict::unsafe) << describe(bad);
  EXPECT_EQ(bad.format, "lz4");
  EXPECT_TRUE(names(bad, "posix.system")) << describe(bad);
  const ScanReport good = scan(borrow(lz4_frame(kClean), "clean.pkl.lz4"));
  EXPECT_EQ(good.verdict, ScanVerdict::clean) << describe(good);
  // A frame cut short is never clean.
  const std::string frame = lz4_frame(kClean);
  const ScanReport cut = scan(borrow(frame.substr(0, frame.size() - 3), "cut.pkl.lz4"));
  EXPECT_EQ(scan_exit_code(cut.verdict), 2) << describe(cut);
}

// joblib < 0.10's files, which joblib.load still reads: "ZF", a hex size
// in 19 characters (and a space, from Python 2), then zlib data.
TEST(ScanContainers, JoblibZfileIsInflated) {
  for (const std::string& sep : {std::string(), std::string(" ")}) {
    std::string head = "ZF0x" + std::to_string(kPayload.size());  // any text: joblib parses hex
    head.resize(21, ' ');
    const ScanReport bad = scan(borrow(head + sep + zlib_of(kPayload), "old.joblib"));
    EXPECT_EQ(bad.verdict, ScanVerdict::unsafe) << describe(bad);
    EXPECT_EQ(bad.format, "joblib-zfile");
    EXPECT_TRUE(names(bad, "posix.system")) << describe(bad);
    const ScanReport good = scan(borrow(head + sep + zlib_of(kClean), "old_clean.joblib"));
    EXPECT_EQ(good.verdict, ScanVerdict::clean) << describe(good);
  }
}

// A skippable frame opens Zstandard and LZ4 data alike (zstandard's reader
// steps over it); read as a pickle, its magic is SHORT_BINSTRING (0x55)
// of 0x2a bytes, after which the pickle goes on inside the frame's
// content. Both readings are judged.
TEST(ScanContainers, SkippableFramePolyglotIsJudgedBothWays) {
  std::string content = std::string(36, 'A') + "0" + kPayload;  // '0': POP the string
  std::string frame = "\x55\x2a\x4d\x18";
  for (int i = 0; i < 4; ++i) frame += static_cast<char>((content.size() >> (8 * i)) & 0xff);
  frame += content;
  const ScanReport r = scan(borrow(frame + lz4_frame(kClean), "polyglot.pkl.lz4"));
  EXPECT_EQ(r.format, "lz4");
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe) << describe(r);
  EXPECT_TRUE(names(r, "posix.system")) << describe(r);
  ASSERT_EQ(r.members.size(), 1u);
  EXPECT_EQ(r.members[0].verdict, ScanVerdict::clean) << describe(r);
}

// An .lzma header may ask for a dictionary of up to 4 GiB, which Python's
// lzma.open allocates and liblzma would too: past the decoder's 512 MiB
// limit the stream is refused, and the file is unscannable, never taken
// for "no such stream" (not-a-model-file: exit 0), which its weak magic
// would otherwise allow.
TEST(ScanContainers, AnLzmaStreamAskingTooMuchMemoryIsUnscannable) {
  std::string head("\x5d", 1);
  for (int i = 0; i < 4; ++i) head += static_cast<char>((0xC0000000u >> (8 * i)) & 0xff);  // 3 GiB
  head += std::string(8, '\xff');  // size unknown
  const ScanReport r = scan(borrow(head + kPayload + std::string(64, '\0'), "big.pkl.lzma"));
  EXPECT_EQ(r.verdict, ScanVerdict::unscannable) << describe(r);
  EXPECT_EQ(r.format, "lzma") << describe(r);
  EXPECT_NE(describe(r).find("512 MiB"), std::string::npos) << describe(r);
}

// Zero bytes are an .lzma header (no properties, an empty dictionary, no
// bytes: liblzma decodes an empty stream) and a tar's end block alike. The
// weak magic is a guess: the file is also read as the tar the registry
// tells it as, which a reader skipping zero blocks would read on past:
// refused by open() as ambiguous, unsafe to the scan, never "clean".
TEST(ScanContainers, AWeakMagicIsAGuessTheFileIsAlsoReadAsWhatItLooksLike) {
  const std::string bytes = std::string(1006, '\0') + kClean;
  const Source src = borrow(bytes, "zeros.pt");
  try {
    (void)open(src);
    ADD_FAILURE() << "open() read it";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ambiguous) << e.what();
  }
  const ScanReport r = scan(src);
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe) << describe(r);
  EXPECT_EQ(r.format, "pytorch-tar") << describe(r);
}

// shelve over dbm.dumb: a .dat met without its index is swept block by
// block past the zero padding; an index that does not read (shelve.open
// fails on it) is malformed, and the .dat is still swept.
TEST(ScanContainers, DbmDumbDatIsSweptBlockByBlock) {
  const auto dir = temp_dir("scan_dbm_dumb");
  std::string dat = kClean;
  dat.resize(512, '\0');
  dat += kPayload;
  std::ofstream(dir / "alone.dat", std::ios::binary) << dat;
  const ScanReport alone = scan(dir / "alone.dat");
  EXPECT_EQ(alone.verdict, ScanVerdict::unsafe) << describe(alone);
  std::ofstream(dir / "shelf.dat", std::ios::binary) << dat;
  std::ofstream(dir / "shelf.dir", std::ios::binary) << "'a', (0, 15)\n'b', (512, 1\n";
  const ScanReport broken = scan(dir / "shelf.dat");
  EXPECT_EQ(broken.format, "dbm.dumb");
  EXPECT_EQ(broken.verdict, ScanVerdict::unsafe) << describe(broken);
  EXPECT_TRUE(finds(broken, "malformed", "")) << describe(broken);
  std::ofstream(dir / "shelf.dir", std::ios::binary) << "'a', (0, 15)\n";
  const ScanReport listed = scan(dir / "shelf.dir");  // the index finds its .dat
  EXPECT_EQ(listed.format, "dbm.dumb");
  EXPECT_EQ(listed.verdict, ScanVerdict::unsafe) << describe(listed);
  std::filesystem::remove_all(dir);
}

// --- the other dbm back ends (dbm.gnu, dbm.ndbm, dbm.sqlite3) ---------------

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::filesystem::path kStores =
    std::filesystem::path(TORCHPORT_FIXTURES_DIR) / ".." / "security" / "advisory";

// Each store, cut in half: never clean (its values are not all read), never
// a crash; every byte of it damaged in turn: a report, whatever it says.
TEST(ScanStores, DamagedStoresGiveAReportAndCutOnesAreNeverClean) {
  for (const char* rel : {"shelve_gnu_twin/shelf", "shelve_ndbm_twin/shelf.db",
                          "shelve_ndbm_overflow_twin/shelf.db", "shelve_sqlite_twin/shelf"}) {
    const std::string whole = read_bytes(kStores / rel);
    ASSERT_GT(whole.size(), 4096u) << rel;
    const ScanReport intact = scan(borrow(whole, rel));
    EXPECT_EQ(intact.verdict, ScanVerdict::clean) << rel << ": " << describe(intact);
    // (A last byte no value uses may go: libgdbm and SQLite read every
    // value without it, as the loaders would.)
    const ScanReport cut = scan(borrow(whole.substr(0, whole.size() / 2), rel));
    EXPECT_NE(cut.verdict, ScanVerdict::clean) << rel << " cut in half: " << describe(cut);
    std::size_t reports = 0;
    for (std::size_t at = 0; at < whole.size(); at += 29) {
      for (const char to : {'\xff', '\x00', '\x07'}) {
        std::string bad = whole;
        bad[at] = to;
        try {
          (void)scan(borrow(bad, rel));
          ++reports;
        } catch (const Error& e) {
          ADD_FAILURE() << rel << " with byte " << at << " damaged: scan threw " << e.what();
        }
      }
    }
    EXPECT_GT(reports, whole.size() / 29) << rel;
  }
}

// Berkeley DB's overflow chain that loops back on itself with no bytes on
// its page (Berkeley DB itself would spin): unscannable, named, never
// walked forever.
TEST(ScanStores, ABerkeleyOverflowChainThatLoopsIsUnscannable) {
  const std::string whole = read_bytes(kStores / "shelve_ndbm_overflow_twin/shelf.db");
  const std::size_t page = 4096;
  ASSERT_EQ(static_cast<unsigned char>(whole[20]) | static_cast<unsigned char>(whole[21]) << 8,
            page);
  std::size_t overflow = 0;
  for (std::size_t p = whole.size() / page - 1; p > 0; --p)
    if (whole[p * page + 25] == 7) overflow = p;  // P_OVERFLOW: the first one
  ASSERT_NE(overflow, 0u);
  std::string loop = whole;
  for (std::size_t i = 0; i < 4; ++i)  // next_pgno: itself
    loop[overflow * page + 16 + i] = static_cast<char>((overflow >> (8 * i)) & 0xff);
  loop[overflow * page + 22] = loop[overflow * page + 23] = 0;  // no bytes on it
  const ScanReport r = scan(borrow(loop, "loop.db"));
  EXPECT_EQ(r.verdict, ScanVerdict::unscannable) << describe(r);
  EXPECT_NE(describe(r).find("overflow chain leaves the file or loops"), std::string::npos)
      << describe(r);
  std::string elsewhere = whole;
  elsewhere[overflow * page + 25] = 13;  // a hash page now: the chain reaches no overflow page
  const ScanReport e = scan(borrow(elsewhere, "elsewhere.db"));
  EXPECT_EQ(e.verdict, ScanVerdict::unscannable) << describe(e);
}

// A SQLite file without a table Dict is no dbm.sqlite3 store, but its
// cells are searched for pickles (sqlitedict keeps them in a table of any
// name); Dict's values are judged whole, at protocol 0 too (no PROTO).
TEST(ScanStores, SqliteCellsAreSearchedAndDictValuesJudged) {
  const auto dir = temp_dir("scan_sqlite_cells");
  const auto make = [&](const std::string& name, const std::string& table,
                        const std::string& value) {
    const auto path = dir / name;
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, ("CREATE TABLE " + table + " (key TEXT, value BLOB)").c_str(),
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, ("INSERT INTO " + table + " VALUES ('a', ?)").c_str(), -1, &st, nullptr);
    sqlite3_bind_blob(st, 1, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
    EXPECT_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return scan(path);
  };
  const ScanReport cell = make("sqlitedict.sqlite", "unnamed", kClean);
  EXPECT_EQ(cell.verdict, ScanVerdict::clean) << describe(cell);
  EXPECT_EQ(cell.pickles.size(), 1u) << describe(cell);
  const ScanReport none = make("plain.sqlite", "unnamed", "not a pickle");
  EXPECT_EQ(none.verdict, ScanVerdict::not_a_model_file) << describe(none);
  const std::string proto_payload = "\x80\x02" + kPayload;
  const ScanReport bad_cell = make("bad.sqlite", "unnamed", proto_payload);
  EXPECT_EQ(bad_cell.verdict, ScanVerdict::unsafe) << describe(bad_cell);
  const ScanReport dict = make("shelf", "Dict", kPayload);  // protocol 0
  EXPECT_EQ(dict.format, "dbm.sqlite3");
  EXPECT_EQ(dict.verdict, ScanVerdict::unsafe) << describe(dict);
  ASSERT_FALSE(dict.pickles.empty());
  EXPECT_EQ(dict.pickles[0].name, "shelve['a']");  // the key, as Python shows it
  ASSERT_EQ(cell.pickles.size(), 1u);
  EXPECT_EQ(cell.pickles[0].name, "dbm.sqlite3 cell 'unnamed row 1 value'");
  std::filesystem::remove_all(dir);
}

// --- the advisory corpus -----------------------------------------------------

const std::filesystem::path kAdvisory =
    std::filesystem::path(TORCHPORT_FIXTURES_DIR) / ".." / "security" / "advisory";

// A file's report, or a folder's (its files' reports as members, the worst
// of their verdicts).
ScanReport scan_any(const std::filesystem::path& path) {
  if (!std::filesystem::is_directory(path)) return scan(path);
  ScanReport r;
  r.path = path.string();
  r.verdict = ScanVerdict::not_a_model_file;
  for (auto& m : scan_directory(path)) {
    if (m.verdict != ScanVerdict::not_a_model_file)
      r.verdict =
          r.verdict == ScanVerdict::not_a_model_file ? m.verdict : worse(r.verdict, m.verdict);
    r.members.push_back(std::move(m));
  }
  return r;
}

bool finds(const ScanReport& r, const std::string& reason, const std::string& global) {
  for (const auto& f : r.findings)
    if (f.reason == reason && (global.empty() || f.global == global)) return true;
  for (const auto& m : r.members)
    if (finds(m, reason, global)) return true;
  return false;
}

// No line of trust in a flagged report, nor in any of its members'.
void no_trust(const ScanReport& r, bool flagged) {
  if (r.torch_weights_only && flagged) {
    EXPECT_EQ(add_safe_globals_line(r, r.torch_weights_only->needs), "") << r.path;
  }
  for (const auto& m : r.members) no_trust(m, flagged);
}

struct AdvisoryCase {
  std::string file, twin, verdict, twin_verdict, global, reason, source;
};

std::vector<AdvisoryCase> advisory_cases() {
  std::vector<AdvisoryCase> out;
  for (const auto& c : read_json(kAdvisory / "expected.json"))
    out.push_back({c["file"], c["twin"], c["verdict"], c["twin_verdict"], c["global"], c["reason"],
                   c["source"]});
  return out;
}

class ScanAdvisory : public ::testing::TestWithParam<AdvisoryCase> {};

TEST_P(ScanAdvisory, CaseFlaggedTwinClean) {
  const AdvisoryCase& c = GetParam();
  const ScanReport bad = scan_any(kAdvisory / c.file);
  EXPECT_EQ(scan_verdict_name(bad.verdict), c.verdict)
      << c.file << " (" << c.source << "): " << describe(bad);
  EXPECT_TRUE(finds(bad, c.reason, c.global))
      << c.file << ": no finding '" << c.reason << "' for '" << c.global << "':\n"
      << describe(bad);
  no_trust(bad, true);
  const ScanReport good = scan_any(kAdvisory / c.twin);
  EXPECT_EQ(scan_verdict_name(good.verdict), c.twin_verdict) << c.twin << ": " << describe(good);
}

INSTANTIATE_TEST_SUITE_P(All, ScanAdvisory, ::testing::ValuesIn(advisory_cases()),
                         [](const auto& p) {
                           std::string n = p.param.file;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(ScanAdvisory, EveryClassOfTheIssueHasACase) {
  EXPECT_GE(advisory_cases().size(), 25u);
}

}  // namespace
}  // namespace torchport::test
