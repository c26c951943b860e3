// A storage larger than 4 GiB through torchport convert: the PyTorch zip
// needs zip64 sizes for that record and zip64 offsets for the records after
// it, and torch's own reader (miniz) must load the result (torch 2.14 also
// with calculate_storage_offsets, which places records by miniz's layout
// rules past 4 GiB). The input is a
// sparse safetensors file, so only the 4.3 GB output costs disk (about a
// minute in all; `ctest -LE slow` skips it).

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"

namespace fs = std::filesystem;
using torchport::test::run_command;

namespace {

TEST(InteropZip64, RecordOverFourGiBLoadsInTorch) {
  const fs::path dir = torchport::test::temp_dir("zip64");
  const std::uint64_t n = (std::uint64_t{1} << 32) + 3 * 4096;
  std::string header = R"({"huge":{"dtype":"U8","shape":[)" + std::to_string(n) +
                       R"(],"data_offsets":[0,)" + std::to_string(n) +
                       R"(]},"small":{"dtype":"U8","shape":[3],"data_offsets":[)" +
                       std::to_string(n) + "," + std::to_string(n + 3) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  const fs::path in = dir / "big.safetensors";
  {
    const int fd = ::open(in.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    const std::uint64_t len = header.size();
    ASSERT_EQ(::write(fd, &len, 8), 8);
    ASSERT_EQ(::write(fd, header.data(), header.size()), static_cast<ssize_t>(header.size()));
    const std::uint64_t data = 8 + header.size();
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(data + n + 3)), 0);  // zeros, without writing them
    const unsigned char tail[4] = {7, 1, 2, 3};  // the last byte of "huge", then "small"
    ASSERT_EQ(::pwrite(fd, tail, 4, static_cast<off_t>(data + n - 1)), 4);
    ::close(fd);
  }
  std::string out;
  ASSERT_EQ(run_command(std::string(TORCHPORT_TOOL) + " convert '" + in.string() + "' '" +
                            (dir / "big.pt").string() + "'",
                        &out),
            0)
      << out;
  fs::remove(in);
  const std::string check =
      "import torch, zipfile\n"
      "z = zipfile.ZipFile('" +
      (dir / "big.pt").string() +
      "')\n"
      "i = {x.filename: x for x in z.infolist()}\n"
      "assert i['big/data/0'].file_size == " +
      std::to_string(n) +
      "\n"
      "assert i['big/version'].header_offset > 2**32\n"
      "d = torch.load('" +
      (dir / "big.pt").string() +
      "', weights_only=True)\n"
      "h = d['huge']\n"
      "assert h.dtype == torch.uint8 and h.shape == (" +
      std::to_string(n) +
      ",)\n"
      "assert int(h[-1]) == 7 and int(h[:4096].sum()) == 0 and int(h[2**32:2**32 + 4096].sum()) == "
      "0\n"
      "assert d['small'].tolist() == [1, 2, 3]\n"
      // torch 2.14 (not 1.13 or 2.6) can place every storage from the
      // layout alone: record 1's header after record 0's 4 GiB of data and
      // its 24-byte zip64 descriptor, with a zip64 field of its header's
      // offset; TORCH_SERIALIZATION_DEBUG checks each place against the
      // directory.
      "import os\n"
      "try:\n"
      "  from torch.utils.serialization import config\n"
      "except ImportError:\n"
      "  config = None\n"
      "if config is not None:\n"
      "  os.environ['TORCH_SERIALIZATION_DEBUG'] = '1'\n"
      "  config.load.calculate_storage_offsets = True\n"
      "  e = torch.load('" +
      (dir / "big.pt").string() +
      "', weights_only=True, mmap=True)\n"
      "  assert int(e['huge'][-1]) == 7 and e['small'].tolist() == [1, 2, 3]\n"
      "  print('offsets computed from the layout')\n"
      "print('ok')\n";
  const int rc = run_command(torchport::test::python() + " -W ignore -c \"" + check + "\"", &out);
  fs::remove_all(dir);
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
