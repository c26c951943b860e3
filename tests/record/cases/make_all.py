"""Runs every case script (each writes its fixtures)."""
import os
import runpy
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
for name in sorted(os.listdir(here)):
    if name.endswith(".py") and name not in ("common.py", "make_all.py"):
        runpy.run_path(os.path.join(here, name), run_name="__main__")
        print("wrote", name[:-3])
