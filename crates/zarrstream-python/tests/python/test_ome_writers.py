"""zarrstream as an ome-writers backend (``zarrstream.ome_writers``).

Acquisitions go through ``ome_writers.create_stream`` with ``format="zarrstream"``, the
dict form and ``"auto"``; the results are read back with zarr-python (and tensorstore)
and compared with the frames appended, the arrays are checked to be zarrstream's
(``attributes.zarrstream`` in their ``zarr.json``) and the OME metadata ome-writers wrote
is validated with ome-zarr-models. The last test runs ome-writers' own test suite against
the backend (``tests/ome_writers_suite.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ome_writers as ow
import tensorstore as ts
import zarr
import ome_zarr_models

from ome_writers import (  # noqa: E402
    AcquisitionSettings,
    Dimension,
    Plate,
    Position,
    create_stream,
    dims_from_standard_axes,
)
from ome_writers import _stream as ow_stream  # noqa: E402
from ome_zarr_models.v05 import HCS, BioFormats2Raw, Image  # noqa: E402

import zarrstream  # noqa: E402
import zarrstream.ome_writers as zo  # noqa: E402

CRATE = Path(__file__).resolve().parents[2]
SUITE = CRATE / "tests" / "ome_writers_suite.py"

#: The three ways of selecting zarrstream.
FORMATS = [
    pytest.param("zarrstream", id="str"),
    pytest.param({"name": "ome-zarr", "backend": "zarrstream"}, id="dict"),
    pytest.param("auto", id="auto"),
]


@pytest.fixture(autouse=True)
def _registered() -> None:
    zo.register()


def frames_for(n: int, shape: tuple[int, int], dtype: str = "uint16",
               seed: int = 7) -> np.ndarray:
    """``n`` distinct, partly compressible frames, none all zero."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    hi = min(info.max, 60000) if info else 1000
    a = rng.integers(1, hi, size=(n, *shape)).astype(dtype)
    a[:, ::2, :] = a[:, :1, :]
    return a


