"""zarrstream.Writer: data in equals data out in readers we did not write, for every
dtype and codec; frames in every layout; stats; the OME form; the context manager."""

from __future__ import annotations

import gc
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tensorstore as ts
import zarr
from conftest import frames_of, stored_order
from zarr.core.indexing import morton_order_iter

import zarrstream

CODECS = ["none", "lz4:1", "blosc-lz4:5", "zstd:3", "blosc-zstd:3",
          "blosc-zstd:1:bitshuffle"]


def read_zarr(path: Path) -> np.ndarray:
    return zarr.open_array(str(path), mode="r")[...]


def read_tensorstore(path: Path) -> np.ndarray:
    store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}},
                    read=True).result()
    return store.read().result()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dtype", zarrstream.DTYPES)
def test_every_dtype_and_codec_reads_back_exactly(tmp_path: Path, rng, dtype: str,
                                                   codec: str) -> None:
    frames = frames_of(rng, dtype, (7, 2, 48, 80))  # (t, c, y, x), a partial last shard
    path = tmp_path / "a.zarr"
    with zarrstream.Writer(path, shape=(None, 2, 48, 80), chunks=(1, 1, 16, 32),
                           shards=(2, 2, 48, 64), dtype=dtype, codec=codec,
                           dimension_names=("t", "c", "y", "x")) as w:
        for t in range(7):
            w.append(frames[t])  # both channels of one time point in one call
    assert w.stats.frames_written == 14
    assert w.stats.frames_dropped == 0
    np.testing.assert_array_equal(read_zarr(path), frames)
    np.testing.assert_array_equal(read_tensorstore(path), frames)
    meta = json.loads((path / "zarr.json").read_text())
    assert meta["data_type"] == dtype
    assert meta["dimension_names"] == ["t", "c", "y", "x"]


def test_defaults_are_the_librarys(tmp_path: Path) -> None:
    w = zarrstream.Writer(tmp_path / "d.zarr", shape=(0, 32, 32), chunks=(1, 32, 32),
                          shards=(4, 32, 32))
    assert w.dtype == np.dtype("uint16")
    assert w.codec == "blosc-lz4:1"
    assert w.shape == (0, 32, 32)
    w.close()


def test_layouts_and_buffers(tmp_path: Path, rng) -> None:
    """C-contiguous stacks, Fortran order, transposed and strided views, bytes and
    memoryviews all land as the same frames."""
    frames = frames_of(rng, "uint16", (12, 40, 56))
    path = tmp_path / "l.zarr"
    with zarrstream.Writer(path, shape=(None, 40, 56), chunks=(1, 20, 28),
                           shards=(4, 40, 56)) as w:
        assert w.append(frames[0]) == 1                       # one C-contiguous frame
        assert w.append(frames[1:4]) == 3                     # a stack
        assert w.append(np.asfortranarray(frames[4])) == 1    # Fortran order
        t = np.ascontiguousarray(frames[5].T).T               # a transposed view
        assert not t.flags.c_contiguous
        assert w.append(t) == 1
        big = np.zeros((2, 80, 112), np.uint16)
        big[:, ::2, ::2] = frames[6:8]                        # a strided view
        assert w.append(big[:, ::2, ::2]) == 2
        assert w.append(frames[8].tobytes()) == 1             # raw bytes
        assert w.append(memoryview(frames[9:11].tobytes())) == 2
        assert w.append(frames[11:12]) == 1
    np.testing.assert_array_equal(read_zarr(path), frames)


