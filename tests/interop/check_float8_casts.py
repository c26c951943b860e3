"""Checks `torchport convert --dtype F8_*` against the torch it runs under
(torch 2.6 or the current one: scripts/torch.sh REF python3
check_float8_casts.py CLI), byte for byte, for every float8 dtype that
torch has: float32 inputs of every 2^16 high-half bit pattern (every sign,
exponent, NaN and infinity, with low halves 0, 1, 0x7fff, 0x8000, 0x8001 and
0xffff: each tie on a float8 grid and a float32 step either side of it),
plus 100,000 random ones; float64 and bfloat16 sources too (a double
rounds to float first, as torch's Float8 constructors take a float).
(`--dtype` converts floating-point tensors only.)

float8_e4m3fn past +-464 is where torch 2.6 writes NaN and torch 2.14
saturates to +-448: those inputs must be refused by name (`ambiguous`,
exit 1); the rest must equal this torch's `.to()`. Exits 1 on the first
difference, printing the input, torch's byte and ours.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

CLI = sys.argv[1]
DTYPES = [("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2"),
          ("F8_E4M3FNUZ", "float8_e4m3fnuz"), ("F8_E5M2FNUZ", "float8_e5m2fnuz"),
          ("F8_E8M0", "float8_e8m0fnu")]


def inputs():
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
    grid = (high[:, None] | lows[None, :]).reshape(-1)
    rng = np.random.default_rng(1)
    rand = rng.integers(0, 1 << 32, size=100_000, dtype=np.uint64).astype(np.uint32)
    return torch.from_numpy(np.concatenate([grid, rand]).view(np.float32).copy())


def convert(tensors, name, d):
    """Our bytes for each tensor of `tensors`, through a .pt and the CLI."""
    src, out = os.path.join(d, "in.pt"), os.path.join(d, "out.pt")
    torch.save(tensors, src)
    r = subprocess.run([CLI, "convert", src, out, "--dtype", name, "--force", "--quiet"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r
    got = torch.load(out, weights_only=False)
    return {k: v.view(torch.uint8) for k, v in got.items()}, r


def main():
    x32 = inputs()
    checked = 0
    with tempfile.TemporaryDirectory() as d:
        for name, tname in DTYPES:
            if not hasattr(torch, tname):
                print(f"{name}: torch {torch.__version__} has no {tname}: skipped")
                continue
            dt = getattr(torch, tname)
            x = x32
            if name == "F8_E4M3":
                far = x32.isfinite().logical_not() & x32.isnan().logical_not() | (x32.abs() > 464)
                # The inputs where the torches disagree are refused, by name.
                _, r = convert({"x": x32[far][:16]}, name, d)
                if r.returncode != 1 or "ambiguous" not in r.stderr:
                    print(f"{name}: values past 464 not refused as ambiguous: exit {r.returncode}, "
                          f"{r.stderr.strip()}")
                    return 1
                x = x32[~far]
            sources = {"f32": x, "f64": x.double(), "bf16": x.to(torch.bfloat16)}
            ours, r = convert(sources, name, d)
            if ours is None:
                print(f"{name}: convert failed: {r.stderr.strip()}")
                return 1
            for key, src in sources.items():
                want = src.to(dt).view(torch.uint8)
                got = ours[key]
                bad = (want != got).nonzero().flatten()
                if len(bad):
                    i = int(bad[0])
                    v = src[i]
                    bits = v.float().view(torch.int32).item() & 0xFFFFFFFF
                    print(f"{name} from {key}: {len(bad)} of {len(want)} differ; first: "
                          f"{v.item()!r} (float32 bits {bits:#010x}): torch {int(want[i]):#04x}, "
                          f"ours {int(got[i]):#04x}")
                    return 1
                checked += len(want)
            print(f"{name}: {sum(len(s) for s in sources.values())} values equal torch's")
    print(f"float8 casts: {checked} values equal torch {torch.__version__}'s .to()")
    return 0


if __name__ == "__main__":
    sys.exit(main())
