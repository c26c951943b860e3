// scan() reads each container as the Python loader that opens it reads
// it (issue 39): joblib's LZ4 frames and its "ZF" files before 0.10,
// .lzma as liblzma's auto decoder takes it, a skippable frame that is also
// a pickle (both readings judged); and the advisory corpus
// (tests/security/advisory, make_advisory_corpus.py: each payload verified
// to run in its real consumer): every case flagged as its entry says, every
// benign twin clean (or, for a store the scan does not read, unscannable),
// and no line of trust offered for any flagged file.

#include <gtest/gtest.h>

#include <lz4frame.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>
#include <torchport/torchport.hpp>

#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

Source borrow(const std::string& bytes, const std::string& name) {
  return Source::borrow(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
      name);
}

std::string describe(const ScanReport& r, const std::string& indent = "") {
  std::string s = indent + std::string(scan_verdict_name(r.verdict)) + " (" + r.format +
                  ", reading " + r.reading + ")";
  for (const auto& f : r.findings)
    s += "\n" + indent + "  " + std::string(scan_verdict_name(f.severity)) + ": " + f.where + ": " +
         f.reason + " [" + f.global + "] " + f.message;
  for (const auto& m : r.members) s += "\n" + describe(m, indent + "  ");
  return s;
}

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
