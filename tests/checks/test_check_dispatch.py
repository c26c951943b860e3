#!/usr/bin/python3
"""Self-test of scripts/check-dispatch.py: small source trees that keep or
break each rule, and the verdict and message for each."""

import unittest

from check_tree import run_checker


def run(files):
    return run_checker("check-dispatch.py", files)


# A tree that follows the rules: each recogniser defined in its home and
# declared in a header, the registry calling them, the one listed exception.
BASE = {
    "src/io/zip.hpp": "#pragma once\nbool looks_like_zip(std::span<const std::byte> bytes) noexcept;\n",
    "src/io/zip.cpp": "bool looks_like_zip(std::span<const std::byte> b) noexcept {\n"
                      "  return starts(b, \"PK\\x03\\x04\");\n}\n",
    "src/io/compression.cpp": "bool looks_like_gzip(std::span<const std::byte> b) noexcept { return x; }\n"
                              "std::optional<Compression> sniff_compression(std::span<const std::byte> b) {\n"
                              "  if (looks_like_gzip(b)) return Compression::gzip;\n}\n",
    "src/formats/read/registry.cpp": "bool sniff_zip(std::span<const std::byte> b) noexcept {\n"
                                     "  return looks_like_zip(b);  // looks_like_tar(b) in a comment\n}\n"
                                     "auto w = sniff_compression(b);\n",
    "src/formats/recorders/record_file.cpp": "  if (looks_like_gzip(source.bytes())) {\n",
    "src/formats/read/numpy_file.cpp": "  const bool npy = std::memcmp(b, \"\\x93NUMPY\", 6) == 0;\n"
                                       "  if (open_detail::reader(Format::pytorch_zip).sniff(h, n)) {}\n",
    "tools/torchport/main.cpp": "  const auto f = sniff(source);\n  log(\"looks_like_zip(x) in a string\");\n",
}


class CheckDispatch(unittest.TestCase):
    def test_a_tree_with_one_dispatch_passes(self):
        code, out = run(BASE)
        self.assertEqual(code, 0, out)
        self.assertIn("recogniser calls", out)

    def test_a_recogniser_called_by_a_reader_fails_naming_file_and_line(self):
        files = dict(BASE)
        files["src/formats/read/torch_export.cpp"] = "int x;\n  return looks_like_zip(inner.bytes())\n"
        code, out = run(files)
        self.assertEqual(code, 1, out)
        self.assertIn("src/formats/read/torch_export.cpp:2: [call] looks_like_zip()", out)

    def test_the_scanner_parsing_a_zip_itself_fails(self):
        files = dict(BASE)
        files["src/formats/scan/scan.cpp"] = (
            "void FileScan::sweep_zip() {\n"
            "  const auto entries = zip_local_entries(src_.bytes(), 10);\n"
            "  Decompressed d = decompress_zip_data(8, data, 1, what);\n"
            "  formats::sweep(src_, *format, o, *this);  // zip_local_entries() in a comment\n}\n")
        code, out = run(files)
        self.assertEqual(code, 1, out)
        self.assertIn("src/formats/scan/scan.cpp:2: [parse] zip_local_entries()", out)
        self.assertIn("src/formats/scan/scan.cpp:3: [parse] decompress_zip_data()", out)
        self.assertNotIn("scan.cpp:4", out)
        # The same call in a reader is the reader's own business.
        files = dict(BASE)
        files["src/formats/read/pytorch_zip.cpp"] = "  const auto e = zip_local_entries(b, 10);\n"
        code, out = run(files)
        self.assertEqual(code, 0, out)

    def test_a_continued_condition_is_a_call(self):
        files = dict(BASE)
        files["src/formats/scan/scan.cpp"] = "  if (a &&\n      !sniff_compression(b)) {}\n"
        code, out = run(files)
        self.assertEqual(code, 1, out)
        self.assertIn("scan.cpp:2: [call] sniff_compression()", out)

    def test_a_declaration_elsewhere_is_no_call(self):
        files = dict(BASE)
        files["src/formats/read/readers.hpp"] = ("#pragma once\n"
                                                 "std::optional<Compression> sniff_compression(Bytes b) noexcept;\n")
        code, out = run(files)
        self.assertEqual(code, 0, out)

    def test_a_magic_spelled_outside_its_reader_fails(self):
        files = dict(BASE)
        files["src/formats/scan/scan.cpp"] = "  if (std::memcmp(b, \"PK\\x03\\x04\", 4) == 0) {}\n"
        code, out = run(files)
        self.assertEqual(code, 1, out)
        self.assertIn("scan.cpp:1: [magic]", out)

    def test_a_new_recogniser_must_be_listed(self):
        files = dict(BASE)
        files["src/formats/read/gguf.cpp"] = "bool looks_like_gguf(std::span<const std::byte> b) {\n}\n"
        code, out = run(files)
        self.assertEqual(code, 1, out)
        self.assertIn("gguf.cpp:1: [unlisted] looks_like_gguf()", out)

    def test_a_member_of_that_name_is_not_a_recogniser(self):
        files = dict(BASE)
        files["src/formats/scan/scan.cpp"] = "  if (row.looks_like_zip(b) || p->sniff_compression(b)) {}\n"
        code, out = run(files)
        self.assertEqual(code, 0, out)

    def test_an_exception_no_longer_used_is_stale(self):
        files = dict(BASE)
        files["src/formats/recorders/record_file.cpp"] = "int unrelated;\n"
        code, out = run(files)
        self.assertEqual(code, 1, out)
        self.assertIn("[stale]", out)
        self.assertIn("record_file.cpp looks_like_gzip()", out)


if __name__ == "__main__":
    unittest.main()