@pytest.mark.parametrize("sink", ["auto", "mmap", "pwrite"])
def test_morton_chunk_order(tmp_path: Path, rng, sink: str) -> None:
    """chunk_order="morton" puts each shard's chunks in the order zarr-python writes
    them (its own morton_order_iter); the readers read the array back exactly."""
    frames = frames_of(rng, "uint16", (10, 64, 48))
    path = tmp_path / "m.zarr"
    with zarrstream.Writer(path, shape=(None, 64, 48), chunks=(1, 16, 16),
                           shards=(4, 64, 48), codec="zstd:1", chunk_order="morton",
                           sink=sink) as w:
        w.append(frames)
    np.testing.assert_array_equal(read_zarr(path), frames)
    np.testing.assert_array_equal(read_tensorstore(path), frames)
    grid = (4, 4, 3)
    morton = list(morton_order_iter(grid))
    assert morton != sorted(morton)
    for shard in ("c/0/0/0", "c/1/0/0"):
        assert stored_order(path / shard, grid) == morton, shard
    # The last shard holds frames 8 and 9 only: their chunks, in Morton order.
    assert stored_order(path / "c/2/0/0", grid) == [c for c in morton if c[0] < 2]
    # By default the mmap sink keeps C order (the appending sinks, chunks in the order
    # they were encoded).
    if sink == "mmap":
        c = tmp_path / "c.zarr"
        with zarrstream.Writer(c, shape=(None, 64, 48), chunks=(1, 16, 16),
                               shards=(4, 64, 48), sink=sink) as w:
            w.append(frames[:4])
        assert stored_order(c / "c/0/0/0", grid) == sorted(morton)


def test_list_input_is_a_dtype_error(tmp_path: Path) -> None:
    with zarrstream.Writer(tmp_path / "x.zarr", shape=(None, 4, 4), chunks=(1, 4, 4),
                           shards=(1, 4, 4)) as w:
        # A list becomes int64: not the array's dtype, so nothing is guessed.
        with pytest.raises(ValueError, match="dtype"):
            w.append([[1] * 4] * 4)


def test_stack_with_leading_axes(tmp_path: Path, rng) -> None:
    frames = frames_of(rng, "uint8", (3, 2, 5, 16, 16))  # (t, c, z, y, x)
    path = tmp_path / "n.zarr"
    with zarrstream.Writer(path, shape=(3, 2, 5, 16, 16), chunks=(1, 1, 5, 16, 16),
                           shards=(1, 2, 5, 16, 16), dtype="uint8") as w:
        assert w.append(frames) == 30  # the whole acquisition in one call
    np.testing.assert_array_equal(read_zarr(path), frames)


def test_stats_and_counts(tmp_path: Path, rng) -> None:
    frames = frames_of(rng, "uint16", (9, 32, 32))
    with zarrstream.Writer(tmp_path / "s.zarr", shape=(None, 32, 32), chunks=(1, 32, 32),
                           shards=(4, 32, 32), codec="none", crc32c=False) as w:
        w.append(frames)
        w.skip(2)
        assert w.frames_pushed == 11
    s = w.stats
    assert isinstance(s, zarrstream.Stats)
    assert (s.frames_pushed, s.frames_written, s.frames_dropped) == (11, 9, 2)
    assert s.bytes_in == 9 * 32 * 32 * 2
    assert s.shards == 3
    assert s.push_latency_ns.count == s.frames_pushed  # skips are pushes too
    assert 0 < s.push_latency_ns.p50 <= s.push_latency_ns.p99 <= s.push_latency_ns.max
    assert s.sink in ("direct", "pwrite", "mmap")
    assert w.close() is s  # closing again returns the same stats
    got = read_zarr(tmp_path / "s.zarr")
    assert got.shape == (11, 32, 32)
    np.testing.assert_array_equal(got[:9], frames)
    assert (got[9:] == 0).all()  # skipped frames read as the fill value


def test_drop_policy_counts_exactly(tmp_path: Path, rng) -> None:
    frames = frames_of(rng, "uint16", (64, 256, 256))
    with zarrstream.Writer(tmp_path / "drop.zarr", shape=(None, 256, 256),
                           chunks=(1, 256, 256), shards=(8, 256, 256), codec="zstd:19",
                           threads=1, pool_frames=2, backpressure="drop") as w:
        accepted = sum(w.append(f) for f in frames)
    s = w.stats
    assert s.frames_written == accepted
    assert s.frames_dropped == 64 - accepted
    assert s.frames_pushed == 64
    got = read_zarr(tmp_path / "drop.zarr")
    # Each frame is either exactly itself or entirely the fill value.
    kept = [i for i in range(64) if np.array_equal(got[i], frames[i])]
    assert len(kept) == accepted


def test_gil_is_released_while_appending(tmp_path: Path, rng) -> None:
    """A Python thread keeps running while append copies frames and waits for
    back-pressure (one slow encoding thread, two frame buffers)."""
    frames = frames_of(rng, "uint16", (24, 512, 512))
    ticks = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    with zarrstream.Writer(tmp_path / "g.zarr", shape=(None, 512, 512), chunks=(1, 512, 512),
                           shards=(8, 512, 512), codec="zstd:19", threads=1,
                           pool_frames=2) as w:
        counter = threading.Thread(target=count)
        counter.start()
        time.sleep(0.05)
        before = ticks
        started = time.perf_counter()
        w.append(frames)  # one call that blocks on back-pressure for a while
        elapsed = time.perf_counter() - started
        during = ticks - before
        stop.set()
        counter.join()
    # Held for `elapsed` seconds, the GIL would have let the counter run only at the
    # switch interval (never, inside one C call); released, it counts freely.
    assert elapsed > 0.2, f"append finished too fast ({elapsed:.3f} s) to tell"
    assert during > 100_000 * elapsed, f"{during} ticks in {elapsed:.3f} s"


def test_context_manager_aborts_on_exception(tmp_path: Path, rng) -> None:
    frames = frames_of(rng, "uint16", (5, 16, 16))
    path = tmp_path / "ab.zarr"
    with pytest.raises(KeyError):
        with zarrstream.Writer(path, shape=(None, 16, 16), chunks=(1, 16, 16),
                               shards=(2, 16, 16)) as w:
            w.append(frames)
            raise KeyError("stage lost")
    assert w.closed
    meta = json.loads((path / "zarr.json").read_text())["attributes"]["zarrstream"]
    assert meta["state"] == "aborted"
    assert "stage lost" in meta["error"]
    np.testing.assert_array_equal(read_zarr(path), frames)  # nothing accepted is lost


def test_abort_with_reason(tmp_path: Path, rng) -> None:
    frames = frames_of(rng, "uint16", (3, 16, 16))
    path = tmp_path / "a2.zarr"
    w = zarrstream.Writer(path, shape=(None, 16, 16), chunks=(1, 16, 16), shards=(2, 16, 16))
    w.append(frames)
    w.abort("camera fault")
    meta = json.loads((path / "zarr.json").read_text())["attributes"]["zarrstream"]
    assert meta["state"] == "aborted" and meta["error"] == "camera fault"
    np.testing.assert_array_equal(read_zarr(path), frames)
    with pytest.raises(ValueError, match="closed"):
        w.append(frames[0])


def test_unclosed_writer_warns_and_still_finishes(tmp_path: Path, rng) -> None:
    frames = frames_of(rng, "uint16", (3, 16, 16))
    path = tmp_path / "u.zarr"
    w = zarrstream.Writer(path, shape=(None, 16, 16), chunks=(1, 16, 16), shards=(2, 16, 16))
    w.append(frames)
    with pytest.warns(ResourceWarning, match="never closed"):
        del w
        gc.collect()
    np.testing.assert_array_equal(read_zarr(path), frames)


def test_ome_image(tmp_path: Path, rng) -> None:
    from ome_zarr_models.v05.image import Image

    frames = frames_of(rng, "uint16", (4, 2, 64, 64))
    path = tmp_path / "img.ome.zarr"
    ome = zarrstream.Ome(name="run", pixel_size=(0.65, 0.65), frame_interval=0.5,
                         channels=["GFP", "mCherry"], omero=True, levels=2)
    with zarrstream.Writer(path, shape=(None, 2, 64, 64), chunks=(1, 1, 32, 32),
                           shards=(2, 2, 64, 64), ome=ome) as w:
        w.append(frames)
    group = zarr.open_group(str(path), mode="r")
    image = Image.from_zarr(group)
    ms = image.ome_attributes.multiscales[0]
    assert [d.path for d in ms.datasets] == ["0", "1"]
    assert [a.name for a in ms.axes] == ["t", "c", "y", "x"]
    np.testing.assert_array_equal(group["0"][...], frames)
    assert group["1"].shape == (4, 2, 32, 32)
    attrs = json.loads((path / "zarr.json").read_text())["attributes"]["ome"]
    assert [c["label"] for c in attrs["omero"]["channels"]] == ["GFP", "mCherry"]
    assert attrs["multiscales"][0]["name"] == "run"
    scale = attrs["multiscales"][0]["datasets"][0]["coordinateTransformations"][0]["scale"]
    t_unit = attrs["multiscales"][0]["axes"][0]["unit"]
    assert (t_unit, scale) in [("millisecond", [500.0, 1.0, 0.65, 0.65]),
                               ("second", [0.5, 1.0, 0.65, 0.65])]


