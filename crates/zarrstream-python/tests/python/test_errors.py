"""Bad input gets a clear error of the fitting built-in class, and nothing accepted is
lost: impossible settings, wrong frames, an existing path, a closed or full array, a full
disk, a crashed writer."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import frames_of

import zarrstream

SMALL = dict(shape=(None, 16, 16), chunks=(1, 16, 16), shards=(2, 16, 16))


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(shape=(None, 16, 16), chunks=(1, 5, 16), shards=(2, 16, 16)), "does not divide"),
        (dict(shape=(16,), chunks=(16,), shards=(16,)), "rank 1 is too small"),
        # A single frame (rank 2) has no append axis to leave unbounded.
        (dict(shape=(None, 16), chunks=(1, 16), shards=(2, 16)), "3 or more axes"),
        (dict(shape=(None, 0, 16), chunks=(1, 16, 16), shards=(2, 16, 16)), "size 0"),
        (dict(shape=(None, 16, 16), chunks=(1, 16), shards=(2, 16, 16)), "entries"),
        (dict(SMALL, codec="lz5:1"), "codec"),
        (dict(SMALL, codec="zstd:99"), "out of range"),
        (dict(SMALL, codec="blosc-zstd:10"), "blosc level 10 is out of range"),
        (dict(SMALL, codec="blosc-zstd:3:bits"), "is not a codec"),
        # A byte shuffle of 1-byte elements does nothing: asked for, it is refused.
        (dict(SMALL, dtype="uint8", codec="blosc-zstd:3:shuffle"),
         "blosc-zstd with shuffle does not fit uint8"),
        (dict(SMALL, dtype="uint8", codec="lz4:1:shuffle"),
         "blosc-lz4 with shuffle does not fit uint8"),
        (dict(SMALL, dtype="float16"), "not supported"),
        (dict(SMALL, dtype="int64", fill_value=2**63), "fill value"),
        (dict(SMALL, dtype="uint64", fill_value=2**53 + 1), "fill value"),
        (dict(SMALL, dtype=">u2"), "not supported"),
        (dict(SMALL, dtype="complex64"), "not supported"),
        (dict(SMALL, dtype="uint8", fill_value=300), "fill value"),
        (dict(SMALL, sink="floppy"), "sink"),
        (dict(SMALL, chunk_order="hilbert"), "not a chunk order"),
        (dict(SMALL, chunk_order="morton", sink="direct"), "cannot be combined"),
        (dict(SMALL, backpressure="maybe"), "backpressure"),
        (dict(SMALL, durability="sometimes"), "durability"),
        (dict(SMALL, durability=-1.0), "positive"),
        (dict(SMALL, threads=10**6), "threads"),
        (dict(SMALL, dimension_names=("t", "y", "y")), "twice"),
        (dict(shape=(None, 2, 16, 16), chunks=(1, 1, 16, 16), shards=(1, 2, 16, 16),
              ome=zarrstream.Ome(channels=["a", "b", "c"])), "channels"),
        (dict(SMALL, ome=zarrstream.Ome(pixel_size=(0.0, 1.0))), "positive"),
        # The library checks the values Python passes through, naming the key.
        (dict(SMALL, shape=(None, -16, 16)), "shape"),
        (dict(SMALL, shape="big"), "shape"),
    ],
)
def test_impossible_settings_are_value_errors(tmp_path: Path, kwargs, words: str) -> None:
    path = tmp_path / "bad.zarr"
    with pytest.raises(ValueError, match=words) as info:
        zarrstream.Writer(path, **kwargs)
    assert isinstance(info.value, zarrstream.ZarrstreamError)
    assert not path.exists()  # nothing half-made is left behind


def test_unknown_keyword_is_a_type_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        zarrstream.Writer(tmp_path / "k.zarr", **SMALL, compression="lz4")  # type: ignore[call-arg]


def test_keywords_are_the_keys_of_the_library_types() -> None:
    """The keywords come from the Rust types (``_native.config_keys()``); each has its
    place in the helpers that build the configuration's sections."""
    import inspect

    from zarrstream import _writer

    for section, helper in [("array", _writer._array_config),
                            ("writer", _writer._options_config),
                            ("remote", _writer._remote_config)]:
        assert _writer._keywords(section) == set(inspect.signature(helper).parameters)
    assert "spare_groups" in _writer._keywords("writer")
    assert "upload_timeout" in _writer._keywords("remote")
    assert "chunks" in _writer._keywords("array")


