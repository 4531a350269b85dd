"""Memory: zarrstream.estimate_memory and Recording.estimate_memory bound what the
writer counts (Writer.memory_in_use, Stats.memory), the count returns to 0 once
closed, and an invalid configuration fails the estimate as it fails the writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import frames_of

import zarrstream

ARRAY = dict(shape=(None, 256, 256), chunks=(1, 128, 128), shards=(8, 256, 256),
             dtype="uint16")


@pytest.mark.parametrize("sink", ["pwrite", "mmap", "direct"])
@pytest.mark.parametrize("codec", ["lz4:1", "zstd:1", "none"])
def test_the_estimate_bounds_the_count_and_the_count_returns_to_zero(
        tmp_path: Path, rng, sink: str, codec: str) -> None:
    est = zarrstream.estimate_memory(**ARRAY, codec=codec, sink=sink, threads=2)
    assert isinstance(est, zarrstream.MemoryEstimate)
    assert est.resident == (est.frame_pool + est.staging + est.encoders
                            + est.mapped_shards + est.pyramid + est.bookkeeping)
    assert est.total == est.resident + est.page_cache
    # 2 x 2 + 2 pooled frames of 128 KiB.
    assert est.frame_pool == 6 * 256 * 256 * 2
    frames = frames_of(rng, "uint16", (20, 256, 256))
    path = tmp_path / "a.zarr"
    with zarrstream.Writer(path, **ARRAY, codec=codec, sink=sink, threads=2) as w:
        for f in frames:
            w.append(f)
            m = w.memory_in_use()
            assert isinstance(m, zarrstream.MemoryUsage)
            assert 0 < m.current <= m.peak <= est.resident
    s = w.stats
    assert s.memory.current == 0
    assert s.pool_bytes <= s.memory.peak <= est.resident - est.bookkeeping
    assert w.memory_in_use() == s.memory
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], frames)


def test_a_pyramid_adds_its_levels(tmp_path: Path) -> None:
    flat = zarrstream.estimate_memory(**ARRAY, threads=2)
    image = zarrstream.estimate_memory(**ARRAY, threads=2, ome={"levels": 3})
    assert flat.pyramid == 0 and image.pyramid > 0
    with zarrstream.Writer(tmp_path / "i.ome.zarr", **ARRAY, threads=2,
                           ome={"levels": 3}) as w:
        w.append(np.zeros((10, 256, 256), dtype="uint16"))
    assert w.stats.memory.current == 0
    assert w.stats.pool_bytes < w.stats.memory.peak <= image.resident


def test_a_recording_is_estimated_and_counted(tmp_path: Path) -> None:
    arrays = {
        "a": zarrstream.ArraySpec(**ARRAY),
        "b": dict(shape=(None, 64, 64), chunks=(4, 32, 32), shards=(8, 64, 64),
                  dtype="uint8", codec="zstd:1"),
    }
    est = zarrstream.Recording.estimate_memory(arrays, threads=2, sink="pwrite")
    with zarrstream.Recording(tmp_path / "r.zarr", arrays, threads=2, sink="pwrite") as rec:
        for _ in range(10):
            rec.append("a", np.ones((256, 256), dtype="uint16"))
            rec.append("b", np.ones((64, 64), dtype="uint8"))
        m = rec.memory_in_use()
        assert 0 < m.current <= m.peak <= est.resident
    total = rec.stats.total
    assert total.memory.current == 0 and 0 < total.memory.peak <= est.resident
    assert all(s.memory.current == 0 for s in rec.stats.arrays.values())
    assert rec.memory_in_use() == total.memory


def test_an_invalid_configuration_fails_the_estimate_as_it_fails_the_writer(
        tmp_path: Path) -> None:
    bad = dict(shape=(None, 256, 256), chunks=(1, 128, 96), shards=(8, 256, 256))
    with pytest.raises(zarrstream.InvalidSpecError) as made:
        zarrstream.Writer(tmp_path / "x.zarr", **bad)
    with pytest.raises(zarrstream.InvalidSpecError) as estimated:
        zarrstream.estimate_memory(**bad)
    assert isinstance(estimated.value, ValueError)
    assert str(estimated.value) == str(made.value)
    with pytest.raises(zarrstream.InvalidSpecError, match="threads"):
        zarrstream.estimate_memory(**ARRAY, threads=5000)
    with pytest.raises(TypeError, match="colour"):
        zarrstream.estimate_memory(**ARRAY, colour="red")
    with pytest.raises(zarrstream.InvalidSpecError) as dup:
        zarrstream.Recording.estimate_memory([("a", ARRAY), ("a", ARRAY)])
    with pytest.raises(zarrstream.InvalidSpecError) as made:
        zarrstream.Recording(tmp_path / "r.zarr", [("a", ARRAY), ("a", ARRAY)])
    assert str(dup.value) == str(made.value)
    with pytest.raises(TypeError, match="path"):
        zarrstream.Recording.estimate_memory({"a": ARRAY}, path="x")
    assert not (tmp_path / "x.zarr").exists() and not (tmp_path / "r.zarr").exists()
