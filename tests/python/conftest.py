"""Shared by tests/python: where the repository, the tool and the fixtures
are, and the canary no payload may ever create.

Run by ctest (tests/python/CMakeLists.txt) with the build tree's package
on PYTHONPATH, under each torch's Python; or by hand:
  PYTHONPATH=build/python:/var/lib/torchport/python-dev python3 -m pytest tests/python
"""

import os
import shutil

import pytest

ROOT = os.environ.get(
    "TORCHPORT_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
CRAFTED = os.path.join(ROOT, "tests", "security", "crafted")
BENIGN = os.path.join(ROOT, "tests", "security", "benign")
# What a crafted payload would create if it ever ran (tests/security/crafted/make_crafted.py).
CANARY = "/tmp/torchport-pwned"


def tool():
    """The torchport tool: TORCHPORT_TOOL (ctest sets it), else the package's."""
    import torchport._cli

    path = os.environ.get("TORCHPORT_TOOL") or torchport._cli.tool_path()
    if not os.access(path, os.X_OK):
        path = shutil.which("torchport") or path
    return path


@pytest.fixture(scope="session", autouse=True)
def canary_never_appears():
    before = os.stat(CANARY).st_mtime_ns if os.path.exists(CANARY) else None
    yield
    after = os.stat(CANARY).st_mtime_ns if os.path.exists(CANARY) else None
    assert after == before, f"{CANARY} was created or touched: a payload ran"
