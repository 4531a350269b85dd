"""Shared fixtures of the Python package's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import garage
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


def _garage_binary_or_skip() -> Path:
    """The Garage binary; without one the test skips loudly (fails with ``CI=true``)."""
    bin = garage.binary()
    if not bin.exists():
        why = (f"no Garage S3 server at {bin}: `cargo test -p zarrstream-python` builds it "
               "(tools/garage/build: 10 to 15 minutes, once), "
               "or set ZARRSTREAM_GARAGE=/path/to/garage")
        if garage.in_ci():
            pytest.fail(why)
        print(f"\n{'!' * 78}\nOBJECT-STORE TESTS SKIPPED: {why}\n{'!' * 78}", file=sys.stderr)
        pytest.skip(why)
    return bin


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[garage.Garage]:
    """One Garage node for the session's object-store tests, with a key and a bucket."""
    g = garage.start(_garage_binary_or_skip(), tmp_path_factory.mktemp("garage"))
    yield g
    g.stop(gently=False)


@pytest.fixture
def s3_own(tmp_path: Path) -> Iterator[garage.Garage]:
    """A Garage node of the test's own, for a test that stops it."""
    g = garage.start(_garage_binary_or_skip(), tmp_path / "garage")
    yield g
    g.stop(gently=False)
