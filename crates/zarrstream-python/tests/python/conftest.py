"""Shared fixtures of the Python package's tests."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261124)


def frames_of(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random frames spanning the dtype's range (compressible enough to exercise codecs)."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt) * 1000
    info = np.iinfo(dt)
    base = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    # Smooth half the rows so compressors have something to find.
    base[..., ::2, :] = base[..., :1, :]
    return base


def stored_order(shard, grid: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The coordinates of a shard's present inner chunks in the order their bytes lie in
    the file, read from its index (at the end: 16 bytes per chunk, then a crc32c)."""
    n = int(np.prod(grid))
    data = open(shard, "rb").read()
    offsets = np.frombuffer(data[len(data) - 16 * n - 4:len(data) - 4], "<u8")[0::2]
    present = sorted((i for i in range(n) if offsets[i] != 2**64 - 1),
                     key=lambda i: offsets[i])
    return [tuple(int(c) for c in np.unravel_index(i, grid)) for i in present]
