"""zarrstream.Recording: several arrays in one group, read back by readers we did not
write (zarr-python, tensorstore); frame metadata; attributes of the root group, of the
arrays and of a group someone else made; concurrent pushes from Python threads; the
exceptions; resume of a finished array."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr
from conftest import frames_of, stored_order
from zarr.core.indexing import morton_order_iter

import zarrstream


def read_zarr(path: Path) -> np.ndarray:
    return zarr.open_array(str(path), mode="r")[...]


def read_tensorstore(path: Path) -> np.ndarray:
    store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}},
                    read=True).result()
    return store.read().result()


def two_arrays(**extra: Any) -> dict[str, zarrstream.ArraySpec]:
    return {
        "cam0": zarrstream.ArraySpec(shape=(None, 2, 48, 80), chunks=(1, 1, 16, 32),
                                     shards=(2, 2, 48, 64), dtype="uint16",
                                     codec="zstd:3", dimension_names=("t", "c", "y", "x"),
                                     **extra),
        "sub/cam1": zarrstream.ArraySpec(shape=(None, 24, 24), chunks=(1, 24, 24),
                                         shards=(4, 24, 24), dtype="float32",
                                         codec="lz4:1"),
    }


def test_two_arrays_read_back_exactly(tmp_path: Path, rng) -> None:
    a = frames_of(rng, "uint16", (7, 2, 48, 80))
    b = frames_of(rng, "float32", (9, 24, 24))
    path = tmp_path / "run.zarr"
    with zarrstream.Recording(path, two_arrays(), threads=2) as rec:
        assert rec.keys == ("cam0", "sub/cam1")
        assert rec.frame_shape("sub/cam1") == (24, 24)
        assert rec.dtype("cam0") == np.dtype("uint16")
        for t in range(9):
            if t < 7:
                assert rec.append("cam0", a[t]) == 2  # both channels in one call
            rec.append("sub/cam1", b[t])
        assert rec.frames_pushed("cam0") == 14
        assert rec.frames_pushed("sub/cam1") == 9
    stats = rec.stats
    assert isinstance(stats, zarrstream.RecordingStats)
    assert stats.arrays["cam0"].frames_written == 14
    assert stats.arrays["sub/cam1"].frames_written == 9
    assert stats.total.frames_written == 23
    assert rec.close() is stats
    for read in (read_zarr, read_tensorstore):
        np.testing.assert_array_equal(read(path / "cam0"), a)
        np.testing.assert_array_equal(read(path / "sub" / "cam1"), b)
    doc = json.loads((path / "cam0" / "zarr.json").read_text())
    assert doc["dimension_names"] == ["t", "c", "y", "x"]
    assert doc["attributes"]["zarrstream"]["state"] == "finished"
    root = json.loads((path / "zarr.json").read_text())
    assert root["node_type"] == "group"
    assert json.loads((path / "sub" / "zarr.json").read_text())["node_type"] == "group"
    group = zarr.open_group(str(path), mode="r")
    assert group["sub/cam1"].shape == (9, 24, 24)


def test_morton_chunk_order_for_every_array(tmp_path: Path, rng) -> None:
    a = frames_of(rng, "uint16", (4, 2, 48, 80))
    b = frames_of(rng, "float32", (4, 24, 24))
    path = tmp_path / "m.zarr"
    with zarrstream.Recording(path, two_arrays(), threads=2, chunk_order="morton") as rec:
        for t in range(4):
            rec.append("cam0", a[t])
            rec.append("sub/cam1", b[t])
    np.testing.assert_array_equal(read_zarr(path / "cam0"), a)
    np.testing.assert_array_equal(read_tensorstore(path / "sub/cam1"), b)
    grid = (2, 2, 3, 2)
    assert stored_order(path / "cam0/c/0/0/0/0", grid) == list(morton_order_iter(grid))
    assert stored_order(path / "cam0/c/0/0/0/0", grid) != sorted(morton_order_iter(grid))


def test_frame_metadata_columns(tmp_path: Path) -> None:
    arrays = {
        "a": zarrstream.ArraySpec(shape=(None, 8, 8), chunks=(1, 8, 8), shards=(4, 8, 8),
                                  frame_meta={"timestamp": "float64", "counter": "int64"},
                                  frame_meta_json=True),
        "b": {"shape": (None, 4, 4), "chunks": (1, 4, 4), "shards": (2, 4, 4),
              "dtype": "uint8", "frame_meta": {"exposure": "float64"}},
    }
    path = tmp_path / "m.zarr"
    with zarrstream.Recording(path, arrays, threads=1) as rec:
        for i in range(6):
            rec.append("a", np.full((8, 8), i, "uint16"),
                       meta={"timestamp": i * 0.25, "counter": 100 + i},
                       meta_json={"i": i})
            rec.append("b", np.full((4, 4), i, "uint8"), meta={"exposure": 10.0 + i})
        with pytest.raises(zarrstream.InvalidFrameError):
            rec.append("b", np.zeros((4, 4), "uint8"), meta={"nope": 1.0})
    ts_ = zarr.open_array(str(path / "a" / "frame_meta" / "timestamp"), mode="r")[...]
    np.testing.assert_array_equal(ts_, np.arange(6) * 0.25)
    counter = zarr.open_array(str(path / "a" / "frame_meta" / "counter"), mode="r")[...]
    np.testing.assert_array_equal(counter, 100 + np.arange(6))
    exposure = zarr.open_array(str(path / "b" / "frame_meta" / "exposure"), mode="r")[...]
    np.testing.assert_array_equal(exposure, 10.0 + np.arange(6))
    np.testing.assert_array_equal(read_zarr(path / "b")[:, 0, 0], np.arange(6))


def test_attributes_and_a_foreign_group(tmp_path: Path) -> None:
    path = tmp_path / "foreign.zarr"
    zarr.open_group(str(path), mode="w", attributes={"owner": "someone else",
                                                     "keep": [1, 2]})
    before = json.loads((path / "zarr.json").read_text())
    arrays = {"x": zarrstream.ArraySpec(shape=(None, 8, 8), chunks=(1, 8, 8),
                                        shards=(2, 8, 8), attributes={"given": 1})}
    with pytest.raises(FileExistsError) as refused:
        zarrstream.Recording(path, arrays)
    assert isinstance(refused.value, zarrstream.NotOwnedError)
    assert "existing_group" in str(refused.value)
    assert json.loads((path / "zarr.json").read_text()) == before
    assert not (path / "x").exists()

    with zarrstream.Recording(path, arrays, existing_group=True) as rec:
        # Joining someone else's group leaves its document as it is...
        assert json.loads((path / "zarr.json").read_text()) == before
        rec.append("x", np.ones((3, 8, 8), "uint16"))
        # ...until a root attribute is set explicitly, keeping every foreign key.
        rec.set_attribute("acquisition", {"operator": "ada"})
        rec.set_attribute("scratch", 1)
        rec.remove_attribute("scratch")
        rec.set_attribute("camera", {"serial": "A1"}, array="x")
        with pytest.raises(ValueError):
            rec.set_attribute("zarrstream", 1, array="x")
        with pytest.raises(KeyError):
            rec.set_attribute("camera", 1, array="nope")
    root = zarr.open_group(str(path), mode="r").attrs.asdict()
    assert root["owner"] == "someone else" and root["keep"] == [1, 2]
    assert root["acquisition"] == {"operator": "ada"}
    assert "scratch" not in root
    x = zarr.open_array(str(path / "x"), mode="r")
    assert x.attrs["camera"] == {"serial": "A1"} and x.attrs["given"] == 1
    assert x.shape == (3, 8, 8)


def test_root_attributes_at_creation(tmp_path: Path) -> None:
    arrays = {"a": zarrstream.ArraySpec(shape=(4, 8, 8), chunks=(1, 8, 8), shards=(4, 8, 8))}
    path = tmp_path / "r.zarr"
    with zarrstream.Recording(path, arrays, attributes={"experiment": "E12"}) as rec:
        rec.append("a", np.zeros((4, 8, 8), "uint16"))
    attrs = zarr.open_group(str(path), mode="r").attrs.asdict()
    assert attrs["experiment"] == "E12"
    assert attrs["zarrstream"]["recording"]["arrays"] == ["a"]


def test_two_threads_push_into_two_arrays_at_once(tmp_path: Path, rng) -> None:
    """A long push into one array (a strided stack, gathered frame by frame with the
    interpreter lock released) does not keep another thread from pushing into the
    other array meanwhile."""
    frame = frames_of(rng, "uint16", (64, 64))
    n = 3000
    stack = np.broadcast_to(frame, (n, 64, 64))  # strided: no memory, gathered per frame
    b = frames_of(rng, "uint8", (20, 32, 32))
    arrays = {
        "a": zarrstream.ArraySpec(shape=(None, 64, 64), chunks=(1, 64, 64),
                                  shards=(50, 64, 64), codec="lz4:1"),
        "b": zarrstream.ArraySpec(shape=(None, 32, 32), chunks=(1, 32, 32),
                                  shards=(5, 32, 32), dtype="uint8"),
    }
    path = tmp_path / "threads.zarr"
    overlapped: list[bool] = []
    errors: list[BaseException] = []
    with zarrstream.Recording(path, arrays, threads=2, pool_frames=4) as rec:
        started = threading.Event()

        def push_a() -> None:
            started.set()
            try:
                rec.append("a", stack)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        def push_b() -> None:
            started.wait()
            try:
                for f in b:
                    rec.append("b", f)
                    # Still inside the one call that pushes every frame of "a".
                    overlapped.append(thread_a.is_alive() and rec.frames_pushed("a") < n)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        thread_a = threading.Thread(target=push_a)
        thread_b = threading.Thread(target=push_b)
        thread_a.start()
        thread_b.start()
        thread_b.join(60)
        thread_a.join(60)
        assert not thread_a.is_alive() and not thread_b.is_alive(), "a push hung"
        assert not errors, errors
    assert any(overlapped), "every push into b waited for the push into a"
    np.testing.assert_array_equal(read_zarr(path / "b"), b)
    a = read_tensorstore(path / "a")
    assert a.shape == (n, 64, 64)
    assert (a == frame).all()


def test_bad_input_raises_the_builtin_classes(tmp_path: Path) -> None:
    spec = zarrstream.ArraySpec(shape=(None, 8, 8), chunks=(1, 8, 8), shards=(2, 8, 8))
    # Keys: given twice, inside another's, not a relative path of plain names.
    for i, arrays in enumerate([
        [("a", spec), ("a", spec)],
        {"a": spec, "a/b": spec},
        {"../a": spec},
        {"a/c/b": spec},
    ]):
        with pytest.raises(ValueError, match="array key") as e:
            zarrstream.Recording(tmp_path / f"k{i}.zarr", arrays)
        assert isinstance(e.value, zarrstream.InvalidSpecError)
        assert not (tmp_path / f"k{i}.zarr").exists()
    with pytest.raises(ValueError):
        zarrstream.Recording(tmp_path / "empty.zarr", {})
    with pytest.raises(ValueError, match="unexpected keyword argument 'shapes'"):
        zarrstream.Recording(tmp_path / "f.zarr", {"a": {**spec.__dict__, "shapes": 1}})

    path = tmp_path / "bad.zarr"
    with zarrstream.Recording(path, {"a": spec}) as rec:
        with pytest.raises(KeyError) as unknown:
            rec.append("b", np.zeros((8, 8), "uint16"))
        assert isinstance(unknown.value, zarrstream.UnknownArrayError)
        assert "'b'" in str(unknown.value)
        with pytest.raises(KeyError):
            rec.frames_pushed("b")
        with pytest.raises(KeyError):
            rec.skip("b")
        with pytest.raises(ValueError) as shape:
            rec.append("a", np.zeros((8, 9), "uint16"))
        assert isinstance(shape.value, zarrstream.InvalidFrameError)
        with pytest.raises(ValueError):
            rec.append("a", np.zeros((8, 8), "uint8"))
        with pytest.raises(ValueError):
            rec.set_attribute("x", 1, group=True)  # the root has no image group
        rec.append("a", np.zeros((8, 8), "uint16"))
    with pytest.raises(zarrstream.ClosedError):
        rec.append("a", np.zeros((8, 8), "uint16"))
    assert rec.frames_pushed("a") == 1

    # The path exists: FileExistsError (zarrstream's own group, without overwrite).
    with pytest.raises(FileExistsError) as exists:
        zarrstream.Recording(path, {"a": spec})
    assert isinstance(exists.value, zarrstream.StoreExistsError)
    with zarrstream.Recording(path, {"a": spec}, overwrite=True) as rec:
        pass
    assert rec.stats.total.frames_pushed == 0


def test_exception_in_with_aborts_every_array(tmp_path: Path) -> None:
    spec = zarrstream.ArraySpec(shape=(None, 8, 8), chunks=(1, 8, 8), shards=(2, 8, 8))
    path = tmp_path / "abort.zarr"
    with pytest.raises(RuntimeError, match="camera lost"):
        with zarrstream.Recording(path, {"a": spec, "b": spec}) as rec:
            rec.append("a", np.ones((3, 8, 8), "uint16"))
            raise RuntimeError("camera lost")
    assert rec.closed
    for key in ("a", "b"):
        state = json.loads((path / key / "zarr.json").read_text())["attributes"]["zarrstream"]
        assert state["state"] == "aborted"
        assert "camera lost" in state["error"]
    np.testing.assert_array_equal(read_zarr(path / "a"), np.ones((3, 8, 8), "uint16"))


def test_resume_a_finished_writer(tmp_path: Path, rng) -> None:
    path = tmp_path / "resume.zarr"
    frames = frames_of(rng, "uint16", (11, 32, 32))
    settings: dict[str, Any] = dict(shape=(None, 32, 32), chunks=(1, 16, 16),
                                    shards=(4, 32, 32), dtype="uint16", codec="zstd:3")
    with zarrstream.Writer(path, **settings) as w:
        w.append(frames[:6])  # the last shard is partly filled
    with zarrstream.Writer(path, resume=True, **settings) as w:
        w.append(frames[6:])
    assert w.stats.frames_written == 5
    np.testing.assert_array_equal(read_zarr(path), frames)
    np.testing.assert_array_equal(read_tensorstore(path), frames)

    # A different codec is refused, naming the field; nothing on disk changes.
    with pytest.raises(ValueError, match="codec") as mismatch:
        zarrstream.Writer(path, resume=True, **{**settings, "codec": "lz4:1"})
    assert isinstance(mismatch.value, zarrstream.ResumeMismatchError)
    assert mismatch.value.field == "codec"
    with pytest.raises(ValueError):
        zarrstream.Writer(path, resume=True, overwrite=True, **settings)
    np.testing.assert_array_equal(read_zarr(path), frames)


def test_resume_a_recording(tmp_path: Path, rng) -> None:
    path = tmp_path / "rr.zarr"
    a = frames_of(rng, "uint16", (9, 16, 16))
    b = frames_of(rng, "uint8", (5, 8, 8))
    arrays = {
        "a": zarrstream.ArraySpec(shape=(None, 16, 16), chunks=(1, 16, 16),
                                  shards=(4, 16, 16)),
        "b": zarrstream.ArraySpec(shape=(None, 8, 8), chunks=(1, 8, 8), shards=(2, 8, 8),
                                  dtype="uint8"),
    }
    with zarrstream.Recording(path, arrays) as rec:
        rec.append("a", a[:5])
        rec.append("b", b[:3])
    with zarrstream.Recording(path, arrays, resume=True) as rec:
        rec.append("a", a[5:])
        rec.append("b", b[3:])
    np.testing.assert_array_equal(read_zarr(path / "a"), a)
    np.testing.assert_array_equal(read_zarr(path / "b"), b)
    with pytest.raises(FileNotFoundError):
        zarrstream.Recording(tmp_path / "missing.zarr", arrays, resume=True)


def test_resume_refusals_are_builtin_classes(tmp_path: Path) -> None:
    """Resume of a store a dead writer left needs `recover` first (an OSError); per-frame
    metadata resumes with its array; a pyramid is not resumed (NotImplementedError)."""
    path = tmp_path / "crashed.zarr"
    settings: dict[str, Any] = dict(shape=(None, 16, 16), chunks=(1, 16, 16),
                                    shards=(4, 16, 16), dtype="uint16")
    code = (
        "import os, sys, numpy as np, zarrstream\n"
        f"w = zarrstream.Writer(sys.argv[1], **{settings!r})\n"
        "w.append(np.ones((6, 16, 16), 'uint16'))\n"
        "os._exit(0)\n"  # dies without finishing
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=300)
    with pytest.raises(OSError) as needs:
        zarrstream.Writer(path, resume=True, **settings)
    assert isinstance(needs.value, zarrstream.NeedsRecoveryError)
    assert "recover" in str(needs.value)
    zarrstream.recover(path)
    with zarrstream.Writer(path, resume=True, **settings) as w:
        w.append(np.full((2, 16, 16), 2, "uint16"))
    data = read_zarr(path)
    assert (data[-2:] == 2).all() and data.shape[0] >= 2
    # At most the 6 frames of the crashed run came back (ones, or fill where lost).
    assert data.shape[0] <= 8 and np.isin(data[:-2], [0, 1]).all()

    # Per-frame metadata continues with its array.
    meta = tmp_path / "meta.zarr"
    with zarrstream.Writer(meta, frame_meta={"t": "float64"}, **settings) as w:
        w.append(np.ones((16, 16), "uint16"), meta={"t": 1.0})
    with zarrstream.Writer(meta, resume=True, frame_meta={"t": "float64"}, **settings) as w:
        w.append(np.ones((16, 16), "uint16"), meta={"t": 2.0})
    t = zarr.open_array(str(meta / "frame_meta" / "t"), mode="r")[...]
    np.testing.assert_array_equal(t, [1.0, 2.0])

    # A pyramid is not resumed (NotImplementedError).
    image = tmp_path / "image.zarr"
    pyramid: dict[str, Any] = dict(settings, shape=(None, 64, 64), chunks=(1, 32, 32),
                                   shards=(4, 64, 64), ome={"levels": 2})
    with zarrstream.Writer(image, **pyramid) as w:
        w.append(np.ones((64, 64), "uint16"))
    with pytest.raises(NotImplementedError) as unsupported:
        zarrstream.Writer(image, resume=True, **pyramid)
    assert isinstance(unsupported.value, zarrstream.ResumeUnsupportedError)
