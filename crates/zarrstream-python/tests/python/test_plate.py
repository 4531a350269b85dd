"""zarrstream.Plate and a Recording of a plate: the field images in the order a screening
microscope visits them, the plate validated by ome-zarr-models' OME-Zarr 0.5 HCS model
and every field read back by zarr-python and tensorstore equal to what was appended;
bad plates are InvalidPlateError (a ValueError) and write nothing."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorstore as ts
import zarr
from ome_zarr_models.exceptions import ValidationWarning
from ome_zarr_models.v05.hcs import HCS
from ome_zarr_models.v05.image import Image

import zarrstream

H, W, T = 16, 24, 3


def image_spec(**extra) -> zarrstream.ArraySpec:
    return zarrstream.ArraySpec(shape=(None, H, W), chunks=(1, 16, 24), shards=(2, 16, 24),
                                dtype="uint16", **extra)


def plate() -> zarrstream.Plate:
    """2 x 3 without B/2, two fields, two acquisitions."""
    return zarrstream.Plate(
        rows=["A", "B"], columns=3, wells=["A/1", "A/2", "A/3", ("B", "1"), ("B", "3")],
        fields=2, name="screen 7",
        acquisitions=[zarrstream.Acquisition(id=0, name="first", start_time=1_700_000_000,
                                             end_time=1_700_000_600),
                      {"id": 9, "description": "after staining"}])


def frame(i: int, t: int) -> np.ndarray:
    y, x = np.mgrid[0:H, 0:W]
    return (i * 1000 + t * 100 + y * W + x).astype("uint16")


def test_images_follow_the_microscope() -> None:
    p = plate()
    images = p.images()
    assert len(images) == 5 * 2 * 2
    assert [i.key for i in images[:4]] == ["A/1/0", "A/1/1", "A/2/0", "A/2/1"]
    assert images[10] == zarrstream.PlateImage("A", "1", 0, 9, "A/1/2")
    assert p.key("B", "3", 1, acquisition=9) == "B/3/3"
    assert zarrstream.Plate(rows=8, columns=12).images()[-1].key == "H/12/0"
    with pytest.raises(zarrstream.InvalidPlateError, match="no such well"):
        p.key("B", "2")
    with pytest.raises(zarrstream.InvalidPlateError, match="name one"):
        p.key("A", "1")


def test_a_plate_recording_validates_and_reads_back(tmp_path: Path) -> None:
    root = tmp_path / "plate.ome.zarr"
    p = plate()
    images = p.images()
    ome = zarrstream.Ome(pixel_size=(0.5, 0.5))
    with zarrstream.Recording(root, plate=p, image=image_spec(ome=ome), threads=2) as rec:
        assert rec.keys == tuple(i.key for i in images)
        with pytest.raises(zarrstream.InvalidSpecError, match="plate's own metadata"):
            rec.set_attribute("ome", {})
        rec.set_attribute("screen", {"compound": "X"})
        for t in range(T):
            for i, image in enumerate(images):
                assert rec.append(image.key, frame(i, t)) == 1
    assert rec.stats.total.frames_written == T * len(images)

    with warnings.catch_warnings():
        warnings.simplefilter("error", ValidationWarning)
        hcs = HCS.from_zarr(zarr.open_group(root, mode="r"))
    meta = hcs.ome_attributes.plate
    assert meta.name == "screen 7"
    assert [w.path for w in meta.wells] == ["A/1", "A/2", "A/3", "B/1", "B/3"]
    assert [(a.id, a.maximumfieldcount) for a in meta.acquisitions] == [(0, 2), (9, 2)]
    assert meta.field_count == 4
    listed = {f"{w.path}/{im.path}": im.acquisition
              for w, well in zip(meta.wells, hcs.well_groups)
              for im in well.ome_attributes.well.images}
    assert listed == {i.key: i.acquisition for i in images}
    attrs = json.loads((root / "zarr.json").read_text())["attributes"]
    assert attrs["screen"] == {"compound": "X"}
    assert attrs["zarrstream"]["recording"]["arrays"] == [i.key for i in images]
    for i, image in enumerate(images):
        Image.from_zarr(zarr.open_group(str(root / image.key), mode="r"))
        want = np.stack([frame(i, t) for t in range(T)])
        np.testing.assert_array_equal(
            zarr.open_array(str(root / image.key / "0"), mode="r")[...], want)
    store = ts.open({"driver": "zarr3", "kvstore": {
        "driver": "file", "path": str(root / "B/3/3/0")}}, read=True).result()
    np.testing.assert_array_equal(store.read().result(),
                                  np.stack([frame(len(images) - 1, t) for t in range(T)]))


@pytest.mark.parametrize(("plate_kwargs", "message"), [
    ({"rows": 2, "columns": 3, "wells": ["A/1", "C/1"]},
     'well C/1 is outside the plate: it has no row "C"'),
    ({"rows": 2, "columns": 3, "wells": [("B", "4")]},
     'well B/4 is outside the plate: it has no column "4"'),
    ({"rows": 2, "columns": 3, "fields": 0}, "field count 0"),
    ({"rows": 2, "columns": 3, "wells": ["A/1", "A/1"]}, "well A/1 is given twice"),
    ({"rows": ["A", "B-1"], "columns": 1}, 'plate row name "B-1"'),
    ({"rows": 1, "columns": 0}, "the plate has no columns"),
    ({"rows": 1, "columns": 1, "acquisitions": [{"id": 3}, {"id": 3}]},
     "acquisition id 3 is given twice"),
])
def test_bad_plates_are_value_errors_and_write_nothing(
        tmp_path: Path, plate_kwargs: dict, message: str) -> None:
    root = tmp_path / "bad.ome.zarr"
    bad = zarrstream.Plate(**plate_kwargs)
    with pytest.raises(zarrstream.InvalidPlateError, match=message) as e:
        zarrstream.Recording(root, plate=bad, image=image_spec())
    assert isinstance(e.value, ValueError)
    assert not root.exists()
    with pytest.raises(ValueError, match=message):
        bad.images()


def test_plate_arguments_are_checked(tmp_path: Path) -> None:
    root = tmp_path / "p.ome.zarr"
    p = zarrstream.Plate(rows=1, columns=1)
    with pytest.raises(zarrstream.InvalidSpecError, match="give image="):
        zarrstream.Recording(root, {"a": image_spec()}, plate=p, image=image_spec())
    with pytest.raises(zarrstream.InvalidSpecError, match="needs image="):
        zarrstream.Recording(root, plate=p)
    with pytest.raises(zarrstream.InvalidSpecError, match="give plate= too"):
        zarrstream.Recording(root, image=image_spec())
    with pytest.raises(TypeError, match="zarrstream.Plate"):
        zarrstream.Recording(root, plate={"rows": 1}, image=image_spec())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="count or a sequence"):
        zarrstream.Plate(rows="AB", columns=1).images()
    with pytest.raises(zarrstream.InvalidPlateError):
        zarrstream.Plate(rows=1, columns=1, fields=-1).images()
    assert not root.exists()
