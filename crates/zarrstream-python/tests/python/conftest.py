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
