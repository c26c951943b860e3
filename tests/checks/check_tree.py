"""What the checkers' self-tests share: a small source tree written to a
temporary folder, and one of scripts/check-*.py run on it."""

import os
import subprocess
import sys
import tempfile

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")


def run_checker(script, files, *args):
    """Writes `files` ({relative path: text}) to a fresh folder, runs
    scripts/`script` with --root on it; returns (exit status, output)."""
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        p = subprocess.run([sys.executable, os.path.join(SCRIPTS, script), "--root", root, *args],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr
