#!/usr/bin/python3
"""Self-test of scripts/check-hashes.py: small source trees that keep or
break each rule, and the verdict and message for each."""

import unittest

from check_tree import run_checker


def run(files):
    return run_checker("check-hashes.py", files)


# Seeded tables, pointer-keyed tables, and the words in comments and strings.
BASE = {
    "include/torchport/detail/hash.hpp":
        "using StringSet = std::unordered_set<std::string, SeededHash, std::equal_to<>>;\n",
    "src/formats/read/a.cpp": "detail::StringMap<Blob> blobs;\n"
                              "std::unordered_map<const Storage*, int> uses;\n"
                              "// std::unordered_set<std::string> in a comment\n"
                              "const char* s = \"std::hash<std::string_view>\";\n"
                              "/* std::hash<std::string>\n   std::unordered_map<std::string, int> */\n",
}


class CheckHashes(unittest.TestCase):
    def test_seeded_tables_pass(self):
        code, out = run(BASE)
        self.assertEqual(code, 0, out)
        self.assertIn("no text table hashed with std::hash", out)

    def test_a_string_keyed_unordered_map_fails_naming_file_and_line(self):
        files = dict(BASE)
        files["src/formats/read/b.cpp"] = "int x;\n  std::unordered_map<std::string, Blob> blobs;\n"
        code, out = run(files)
        self.assertEqual(code, 1, out)
        self.assertIn("src/formats/read/b.cpp:2: [table]", out)

    def test_string_view_sets_in_public_headers_and_tools_fail(self):
        files = dict(BASE)
        files["include/torchport/x.hpp"] = "std::unordered_set<std::string_view> names_;\n"
        files["tools/torchport/y.cpp"] = "std::unordered_set< std::string > seen;\n"
        code, out = run(files)
        self.assertEqual(code, 1, out)
        self.assertIn("include/torchport/x.hpp:1: [table]", out)
        self.assertIn("tools/torchport/y.cpp:1: [table]", out)

    def test_std_hash_of_text_fails(self):
        files = dict(BASE)
        files["src/core/c.cpp"] = ("auto h = std::hash<std::string_view>{}(name);\n"
                                   "auto g = std::hash<const char*>{}(p);\n"
                                   "auto k = std::hash<const Storage*>()(s);\n")
        code, out = run(files)
        self.assertEqual(code, 1, out)
        self.assertIn("src/core/c.cpp:1: [hash]", out)
        self.assertIn("src/core/c.cpp:2: [hash]", out)
        self.assertNotIn("src/core/c.cpp:3:", out)

    def test_the_aliases_home_may_spell_the_tables(self):
        code, out = run(BASE)
        self.assertNotIn("hash.hpp", out)


if __name__ == "__main__":
    unittest.main()