def array_json(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((path / "zarr.json").read_text())
    return doc


def assert_zarrstream_array(path: Path, frames: int, dropped: int = 0) -> dict[str, Any]:
    """``path`` is an array zarrstream finished, with ``frames`` frames written."""
    doc = array_json(path)
    assert doc["node_type"] == "array"
    record = doc["attributes"]["zarrstream"]
    assert record["state"] == "finished", record
    assert record["frames_committed"] == frames, record
    assert record["frames_dropped"] == dropped, record
    assert not (path / ".zarrstream-partial").exists() or not any(
        (path / ".zarrstream-partial").iterdir())
    return doc


def inner_codecs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    (sharding,) = doc["codecs"]
    assert sharding["name"] == "sharding_indexed"
    codecs: list[dict[str, Any]] = sharding["configuration"]["codecs"]
    return codecs


# -- registration ---------------------------------------------------------------------


def test_register_is_idempotent_and_first() -> None:
    zo.register()
    zo.register()
    assert ow_stream.BACKENDS[0].name == "zarrstream"
    assert [b.name for b in ow_stream.BACKENDS].count("zarrstream") == 1
    assert next(iter(ow_stream.AVAILABLE_BACKENDS)) == "zarrstream"
    assert ow_stream.VALID_BACKEND_NAMES.count("zarrstream") == 1
    # ome-writers' own backends stay, in their order.
    others = [n for n in ow_stream.AVAILABLE_BACKENDS if n != "zarrstream"]
    assert others[:1] == ["tensorstore"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_settings_accept_the_name(tmp_path: Path, fmt: Any) -> None:
    settings = AcquisitionSettings(
        root_path=tmp_path / "a.ome.zarr",
        dimensions=dims_from_standard_axes({"t": 2, "y": 8, "x": 8}),
        dtype="uint16", format=fmt)
    assert settings.format.name == "ome-zarr"
    assert settings.format.backend == ("auto" if fmt == "auto" else "zarrstream")
    # Assignment validates too, and the plain model accepts the name.
    settings.format = "zarrstream"  # type: ignore[assignment]
    assert settings.format.backend == "zarrstream"
    assert ow.OmeZarrFormat(backend="zarrstream").backend == "zarrstream"
    with pytest.raises(ValueError):
        ow.OmeZarrFormat(backend="no-such-backend")


def test_refuses_other_ome_writers_versions() -> None:
    code = ("import ome_writers; ome_writers.__version__ = '0.4.0'\n"
            "try:\n    import zarrstream.ome_writers\n"
            "except ImportError as e:\n    print('refused:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    assert "refused:" in out and "0.3.x only" in out and "0.4.0" in out, out


# -- acquisitions ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_tczyx(tmp_path: Path, fmt: Any) -> None:
    """t × c × z × y × x, with per-frame metadata: the data, zarrstream's arrays, and
    ome-writers' metadata untouched and valid."""
    t, c, z, h, w = 3, 2, 4, 48, 64
    settings = AcquisitionSettings(
        root_path=tmp_path / "tczyx.ome.zarr",
        dimensions=dims_from_standard_axes({"t": t, "c": c, "z": z, "y": h, "x": w}),
        dtype="uint16", compression="blosc-lz4", format=fmt)
    frames = frames_for(t * c * z, (h, w))
    root = Path(settings.output_path)
    with create_stream(settings) as stream:
        assert isinstance(stream._backend, zo.ZarrstreamBackend)
        group_before = json.loads((root / "zarr.json").read_text())
        for i, frame in enumerate(frames):
            stream.append(frame, frame_metadata={"delta_t": i * 0.5, "serial": i})
    data = zarr.open_array(root / "0", mode="r")[...]
    assert data.shape == (t, c, z, h, w)
    np.testing.assert_array_equal(data.reshape(-1, h, w), frames)

    doc = assert_zarrstream_array(root / "0", t * c * z)
    assert doc["dimension_names"] == ["t", "c", "z", "y", "x"]
    assert doc["data_type"] == "uint16"
    # The group zarr.json is yaozarrs': its OME metadata is what was written at prepare,
    # plus ome-writers' frame metadata.
    group = json.loads((root / "zarr.json").read_text())
    assert group["node_type"] == "group"
    assert group["attributes"]["ome"] == group_before["attributes"]["ome"]
    meta = group["attributes"]["ome_writers"]["frame_metadata"]
    assert [m["serial"] for m in meta] == list(range(t * c * z))
    assert meta[5]["storage_index"] == [0, 1, 1]
    opened = ome_zarr_models.open_ome_zarr(root)
    assert isinstance(opened, Image)
    axes = [a.name for a in opened.attributes.ome.multiscales[0].axes]
    assert axes == doc["dimension_names"]


def test_multi_position(tmp_path: Path) -> None:
    """Three positions: a bioformats2raw layout, one zarrstream array per position, and
    global metadata in the root group."""
    n_pos, t, c, h, w = 3, 2, 2, 32, 40
    dims = [Dimension(name="t", count=t, type="time"),
            Dimension(name="p", type="position", coords=["A", "B", "C"]),
            Dimension(name="c", count=c, type="channel"),
            Dimension(name="y", count=h, type="space"),
            Dimension(name="x", count=w, type="space")]
    settings = AcquisitionSettings(root_path=tmp_path / "multi.ome.zarr", dimensions=dims,
                                   dtype="uint16", format="zarrstream")
    frames = frames_for(t * n_pos * c, (h, w)).reshape(t, n_pos, c, h, w)
    root = Path(settings.output_path)
    with create_stream(settings) as stream:
        assert len(stream._backend.writers) == n_pos
        groups = {p: p.read_bytes() for p in root.rglob("zarr.json")
                  if json.loads(p.read_bytes())["node_type"] == "group"}
        assert len(groups) == 2 + n_pos  # root, OME, one image group per position
        for ti in range(t):
            for p in range(n_pos):
                for ci in range(c):
                    stream.append(frames[ti, p, ci])
        deadline = time.monotonic() + 60
        for w in stream._backend.writers:  # let every shard land
            while w.frames_encoded < t * c:
                assert time.monotonic() < deadline, "frames not encoded within 60 s"
                time.sleep(0.005)
        # zarrstream wrote no group document: each is byte for byte what yaozarrs wrote.
        assert {p: p.read_bytes() for p in groups} == groups
        stream.set_global_metadata("acquisition", {"who": "test"})
    BioFormats2Raw.from_zarr(zarr.open_group(root, mode="r"))
    # (ome-zarr-models' image_paths lists numbered series only; these are named.)
    ome_series = json.loads((root / "OME" / "zarr.json").read_text())["attributes"]["ome"]
    assert ome_series["series"] == ["A", "B", "C"]
    assert json.loads((root / "zarr.json").read_text())["attributes"]["acquisition"] == {
        "who": "test"}
    for p, name in enumerate("ABC"):
        assert isinstance(ome_zarr_models.open_ome_zarr(root / name), Image)
        assert_zarrstream_array(root / name / "0", t * c)
        data = zarr.open_array(root / name / "0", mode="r")[...]
        np.testing.assert_array_equal(data, frames[:, p])


def test_plate(tmp_path: Path) -> None:
    """A plate of two wells: HCS metadata from ome-writers, arrays from zarrstream."""
    h, w = 16, 16
    dims = [Dimension(name="t", count=2, type="time"),
            Dimension(name="p", type="position", coords=[
                Position(name="f0", plate_row="A", plate_column="1"),
                Position(name="f0", plate_row="A", plate_column="2")]),
            Dimension(name="y", count=h, type="space"),
            Dimension(name="x", count=w, type="space")]
    settings = AcquisitionSettings(
        root_path=tmp_path / "plate.ome.zarr", dimensions=dims, dtype="uint8",
        format="zarrstream", plate=Plate(name="p", row_names=["A"], column_names=["1", "2"]))
    frames = frames_for(4, (h, w), "uint8")
    with create_stream(settings) as stream:
        for f in frames:
            stream.append(f)
    root = Path(settings.output_path)
    HCS.from_zarr(zarr.open_group(root, mode="r"))
    for i, col in enumerate(("1", "2")):
        path = root / "A" / col / "f0"
        assert isinstance(ome_zarr_models.open_ome_zarr(path), Image)
        assert_zarrstream_array(path / "0", 2)
        np.testing.assert_array_equal(zarr.open_array(path / "0", mode="r")[...],
                                      frames[i::2])


def test_unbounded_t_and_skip(tmp_path: Path) -> None:
    """t unbounded: frames and skips extend it; tensorstore reads it back."""
    import tensorstore as ts
    c, h, w = 2, 24, 32
    dims = dims_from_standard_axes({"t": None, "c": c, "y": h, "x": w})
    settings = AcquisitionSettings(root_path=tmp_path / "live.ome.zarr", dimensions=dims,
                                   dtype="float32", compression="zstd", format="zarrstream")
    frames = frames_for(7, (h, w), "float32")
    with create_stream(settings) as stream:
        for f in frames[:3]:
            stream.append(f)
        stream.skip(frames=2)
        for f in frames[3:]:
            stream.append(f)
    # 3 + 2 skipped + 4 = 9 frames: t = 5, the last (t=4, c=1) never written.
    root = Path(settings.output_path)
    doc = assert_zarrstream_array(root / "0", 7, dropped=2)
    assert doc["shape"] == [5, c, h, w]
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / "0")}}
    data = ts.open(spec, read=True).result().read().result()
    flat = np.asarray(data).reshape(-1, h, w)
    np.testing.assert_array_equal(flat[:3], frames[:3])
    assert not flat[3:5].any()
    np.testing.assert_array_equal(flat[5:9], frames[3:])
    assert not flat[9].any()
    assert isinstance(ome_zarr_models.open_ome_zarr(root), Image)


def test_skip_bounded(tmp_path: Path) -> None:
    h, w = 16, 16
    settings = AcquisitionSettings(
        root_path=tmp_path / "skip.ome.zarr",
        dimensions=dims_from_standard_axes({"t": 3, "z": 2, "y": h, "x": w}),
        dtype="int16", format="zarrstream")
    frames = frames_for(6, (h, w), "int16")
    with create_stream(settings) as stream:
        stream.append(frames[0])
        stream.skip(frames=3)
        stream.append(frames[4])
        stream.append(frames[5])
    root = Path(settings.output_path)
    assert_zarrstream_array(root / "0", 3, dropped=3)
    flat = zarr.open_array(root / "0", mode="r")[...].reshape(-1, h, w)
    np.testing.assert_array_equal(flat[[0, 4, 5]], frames[[0, 4, 5]])
    assert not flat[1:4].any()


def test_chunks_and_shards(tmp_path: Path) -> None:
    """ome-writers' chunk_size and shard_size_chunks become zarrstream's chunks and
    shards (index dimensions default to chunk 1)."""
    t, c, z, h, w = 4, 2, 3, 64, 64
    dims = [Dimension(name="t", count=t, type="time", chunk_size=2, shard_size_chunks=2),
            Dimension(name="c", count=c, type="channel"),
            Dimension(name="z", count=z, type="space", shard_size_chunks=3),
            Dimension(name="y", count=h, type="space", chunk_size=32, shard_size_chunks=2),
            Dimension(name="x", count=w, type="space", chunk_size=16, shard_size_chunks=4)]
    settings = AcquisitionSettings(root_path=tmp_path / "chunks.ome.zarr", dimensions=dims,
                                   dtype="uint16", compression="blosc-lz4",
                                   format="zarrstream")
    frames = frames_for(t * c * z, (h, w))
    with create_stream(settings) as stream:
        for f in frames:
            stream.append(f)
    root = Path(settings.output_path)
    doc = assert_zarrstream_array(root / "0", t * c * z)
    assert doc["chunk_grid"]["configuration"]["chunk_shape"] == [4, 1, 3, 64, 64]
    assert doc["codecs"][0]["configuration"]["chunk_shape"] == [2, 1, 1, 32, 16]
    np.testing.assert_array_equal(
        zarr.open_array(root / "0", mode="r")[...].reshape(-1, h, w), frames)


@pytest.mark.parametrize("compression,expected", [
    ("blosc-lz4", {"name": "blosc", "cname": "lz4", "clevel": 5, "shuffle": "shuffle"}),
    ("blosc-zstd", {"name": "blosc", "cname": "zstd", "clevel": 3, "shuffle": "shuffle",
                    "typesize": 4}),
    ("zstd", {"name": "zstd", "level": 3}),
    ("none", None),
    (None, None),
])
def test_compression(tmp_path: Path, compression: str | None,
                     expected: dict[str, Any] | None) -> None:
    settings = AcquisitionSettings(
        root_path=tmp_path / "c.ome.zarr",
        dimensions=dims_from_standard_axes({"z": 3, "y": 32, "x": 32}),
        dtype="uint32", compression=compression, format="zarrstream")
    frames = frames_for(3, (32, 32), "uint32")
    with create_stream(settings) as stream:
        for f in frames:
            stream.append(f)
    root = Path(settings.output_path)
    doc = assert_zarrstream_array(root / "0", 3)
    names = [c["name"] for c in inner_codecs(doc)]
    # Uncompressed chunks are bytes alone, as ome-writers' other backends write them;
    # compressed ones carry zarrstream's crc32c checksum too.
    assert ("crc32c" in names) == (expected is not None), names
    codecs = [c for c in inner_codecs(doc) if c["name"] not in ("bytes", "crc32c")]
    if expected is None:
        assert codecs == []
    else:
        (codec,) = codecs
        assert codec["name"] == expected["name"]
        for key, value in expected.items():
            if key != "name":
                assert codec["configuration"][key] == value, codec
    np.testing.assert_array_equal(zarr.open_array(root / "0", mode="r")[...], frames)


def test_blosc_zstd_is_written_and_auto_picks_zarrstream(tmp_path: Path) -> None:
    """ome-writers' "blosc-zstd" (its default for the other Zarr backends) is
    zarrstream's blosc-zstd:3 with byte shuffle, as acquire-zarr and yaozarrs write it:
    accepted by name and by "auto", read back by zarr-python and tensorstore."""
    dims = dims_from_standard_axes({"t": 4, "c": 2, "y": 48, "x": 40})
    backend = zo.ZarrstreamBackend()
    assert zo.ZarrstreamBackend.codec_for("blosc-zstd") == "blosc-zstd:3"
    frames = frames_for(8, (48, 40))
    for fmt in ("zarrstream", "auto"):
        settings = AcquisitionSettings(root_path=tmp_path / f"{fmt}.ome.zarr",
                                       dimensions=dims, dtype="uint16",
                                       compression="blosc-zstd", format=fmt)
        assert backend.is_incompatible(settings) is False
        with create_stream(settings) as stream:
            assert isinstance(stream._backend, zo.ZarrstreamBackend)
            for f in frames:
                stream.append(f)
        root = Path(settings.output_path)
        doc = assert_zarrstream_array(root / "0", 8)
        (blosc,) = [c for c in inner_codecs(doc) if c["name"] == "blosc"]
        assert blosc["configuration"] == {"cname": "zstd", "clevel": 3, "shuffle": "shuffle",
                                          "typesize": 2, "blocksize": 0}
        want = frames.reshape(4, 2, 48, 40)
        np.testing.assert_array_equal(zarr.open_array(root / "0", mode="r")[...], want)
        store = ts.open({"driver": "zarr3",
                         "kvstore": {"driver": "file", "path": str(root / "0")}},
                        read=True).result()
        np.testing.assert_array_equal(store.read().result(), want)


def test_unknown_compression_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="'lzw' is not supported by zarrstream. "
                       "Use 'blosc-zstd', 'blosc-lz4', 'zstd' or 'none'"):
        zo.ZarrstreamBackend.codec_for("lzw")


@pytest.mark.parametrize("case,dims,dtype,match", [
    ("dtype", {"t": 2, "y": 8, "x": 8}, "float16", "Data type 'float16' is not supported"),
    # Acquired z (unbounded) outermost, stored t, z (storage_order='ome').
    ("unbounded axis moved", {"z": None, "t": 2, "y": 8, "x": 8}, "uint16",
     "only unbounded axis is the first storage axis"),
])
def test_refusals(tmp_path: Path, case: str, dims: dict[str, int], dtype: str,
                  match: str) -> None:
    """What zarrstream cannot write is refused with a reason; 'auto' moves on."""
    for fmt in ("zarrstream", "auto"):
        settings = AcquisitionSettings(root_path=tmp_path / f"{fmt}.ome.zarr",
                                       dimensions=dims_from_standard_axes(dims),
                                       dtype=dtype, format=fmt)
        if fmt == "zarrstream":
            with pytest.raises(NotImplementedError, match=match):
                create_stream(settings)
    with create_stream(settings) as stream:
        assert not isinstance(stream._backend, zo.ZarrstreamBackend)


def test_views_during_and_after_acquisition(tmp_path: Path) -> None:
    """ome-writers' view() reads zarrstream's arrays while they are being written (a
    frame shows once its shard is published) and after close (reopened read-only)."""
    h, w = 16, 16
    dims = [Dimension(name="t", count=None, type="time"),
            Dimension(name="p", type="position", coords=["a", "b"]),
            Dimension(name="c", count=2, type="channel"),
            Dimension(name="y", count=h, type="space"),
            Dimension(name="x", count=w, type="space")]
    settings = AcquisitionSettings(root_path=tmp_path / "view.ome.zarr", dimensions=dims,
                                   dtype="uint16", format="zarrstream")
    frames = frames_for(12, (h, w)).reshape(3, 2, 2, h, w)
    with create_stream(settings) as stream:
        view = stream.view(dynamic_shape=False)
        for p in range(2):
            for ci in range(2):
                stream.append(frames[0, p, ci])
        stream.append(frames[1, 0, 0])
        arrays = stream._backend.get_arrays()
        # Each position's shape is its own high-water mark, as ome-writers' backends'.
        assert [a.shape for a in arrays] == [(2, 2, h, w), (1, 2, h, w)]
        deadline = time.monotonic() + 10
        while not view[0, 1, 1].any() and time.monotonic() < deadline:
            time.sleep(0.01)
        np.testing.assert_array_equal(view[0, 1, 1], frames[0, 1, 1])
        assert view.shape == (2, 2, 2, h, w)
        assert not view[1, 1, 1].any()  # not written yet: the fill value
        for p in range(2):
            for ci in range(2):
                if (p, ci) != (0, 0):
                    stream.append(frames[1, p, ci])
        for f in frames[2].reshape(-1, h, w):
            stream.append(f)
    after = stream.view(dynamic_shape=False)
    assert after.shape == (3, 2, 2, h, w)
    np.testing.assert_array_equal(np.asarray(after), frames)
    reopened = stream._backend.get_arrays()
    np.testing.assert_array_equal(np.asarray(reopened[1].read().result()
                                             if hasattr(reopened[1], "read")
                                             else reopened[1][...]), frames[:, 1])


def _acquire(settings: AcquisitionSettings, counts: dict[str, int], h: int, w: int,
             seed: int = 3) -> dict[tuple[int, ...], np.ndarray]:
    """Streams distinct frames in acquisition order; returns each position's frames by
    acquisition coordinates (name -> index)."""
    names = [d.name for d in settings.dimensions[:-2]]
    frames = frames_for(int(np.prod([counts[n] for n in names])), (h, w), seed=seed)
    sent = {}
    with create_stream(settings) as stream:
        assert isinstance(stream._backend, zo.ZarrstreamBackend)
        for i, values in enumerate(np.ndindex(*[counts[n] for n in names])):
            sent[tuple(values)] = frames[i]
            stream.append(frames[i])
    return sent


#: (acquisition order, storage order): every loop order of t, c, z into the storage
#: order OME-Zarr requires (time, channel, space: yaozarrs refuses any other), by each
#: way of asking for it; the first storage axis moved inside other loops included.
ORDERS = [
    ("tcz", "acquisition"),
    ("tzc", "ome"),  # reordered within one time point only
    ("ctz", "ome"),  # channel-first
    ("czt", "ome"),
    ("ztc", "ome"),
    ("zct", "ome"),
    ("zct", ["t", "c", "z", "y", "x"]),
]


@pytest.mark.parametrize("acquired,storage", ORDERS,
                         ids=[f"{a}-{s if isinstance(s, str) else ''.join(s[:3])}"
                              for a, s in ORDERS])
def test_every_storage_order_is_written_where_ome_writers_puts_it(
        tmp_path: Path, acquired: str, storage: Any) -> None:
    """Acquired in one loop order, stored in another: every frame lands at its storage
    index (zarr-python and tensorstore read it there), none held in memory, and the
    writer was told the acquisition order."""
    counts = {"t": 3, "c": 2, "z": 4}
    h, w = 16, 24
    dims = dims_from_standard_axes({**{n: counts[n] for n in acquired}, "y": h, "x": w})
    settings = AcquisitionSettings(root_path=tmp_path / "o.ome.zarr", dimensions=dims,
                                   dtype="uint16", storage_order=storage,
                                   format="zarrstream")
    assert zo.ZarrstreamBackend.acquisition_order(settings) == tuple(acquired)
    sent = _acquire(settings, counts, h, w)
    root = Path(settings.output_path)
    stored = [d.name for d in settings.storage_index_dimensions]
    doc = assert_zarrstream_array(root / "0", 24)
    assert doc["dimension_names"] == [*stored, "y", "x"]
    expected = np.zeros([counts[n] for n in stored] + [h, w], "uint16")
    for values, frame in sent.items():
        at = dict(zip(acquired, values))
        expected[tuple(at[n] for n in stored)] = frame
    np.testing.assert_array_equal(zarr.open_array(root / "0", mode="r")[...], expected)
    store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file",
                                                    "path": str(root / "0")}},
                    read=True).result()
    np.testing.assert_array_equal(store.read().result(), expected)


def test_positions_first_and_chunks_deeper_than_a_frame(tmp_path: Path) -> None:
    """Positions outermost, then channel-first into storage t, c, z with chunks two
    time points deep and shards of all of them (staging groups open across loops)."""
    counts = {"p": 2, "t": 4, "c": 2, "z": 3}
    h, w = 16, 16
    dims = [Dimension(name="p", type="position", coords=["A", "B"]),
            Dimension(name="c", count=2, type="channel"),
            Dimension(name="t", count=4, type="time", chunk_size=2, shard_size_chunks=2),
            Dimension(name="z", count=3, type="space"),
            Dimension(name="y", count=h, type="space"),
            Dimension(name="x", count=w, type="space")]
    settings = AcquisitionSettings(root_path=tmp_path / "p.ome.zarr", dimensions=dims,
                                   dtype="uint16", format="zarrstream")
    sent = _acquire(settings, counts, h, w)
    root = Path(settings.output_path)
    for p, name in enumerate("AB"):
        expected = np.zeros((4, 2, 3, h, w), "uint16")
        for (pi, ci, ti, zi), frame in sent.items():
            if pi == p:
                expected[ti, ci, zi] = frame
        doc = assert_zarrstream_array(root / name / "0", 24)
        assert doc["dimension_names"] == ["t", "c", "z", "y", "x"]
        np.testing.assert_array_equal(zarr.open_array(root / name / "0", mode="r")[...],
                                      expected)


