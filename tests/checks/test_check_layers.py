#!/usr/bin/python3
"""Self-test of scripts/check-layers.py: builds small source trees that keep
or break each rule and checks the verdict and the message."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check-layers.py")


def run(root, *args):
    p = subprocess.run([sys.executable, SCRIPT, "--root", root, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class Tree:
    def __init__(self, files):
        self.dir = tempfile.TemporaryDirectory()
        for rel, text in files.items():
            path = os.path.join(self.dir.name, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)

    def __enter__(self):
        return self.dir.name

    def __exit__(self, *exc):
        self.dir.cleanup()


BASE = {
    "include/torchport/core/tensor.hpp": "#pragma once\n",
    "include/torchport/detail/checked.hpp": "#pragma once\n#include \"torchport/core/tensor.hpp\"\n",
    "include/torchport/formats/catalog.hpp": "#pragma once\n#include \"torchport/core/tensor.hpp\"\n",
    "include/torchport/record/load.hpp": "#pragma once\n#include \"torchport/formats/catalog.hpp\"\n",
    "include/torchport/record/files.hpp": "#pragma once\n#include \"torchport/record/load.hpp\"\n",
    "include/torchport/nn/modules.hpp": "#pragma once\n#include \"torchport/record/load.hpp\"\n",
    "include/torchport/torchport.hpp": "#pragma once\n#include \"torchport/nn/modules.hpp\"\n"
                                       "#include \"torchport/record/files.hpp\"\n",
    "src/core/tensor.cpp": "#include \"torchport/core/tensor.hpp\"\n#include \"torchport/detail/checked.hpp\"\n"
                           "#include \"torchport/version.hpp\"\n#include <vector>\n#include \"zlib.h\"\n",
    "src/formats/helper.hpp": "#pragma once\n",
    "src/formats/reader.cpp": "#include \"helper.hpp\"\n#include \"formats/helper.hpp\"\n"
                              "#include \"torchport/formats/catalog.hpp\"\n",
    "tools/torchport/main.cpp": "#include \"torchport/torchport.hpp\"\n",
}


class CheckLayers(unittest.TestCase):
    def test_clean_tree_passes(self):
        with Tree(BASE) as root:
            code, out = run(root)
            self.assertEqual(code, 0, out)

    def test_lower_layer_including_higher_fails_naming_line_and_layers(self):
        files = dict(BASE)
        files["src/core/tensor.cpp"] = "// top\n#include \"torchport/record/load.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("src/core/tensor.cpp:2: [layer] core includes \"torchport/record/load.hpp\" of record", out)

    def test_higher_layer_may_include_lower_and_not_the_reverse(self):
        files = dict(BASE)
        files["include/torchport/nn/modules.hpp"] = "#pragma once\n#include \"torchport/record/files.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 0, out)
        files["include/torchport/record/files.hpp"] = "#pragma once\n#include \"torchport/nn/modules.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("include/torchport/record/files.hpp:2: [layer] record includes "
                          "\"torchport/nn/modules.hpp\" of nn: a lower layer includes a higher one", out)

    def test_detail_is_core(self):
        files = dict(BASE)
        files["include/torchport/detail/checked.hpp"] = "#include \"torchport/formats/catalog.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("[layer] core includes \"torchport/formats/catalog.hpp\" of formats", out)

    def test_only_tools_include_the_umbrella(self):
        files = dict(BASE)
        files["src/formats/reader.cpp"] = "#include \"torchport/torchport.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("src/formats/reader.cpp:1: [umbrella] formats includes \"torchport/torchport.hpp\" "
                          "of umbrella", out)

    def test_private_header_of_another_layer_fails(self):
        files = dict(BASE)
        files["src/record/load.cpp"] = "#include \"torchport/record/load.hpp\"\n#include \"formats/helper.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("src/record/load.cpp:2: [private] record includes \"formats/helper.hpp\", "
                          "a private header of formats", out)

    def test_shared_header_reaches_sources_above_but_not_tools_or_installed_headers(self):
        files = dict(BASE)
        files["src/io/zip.hpp"] = "#pragma once\n"
        files["src/formats/reader.cpp"] = "#include \"io/zip.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 0, out)
        files["tools/torchport/main.cpp"] = "#include \"io/zip.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("tools/torchport/main.cpp:1: [private] tools includes \"io/zip.hpp\", a private "
                          "header of io (src/io/): only io and the library's sources above it", out)
        del files["tools/torchport/main.cpp"]
        files["include/torchport/formats/catalog.hpp"] = "#pragma once\n#include \"io/zip.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("include/torchport/formats/catalog.hpp:2: [public]", out)

    def test_public_header_including_a_private_one_fails(self):
        files = dict(BASE)
        files["include/torchport/formats/catalog.hpp"] = "#pragma once\n#include \"formats/helper.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("include/torchport/formats/catalog.hpp:2: [public]", out)

    def test_commented_out_includes_are_ignored(self):
        files = dict(BASE)
        files["src/core/tensor.cpp"] = ("/// #include <torchport/record/load.hpp>\n/*\n"
                                        "#include \"torchport/record/load.hpp\"\n*/\n")
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 0, out)

    def test_angle_includes_of_torchport_are_checked(self):
        files = dict(BASE)
        files["src/core/tensor.cpp"] = "#include <torchport/nn/modules.hpp>\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("src/core/tensor.cpp:1: [layer] core includes", out)

    def test_file_in_no_layer_fails(self):
        files = dict(BASE)
        files["src/extra/thing.cpp"] = "\n"
        with Tree(files) as root:
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("src/extra/thing.cpp: [table]", out)

    def test_allow_list_accepts_listed_violation_and_rejects_stale_or_bare_entries(self):
        files = dict(BASE)
        files["src/core/tensor.cpp"] = "#include \"torchport/record/load.hpp\"\n"
        with Tree(files) as root:
            allow = os.path.join(root, "allow.txt")
            with open(allow, "w") as f:
                f.write("# comment\nsrc/core/tensor.cpp \"torchport/record/load.hpp\" -- needs a move\n")
            code, out = run(root, "--allow", allow)
            self.assertEqual(code, 0, out)
            self.assertIn("1 allowed exception", out)
            with open(allow, "a") as f:
                f.write("src/io/gone.cpp \"torchport/record/load.hpp\" -- fixed already\n")
            code, out = run(root, "--allow", allow)
            self.assertEqual(code, 1, out)
            self.assertIn("stale entry src/io/gone.cpp", out)
            with open(allow, "w") as f:
                f.write("src/core/tensor.cpp \"torchport/record/load.hpp\"\n")
            code, out = run(root, "--allow", allow)
            self.assertEqual(code, 1, out)
            self.assertIn("[allow] expected", out)

    def test_graph_lists_layer_edges_and_marks_wrong_ones(self):
        files = dict(BASE)
        files["src/core/tensor.cpp"] = "#include \"torchport/record/load.hpp\"\n"
        with Tree(files) as root:
            code, out = run(root, "--graph")
            self.assertEqual(code, 0, out)
            lines = out.splitlines()
            self.assertIn("core -> record (!)", lines)
            self.assertIn("formats -> core", lines)
            self.assertIn("record -> formats", lines)
            self.assertIn("nn -> record", lines)
            self.assertIn("tools -> umbrella", lines)
            self.assertIn("umbrella -> record, nn", lines)


if __name__ == "__main__":
    unittest.main()
