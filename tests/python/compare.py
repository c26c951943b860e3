"""Deep comparison of what torchport.load returns with what torch.load
returns: the same containers (dict / OrderedDict, list, tuple, set), the
same scalars, and tensors with the same dtype, sizes, strides and bits (a
quantized tensor its quantizer, a sparse one its parts), and tensors that
share a storage in torch's object share it in ours."""

import collections
import math

import numpy as np


def _torch():
    import torch

    return torch


def _bits(t):
    """A dense tensor's elements as bytes in C order (NaNs compare by bits)."""
    torch = _torch()
    t = t.detach()
    if hasattr(t, "is_conj") and t.is_conj():
        t = t.resolve_conj()
    if hasattr(t, "is_neg") and t.is_neg():
        t = t.resolve_neg()
    t = t.contiguous()
    if t.numel() == 0:
        return b""
    carrier = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size())
    if carrier is None:  # complex128: two float64 each
        return t.view(torch.float64).numpy().tobytes()
    return t.view(carrier).numpy().tobytes()


def _tensor_equal(a, b, path, shares):
    torch = _torch()
    assert isinstance(a, torch.Tensor), f"{path}: {type(a).__name__}, torch gives a tensor"
    assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
    assert tuple(a.shape) == tuple(b.shape), f"{path}: shape {tuple(a.shape)} != {tuple(b.shape)}"
    assert a.layout == b.layout, f"{path}: layout {a.layout} != {b.layout}"
    if b.is_meta:
        assert a.is_meta, f"{path}: torch's is a meta tensor"
        assert a.stride() == b.stride(), f"{path}: strides {a.stride()} != {b.stride()}"
        return
    if b.layout != torch.strided:
        assert _bits(a.to_dense()) == _bits(b.to_dense()), f"{path}: sparse values differ"
        return
    if b.is_quantized:
        assert a.is_quantized and a.qscheme() == b.qscheme(), f"{path}: qscheme"
        if b.qscheme() in (torch.per_tensor_affine,):
            assert a.q_scale() == b.q_scale() and a.q_zero_point() == b.q_zero_point(), path
        else:
            assert torch.equal(a.q_per_channel_scales(), b.q_per_channel_scales()), path
            assert torch.equal(a.q_per_channel_zero_points(), b.q_per_channel_zero_points()), path
            assert a.q_per_channel_axis() == b.q_per_channel_axis(), path
        assert _bits(a.int_repr()) == _bits(b.int_repr()), f"{path}: integers differ"
        return
    assert a.stride() == b.stride(), f"{path}: strides {a.stride()} != {b.stride()}"
    assert _bits(a) == _bits(b), f"{path}: elements differ"
    conj = (hasattr(b, "is_conj") and b.is_conj()) or (hasattr(b, "is_neg") and b.is_neg())
    if b.numel() and not conj:  # torchport resolves a conj/neg view into a storage of its own
        shares.append((path, a, b))


def _storage_key(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr()


def equal(mine, ref, path="$", shares=None):
    """Asserts `mine` (torchport.load) equals `ref` (torch.load); returns
    nothing. Messages name the path."""
    top = shares is None
    if top:
        shares = []
    torch = _torch()
    if isinstance(ref, torch.Tensor):
        _tensor_equal(mine, ref, path, shares)
    elif isinstance(ref, np.ndarray):
        assert isinstance(mine, np.ndarray), f"{path}: {type(mine).__name__}, torch gives an ndarray"
        assert mine.dtype == ref.dtype and mine.shape == ref.shape, f"{path}: {mine.dtype}{mine.shape} != {ref.dtype}{ref.shape}"
        assert np.ascontiguousarray(mine).tobytes() == np.ascontiguousarray(ref).tobytes(), f"{path}: elements differ"
    elif isinstance(ref, dict):
        assert isinstance(mine, dict), f"{path}: {type(mine).__name__}, torch gives a dict"
        assert isinstance(mine, collections.OrderedDict) == isinstance(ref, collections.OrderedDict), (
            f"{path}: {type(mine).__name__} != {type(ref).__name__}")
        assert list(mine.keys()) == list(ref.keys()), f"{path}: keys {list(mine)[:8]} != {list(ref)[:8]}"
        for k in ref:
            equal(mine[k], ref[k], f"{path}.{k}", shares)
    elif isinstance(ref, (list, tuple)):
        want = tuple if isinstance(ref, tuple) else list  # torch.Size is a tuple
        assert isinstance(mine, want), f"{path}: {type(mine).__name__} != {type(ref).__name__}"
        assert len(mine) == len(ref), f"{path}: {len(mine)} items != {len(ref)}"
        for i, (x, y) in enumerate(zip(mine, ref)):
            equal(x, y, f"{path}.{i}", shares)
    elif isinstance(ref, (set, frozenset)):
        assert isinstance(mine, (set, frozenset)) and mine == ref, f"{path}: {mine!r} != {ref!r}"
    elif isinstance(ref, float) and math.isnan(ref):
        assert isinstance(mine, float) and math.isnan(mine), f"{path}: {mine!r} != nan"
    else:
        assert type(mine) is type(ref) or (
            isinstance(ref, np.generic) and mine == ref), f"{path}: {type(mine).__name__} {mine!r} != {type(ref).__name__} {ref!r}"
        assert mine == ref, f"{path}: {mine!r} != {ref!r}"
    if top:
        # Storage sharing: two tensors share in torch's object iff they share in ours.
        groups_ref, groups_mine = {}, {}
        for p, a, b in shares:
            groups_ref.setdefault(_storage_key(b), set()).add(p)
            groups_mine.setdefault(_storage_key(a), set()).add(p)
        assert sorted(map(sorted, groups_ref.values())) == sorted(map(sorted, groups_mine.values())), (
            f"{path}: tensors share storages differently")