def test_single_frame_positions(tmp_path: Path) -> None:
    """One y, x frame per position (rank-2 arrays): each written at its empty index."""
    h, w = 24, 16
    dims = [Dimension(name="p", type="position", coords=["a", "b", "c1"]),
            Dimension(name="y", count=h, type="space"),
            Dimension(name="x", count=w, type="space")]
    settings = AcquisitionSettings(root_path=tmp_path / "s.ome.zarr", dimensions=dims,
                                   dtype="uint8", compression="zstd", format="auto")
    frames = frames_for(3, (h, w), "uint8")
    with create_stream(settings) as stream:
        assert isinstance(stream._backend, zo.ZarrstreamBackend)
        for f in frames:
            stream.append(f)
    root = Path(settings.output_path)
    for i, name in enumerate(["a", "b", "c1"]):
        doc = assert_zarrstream_array(root / name / "0", 1)
        assert doc["shape"] == [h, w]
        np.testing.assert_array_equal(zarr.open_array(root / name / "0", mode="r")[...],
                                      frames[i])


def test_frames_written_twice_are_rejected_and_gaps_read_as_fill(tmp_path: Path) -> None:
    settings = AcquisitionSettings(
        root_path=tmp_path / "o.ome.zarr",
        dimensions=dims_from_standard_axes({"t": 4, "y": 8, "x": 8}),
        dtype="uint16", format="zarrstream")
    frame = np.ones((8, 8), "uint16")
    with create_stream(settings) as stream:
        backend = stream._backend
        backend.write(0, (0,), frame)
        with pytest.raises(zarrstream.FrameConflictError, match="already written"):
            backend.write(0, (0,), frame)
        backend.write(0, (2,), frame * 3)  # ahead of storage order: written where it goes
        with pytest.raises(zarrstream.FrameConflictError, match="already written"):
            backend.advance([(0, (2,))])
        with pytest.raises(zarrstream.FrameIndexError):
            backend.write(0, (4,), frame)
    doc = assert_zarrstream_array(tmp_path / "o.ome.zarr" / "0", 2)
    assert doc["shape"] == [4, 8, 8]
    arr = zarr.open_array(str(tmp_path / "o.ome.zarr" / "0"), mode="r")
    np.testing.assert_array_equal(arr[:, 0, 0], [1, 0, 3, 0])  # frames 1 and 3: fill


def test_finalize_closes_every_writer_then_raises_the_first_error(tmp_path: Path) -> None:
    dims = [Dimension(name="t", count=2, type="time"),
            Dimension(name="p", type="position", coords=["a", "b", "c"]),
            Dimension(name="y", count=8, type="space"),
            Dimension(name="x", count=8, type="space")]
    settings = AcquisitionSettings(root_path=tmp_path / "f.ome.zarr", dimensions=dims,
                                   dtype="uint16", format="zarrstream")
    stream = create_stream(settings)
    writers = stream._backend.writers

    def failing_close(writer: Any, message: str) -> Any:
        real = writer.close

        def close() -> Any:
            real()
            raise OSError(message)
        return close

    writers[0].close = failing_close(writers[0], "first")
    writers[1].close = failing_close(writers[1], "second")
    with pytest.raises(OSError, match="first"):
        stream.close()
    assert all(w.closed for w in writers)
    root = Path(settings.output_path)
    for name in "abc":
        assert array_json(root / name / "0")["attributes"]["zarrstream"]["state"] == (
            "finished")


