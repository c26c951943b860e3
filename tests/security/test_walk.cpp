// The one walk: open() and scan() read a file through the same readers, so
// every pickle open() runs is one scan() judged (same name, same offset),
// and every member a scan judges is one the reader named. A walker that
// records what the reader meets checks both against open() and scan().

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include <torchport/torchport.hpp>

#include "formats/read/walk.hpp"
#include "security/hostile.hpp"
#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

// Records each pickle the reader runs, and each part it names; runs every
// pickle under open()'s policy.
class Recorder final : public formats::Walker {
 public:
  explicit Recorder(const OpenOptions& o) : load_(o) {}
  bool lists_parts() const noexcept override { return true; }
  void part(formats::Part p) override {
    parts.insert(p.name);
    roles[p.name] = p.role;
  }
  Value pickle(std::string_view name, const ByteReader& start, pickle::Stats& stats,
               const std::function<Value()>& run) override {
    pickles.insert(std::string(name) + "@" + std::to_string(start.file_offset()));
    return load_.pickle(name, start, stats, run);
  }
  std::set<std::string> pickles;
  std::set<std::string> parts;
  std::map<std::string, formats::PartRole> roles;

 private:
  formats::LoadWalker load_;
};

TEST(Walk, OpenAndScanReadTheSamePickles) {
  std::size_t files = 0;
  for (const char* name :
       {"checkpoint.pt", "legacy.pt", "tar.pt", "torchscript.pt", "whole_module.pt", "deflated.pt",
        "protocol0.pt", "protocol5.pt", "plain_protocol2.pkl", "views.pt",
        "numpy/training_numpy.pt", "numpy/training_numpy_legacy.pt"}) {
    const auto path = fixture(name);
    if (!std::filesystem::exists(path)) continue;
    ++files;
    const Source src = Source::map_file(path);
    const OpenOptions o;
    Recorder rec(o);
    const TensorCatalog walked = formats::walk(src, o, rec);
    const TensorCatalog opened = open(src, o);
    // The walk is open(): the same tensors.
    ASSERT_EQ(walked.size(), opened.size()) << name;
    for (std::size_t i = 0; i < walked.size(); ++i)
      EXPECT_EQ(walked.tensors()[i].name, opened.tensors()[i].name) << name;
    // Every pickle the reader ran, scan() judged, at the same offset.
    const ScanReport r = scan(src);
    std::set<std::string> judged;
    for (const auto& p : r.pickles) judged.insert(p.name + "@" + std::to_string(p.offset));
    ASSERT_FALSE(rec.pickles.empty()) << name;
    for (const auto& p : rec.pickles) EXPECT_TRUE(judged.count(p)) << name << ": " << p;
    // And scan() judged nothing the reader did not meet (its members are
    // parts the reader named).
    for (const auto& m : r.members) {
      const std::string member = m.path.substr(m.path.rfind('!') + 1);
      EXPECT_TRUE(rec.parts.count(member)) << name << ": " << member;
    }
  }
  EXPECT_GE(files, 8u);
}

// torch 2.14's PT2 archives: every record torch.export.load unpickles (the
// sample inputs, a use_pickle weight, a torchbind or an opaque object) is a
// member the reader names, which a scan judges as a file of its own; raw
// blobs are tensor data, AOTInductor's files code; and the scan judges no
// member the reader did not name.
TEST(Walk, Pt2ArchivesNameWhatTorchUnpickles) {
  using formats::PartRole;
  const std::map<std::string, std::map<std::string, PartRole>> want = {
      {"export/net214.pt2",
       {{"net214/data/sample_inputs/model.pt", PartRole::member},
        {"net214/data/weights/weight_0", PartRole::tensor_data},
        {"net214/data/constants/tensor_0", PartRole::tensor_data},
        {"net214/extra/note.txt", PartRole::member},
        {"net214/models/model.json", PartRole::metadata}}},
      {"export/pickled214.pt2",
       {{"pickled214/data/weights/weight_0", PartRole::member},
        {"pickled214/data/weights/weight_1", PartRole::tensor_data}}},
      {"export/objects214.pt2",
       {{"objects214/data/constants/opaque_obj_0", PartRole::member},
        {"objects214/data/constants/custom_obj_0", PartRole::member},
        {"objects214/data/sample_inputs/model.pt", PartRole::member}}}};
  for (const auto& [name, roles] : want) {
    const Source src = Source::map_file(fixture(name));
    Recorder rec{OpenOptions{}};
    (void)formats::walk(src, OpenOptions{}, rec);
    for (const auto& [part, role] : roles) {
      ASSERT_TRUE(rec.roles.count(part)) << name << ": " << part;
      EXPECT_EQ(static_cast<int>(rec.roles.at(part)), static_cast<int>(role))
          << name << ": " << part;
    }
    const ScanReport r = scan(src);
    EXPECT_EQ(r.reading, "ok") << name << ": " << r.reading_error;
    for (const auto& m : r.members) {
      const std::string member = m.path.substr(m.path.rfind('!') + 1);
      EXPECT_TRUE(rec.parts.count(member)) << name << ": " << member;
    }
  }
  Recorder rec{OpenOptions{}};
  // (refused once named: a package without an exported program)
  EXPECT_THROW(
      (void)formats::walk(Source::map_file(fixture("export/aoti214.pt2")), OpenOptions{}, rec),
      Error);
  std::size_t code = 0;
  for (const auto& [part, role] : rec.roles)
    if (part.find("/data/aotinductor/") != std::string::npos) {
      EXPECT_EQ(static_cast<int>(role), static_cast<int>(PartRole::code)) << part;
      ++code;
    }
  EXPECT_GE(code, 3u);
}