def test_positional_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        zarrstream.Writer(tmp_path / "p.zarr", (None, 16, 16))  # type: ignore[misc]


def test_existing_path_is_file_exists_error(tmp_path: Path) -> None:
    path = tmp_path / "e.zarr"
    path.mkdir()
    (path / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError) as info:
        zarrstream.Writer(path, **SMALL)
    assert info.value.errno == errno.EEXIST
    assert isinstance(info.value, zarrstream.StoreExistsError)
    assert (path / "keep.txt").read_text() == "mine"
    # overwrite=True is the way to replace it.
    zarrstream.Writer(path, **SMALL, overwrite=True).close()
    assert not (path / "keep.txt").exists()


def test_live_store_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "l.zarr"
    with zarrstream.Writer(path, **SMALL):
        with pytest.raises(OSError) as info:
            zarrstream.Writer(path, **SMALL, overwrite=True)
        assert isinstance(info.value, zarrstream.StoreLockedError)


def test_wrong_frames_are_value_errors_and_lose_nothing(tmp_path: Path, rng) -> None:
    frames = frames_of(rng, "uint16", (3, 16, 16))
    path = tmp_path / "f.zarr"
    with zarrstream.Writer(path, **SMALL) as w:
        w.append(frames)
        for bad, words in [
            (np.zeros((16, 15), np.uint16), "shape"),
            (np.zeros((16,), np.uint16), "shape"),
            (np.zeros((16, 16), np.float32), "dtype"),
            (np.zeros((16, 16), ">u2"), "dtype"),
            (b"\0" * 511, "whole number"),
            (object(), "dtype"),
        ]:
            with pytest.raises(ValueError, match=words) as info:
                w.append(bad)
            assert isinstance(info.value, zarrstream.InvalidFrameError)
        assert w.frames_pushed == 3  # refused frames were not counted
        w.append(frames[:1])
    got = zarr.open_array(str(path), mode="r")[...]
    np.testing.assert_array_equal(got, np.concatenate([frames, frames[:1]]))


def test_closed_writer_is_value_error(tmp_path: Path) -> None:
    w = zarrstream.Writer(tmp_path / "c.zarr", **SMALL)
    w.close()
    for call in (lambda: w.append(np.zeros((16, 16), np.uint16)), lambda: w.skip(1),
                 lambda: w.abort("late")):
        with pytest.raises(ValueError, match="closed") as info:
            call()
        assert isinstance(info.value, zarrstream.ClosedError)


