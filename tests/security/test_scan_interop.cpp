// Python's protocol-2 renames: torchport's table gives, for every entry of
// the installed Python's _compat_pickle (NAME_MAPPING, IMPORT_MAPPING), the
// name Python's unpickler imports.

#include <gtest/gtest.h>

#include <sstream>

#include <torchport/torchport.hpp>

#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

TEST(CompatPickle, EveryRenameOfPython) {
  std::string out;
  const std::string script =
      "import _compat_pickle as c\n"
      "for (m, n), (m2, n2) in sorted(c.NAME_MAPPING.items()): print('N', m, n, m2, n2)\n"
      "for m, m2 in sorted(c.IMPORT_MAPPING.items()): print('I', m, m2)\n";
  ASSERT_EQ(run_command("/usr/bin/python3 -c \"" + script + "\"", &out), 0) << out;
  std::istringstream lines(out);
  std::string kind;
  int names = 0, modules = 0;
  while (lines >> kind) {
    if (kind == "N") {
      std::string m, n, m2, n2;
      lines >> m >> n >> m2 >> n2;
      EXPECT_EQ(pickle::compat_rename(m, n), std::make_pair(m2, n2)) << m << "." << n;
      ++names;
    } else {
      std::string m, m2;
      lines >> m >> m2;
      // A name no NAME_MAPPING entry covers takes the module's rename.
      EXPECT_EQ(pickle::compat_rename(m, "NoSuchName_"),
                std::make_pair(m2, std::string("NoSuchName_")))
          << m;
      ++modules;
    }
  }
  EXPECT_GT(names, 50);
  EXPECT_GT(modules, 40);
  EXPECT_EQ(pickle::compat_rename("torch._utils", "_rebuild_tensor_v2"),
            std::make_pair(std::string("torch._utils"), std::string("_rebuild_tensor_v2")));
}

}  // namespace
}  // namespace torchport::test
