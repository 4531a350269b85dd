"""End to end: pymmcore-plus runs a multi-dimensional acquisition with simulated Python
devices, ome-writers writes it as OME-Zarr through zarrstream, and zarr-python and
ome-zarr-models read it back.

The acquisitions come from ``examples/python/pymmcore_plus_mda.py`` (imported by path),
in useq's default order and in two others (``axis_order``): channel-first, and
position-first with z outermost and time innermost at each position; ome-writers
stores every one as t, c, z, so zarrstream writes those frames by index.
Every stored frame is compared with the frame the camera produced for that event, and
with the same frame recomputed independently from the event (serial number, channel,
stage positions). The same acquisitions through ome-writers' own tensorstore backend
check the test itself and give the reference metadata.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import pymmcore_plus  # noqa: F401 - the environment must have it
import useq  # noqa: F401
import zarr
import ome_zarr_models

from ome_zarr_models.v05.bioformats2raw import BioFormats2Raw  # noqa: E402
from ome_zarr_models.v05.image import Image  # noqa: E402

REPO = Path(__file__).resolve().parents[4]
EXAMPLE = REPO / "examples" / "python" / "pymmcore_plus_mda.py"

#: (a): t × c × z at one position.
TCZ = {"t": 3, "c": 2, "z": 4, "positions": 1, "height": 64, "width": 96}
#: (b): several stage positions × t × c.
PTC = {"t": 2, "c": 2, "z": 1, "positions": 2, "height": 64, "width": 96}
#: (c): t × c × z acquired channel-first (every time point and z-stack of one channel,
#: then the next), stored t, c, z.
CTZ = TCZ
#: (d): two positions × t × c × z acquired position-first (every frame of one stage
#: position before the next), z outermost and t innermost at each, stored t, c, z.
PZCT = {"t": 3, "c": 2, "z": 3, "positions": 2, "height": 64, "width": 96}


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pymmcore_plus_mda", EXAMPLE)
    assert spec is not None and spec.loader is not None, EXAMPLE
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the module executes.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


mda_example = _load_example()


# The package ships the backend: importing it must work (an error fails, never skips).
import zarrstream.ome_writers  # noqa: E402,F401

#: Which acquisition through which backend: zarrstream, and ome-writers' tensorstore
#: backend as the reference that checks the test itself.
CASES = [
    pytest.param((case, backend), id=f"{case}-{backend}")
    for case in ("tcz", "ptc", "ctz", "pzct") for backend in ("zarrstream", "tensorstore")
]
SIZES = {"tcz": TCZ, "ptc": PTC, "ctz": CTZ, "pzct": PZCT}
#: useq's axis_order of each case (None: the example's default, ``tpgcz``).
AXIS_ORDERS: dict[str, str | None] = {"tcz": None, "ptc": None, "ctz": "ctpgz",
                                      "pzct": "pgzct"}


@dataclasses.dataclass
class Recording:
    """One acquisition run by the example: where it went, through which backend, and
    what the camera did."""

    root: Path
    backend: str
    sizes: dict[str, int]
    mda: Any
    sequence: Any
    #: useq's axis_order when not the example's default.
    axis_order: str | None = None

    @property
    def events(self) -> list[Any]:
        """The sequence's events, in acquisition order."""
        return list(self.sequence)

    @property
    def multi_position(self) -> bool:
        return self.sizes["positions"] > 1

    def image_paths(self) -> list[Path]:
        """The OME-Zarr image group of each position, in position order."""
        if self.multi_position:
            return [self.root / str(p) for p in range(self.sizes["positions"])]
        return [self.root]

    def array_paths(self) -> list[Path]:
        """The full-resolution array of each position."""
        return [image / "0" for image in self.image_paths()]


def _record(tmp_path_factory: pytest.TempPathFactory, backend: str,
            sizes: dict[str, int], name: str, axis_order: str | None = None) -> Recording:
    root = tmp_path_factory.mktemp(f"{name}-{backend}") / f"{name}.ome.zarr"
    if axis_order is None:
        mda, sequence = mda_example.run(root, backend=backend, **sizes)
    else:
        # The example's devices and sequence, acquired in another loop order.
        mda = mda_example.make_core(sizes["height"], sizes["width"])
        sequence = mda_example.make_sequence(sizes["t"], sizes["c"], sizes["z"],
                                             sizes["positions"])
        sequence = sequence.replace(axis_order=axis_order)
        mda.core.mda.run(sequence,
                         output=mda_example.acquisition_settings(root, backend))
    return Recording(root, backend, sizes, mda, sequence, axis_order)


@pytest.fixture(scope="module", params=CASES)
def recording(request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """(a) t × c × z, (b) positions × t × c, (c) t × c × z channel-first and (d)
    positions × t × c × z position-first, each through each backend, run once."""
    case, backend = request.param
    return _record(tmp_path_factory, backend, SIZES[case], case, AXIS_ORDERS[case])


def _expected_dims(sizes: dict[str, int]) -> list[str]:
    dims = ["t", "c"]
    if sizes["z"] > 1:
        dims.append("z")
    return [*dims, "y", "x"]


def _state_of(event: Any, serial: int) -> Any:
    """The device state the camera should have seen for ``event``, from the event alone."""
    return mda_example.DeviceState(
        serial=serial, line=event.channel.config,
        z_um=event.z_pos if event.z_pos is not None else 0.0,
        x_um=event.x_pos if event.x_pos is not None else 0.0,
        y_um=event.y_pos if event.y_pos is not None else 0.0)


def _expected_arrays(rec: Recording) -> list[np.ndarray]:
    """Per position, the array the acquisition should have written: every event's frame,
    recomputed from the event, at the event's (t, c, z) index."""
    dims = _expected_dims(rec.sizes)
    h, w = rec.sizes["height"], rec.sizes["width"]
    shape = [rec.sizes[d] for d in dims[:-2]] + [h, w]
    out = [np.zeros(shape, dtype="uint16") for _ in range(rec.sizes["positions"])]
    filled = [np.zeros(shape[:-2], dtype=int) for _ in out]
    for serial, event in enumerate(rec.events):
        p = event.index.get("p", 0)
        where = tuple(event.index.get(d, 0) for d in dims[:-2])
        out[p][where] = mda_example.expected_frame(_state_of(event, serial), (h, w))
        filled[p][where] += 1
    for f in filled:  # the sequence visits every (p, t, c, z) exactly once
        assert (f == 1).all(), f
    return out


def _array_json(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((path / "zarr.json").read_text())
    return doc


# ---------------------------------------------------------------------------------------


def test_example_imports_from_repository() -> None:
    assert mda_example.__file__ is not None and Path(mda_example.__file__) == EXAMPLE
    assert callable(mda_example.make_core) and callable(mda_example.run)


@pytest.mark.parametrize("case", ["ctz", "pzct"])
def test_other_axis_orders_are_not_storage_order(case: str) -> None:
    """The reordered cases really acquire out of storage order (t, c, z at each
    position), so their arrays are written by index, not appended."""
    sizes = SIZES[case]
    sequence = mda_example.make_sequence(sizes["t"], sizes["c"], sizes["z"],
                                         sizes["positions"])
    sequence = sequence.replace(axis_order=AXIS_ORDERS[case])
    visits = [(e.index.get("p", 0), e.index.get("t", 0), e.index.get("c", 0),
               e.index.get("z", 0)) for e in sequence]
    per_position = [[v[1:] for v in visits if v[0] == p] for p in range(sizes["positions"])]
    assert all(seen != sorted(seen) for seen in per_position), per_position
    first_c1 = next(i for i, v in enumerate(visits) if v[2] == 1)
    if case == "ctz":  # every frame of channel 0 comes first
        assert first_c1 == sizes["t"] * sizes["z"]
    else:  # every frame of position 0 comes first
        assert all(v[0] == 0 for v in visits[: len(visits) // 2])


def test_camera_produced_every_event_in_its_state(recording: Recording) -> None:
    """One frame per event, exposed with the channel and stage positions the event asks
    for, and equal to the frame recomputed from the event."""
    rec = recording
    n = math.prod(rec.sizes[k] for k in ("t", "c", "z", "positions"))
    assert len(rec.events) == n
    produced = rec.mda.camera.produced
    assert len(produced) == n
    h, w = rec.sizes["height"], rec.sizes["width"]
    for serial, (event, (state, frame)) in enumerate(zip(rec.events, produced)):
        want = _state_of(event, serial)
        assert state.serial == serial
        assert state.line == want.line, event
        assert state.z_um == pytest.approx(want.z_um), event
        assert state.x_um == pytest.approx(want.x_um), event
        assert state.y_um == pytest.approx(want.y_um), event
        assert frame.shape == (h, w) and frame.dtype == np.uint16
        np.testing.assert_array_equal(frame, mda_example.expected_frame(want, (h, w)))
    # The frames differ from each other (a wrong index would show).
    assert len({f.tobytes() for _, f in produced}) == n


def test_arrays_hold_exactly_the_frames(recording: Recording) -> None:
    """zarr-python reads back, at each (p, t, c, z), exactly the camera's frame."""
    rec = recording
    dims = _expected_dims(rec.sizes)
    expected = _expected_arrays(rec)
    paths = rec.array_paths()
    assert len(paths) == len(expected) == rec.sizes["positions"]
    for p, (path, want) in enumerate(zip(paths, expected)):
        arr = zarr.open_array(path, mode="r")
        assert arr.metadata.zarr_format == 3
        assert list(arr.metadata.dimension_names) == dims
        assert arr.shape == want.shape, (p, arr.shape)
        assert arr.dtype == np.dtype("uint16")
        np.testing.assert_array_equal(arr[...], want, err_msg=f"position {p}")
    # And the same through the camera's own copies, frame by frame in event order.
    for (_, frame), event in zip(rec.mda.camera.produced, rec.events):
        arr = zarr.open_array(paths[event.index.get("p", 0)], mode="r")
        where = tuple(event.index.get(d, 0) for d in dims[:-2])
        np.testing.assert_array_equal(arr[where], frame, err_msg=str(event.index))


def test_backend_wrote_the_arrays(recording: Recording) -> None:
    """With zarrstream selected, every array's zarr.json carries zarrstream's own record
    (a finished recording of every plane); ome-writers' tensorstore backend writes none."""
    rec = recording
    for path in rec.array_paths():
        doc = _array_json(path)
        assert doc["node_type"] == "array"
        attrs = doc.get("attributes", {})
        if rec.backend != "zarrstream":
            assert "zarrstream" not in attrs
            continue
        assert "zarrstream" in attrs, f"{path}/zarr.json has no attributes.zarrstream"
        record = attrs["zarrstream"]
        planes = math.prod(doc["shape"][:-2])
        assert record["state"] == "finished", record
        assert record["frames_committed"] == planes, (record, doc["shape"])
        assert record["frames_dropped"] == 0, record
        # zarrstream's arrays are sharded (one sharding_indexed codec).
        assert [c["name"] for c in doc["codecs"]] == ["sharding_indexed"], doc["codecs"]


def test_metadata_validates_with_ome_zarr_models(recording: Recording) -> None:
    """Each position is a valid OME-Zarr 0.5 image whose axes are the array's dimensions
    and whose omero channels are the sequence's; several positions hang off a valid
    bioformats2raw group."""
    rec = recording
    dims = _expected_dims(rec.sizes)
    if rec.multi_position:
        # ome-zarr-models 1.7's open_ome_zarr tries no v0.5 bioformats2raw model, so
        # validate the root with the class itself.
        root = BioFormats2Raw.from_zarr(zarr.open_group(rec.root, mode="r"))
        assert root.image_paths == [str(p) for p in range(rec.sizes["positions"])]
        assert set(root.images) == set(root.image_paths)
    for image_path in rec.image_paths():
        opened = ome_zarr_models.open_ome_zarr(image_path)
        assert isinstance(opened, Image), type(opened)
        image = Image.from_zarr(zarr.open_group(image_path, mode="r"))
        multiscales = image.attributes.ome.multiscales
        assert len(multiscales) == 1
        assert [a.name for a in multiscales[0].axes] == dims
        assert [d.path for d in multiscales[0].datasets] == ["0"]
        group_attrs = _array_json(image_path)["attributes"]
        labels = [c["label"] for c in group_attrs["ome"]["omero"]["channels"]]
        assert labels == list(mda_example.CHANNELS[: rec.sizes["c"]])


def test_frame_and_summary_metadata(recording: Recording) -> None:
    """Each image group keeps pymmcore-plus' summary metadata and ome-writers' per-frame
    metadata: one entry per frame, at the frame's storage index, with the stage
    position of its event (pymmcore-plus records no stage position in the frames of
    the position-first order, with either backend: checked where it records one)."""
    rec = recording
    dims = _expected_dims(rec.sizes)
    for p, image_path in enumerate(rec.image_paths()):
        attrs = _array_json(image_path)["attributes"]
        summary = attrs["pymmcore_plus"]["summary_metadata"]
        assert summary["mda_sequence"]["time_plan"]["loops"] == rec.sizes["t"]
        frames = attrs["ome_writers"]["frame_metadata"]
        by_index = {tuple(f["storage_index"]): f for f in frames}
        events = [e for e in rec.events if e.index.get("p", 0) == p]
        assert len(frames) == len(by_index) == len(events)
        for event in events:
            meta = by_index[tuple(event.index.get(d, 0) for d in dims[:-2])]
            if rec.axis_order is not None and "position_z" not in meta:
                continue
            assert meta["position_z"] == pytest.approx(event.z_pos or 0.0), event.index
            if rec.multi_position:
                assert meta["position_x"] == pytest.approx(event.x_pos), event.index
                assert meta["position_y"] == pytest.approx(event.y_pos), event.index


def test_ome_metadata_matches_reference_backend(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The OME metadata written with zarrstream selected equals, group for group, the
    metadata of the same acquisition through ome-writers' tensorstore backend."""
    for sizes, name in ((TCZ, "tcz"), (PTC, "ptc")):
        ours = _record(tmp_path_factory, "zarrstream", sizes, f"ref-{name}")
        ref = _record(tmp_path_factory, "tensorstore", sizes, f"ref-{name}")
        groups = sorted(p.relative_to(ref.root) for p in ref.root.rglob("zarr.json")
                        if json.loads(p.read_text())["node_type"] == "group")
        ours_groups = sorted(p.relative_to(ours.root) for p in ours.root.rglob("zarr.json")
                             if json.loads(p.read_text())["node_type"] == "group")
        assert ours_groups == groups
        for rel in groups:
            a = json.loads((ours.root / rel).read_text())["attributes"].get("ome")
            b = json.loads((ref.root / rel).read_text())["attributes"].get("ome")
            assert a == b, rel
        for a_path, b_path in zip(ours.array_paths(), ref.array_paths()):
            a_doc, b_doc = _array_json(a_path), _array_json(b_path)
            for key in ("shape", "data_type", "dimension_names"):
                assert a_doc[key] == b_doc[key], (a_path, key)
            np.testing.assert_array_equal(zarr.open_array(a_path, mode="r")[...],
                                          zarr.open_array(b_path, mode="r")[...])


@pytest.mark.parametrize("form", ["dict", "path"])
def test_other_ways_of_selecting_zarrstream(form: str, tmp_path: Path) -> None:
    """zarrstream also writes the acquisition when selected as
    ``{"name": "ome-zarr", "backend": "zarrstream"}``, and, once registered, when
    pymmcore-plus is given a bare path (ome-writers' ``"auto"`` tries it first)."""
    import zarrstream.ome_writers

    root = tmp_path / "run.ome.zarr"
    sizes = {**TCZ, "t": 2}
    if form == "dict":
        mda, sequence = mda_example.run(
            root, backend={"name": "ome-zarr", "backend": "zarrstream"}, **sizes)
    else:
        zarrstream.ome_writers.register()
        mda = mda_example.make_core(sizes["height"], sizes["width"])
        sequence = mda_example.make_sequence(sizes["t"], sizes["c"], sizes["z"])
        mda.core.mda.run(sequence, output=str(root))
    rec = Recording(root, form, sizes, mda, sequence)
    (array_path,) = rec.array_paths()
    assert "zarrstream" in _array_json(array_path)["attributes"]
    (want,) = _expected_arrays(rec)
    np.testing.assert_array_equal(zarr.open_array(array_path, mode="r")[...], want)
    assert isinstance(ome_zarr_models.open_ome_zarr(root), Image)