def test_ome_display_windows_follow_the_data(tmp_path: Path, rng) -> None:
    """``omero=True`` windows come from the frames (robust to hot pixels), a channel
    mapping without ``window`` follows the data too, and a window given is kept."""
    from ome_zarr_models.v05.image import Image

    frames = rng.integers(100, 110, size=(6, 2, 64, 64), dtype=np.uint16)
    frames[:, 0, 20:40, 20:40] = 2000
    frames[:, 1, 20:40, 20:40] = 30000
    frames[:, :, 0, 0] = 65000  # a hot pixel in every frame
    cases = {
        "auto": True,
        "mapped": [{"label": "a", "color": "00FF00"},
                   {"label": "b", "color": "FF00FF",
                    "window": {"min": 0, "max": 65535, "start": 5, "end": 6}}],
    }
    for name, omero in cases.items():
        path = tmp_path / f"{name}.ome.zarr"
        ome = zarrstream.Ome(channels=["a", "b"], omero=omero)
        with zarrstream.Writer(path, shape=(None, 2, 64, 64), chunks=(1, 1, 32, 32),
                               shards=(2, 2, 64, 64), ome=ome) as w:
            w.append(frames)
        Image.from_zarr(zarr.open_group(str(path), mode="r"))
        channels = json.loads((path / "zarr.json").read_text())["attributes"]["ome"][
            "omero"]["channels"]
        windows = [(c["window"]["start"], c["window"]["end"]) for c in channels]
        assert 100 <= windows[0][0] < 110 and windows[0][1] == 2000, (name, windows)
        assert channels[0]["window"]["min"] == 0 and channels[0]["window"]["max"] == 65535
        if name == "auto":
            assert 100 <= windows[1][0] < 110 and windows[1][1] == 30000, windows
        else:
            assert windows[1] == (5, 6), windows


@pytest.mark.parametrize("layout", ["c", "fortran", "strided"])
def test_append_makes_no_python_side_copy(tmp_path: Path, rng, layout: str) -> None:
    """numpy reports its allocations to tracemalloc: appending 32 MiB of frames in any
    layout allocates (almost) nothing in Python; the one copy is the writer's, into its
    frame pool."""
    import tracemalloc

    frames = frames_of(rng, "uint16", (64, 512, 512))
    if layout == "fortran":
        frames = np.asfortranarray(frames)
    elif layout == "strided":
        frames = np.repeat(frames, 2, axis=2)[:, :, ::2]
        assert not frames.flags.c_contiguous
    with zarrstream.Writer(tmp_path / "nc.zarr", shape=(None, 512, 512),
                           chunks=(1, 256, 256), shards=(16, 512, 512)) as w:
        tracemalloc.start()
        try:
            w.append(frames)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 512 * 512 * 2 // 4, f"append allocated {peak} bytes in Python"
    np.testing.assert_array_equal(read_zarr(tmp_path / "nc.zarr"), frames)


def test_attributes_while_recording(tmp_path: Path, rng) -> None:
    """Attributes set mid-recording are published at once, survive later publications,
    and zarr-python reads them; the writer's own namespaces are refused."""
    frames = frames_of(rng, "uint16", (6, 16, 16))
    path = tmp_path / "at.zarr"
    with zarrstream.Writer(path, shape=(None, 16, 16), chunks=(1, 16, 16),
                           shards=(2, 16, 16), attributes={"lab": "b1"}) as w:
        w.append(frames[:3])
        w.set_attribute("stage", {"x_um": 12.5, "y_um": -3.0})
        assert zarr.open_array(str(path), mode="r").attrs["stage"]["x_um"] == 12.5
        w.set_attribute("gone", [1, 2])
        w.remove_attribute("gone")
        with pytest.raises(ValueError, match="namespace") as info:
            w.set_attribute("zarrstream", {})
        assert isinstance(info.value, zarrstream.InvalidSpecError)
        with pytest.raises(ValueError, match="not JSON"):
            w.set_attribute("bad", object())
        with pytest.raises(ValueError, match="OME-Zarr image"):
            w.set_attribute("acq", 1, group=True)
        w.append(frames[3:])
    attrs = zarr.open_array(str(path), mode="r").attrs.asdict()
    assert attrs["stage"] == {"x_um": 12.5, "y_um": -3.0}
    assert attrs["lab"] == "b1"
    assert "gone" not in attrs
    assert attrs["zarrstream"]["state"] == "finished"
    with pytest.raises(ValueError, match="closed"):
        w.set_attribute("late", 1)


