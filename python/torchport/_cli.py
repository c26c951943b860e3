"""The ``torchport`` console script: runs the tool shipped in the package."""

from __future__ import annotations

import os
import sys


def tool_path() -> str:
    """The torchport tool inside the installed package (bin/torchport)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "torchport")


def main() -> None:
    tool = tool_path()
    if not os.access(tool, os.X_OK):
        sys.stderr.write(f"torchport: the tool is missing from the package ({tool})\n")
        sys.exit(2)
    os.execv(tool, [tool, *sys.argv[1:]])