// A zip checkpoint with records torch does not read: the reader names
// them, open() ignores them, scan() judges each by its content (a payload
// there is found though torch.load would never reach it).
TEST(Walk, MembersTheReaderDoesNotReadAreJudged) {
  const std::string data = Pk().ordered_dict().stop();
  std::vector<ZipMember> members = {
      {"archive/data.pkl", data},
      {"archive/version", "3\n"},
      {"archive/extra/notes.txt", "a note\n"},
      {"archive/extra/cache.pkl", Pk().call("posix", "system").stop()}};
  const std::string zip = zip_archive(members);
  const Source src = Source::borrow(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(zip.data()), zip.size()),
      "m.pt");
  Recorder rec{OpenOptions{}};
  EXPECT_EQ(formats::walk(src, OpenOptions{}, rec).size(), 0u);
  EXPECT_TRUE(rec.parts.count("archive/extra/cache.pkl"));
  EXPECT_TRUE(rec.parts.count("archive/extra/notes.txt"));
  EXPECT_EQ(open(src).size(), 0u);  // torch.load reads data.pkl only
  const ScanReport r = scan(src);
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe);
  ASSERT_EQ(r.members.size(), 2u);
  for (const auto& m : r.members) {
    if (m.path.ends_with("notes.txt")) {
      EXPECT_EQ(m.verdict, ScanVerdict::not_a_model_file);
    } else {
      EXPECT_EQ(m.verdict, ScanVerdict::unsafe) << m.path;
    }
  }
}

// Where the reader stops, what a more lenient loader still reaches is
// what the format's reader tells as swept parts (formats::sweep): the
// scanner reads no format on its own. A zip cut before its central
// directory: its local headers, tensor records as tensor data, the rest
// as members, each judged by the scan, which judges no member the sweep
// did not name. A broken legacy file: one stream from its first byte.
TEST(Walk, SweptPartsAreWhatTheScanJudges) {
  const std::string zip = torch_zip(Pk().ordered_dict().stop(), {{"0", std::string(64, '\x01')}});
  std::string more = zip_archive({{"archive/extra/cache.pkl", Pk().call("posix", "system").stop()},
                                  {"archive/extra/notes.txt", "a note\n", 8}});
  // The first archive's local headers and data, then the second's whole:
  // its end record closes the file, its directory lists only its own.
  const std::size_t cd = zip.find("PK\x01\x02");
  ASSERT_NE(cd, std::string::npos);
  const std::string bytes = zip.substr(0, cd) + more;
  const Source src = Source::borrow(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
      "cut.pt");
  Recorder rec{OpenOptions{}};
  formats::sweep(src, Format::pytorch_zip, OpenOptions{}, rec);
  using formats::PartRole;
  const std::map<std::string, PartRole> want = {{"archive/data.pkl", PartRole::member},
                                                {"archive/data/0", PartRole::tensor_data},
                                                {"archive/extra/cache.pkl", PartRole::member},
                                                {"archive/extra/notes.txt", PartRole::member}};
  for (const auto& [part, role] : want) {
    ASSERT_TRUE(rec.roles.count(part)) << part;
    EXPECT_EQ(static_cast<int>(rec.roles.at(part)), static_cast<int>(role)) << part;
  }
  const ScanReport r = scan(src);
  // (The directory lists the second archive's entries, after bytes it
  // does not count: torch's reader and Python's would disagree.)
  EXPECT_EQ(r.reading, "ambiguous") << r.reading_error;
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe);
  std::set<std::string> judged;
  for (const auto& m : r.members) {
    const std::string member = m.path.substr(m.path.rfind('!') + 1);
    EXPECT_TRUE(rec.parts.count(member)) << member;
    judged.insert(member);
  }
  EXPECT_TRUE(judged.count("archive/extra/cache.pkl"));
  EXPECT_TRUE(judged.count("archive/extra/notes.txt"));  // inflated, then judged

  // A legacy file: pickle after pickle from its first byte.
  Recorder stream{OpenOptions{}};
  formats::sweep(src, Format::pytorch_legacy, OpenOptions{}, stream);
  ASSERT_EQ(stream.roles.size(), 1u);
  EXPECT_EQ(static_cast<int>(stream.roles.at("pickle")), static_cast<int>(PartRole::stream));
  // The other formats' readers tell every part as they meet it.
  Recorder none{OpenOptions{}};
  formats::sweep(src, Format::safetensors, OpenOptions{}, none);
  EXPECT_TRUE(none.parts.empty());
}

}  // namespace
}  // namespace torchport::test