def test_image_group_attributes(tmp_path: Path) -> None:
    path = tmp_path / "g.ome.zarr"
    with zarrstream.Writer(path, shape=(None, 16, 16), chunks=(1, 16, 16),
                           shards=(2, 16, 16), ome=True) as w:
        w.set_attribute("acquisition", {"operator": "ada"}, group=True)
        with pytest.raises(ValueError, match="namespace"):
            w.set_attribute("ome", {}, group=True)
        w.append(np.zeros((16, 16), np.uint16))
    group = zarr.open_group(str(path), mode="r")
    assert group.attrs["acquisition"] == {"operator": "ada"}
    assert "multiscales" in group.attrs["ome"]


def test_frame_metadata(tmp_path: Path, rng) -> None:
    """Per-frame values and JSON, read back by zarr-python as ordinary arrays aligned
    with the frames; bad metadata refuses its frame."""
    frames = frames_of(rng, "uint16", (20, 16, 16))
    path = tmp_path / "fm.zarr"
    with zarrstream.Writer(path, shape=(None, 16, 16), chunks=(1, 16, 16),
                           shards=(4, 16, 16),
                           frame_meta={"timestamp": "float64", "counter": "int64"},
                           frame_meta_json=True) as w:
        for i, frame in enumerate(frames):
            if i == 7:
                w.append(frame)  # no metadata: fill values
                continue
            w.append(frame, meta={"timestamp": i * 0.25, "counter": np.int64(i)},
                     meta_json={"i": i} if i % 2 else None)
        with pytest.raises(ValueError, match="exposure"):
            w.append(frames[0], meta={"exposure": 1.0})
        with pytest.raises(ValueError, match="counter"):
            w.append(frames[0], meta={"counter": 1.5})
        with pytest.raises(ValueError, match="not a number"):
            w.append(frames[0], meta={"timestamp": "soon"})
        with pytest.raises(ValueError, match="one frame"):
            w.append(frames[:2], meta={"timestamp": 1.0})
        assert w.frames_pushed == 20  # refused frames were not pushed
    np.testing.assert_array_equal(read_zarr(path), frames)
    group = zarr.open_group(str(path / "frame_meta"), mode="r")
    ts = group["timestamp"][...]
    assert ts.shape == (20,)
    assert np.isnan(ts[7])
    np.testing.assert_array_equal(np.delete(ts, 7), np.delete(np.arange(20) * 0.25, 7))
    assert list(group["counter"][...]) == [i if i != 7 else 0 for i in range(20)]
    offset, length = group["json_offset"][...], group["json_length"][...]
    text = bytes(group["json_bytes"][...])
    for i in range(20):
        got = text[offset[i]:offset[i] + length[i]]
        assert (json.loads(got) == {"i": i}) if (i % 2 and i != 7) else got == b""
    # tensorstore reads the same values.
    np.testing.assert_array_equal(read_tensorstore(path / "frame_meta" / "timestamp"), ts)


@pytest.mark.parametrize(("dtype", "fill"), [("int64", -2**63), ("uint64", 2**60 + 2**12),
                                             ("int8", -128), ("float64", float("-inf"))])
def test_fill_values_at_the_ends_of_the_new_types(tmp_path: Path, dtype: str, fill) -> None:
    """Fill values near the ends of the types read back exactly as zarr-python's
    fill_value and in the chunks no frame reached."""
    path = tmp_path / "f.zarr"
    frame = np.ones((16, 16), dtype)
    with zarrstream.Writer(path, shape=(3, 16, 32), chunks=(1, 16, 16), shards=(1, 16, 32),
                           dtype=dtype, fill_value=fill) as w:
        w.append(np.concatenate([frame, frame], axis=1))  # frame 0 only; 1 and 2 are fill
    a = zarr.open_array(path, mode="r")
    assert a.dtype == np.dtype(dtype)
    want = np.full((3, 16, 32), fill, dtype)
    want[0] = 1
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(read_tensorstore(path), want)