def test_bounded_array_full_is_index_error(tmp_path: Path, rng) -> None:
    frames = frames_of(rng, "uint16", (5, 16, 16))
    path = tmp_path / "b.zarr"
    with zarrstream.Writer(path, shape=(4, 16, 16), chunks=(1, 16, 16),
                           shards=(2, 16, 16)) as w:
        with pytest.raises(IndexError, match="full") as info:
            w.append(frames)
        assert isinstance(info.value, zarrstream.ArrayFullError)
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], frames[:4])


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 3 MiB tmpfs (we run as root in CI; elsewhere the test is skipped)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
                          capture_output=True, text=True, timeout=60)
    if made.returncode != 0:
        if os.environ.get("CI", "") not in ("", "0", "false"):
            pytest.fail(f"cannot mount a tmpfs: {made.stderr}")
        pytest.skip(f"cannot mount a tmpfs: {made.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False, timeout=60)


@pytest.mark.parametrize("sink", ["pwrite", "mmap"])
def test_full_disk_is_oserror_enospc_and_finished_shards_stay(small_disk: Path, rng,
                                                              sink: str) -> None:
    frames = frames_of(rng, "uint16", (64, 128, 128))  # 2 MiB a shard of 64 frames
    frames[:] = rng.integers(0, 65535, size=frames.shape, dtype=np.uint16)  # incompressible
    path = small_disk / "full.zarr"
    w = zarrstream.Writer(path, shape=(None, 128, 128), chunks=(1, 128, 128),
                          shards=(8, 128, 128), codec="none", sink=sink)
    with pytest.raises(OSError) as info:
        for _ in range(20):
            w.append(frames)
        w.close()
    assert info.value.errno == errno.ENOSPC
    assert isinstance(info.value, zarrstream.DiskFullError)
    if not w.closed:
        with pytest.raises(OSError):
            w.close()
    meta = json.loads((path / "zarr.json").read_text())
    committed = meta["attributes"]["zarrstream"]["frames_committed"]
    assert committed >= 8, "at least one shard was finished before the disk filled"
    got = zarr.open_array(str(path), mode="r")[:committed]
    expected = np.concatenate([frames] * (committed // 64 + 1))[:committed]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kind", ["writer", "recording"])
def test_a_panic_closes_the_writer_for_good(tmp_path: Path, kind: str) -> None:
    """The one poison policy of both bindings: a call that panicked (a bug, injected here
    through the C API's ZARRSTREAM_CAPI_INJECT_PANIC, which debug builds read) raises
    InternalError, and every later call ClosedError, as a C handle answers ZS_E_CLOSED;
    close() then frees it, raising that InternalError again."""
    path = tmp_path / f"{kind}.zarr"
    script = textwrap.dedent(f"""
        import numpy as np, zarrstream
        frame = np.zeros((16, 16), np.uint16)
        if {kind!r} == "writer":
            w = zarrstream.Writer({str(path)!r}, shape=(None, 16, 16), chunks=(1, 16, 16),
                                  shards=(2, 16, 16))
            push = lambda: w.append(frame)
        else:
            w = zarrstream.Recording({str(path)!r}, {{"a": zarrstream.ArraySpec(
                shape=(None, 16, 16), chunks=(1, 16, 16), shards=(2, 16, 16))}})
            push = lambda: w.append("a", frame)
        try:
            push()
        except zarrstream.InternalError as e:
            assert "panicked" in str(e), e
        else:
            print("release build: no injected panics")
            raise SystemExit(0)
        for call in (push, w.memory_in_use, push):
            try:
                call()
            except zarrstream.ClosedError as e:
                assert "failed with an internal error" in str(e), e
            else:
                raise AssertionError(f"{{call}} after the panic did not raise")
        # close() frees it and raises the failure that stopped it, as after a full disk.
        try:
            w.close()
        except zarrstream.InternalError as e:
            assert "panicked" in str(e), e
        else:
            raise AssertionError("close after the panic did not raise")
        assert w.closed
        print("poisoned")
    """)
    env = dict(os.environ, ZARRSTREAM_CAPI_INJECT_PANIC=kind, RUST_BACKTRACE="0")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    if "release build" in done.stdout:
        pytest.skip("panic injection exists in debug builds of the library only")
    assert "poisoned" in done.stdout, done.stdout + done.stderr


def test_recover_after_a_crash(tmp_path: Path, rng) -> None:
    """A writer process killed mid-recording: recover() restores every frame whose chunks
    reached the disk, and zarr-python reads them."""
    path = tmp_path / "crash.zarr"
    script = textwrap.dedent(f"""
        import os, numpy as np, zarrstream, time
        frames = np.arange(20 * 32 * 32, dtype=np.uint16).reshape(20, 32, 32)
        w = zarrstream.Writer({str(path)!r}, shape=(None, 32, 32), chunks=(1, 32, 32),
                              shards=(8, 32, 32))
        w.append(frames)
        deadline = time.monotonic() + 60
        while w.frames_encoded < 20:
            assert time.monotonic() < deadline, "20 frames not encoded within 60 s"
            time.sleep(0.01)
        os._exit(0)  # no close(): a crash
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert json.loads((path / "zarr.json").read_text())["attributes"]["zarrstream"][
        "state"] == "running"
    report = zarrstream.recover(path)
    assert report["frames_committed"] == 20
    assert report["shape"][0] == 20
    frames = np.arange(20 * 32 * 32, dtype=np.uint16).reshape(20, 32, 32)
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], frames)
    again = zarrstream.recover(path)  # harmless the second time
    assert again["frames_committed"] == 20


def test_recover_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        zarrstream.recover(tmp_path / "missing.zarr")
    (tmp_path / "junk.zarr").mkdir()
    (tmp_path / "junk.zarr" / "zarr.json").write_text("{not json")
    with pytest.raises(ValueError) as info:
        zarrstream.recover(tmp_path / "junk.zarr")
    assert isinstance(info.value, zarrstream.ZarrstreamError)


def test_inspect_and_verify(tmp_path: Path, rng) -> None:
    frames = frames_of(rng, "uint16", (5, 16, 16))
    path = tmp_path / "iv.zarr"
    with zarrstream.Writer(path, **SMALL) as w:
        w.append(frames)
    summary = zarrstream.inspect(path)
    assert summary["array"]["shape"] == [5, 16, 16]
    assert summary["shards"] == 3
    assert summary["chunks_stored"] == 5
    report = zarrstream.verify(path, decode=True)
    assert report["problems"] == [] and report["chunks_checked"] == 5
    # Flip one byte of the first chunk of the second shard: verify names it.
    shard = path / "c" / "1" / "0" / "0"
    data = bytearray(shard.read_bytes())
    data[20] ^= 0xFF
    shard.write_bytes(bytes(data))
    report = zarrstream.verify(path)
    assert len(report["problems"]) == 1
    assert "c/1/0/0" in json.dumps(report["problems"][0])
    with pytest.raises(FileNotFoundError):
        zarrstream.inspect(tmp_path / "none.zarr")
    with pytest.raises(FileNotFoundError):
        zarrstream.verify(tmp_path / "none.zarr")


def test_full_disk_inside_a_with_block_raises_the_disk_error(small_disk: Path, rng) -> None:
    """Leaving the block by the full disk shows that error, not a 'closed' from the
    abort the context manager attempts."""
    frames = rng.integers(0, 65535, size=(64, 128, 128), dtype=np.uint16)
    with pytest.raises(OSError) as info:
        with zarrstream.Writer(small_disk / "w.zarr", shape=(None, 128, 128),
                               chunks=(1, 128, 128), shards=(8, 128, 128),
                               codec="none") as w:
            for _ in range(20):
                w.append(frames)
    assert info.value.errno == errno.ENOSPC
    assert isinstance(info.value, zarrstream.DiskFullError)


def test_a_truncated_shard_is_an_oserror_naming_the_file() -> None:
    """The Python half of `Error::ShardTruncated` (another process cut a shard file; the
    Rust tests in crates/zarrstream/tests/writer/hostile.rs provoke it)."""
    from zarrstream.errors import _from_native

    path = "/data/run.zarr/.zarrstream-partial/c.2.0.0.partial"
    message = f"{path}: the shard file was truncated by another process while it was written"
    e = _from_native("shard_truncated", message, None, path)
    assert type(e) is zarrstream.ShardTruncatedError
    assert isinstance(e, OSError) and isinstance(e, zarrstream.ZarrstreamError)
    assert e.filename == path
    assert str(e) == message


#: Every kind of failure the library knows (`zarrstream::ErrorKind`) and its exception:
#: class, built-in base and errno. Written out, not read from errors.py, so a kind the
#: library adds fails here until errors.py gives it a class.
KIND_CLASSES: dict[str, tuple[type, type, int | None]] = {
    "invalid_config": (zarrstream.InvalidSpecError, ValueError, None),
    "invalid_argument": (zarrstream.InvalidSpecError, ValueError, None),
    "invalid_plate": (zarrstream.InvalidPlateError, ValueError, None),
    "invalid_frame": (zarrstream.InvalidFrameError, ValueError, None),
    "invalid_frame_meta": (zarrstream.InvalidFrameError, ValueError, None),
    "frame_index": (zarrstream.FrameIndexError, IndexError, None),
    "duplicate_frame": (zarrstream.FrameConflictError, ValueError, None),
    "mixed_frames": (zarrstream.FrameConflictError, ValueError, None),
    "index_unsupported": (zarrstream.IndexedUnsupportedError, NotImplementedError, None),
    "working_set": (zarrstream.WorkingSetError, ValueError, None),
    "array_full": (zarrstream.ArrayFullError, IndexError, None),
    "closed": (zarrstream.ClosedError, ValueError, None),
    "unknown_array": (zarrstream.UnknownArrayError, KeyError, None),
    "exists": (zarrstream.StoreExistsError, FileExistsError, errno.EEXIST),
    "not_owned": (zarrstream.NotOwnedError, FileExistsError, errno.EEXIST),
    "locked": (zarrstream.StoreLockedError, OSError, errno.EBUSY),
    "resume_mismatch": (zarrstream.ResumeMismatchError, ValueError, None),
    "needs_recovery": (zarrstream.NeedsRecoveryError, OSError, None),
    "unsupported": (zarrstream.ResumeUnsupportedError, NotImplementedError, None),
    "disk_full": (zarrstream.DiskFullError, OSError, errno.ENOSPC),
    "io": (zarrstream.StoreIOError, OSError, None),
    "not_found": (zarrstream.StoreNotFoundError, FileNotFoundError, errno.ENOENT),
    "not_a_store": (zarrstream.NotAStoreError, ValueError, None),
    "shard_truncated": (zarrstream.ShardTruncatedError, OSError, None),
    "remote_url": (zarrstream.RemoteURLError, ValueError, None),
    "remote_credentials": (zarrstream.RemoteCredentialsError, PermissionError, None),
    "remote_no_bucket": (zarrstream.RemoteNoBucketError, FileNotFoundError, None),
    "remote_unreachable": (zarrstream.RemoteUnreachableError, ConnectionError, None),
    "remote_upload": (zarrstream.UploadError, ConnectionError, None),
    "remote_conflict": (zarrstream.RemoteConflictError, FileExistsError, None),
    "remote_staging": (zarrstream.StagingError, FileExistsError, None),
    "internal": (zarrstream.InternalError, RuntimeError, None),
}


def test_every_kind_of_failure_has_its_class() -> None:
    from zarrstream import _native
    from zarrstream.errors import _from_native

    assert sorted(_native.error_kinds()) == sorted(KIND_CLASSES)
    for kind, (cls, builtin, code) in KIND_CLASSES.items():
        e = _from_native(kind, "what happened", None, "run.zarr")
        assert type(e) is cls, kind
        assert isinstance(e, builtin) and isinstance(e, zarrstream.ZarrstreamError), kind
        if isinstance(e, zarrstream.StoreIOError):
            assert (e.errno, e.filename) == (code, "run.zarr"), kind
        if code is None:
            assert str(e) == "what happened", kind


@pytest.mark.parametrize(("code", "cls"), [
    (errno.ENOENT, zarrstream.StoreNotFoundError),
    (errno.EACCES, zarrstream.StorePermissionError),
    (errno.EPERM, zarrstream.StorePermissionError),
    (errno.EEXIST, zarrstream.StoreExistsError),
    (errno.ENOSPC, zarrstream.DiskFullError),
    (errno.EIO, zarrstream.StoreIOError),
])
def test_other_os_errors_have_the_class_of_their_errno(code: int, cls: type) -> None:
    from zarrstream.errors import _from_native

    e = _from_native("io", "write run.zarr/c/0/0/0: what happened", code, "run.zarr/c/0/0/0")
    assert type(e) is cls
    assert (e.errno, e.filename) == (code, "run.zarr/c/0/0/0")


def test_exception_attributes_come_from_the_failure() -> None:
    from zarrstream.errors import _from_native

    e = _from_native("duplicate_frame", "m", None, None, extra='{"index": [1, 2]}')
    assert e.index == (1, 2)
    e = _from_native("working_set", "m", None, None,
                     extra='{"what": "shards", "needed": 9, "limit": "max_open_shards", '
                           '"budget": 8}')
    assert (e.what, e.needed, e.limit, e.budget) == ("shards", 9, "max_open_shards", 8)
    e = _from_native("resume_mismatch", "m", None, "run.zarr", field="codec")
    assert e.field == "codec"
    e = _from_native("remote_upload", "m", None, "/scratch/staging")
    assert e.staging == "/scratch/staging"
    assert type(_from_native("no_such_kind", "m", None, None)) is zarrstream.InternalError


# -- frames written by index ----------------------------------------------------------

#: t, z, y, x written by index; shard sets two time points of every z.
INDEXED = dict(shape=(4, 3, 16, 16), chunks=(1, 1, 16, 16), shards=(2, 3, 16, 16),
               dimension_names=("t", "z", "y", "x"))


def read_back(path: Path) -> np.ndarray:
    return zarr.open_array(str(path), mode="r")[...]


@pytest.mark.parametrize(
    ("index", "words"),
    [
        ((1,), "has 1 coordinates but the array has 2 leading axes"),
        ((1, 0, 0), "has 3 coordinates"),
        ((4, 0), "coordinate 4 on axis 0 is out of bounds"),
        ((1, 3), "coordinate 3 on axis 1 is out of bounds"),
        # Negative coordinates do not wrap around (numpy's -1 would be the last frame).
        ((-1, 0), "coordinate -1 on axis 0 is out of bounds"),
        ((1, -3), "coordinate -3 on axis 1 is out of bounds"),
    ],
    ids=str,
)
def test_bad_frame_indices_are_index_errors_and_touch_nothing(
        tmp_path: Path, rng, index: tuple[int, ...], words: str) -> None:
    data = frames_of(rng, "uint16", INDEXED["shape"])
    stray = np.full((16, 16), 7777, np.uint16)
    path = tmp_path / "i.zarr"
    with zarrstream.Writer(path, **INDEXED) as w:
        w.write_frame((0, 0), data[0, 0])
        for call in (lambda: w.write_frame(index, stray), lambda: w.skip_frame(index)):
            with pytest.raises(IndexError, match=words) as info:
                call()
            assert isinstance(info.value, zarrstream.FrameIndexError)
            assert isinstance(info.value, zarrstream.ZarrstreamError)
            assert info.value.index == index
        assert w.frames_pushed == 1  # refused frames were not counted
        for t in range(4):
            for z in range(3):
                if (t, z) != (0, 0):
                    w.write_frame((t, z), data[t, z])
    assert w.stats.frames_written == 12 and w.stats.frames_dropped == 0
    np.testing.assert_array_equal(read_back(path), data)


def test_index_outside_the_window_of_an_unbounded_axis_is_index_error(tmp_path: Path,
                                                                      rng) -> None:
    data = frames_of(rng, "uint16", (5, 3, 16, 16))
    path = tmp_path / "w.zarr"
    with zarrstream.Writer(path, **dict(INDEXED, shape=(None, 3, 16, 16))) as w:
        w.write_frame((0, 0), data[0, 0])
        # Rows of shard sets are two time points: rows 0 and 1 (t < 4) are open.
        with pytest.raises(IndexError, match="outside the window 0..4") as info:
            w.write_frame((4, 0), data[4, 0])
        assert isinstance(info.value, zarrstream.FrameIndexError)
        assert info.value.index == (4, 0)
        for t in range(5):
            for z in range(3):
                if (t, z) != (0, 0):
                    w.write_frame((t, z), data[t, z])  # t=4 once row 0 is complete
    np.testing.assert_array_equal(read_back(path), data)


def test_frames_written_twice_or_mixed_with_append_are_value_errors(tmp_path: Path,
                                                                    rng) -> None:
    data = frames_of(rng, "uint16", INDEXED["shape"])
    path = tmp_path / "d.zarr"
    with zarrstream.Writer(path, **INDEXED) as w:
        w.write_frame((0, 0), data[0, 0])
        w.skip_frame((0, 1))
        for call, index in [
            (lambda: w.write_frame((0, 0), data[1, 1]), (0, 0)),  # written
            (lambda: w.write_frame((0, 1), data[1, 1]), (0, 1)),  # skipped
            (lambda: w.skip_frame((0, 0)), (0, 0)),
            (lambda: w.append(data[1, 1]), ()),  # a writer written by index
        ]:
            with pytest.raises(ValueError, match="already written|either appended or "
                                                 "indexed") as info:
                call()
            assert isinstance(info.value, zarrstream.FrameConflictError)
            assert info.value.index == index
        for t in range(4):
            for z in range(3):
                if (t, z) not in ((0, 0), (0, 1)):
                    w.write_frame((t, z), data[t, z])
    assert w.stats.frames_written == 11 and w.stats.frames_dropped == 1
    expected = data.copy()
    expected[0, 1] = 0
    np.testing.assert_array_equal(read_back(path), expected)
    # And the other way round: write_frame on a writer that append wrote to.
    with zarrstream.Writer(tmp_path / "a.zarr", **INDEXED) as w:
        w.append(data[0])
        with pytest.raises(ValueError, match="appended to with push") as info:
            w.write_frame((1, 0), data[1, 0])
        assert isinstance(info.value, zarrstream.FrameConflictError)
        w.append(data[1:])
    np.testing.assert_array_equal(read_back(tmp_path / "a.zarr"), data)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(ome=zarrstream.Ome(levels=2)), "indexed writes are not supported"),
        (dict(frame_meta={"stamp": "float64"}), "frame metadata"),
    ],
    ids=["pyramid", "frame_meta"],
)
def test_indexed_writes_into_appending_only_arrays_are_not_implemented(
        tmp_path: Path, rng, kwargs: dict, words: str) -> None:
    data = frames_of(rng, "uint16", INDEXED["shape"])
    with zarrstream.Writer(tmp_path / "u.zarr", **INDEXED, **kwargs) as w:
        for call in (lambda: w.write_frame((0, 0), data[0, 0]), lambda: w.skip_frame((0, 0))):
            with pytest.raises(NotImplementedError, match=words) as info:
                call()
            assert isinstance(info.value, zarrstream.IndexedUnsupportedError)
            assert isinstance(info.value, zarrstream.ZarrstreamError)
        w.append(data)  # appending still works
    assert w.stats.frames_written == 12


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(acquisition_order=("z", "z")), "twice"),
        (dict(acquisition_order=(1, 1)), "twice"),
        (dict(acquisition_order=("z", "q")), '"q" is not one of'),
        (dict(acquisition_order=("z",)), "has 1 axes but the array has 2"),
        (dict(acquisition_order=(0, 2)), "no axis 2"),
        (dict(acquisition_order=(0, -1)), "negative"),
        (dict(acquisition_order=("z", "t"), dimension_names=None), "dimension_names"),
        (dict(acquisition_order=("z", "t"), shape=(None, 3, 16, 16)),
         "unbounded axis 0 must be the outermost"),
        (dict(max_open_shards=0), "at least 1"),
        (dict(resume=True, acquisition_order=(0, 1)), "cannot be combined"),
    ],
)
def test_impossible_acquisition_orders_are_value_errors(tmp_path: Path, kwargs: dict,
                                                        words: str) -> None:
    path = tmp_path / "o.zarr"
    with pytest.raises(ValueError, match=words) as info:
        zarrstream.Writer(path, **{**INDEXED, **kwargs})
    assert isinstance(info.value, zarrstream.InvalidSpecError)
    assert not path.exists()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(acquisition_order=("t", "q")), "not a leading dimension"),
        (dict(acquisition_order=(0, 0)), "twice"),
        # The arrays share one order: the names must mean the same axes in each.
        (dict(acquisition_order=("z", "t"), swap=True), "in one array and"),
    ],
)
def test_impossible_recording_orders_are_value_errors(tmp_path: Path, kwargs: dict,
                                                      words: str) -> None:
    swap = kwargs.pop("swap", False)
    a = zarrstream.ArraySpec(**INDEXED)
    b = zarrstream.ArraySpec(**dict(INDEXED, dimension_names=("z", "t", "y", "x"))
                             if swap else INDEXED)
    path = tmp_path / "r.zarr"
    with pytest.raises(ValueError, match=words) as info:
        zarrstream.Recording(path, {"a": a, "b": b}, **kwargs)
    assert isinstance(info.value, zarrstream.InvalidSpecError)
    assert not path.exists()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        (dict(acquisition_order="zt"), TypeError),  # a str is not a list of names
        (dict(acquisition_order=("z", 0)), TypeError),
        (dict(acquisition_order=(0.0, 1.0)), TypeError),
        (dict(max_open_shards=2.5), TypeError),
    ],
)
def test_order_keywords_of_the_wrong_type_are_type_errors(tmp_path: Path, kwargs: dict,
                                                          error: type) -> None:
    with pytest.raises(error):
        zarrstream.Writer(tmp_path / "t.zarr", **{**INDEXED, **kwargs})


def test_frame_indices_of_the_wrong_type_are_type_errors(tmp_path: Path) -> None:
    frame = np.zeros((16, 16), np.uint16)
    with zarrstream.Writer(tmp_path / "t.zarr", **INDEXED) as w:
        for index in [(0.0, 1), "01", (True, 0), None, (0, "1")]:
            with pytest.raises(TypeError):
                w.write_frame(index, frame)  # type: ignore[arg-type]
            with pytest.raises(TypeError):
                w.skip_frame(index)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="one frame") as info:
            w.write_frame((0, 0), np.zeros((2, 16, 16), np.uint16))
        assert isinstance(info.value, zarrstream.InvalidFrameError)
        assert w.frames_pushed == 0


def test_a_declared_order_beyond_max_open_shards_is_a_working_set_error(
        tmp_path: Path) -> None:
    """Channel-first into storage t, c, z with shard sets 4 time points deep keeps the
    set of every z open while t runs: more than max_open_shards=2 allows, refused when
    the writer is created, the message naming the budget."""
    path = tmp_path / "ws.zarr"
    with pytest.raises(ValueError, match="max_open_shards allows 2") as info:
        zarrstream.Writer(path, shape=(8, 3, 5, 16, 16), chunks=(1, 1, 1, 16, 16),
                          shards=(4, 1, 1, 16, 16), dimension_names=("t", "c", "z", "y", "x"),
                          acquisition_order=("c", "t", "z"), max_open_shards=2)
    e = info.value
    assert isinstance(e, zarrstream.WorkingSetError)
    assert isinstance(e, zarrstream.ZarrstreamError)
    assert (e.what, e.limit, e.budget) == ("shards", "max_open_shards", 2)
    assert e.needed is not None and e.needed > 2
    assert not path.exists()
    # The same order within its budget is taken.
    zarrstream.Writer(path, shape=(8, 3, 5, 16, 16), chunks=(1, 1, 1, 16, 16),
                      shards=(4, 1, 1, 16, 16), dimension_names=("t", "c", "z", "y", "x"),
                      acquisition_order=("c", "t", "z"), max_open_shards=e.needed).close()


def test_an_undeclared_order_too_far_from_storage_is_a_working_set_error(
        tmp_path: Path, rng) -> None:
    """Channel-first without declaring it: the frame that would open more shard sets
    than appending keeps is refused (not waited for), and the writer goes on."""
    data = frames_of(rng, "uint16", (6, 2, 16, 16))
    path = tmp_path / "far.zarr"
    with zarrstream.Writer(path, shape=(6, 2, 16, 16), chunks=(1, 1, 16, 16),
                           shards=(1, 2, 16, 16)) as w:
        refused = None
        for t in range(6):
            try:
                w.write_frame((t, 0), data[t, 0])
            except zarrstream.WorkingSetError as e:
                assert isinstance(e, ValueError)
                assert "acquisition_order" in str(e) and e.limit is not None, e
                refused = t
                break
        assert refused is not None and refused > 0
        for t in range(6):
            for c in range(2):
                if c == 1 or t >= refused:
                    w.write_frame((t, c), data[t, c])
    np.testing.assert_array_equal(read_back(path), data)
