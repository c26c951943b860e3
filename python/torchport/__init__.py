"""torchport: PyTorch checkpoints read without running them.

Every file torch.load reads (and safetensors, sharded and distributed
checkpoints), through torchport's C++ core: nothing from a file ever runs,
tensors are views of the mapped file until used.

    import torchport
    with torchport.open("model.pt") as f:          # a lazy catalogue
        w = f.get("fc.weight")                     # numpy view of the mapped file
    sd = torchport.load("model.pt", framework="torch")  # as torch.load(weights_only=True)
    report = torchport.scan("downloaded.pt")       # report.verdict, report.findings
    torchport.convert("model.pt", "model.safetensors")

See docs/python.md.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from torchport._errors import TorchportError
from torchport import _core
from torchport._core import File, PickleScan, ScanFinding, ScanGlobal, ScanReport, TensorSlice

_core._set_error_class(TorchportError)

__version__: str = _core.__version__

__all__ = [
    "File",
    "PickleScan",
    "ScanFinding",
    "ScanGlobal",
    "ScanReport",
    "TensorSlice",
    "TorchportError",
    "convert",
    "load",
    "open",
    "scan",
    "scan_bytes",
    "scan_directory",
]

PathLike = Union[str, "os.PathLike[str]"]


def _local_path(path_or_url: PathLike) -> str:
    """The path to read. A URL is refused by name for now: it will go to the
    remote byte source when the core has one (the parameter takes it already)."""
    path = os.fspath(path_or_url)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", path):
        raise TorchportError(
            f"[unsupported] {path}: URLs are not read yet (a local path is)",
            "unsupported",
            file=path,
            message="URLs are not read yet (a local path is)",
        )
    return path


def open(
    path_or_url: PathLike,
    framework: str = "numpy",
    *,
    allow: Optional[Sequence[str]] = None,
    format: Optional[str] = None,
    verify: bool = False,
) -> File:
    """Opens a checkpoint as a lazy catalogue (as ``safetensors.safe_open``).

    Reads the directories and pickles only; ``get(name)`` gives a tensor as a
    view of the mapped file (zero copy where the dtype and layout allow).
    ``framework`` is "numpy" or "torch". ``allow`` adds trusted globals
    ("module.name" or "module.*"); ``format`` forces a reader by name;
    ``verify`` checks every zip CRC-32. Raises TorchportError.
    """
    return File(_local_path(path_or_url), framework, list(allow) if allow is not None else None,
                format, verify)


def load(
    path: PathLike,
    framework: str = "numpy",
    *,
    mmap: bool = False,
    allow: Optional[Sequence[str]] = None,
    format: Optional[str] = None,
) -> Any:
    """The whole object, as ``torch.load(path, weights_only=True)`` returns it
    (dicts, OrderedDicts, lists, tuples, numbers, strings, tensors), or a
    TorchportError naming what torch's weights_only loader would refuse.

    Tensors are owned copies (``mmap=True``: views of the mapped file, as
    ``torch.load(mmap=True)``), numpy arrays or torch tensors by ``framework``.
    """
    return _core.load(_local_path(path), framework, mmap,
                      list(allow) if allow is not None else None, format)


def scan(
    path: PathLike,
    *,
    allow: Optional[Sequence[str]] = None,
    format: Optional[str] = None,
) -> ScanReport:
    """What the file would make Python import and run, found without loading
    it (``torchport scan``): ``.verdict``, ``.findings`` (with offsets and
    reasons), ``.pickles``, and ``.json()``, the CLI's ``--json``."""
    return _core.scan(_local_path(path), list(allow) if allow is not None else None, format)


def scan_bytes(
    data: bytes,
    name: str = "<bytes>",
    *,
    allow: Optional[Sequence[str]] = None,
    format: Optional[str] = None,
) -> ScanReport:
    """``scan`` of bytes held in memory (an upload), named ``name`` in the report."""
    return _core.scan_bytes(bytes(data), name, list(allow) if allow is not None else None, format)


def scan_directory(
    path: PathLike,
    *,
    allow: Optional[Sequence[str]] = None,
    include: Optional[Iterable[str]] = None,
    exclude: Optional[Iterable[str]] = None,
) -> List[ScanReport]:
    """``scan`` of every regular file under ``path`` by its content (a model
    repository), optionally only those matching ``include`` globs and not
    ``exclude`` ones."""
    return _core.scan_directory(
        _local_path(path),
        list(allow) if allow is not None else None,
        list(include) if include is not None else None,
        list(exclude) if exclude is not None else None,
    )


def convert(
    src: PathLike,
    dst: PathLike,
    *,
    format: Optional[str] = None,
    dtype: Optional[str] = None,
    top_level_key: Optional[str] = None,
    max_shard_size: Union[int, str, None] = None,
    tensors_only: bool = False,
    dequantize: bool = False,
    keep_quantized: bool = False,
    densify: bool = False,
    allow: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    """Writes ``src`` to ``dst`` as ``torchport convert`` does (atomically,
    streamed): safetensors, a .pt torch.load reads (keeping the whole
    object), or a torchport record, by ``dst``'s name or ``format``.
    Returns {"files", "index", "tensors", "tensor_bytes", "format"}."""
    return _core.convert(
        _local_path(src),
        os.fspath(dst),
        format=format,
        dtype=dtype,
        top_level_key=top_level_key,
        max_shard_size=max_shard_size,
        tensors_only=tensors_only,
        dequantize=dequantize,
        keep_quantized=keep_quantized,
        densify=densify,
        allow=list(allow) if allow is not None else None,
    )
