"""Type stubs of torchport._core (python/src): the binding of the C++ core."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

__version__: str

_Path = Union[str, "os.PathLike[str]"]

class TensorSlice:
    """One tensor, sliced in place by indexing: ints, slices (positive
    steps) and ``...``, as ``safetensors``' ``get_slice``."""

    @property
    def shape(self) -> List[int]: ...
    @property
    def dtype(self) -> str: ...
    def get_shape(self) -> List[int]: ...
    def get_dtype(self) -> str: ...
    def __getitem__(self, key: Any) -> Any: ...

class File:
    """An open checkpoint (``torchport.open``). Arrays it gives are views of
    the mapped file and stay valid after ``close()``."""

    def __init__(self, path: _Path, framework: str = "numpy", allow: Optional[Sequence[str]] = None,
                 format: Optional[str] = None, verify: bool = False) -> None: ...
    def keys(self) -> List[str]: ...
    def get(self, name: str) -> Any: ...
    def get_tensor(self, name: str) -> Any: ...
    def get_raw(self, name: str) -> Tuple[np.ndarray, str]: ...
    def get_slice(self, name: str) -> TensorSlice: ...
    def object(self) -> Any: ...
    def dtype(self, name: str) -> str: ...
    def shape(self, name: str) -> List[int]: ...
    @property
    def metadata(self) -> Dict[str, str]: ...
    @property
    def format(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __len__(self) -> int: ...
    def __contains__(self, name: str) -> bool: ...
    def __enter__(self) -> File: ...
    def __exit__(self, *args: Any) -> None: ...

class ScanGlobal:
    name: str
    written: str
    opcode: str
    offset: int
    count: int
    calls: int
    call_opcode: str
    call_offset: Optional[int]
    builds: int
    sets: int
    allowed: bool
    known_dangerous: bool
    after_error: bool
    reasons: List[str]

class PickleScan:
    name: str
    offset: int
    protocol: int
    persistent_ids: int
    globals: List[ScanGlobal]
    error: str
    swept: bool
    python_reads_on: bool
    object_arrays: List[str]
    object_array_count: int

class ScanFinding:
    severity: str
    reason: str
    global_name: str
    known_dangerous: bool
    message: str
    where: str
    offset: Optional[int]

class ScanReport:
    path: str
    format: str
    reading: str
    reading_error: str
    verdict: str
    exit_code: int
    reason: str
    pickles: List[PickleScan]
    code_records: List[str]
    shards: List[str]
    members: List[ScanReport]
    tensor_records: int
    tensors: int
    findings: List[ScanFinding]
    torch_weights_only: Optional[Dict[str, Any]]
    def json(self, indent: int = 2) -> str: ...

def load(path: _Path, framework: str = "numpy", mmap: bool = False,
         allow: Optional[Sequence[str]] = None, format: Optional[str] = None) -> Any: ...
def scan(path: _Path, allow: Optional[Sequence[str]] = None, format: Optional[str] = None) -> ScanReport: ...
def scan_bytes(data: bytes, name: str = "<bytes>", allow: Optional[Sequence[str]] = None,
               format: Optional[str] = None) -> ScanReport: ...
def scan_directory(path: _Path, allow: Optional[Sequence[str]] = None,
                   include: Optional[Sequence[str]] = None,
                   exclude: Optional[Sequence[str]] = None) -> List[ScanReport]: ...
def convert(src: _Path, dst: _Path, *, format: Optional[str] = None, dtype: Optional[str] = None,
            top_level_key: Optional[str] = None, max_shard_size: Union[int, str, None] = None,
            tensors_only: bool = False, dequantize: bool = False, keep_quantized: bool = False,
            densify: bool = False, allow: Optional[Sequence[str]] = None) -> Dict[str, Any]: ...
def _set_error_class(cls: type) -> None: ...
