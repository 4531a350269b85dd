"""Frames written by index, in any order (``Writer.write_frame``, ``skip_frame``,
``acquisition_order``; the same on a ``Recording``'s arrays): every loop order of
``t, c, z`` into a bounded ``t, c, z, y, x`` array, an unbounded axis 0 within its
window, skipped frames, two positions of one recording. Every array is read back by
zarr-python and tensorstore and compared with the numpy array the frames came from.

The refusals (wrong indices, frames written twice, mixed appending, unsupported arrays,
impossible orders, working-set budgets) are in ``test_errors.py``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr
from conftest import frames_of

import zarrstream

DIMS = ("t", "c", "z", "y", "x")
#: t, c, z, y, x; inner chunks two time points deep and a quarter of a frame, shards a
#: whole z-stack of one channel over all time points: an order other than storage
#: order keeps several staging groups and shards open at once.
SHAPE = (4, 3, 5, 32, 48)
CHUNKS = (2, 1, 1, 16, 24)
SHARDS = (4, 1, 5, 32, 48)


def read_zarr(path: Path) -> np.ndarray:
    return zarr.open_array(str(path), mode="r")[...]


def read_tensorstore(path: Path) -> np.ndarray:
    store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}},
                    read=True).result()
    return np.asarray(store.read().result())


def assert_read_back(path: Path, expected: np.ndarray) -> None:
    """zarr-python and tensorstore both read exactly ``expected``."""
    for read in (read_zarr, read_tensorstore):
        got = read(path)
        assert got.shape == expected.shape, read.__name__
        assert got.dtype == expected.dtype, read.__name__
        np.testing.assert_array_equal(got, expected, err_msg=read.__name__)


def loops(order: tuple[str, ...], counts: dict[str, int]) -> list[tuple[int, ...]]:
    """Every ``(t, c, z)`` index in the nested loops ``order`` (outermost first)."""
    out = []
    for values in itertools.product(*(range(counts[n]) for n in order)):
        at = dict(zip(order, values))
        out.append(tuple(at[n] for n in ("t", "c", "z")))
    return out


@pytest.mark.parametrize("order", list(itertools.permutations(("t", "c", "z"))),
                         ids="".join)
def test_every_acquisition_order_reads_back(tmp_path: Path, rng, order: tuple[str, ...]) -> None:
    data = frames_of(rng, "uint16", SHAPE)
    path = tmp_path / "run.zarr"
    counts = dict(zip(DIMS, SHAPE))
    with zarrstream.Writer(path, shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="uint16",
                           codec="zstd:1", dimension_names=DIMS, acquisition_order=order,
                           threads=2) as w:
        for index in loops(order, counts):
            assert w.write_frame(index, data[index]) is True
        assert w.frames_pushed == 60
    assert w.stats.frames_written == 60 and w.stats.frames_dropped == 0
    assert w.stats.shards == 3
    assert_read_back(path, data)
    record = zarr.open_array(str(path), mode="r").attrs["zarrstream"]
    assert record["state"] == "finished" and record["frames_committed"] == 60


@pytest.mark.parametrize("axes", [(2, 0, 1), (1, 2, 0)], ids=str)
def test_order_by_axis_numbers(tmp_path: Path, rng, axes: tuple[int, ...]) -> None:
    """The order as storage axis numbers, on an array without dimension names; frames
    given as raw bytes and as a non-contiguous view (gathered once)."""
    data = frames_of(rng, "int16", SHAPE)
    path = tmp_path / "axes.zarr"
    names = tuple(("t", "c", "z")[a] for a in axes)
    with zarrstream.Writer(path, shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="int16",
                           acquisition_order=axes) as w:
        for n, index in enumerate(loops(names, dict(zip(DIMS, SHAPE)))):
            frame = data[index]
            if n % 3 == 1:
                w.write_frame(list(index), frame.tobytes())
            elif n % 3 == 2:
                w.write_frame(index, np.asfortranarray(frame))  # not C-contiguous
            else:
                w.write_frame(np.array(index), frame[np.newaxis])  # a stack of one
    assert_read_back(path, data)


def test_undeclared_order_within_the_open_shards(tmp_path: Path, rng) -> None:
    """Without acquisition_order, frames may come in any order within the shard set
    appending keeps open (here two time points of every z, each backwards)."""
    shape = (6, 4, 24, 24)
    data = frames_of(rng, "uint8", shape)
    path = tmp_path / "undeclared.zarr"
    with zarrstream.Writer(path, shape=shape, chunks=(1, 1, 12, 12), shards=(2, 4, 24, 24),
                           dtype="uint8", codec="none") as w:
        for row in range(3):
            for z in reversed(range(4)):
                for t in reversed(range(row * 2, row * 2 + 2)):
                    w.write_frame((t, z), data[t, z])
    assert w.stats.frames_written == 24
    assert_read_back(path, data)


def test_rank_2_single_frame(tmp_path: Path, rng) -> None:
    """An array of one frame (y, x): its index is empty."""
    frame = frames_of(rng, "uint16", (40, 56))
    with zarrstream.Writer(tmp_path / "one.zarr", shape=(40, 56), chunks=(20, 28),
                           shards=(40, 56), dimension_names=("y", "x")) as w:
        assert w.write_frame((), frame)
        with pytest.raises(zarrstream.FrameConflictError):
            w.write_frame([], frame)
    assert_read_back(tmp_path / "one.zarr", frame)
    with zarrstream.Writer(tmp_path / "none.zarr", shape=(40, 56), chunks=(20, 28),
                           shards=(40, 56), fill_value=3) as w:
        w.skip_frame(())
    assert w.stats.frames_dropped == 1
    assert_read_back(tmp_path / "none.zarr", np.full((40, 56), 3, np.uint16))


def test_skip_frame_reads_as_fill(tmp_path: Path, rng) -> None:
    data = frames_of(rng, "float32", SHAPE)
    path = tmp_path / "skip.zarr"
    skipped = {(0, 0, 0), (1, 2, 4), (3, 1, 2), (2, 0, 3)}
    order = ("z", "c", "t")
    with zarrstream.Writer(path, shape=SHAPE, chunks=CHUNKS, shards=SHARDS,
                           dtype="float32", fill_value=-1.5, dimension_names=DIMS,
                           acquisition_order=order) as w:
        for index in loops(order, dict(zip(DIMS, SHAPE))):
            if index in skipped:
                w.skip_frame(index)
            else:
                w.write_frame(index, data[index])
    assert w.stats.frames_written == 60 - len(skipped)
    assert w.stats.frames_dropped == len(skipped)
    expected = data.copy()
    for index in skipped:
        expected[index] = -1.5
    assert_read_back(path, expected)


def test_frames_that_never_came_read_as_fill(tmp_path: Path, rng) -> None:
    """close() finishes every shard, frames never written reading as the fill value.
    (Inner chunks one frame deep: a chunk deeper than a frame that misses one holds a
    staging buffer until close, so many such holes exhaust them: skip_frame frees it.)"""
    data = frames_of(rng, "uint16", SHAPE)
    path = tmp_path / "partial.zarr"
    written = [(t, c, z) for t in range(4) for c in range(3) for z in range(5)
               if (t + c + z) % 3]
    with zarrstream.Writer(path, shape=SHAPE, chunks=(1, 1, 1, 16, 24), shards=SHARDS,
                           fill_value=9, dimension_names=DIMS,
                           acquisition_order=("c", "z", "t")) as w:
        for index in sorted(written, key=lambda i: (i[1], i[2], i[0])):
            w.write_frame(index, data[index])
    expected = np.full(SHAPE, 9, np.uint16)
    for index in written:
        expected[index] = data[index]
    assert_read_back(path, expected)


def test_unbounded_axis_zero_within_the_window(tmp_path: Path, rng) -> None:
    """t unbounded: each time point's channels in reverse, and the next time point's
    frames before the previous one's are all in (the window is two rows of shard sets);
    the published shape follows the frames."""
    data = frames_of(rng, "uint16", (7, 2, 16, 16))
    path = tmp_path / "live.zarr"
    with zarrstream.Writer(path, shape=(None, 2, 16, 16), chunks=(1, 1, 16, 16),
                           shards=(2, 2, 16, 16), dimension_names=("t", "c", "y", "x"),
                           acquisition_order=("t", "c")) as w:
        order = [(1, 1), (0, 1), (1, 0), (0, 0), (2, 0), (3, 1), (3, 0), (2, 1),
                 (4, 1), (4, 0), (5, 0), (6, 0), (5, 1), (6, 1)]
        for index in order:
            w.write_frame(index, data[index])
        with pytest.raises(zarrstream.FrameIndexError) as info:
            w.write_frame((50, 0), data[0, 0])
        assert info.value.index == (50, 0)
    assert w.stats.frames_written == 14
    assert_read_back(path, data)


def test_recording_two_positions(tmp_path: Path, rng) -> None:
    """Two positions of one recording, acquired channel-first with the positions
    visited inside each time point (as pymmcore-plus' 'ctpz' would), their frames
    written by index; one array has another dtype and shard layout."""
    t, c, z, h, w = 3, 2, 4, 24, 32
    a = frames_of(rng, "uint16", (t, c, z, h, w))
    b = frames_of(rng, "uint8", (t, c, z, h, w))
    arrays = {
        "A/0": zarrstream.ArraySpec(shape=(t, c, z, h, w), chunks=(1, 1, 2, h, w),
                                    shards=(3, 1, 4, h, w), dtype="uint16",
                                    dimension_names=DIMS),
        "B/0": zarrstream.ArraySpec(shape=(t, c, z, h, w), chunks=(1, 1, 1, 8, 16),
                                    shards=(1, 2, 4, h, w), dtype="uint8", codec="zstd:1",
                                    dimension_names=DIMS),
    }
    path = tmp_path / "positions.zarr"
    with zarrstream.Recording(path, arrays, acquisition_order=("c", "t", "z"),
                              threads=2) as rec:
        for ci in range(c):
            for ti in range(t):
                for key, data in (("A/0", a), ("B/0", b)):
                    for zi in range(z):
                        assert rec.write_frame(key, (ti, ci, zi), data[ti, ci, zi])
        assert rec.frames_pushed("A/0") == t * c * z
    stats = rec.stats
    assert stats.arrays["A/0"].frames_written == t * c * z
    assert stats.arrays["B/0"].frames_written == t * c * z
    assert_read_back(path / "A" / "0", a)
    assert_read_back(path / "B" / "0", b)


def test_recording_skip_and_mixed_arrays(tmp_path: Path, rng) -> None:
    """One array of a recording written by index (with skips), the other appended."""
    a = frames_of(rng, "uint16", (2, 3, 16, 16))
    b = frames_of(rng, "uint16", (5, 16, 16))
    arrays = {
        "idx": zarrstream.ArraySpec(shape=(2, 3, 16, 16), chunks=(1, 1, 16, 16),
                                    shards=(2, 3, 16, 16), dimension_names=("t", "z", "y", "x")),
        "app": zarrstream.ArraySpec(shape=(None, 16, 16), chunks=(1, 16, 16),
                                    shards=(2, 16, 16)),
    }
    path = tmp_path / "mixed.zarr"
    with zarrstream.Recording(path, arrays) as rec:
        for zi in reversed(range(3)):
            for ti in range(2):
                if (ti, zi) == (1, 1):
                    rec.skip_frame("idx", (ti, zi))
                else:
                    rec.write_frame("idx", (ti, zi), a[ti, zi])
                if (ti, zi) == (0, 2):
                    # Each array takes either appended or indexed frames.
                    with pytest.raises(zarrstream.FrameConflictError):
                        rec.append("idx", a[0, 0])
        rec.append("app", b)
        with pytest.raises(zarrstream.FrameConflictError):
            rec.write_frame("app", (0,), b[0])
    expected = a.copy()
    expected[1, 1] = 0
    assert rec.stats.arrays["idx"].frames_dropped == 1
    assert_read_back(path / "idx", expected)
    assert_read_back(path / "app", b)


def test_estimate_memory_takes_the_order(tmp_path: Path) -> None:
    """estimate_memory takes acquisition_order and max_open_shards as the constructors
    do, and refuses the same orders."""
    kwargs: dict[str, Any] = dict(shape=SHAPE, chunks=CHUNKS, shards=SHARDS,
                                  dimension_names=DIMS)
    declared = zarrstream.estimate_memory(**kwargs, acquisition_order=("c", "t", "z"),
                                          max_open_shards=64)
    assert declared.resident > 0
    with pytest.raises(zarrstream.InvalidSpecError, match="twice"):
        zarrstream.estimate_memory(**kwargs, acquisition_order=(0, 0, 1))
    spec = zarrstream.ArraySpec(**kwargs)
    estimate = zarrstream.Recording.estimate_memory({"a": spec, "b": spec},
                                                    acquisition_order=("z", "c", "t"))
    assert estimate.resident > declared.resident