def _worker_threads() -> int:
    """zarrstream's encoding workers alive in this process (``zarrstream-worker-N``,
    truncated by the kernel to 15 characters)."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            if (task / "comm").read_text().startswith("zarrstream-work"):
                count += 1
        except OSError:  # the thread ended meanwhile
            pass
    return count


def _positions(n: int, t: int = 2, h: int = 16, w: int = 16) -> list[Dimension]:
    return [Dimension(name="t", count=t, type="time"),
            Dimension(name="p", type="position", coords=[f"pos{i}" for i in range(n)]),
            Dimension(name="y", count=h, type="space"),
            Dimension(name="x", count=w, type="space")]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_positions_share_one_set_of_workers(tmp_path: Path) -> None:
    """Every position is an array of one Recording: the encoding workers are the same
    number for 1, 2 or 6 positions (not one set per position, nor cores split)."""
    before = _worker_threads()
    seen = {}
    for n in (1, 2, 6):
        settings = AcquisitionSettings(root_path=tmp_path / f"p{n}.ome.zarr",
                                       dimensions=_positions(n), dtype="uint16",
                                       format="zarrstream")
        frames = frames_for(2 * n, (16, 16))
        with create_stream(settings) as stream:
            backend = stream._backend
            assert isinstance(backend.recording, zarrstream.Recording)
            assert all(isinstance(w, zo.PositionArray) for w in backend.writers)
            assert len(backend.writers) == n
            for f in frames:
                stream.append(f)
            seen[n] = _worker_threads() - before
        deadline = time.monotonic() + 5  # joined at close (their /proc entries go soon after)
        while _worker_threads() != before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _worker_threads() == before
        assert backend.recording.stats.total.frames_written == 2 * n
        root = Path(settings.output_path)
        for i in range(n):
            key = "0" if n == 1 else f"pos{i}/0"
            assert_zarrstream_array(root / key, 2)
            np.testing.assert_array_equal(zarr.open_array(root / key, mode="r")[...],
                                          frames[i::n])
    assert seen[1] > 0
    assert seen[1] == seen[2] == seen[6], seen
    print("zarrstream worker threads by positions:", seen)
    assert seen[6] <= 3 * (os.cpu_count() or 1), seen


def test_recording_failure_at_close_still_finalizes(tmp_path: Path) -> None:
    """The recording's error at close is raised after ome-writers' metadata is
    flushed; every position's array is finished."""
    settings = AcquisitionSettings(root_path=tmp_path / "e.ome.zarr",
                                   dimensions=_positions(3), dtype="uint16",
                                   format="zarrstream")
    stream = create_stream(settings)
    backend = stream._backend
    recording = backend.recording
    real = recording.close

    def failing_close() -> Any:
        real()
        raise OSError("disk gone")

    recording.close = failing_close  # type: ignore[method-assign]
    for i, f in enumerate(frames_for(6, (16, 16))):
        stream.append(f, frame_metadata={"i": i})
    with pytest.raises(OSError, match="disk gone"):
        stream.close()
    assert recording.closed and backend._finalized
    root = Path(settings.output_path)
    for i in range(3):
        assert_zarrstream_array(root / f"pos{i}" / "0", 2)
        group = json.loads((root / f"pos{i}" / "zarr.json").read_text())
        assert len(group["attributes"]["ome_writers"]["frame_metadata"]) == 2


def test_reserved_position_names_fall_back_to_a_writer_each(tmp_path: Path) -> None:
    """A position named ``c`` (reserved in a recording's keys) still records, with one
    Writer per position."""
    dims = _positions(2)
    dims[1] = Dimension(name="p", type="position", coords=["c", "d"])
    settings = AcquisitionSettings(root_path=tmp_path / "c.ome.zarr", dimensions=dims,
                                   dtype="uint16", format="zarrstream")
    frames = frames_for(4, (16, 16))
    with create_stream(settings) as stream:
        assert stream._backend.recording is None
        assert all(isinstance(w, zarrstream.Writer) for w in stream._backend.writers)
        for f in frames:
            stream.append(f)
    root = Path(settings.output_path)
    for i, name in enumerate("cd"):
        np.testing.assert_array_equal(zarr.open_array(root / name / "0", mode="r")[...],
                                      frames[i::2])


# -- ome-writers' own test suite ------------------------------------------------------


def _target_dir() -> Path:
    env = os.environ.get("ZARRSTREAM_TARGET_DIR")
    return Path(env) if env else CRATE.parents[1] / "target"


# The suite's own subprocess deadline (1800 s) governs, not the default per test.
@pytest.mark.timeout(1900)
def test_ome_writers_suite(tmp_path: Path) -> None:
    """ome-writers 0.3.2's test suite, run with zarrstream registered: no [zarrstream]
    failure at all (every storage order, single-frame arrays and uncompressed chunks
    included)."""
    out = tmp_path / "suite.json"
    run = subprocess.run([sys.executable, str(SUITE), str(_target_dir()), "--json", str(out)],
                         capture_output=True, text=True, check=False, timeout=1800)
    print(run.stdout[-20000:])
    print(run.stderr[-5000:], file=sys.stderr)
    if run.returncode == 3 and os.environ.get("CI") != "true":
        pytest.skip("the ome-writers sdist could not be downloaded (no network?)")
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    summary = json.loads(out.read_text())
    counts = summary["counts"]
    # Every backend-parametrised test passes for zarrstream, as many as for tensorstore
    # (ome-writers' reference backend): no refusal, no justified failure left.
    assert counts["zarrstream"]["failed"] == 0, counts
    assert counts["zarrstream"]["passed"] >= counts["tensorstore"]["passed"] >= 60, counts
    assert counts["unparametrised"]["failed"] == 0, counts
    assert summary["problems"] == []
