#!/usr/bin/env bash
# Assembles the fuzz seed corpora from the test fixtures:
#   fuzz/make_corpus.sh OUT_DIR [TORCHPORT_TOOL]
# writes OUT_DIR/<target>/ for every fuzz target. With the torchport tool,
# the record corpus also gets a fixture converted to every record format
# (.mpk, .json, .tpb and their .gz). Seeds over 64 KiB are left out: the
# fuzzers mutate small inputs faster, and the big fixtures are replayed by
# the reader tests anyway. Needs python3 (standard library only).
set -euo pipefail
out=$1
tool=${2:-}
src=$(cd "$(dirname "$0")/.." && pwd)
fx=$src/tests/fixtures
rm -rf "$out"
mkdir -p "$out"/{pickle,zip,open,safetensors,record,sharded,scan,dcp}

small() { [ "$(stat -c %s "$1")" -le 65536 ]; }
for f in "$fx"/*.pt "$fx"/*.pkl "$fx"/bad/*.pt "$fx"/bad/*.pkl "$src"/tests/record/fixtures/*.pt \
  "$fx"/export/*.pt2; do
  [ -f "$f" ] && small "$f" || continue
  name=$(basename "$(dirname "$f")")_$(basename "$f")
  cp "$f" "$out/open/$name"
  cp "$f" "$out/scan/$name"
  case "$(head -c 2 "$f" | od -An -tx1 | tr -d ' ')" in
    504b) cp "$f" "$out/zip/$name" ;;
    80*) cp "$f" "$out/pickle/$name" ;;
  esac
done

# The scan's containers of the advisory corpus (issue 39): the benign twins
# (key-value stores, compressed files, npy headers, joblib's layouts).
for f in "$src"/tests/security/advisory/*_twin* "$src"/tests/security/advisory/*_twin/*; do
  [ -f "$f" ] && small "$f" || continue
  cp "$f" "$out/scan/advisory_$(basename "$(dirname "$f")")_$(basename "$f")"
done

python3 - "$fx" "$out" <<'PY'
import glob, json, os, struct, sys, zipfile
fx, out = sys.argv[1], sys.argv[2]
# The pickles inside the zip fixtures.
for f in sorted(glob.glob(os.path.join(fx, "*.pt")) + glob.glob(os.path.join(fx, "bad", "*.pt"))):
    try:
        with zipfile.ZipFile(f) as z:
            for n in z.namelist():
                if n.endswith(".pkl"):
                    data = z.read(n)
                    if len(data) <= 65536:
                        name = os.path.basename(f) + "_" + n.replace("/", "_")
                        open(os.path.join(out, "pickle", name), "wb").write(data)
    except Exception:
        pass
# safetensors headers (the target frames them) and whole files (for open).
headers = {
    "two": {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "y": {"dtype": "I64", "shape": [1, 2], "data_offsets": [8, 24]}},
    "meta": {"__metadata__": {"format": "pt"}, "w": {"dtype": "BF16", "shape": [3, 4], "data_offsets": [0, 24]}},
    "empty": {},
    "scalar": {"s": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]}},
    "zero": {"z": {"dtype": "U8", "shape": [0, 5], "data_offsets": [0, 0]}},
    "dtypes": {d: {"dtype": d, "shape": [2], "data_offsets": [0, 2 * s]} for d, s in
               [("F16", 2), ("F32", 4), ("I8", 1), ("U16", 2), ("BOOL", 1), ("F8_E4M3", 1), ("C64", 8)]},
}
for name, h in headers.items():
    text = json.dumps(h).encode()
    open(os.path.join(out, "safetensors", name + ".json"), "wb").write(text)
    open(os.path.join(out, "open", name + ".safetensors"), "wb").write(struct.pack("<Q", len(text)) + text + bytes(range(64)))
# Sharded indexes over the target's a.safetensors (tensors x and y).
indexes = {
    "good": {"metadata": {"total_size": 16}, "weight_map": {"x": "a.safetensors", "y": "a.safetensors"}},
    "missing": {"weight_map": {"x": "b.safetensors"}},
    "partial": {"weight_map": {"x": "a.safetensors"}},
    "escape": {"weight_map": {"x": "../a.safetensors"}},
    "empty": {"weight_map": {}},
}
for name, h in indexes.items():
    open(os.path.join(out, "sharded", name + ".json"), "wb").write(json.dumps(h).encode())
# Distributed checkpoint folders, packed as fuzz_dcp reads them (name, NUL,
# u32 length, bytes per file; expected.json left out): the .metadata
# layouts (zstd-transformed too) and the Hugging Face storage's shards,
# good and hostile, when they pack to 64 KiB or less.
dcp = os.path.join(fx, "dcp")
for root, dirs, files in sorted(os.walk(dcp)):
    names = sorted(f for f in files if f != "expected.json" and not f.endswith(".py"))
    if not names or len(names) > 16:
        continue
    packed = b"".join(n.encode() + b"\0" + struct.pack("<I", os.path.getsize(os.path.join(root, n)))
                      + open(os.path.join(root, n), "rb").read() for n in names)
    if len(packed) <= 65536:
        name = os.path.relpath(root, dcp).replace(os.sep, "_")
        open(os.path.join(out, "dcp", name), "wb").write(packed)
PY

if [ -n "$tool" ] && [ -x "$tool" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for ext in mpk json tpb mpk.gz json.gz tpb.gz; do
    for f in "$fx/dtypes.pt" "$fx/views.pt"; do
      o="$tmp/$(basename "$f" .pt).$ext"
      if "$tool" convert "$f" "$o" >/dev/null 2>&1 && small "$o"; then cp "$o" "$out/record/"; fi
    done
  done
  cp "$out"/record/* "$out/open/" 2>/dev/null || true
fi
# Every target has at least one seed.
for d in "$out"/*/; do
  [ -n "$(ls -A "$d")" ] || printf '\x80\x02}q\x00.' > "$d/min"
done
echo "make_corpus: $(find "$out" -type f | wc -l) seeds in $out"
