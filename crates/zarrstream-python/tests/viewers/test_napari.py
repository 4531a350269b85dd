"""napari opens what zarrstream writes, in a real Qt window, at a readable contrast.

Each test renders a layer as napari shows it when opened (no contrast touched) with
``export_figure`` (one screen pixel per level-0 pixel) and asserts on those pixels: the
bright feature and the background at least half the display range apart, and the
pattern where the data has it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr
from viewer_support import assert_readable, intensity, layer_figure, save_screenshot

import zarrstream

H = W = 512
#: Each channel of the Python-written image: background, its noise, the feature's value
#: and where it lies (rows, columns); the hot pixels (60000) are the same in both.
PATTERNS = [
    {"background": 100, "noise": 5, "value": 2000, "rows": (128, 256), "cols": (192, 384)},
    {"background": 1000, "noise": 20, "value": 20000, "rows": (320, 416), "cols": (64, 448)},
]
HOT = ([10, 50, 300, 400, 500], [20, 480, 7, 250, 90])


def pattern_frame(rng: np.random.Generator, c: int, hot: bool = True) -> np.ndarray:
    p = PATTERNS[c]
    frame = rng.normal(p["background"], p["noise"], (H, W)).round().astype(np.uint16)
    (r0, r1), (c0, c1) = p["rows"], p["cols"]
    frame[r0:r1, c0:c1] = p["value"]
    if hot:
        frame[HOT] = 60000
    return frame


def feature_mask(c: int, margin: int = 0) -> np.ndarray:
    """Where channel ``c``'s feature is (shrunk by ``margin`` pixels; a negative margin
    grows it)."""
    (r0, r1), (c0, c1) = PATTERNS[c]["rows"], PATTERNS[c]["cols"]
    mask = np.zeros((H, W), bool)
    mask[max(r0 + margin, 0):r1 - margin, max(c0 + margin, 0):c1 - margin] = True
    return mask


def group_windows(path: Path) -> list[list[float]]:
    omero = json.loads((path / "zarr.json").read_text())["attributes"]["ome"]["omero"]
    return [[ch["window"]["start"], ch["window"]["end"]] for ch in omero["channels"]]


def assert_pattern_in_place(screen: np.ndarray, c: int, what: str) -> None:
    """The feature shows bright exactly where it is: thresholded at half the display
    range, the screen matches the feature's rectangle (its edges and the hot pixels
    aside) on all but 0.1 % of the pixels."""
    hot = np.zeros((H, W), bool)
    hot[HOT] = True
    judged = ~hot & (feature_mask(c, 2) | ~feature_mask(c, -2))
    wrong = ((screen > 128) != feature_mask(c))[judged]
    assert wrong.mean() < 1e-3, (
        f"{what}: {wrong.sum()} of {judged.sum()} pixels on the wrong side of the "
        f"feature's edge as shown")


def test_record_ome_image(tmp_path: Path, record_cmd: list[str], viewer) -> None:
    """napari-ome-zarr opens a two-channel pyramid `zarrstream record` wrote: one layer
    per channel, windowed from the group's omero metadata, the camera's beads bright
    over a dark background, each pixel as the window maps the data."""
    path = tmp_path / "record.ome.zarr"
    subprocess.run([*record_cmd, "--out", str(path), "--ome", "--channels", "A,B",
                    "--levels", "3", "--frames", "8", "--shape", f"0,2,{H},{W}",
                    "--chunk", f"1,1,{H // 2},{W // 2}", "--shard", f"4,2,{H},{W}"],
                   check=True, timeout=120, capture_output=True)
    layers = viewer.open(str(path), plugin="napari-ome-zarr")
    assert [layer.name.split(": ")[-1] for layer in layers] == ["A", "B"]
    assert all(layer.multiscale and len(layer.data) == 3 for layer in layers)
    windows = group_windows(path)
    t = viewer.dims.current_step[0]
    level0 = zarr.open_array(str(path / "0"), mode="r")
    assert level0.shape == (4, 2, H, W)
    for c, layer in enumerate(layers):
        # The plugin applies the group's window as the layer's contrast.
        assert list(layer.contrast_limits) == pytest.approx(windows[c])
        data = level0[t, c].astype(np.float64)
        screen = intensity(layer_figure(viewer, layer))
        assert screen.shape == (H, W), f"export_figure gave {screen.shape}"
        # Beads: the brightest 0.1 % of this frame; background: its darker half.
        assert_readable(screen, data >= np.percentile(data, 99.9),
                        data <= np.median(data), f"record channel {layer.name}")
        # Every pixel where the window puts it (the rendering rounds to 1/255).
        start, end = layer.contrast_limits
        expected = np.clip((data - start) / (end - start), 0, 1) * 255
        off = np.abs(screen - expected) > 2
        assert off.mean() < 1e-3, (
            f"{layer.name}: {off.sum()} pixels differ from the data through the window "
            f"{start}..{end} (pattern misplaced or misrendered)")
    save_screenshot(viewer, "napari-record-ome")


def test_python_ome_image(tmp_path: Path, viewer) -> None:
    """An image the Python package wrote, with a known pattern per channel: background
    about 100 (1000) counts with noise, a bright rectangle of 2000 (20000) and hot
    pixels at 60000. As opened, each rectangle shows bright over a dark background,
    in place: the display window ignores the hot pixels."""
    rng = np.random.default_rng(20261128)
    frames = np.stack([np.stack([pattern_frame(rng, c) for c in range(2)]) for _ in range(3)])
    path = tmp_path / "pattern.ome.zarr"
    ome = zarrstream.Ome(name="pattern", channels=["square", "bar"], omero=True, levels=3)
    with zarrstream.Writer(path, shape=(None, 2, H, W), chunks=(1, 1, H // 2, W // 2),
                           shards=(1, 2, H, W), dimension_names=("t", "c", "y", "x"),
                           ome=ome) as w:
        w.append(frames)
    layers = viewer.open(str(path), plugin="napari-ome-zarr")
    assert [layer.name for layer in layers] == ["pattern: square", "pattern: bar"]
    windows = group_windows(path)
    t = viewer.dims.current_step[0]
    for c, layer in enumerate(layers):
        assert list(layer.contrast_limits) == pytest.approx(windows[c])
        screen = intensity(layer_figure(viewer, layer))
        assert screen.shape == (H, W)
        background = ~feature_mask(c, -2)
        background[HOT] = False
        assert_readable(screen, feature_mask(c, 2), background,
                        f"{layer.name} (window {layer.contrast_limits}, hot pixels 60000)")
        assert_pattern_in_place(screen, c, layer.name)
        # What napari reads at this slice is what was written.
        np.testing.assert_array_equal(np.asarray(layer.data[0][t]), frames[t, c])
    save_screenshot(viewer, "napari-pattern-ome")


def test_plain_array_builtin_reader(tmp_path: Path, viewer) -> None:
    """napari's own reader (no plugin) opens a plain array the writer made and shows the
    pattern. Without OME metadata napari picks the contrast from the data's range, so
    this pattern has no hot pixels (napari's choice, not the writer's)."""
    rng = np.random.default_rng(7)
    frames = np.stack([pattern_frame(rng, 0, hot=False) for _ in range(5)])
    path = tmp_path / "plain.zarr"
    with zarrstream.Writer(path, shape=(None, H, W), chunks=(1, H // 2, W // 2),
                           shards=(4, H, W), dimension_names=("t", "y", "x")) as w:
        w.append(frames)
    layers = viewer.open(str(path), plugin="napari")
    assert len(layers) == 1 and not layers[0].multiscale
    layer = layers[0]
    assert layer.data.shape == frames.shape
    t = viewer.dims.current_step[0]
    np.testing.assert_array_equal(np.asarray(layer.data[t]), frames[t])
    screen = intensity(layer_figure(viewer, layer))
    assert screen.shape == (H, W)
    assert_readable(screen, feature_mask(0, 2), ~feature_mask(0, -2),
                    f"plain array (contrast {layer.contrast_limits})")
    assert_pattern_in_place(screen, 0, "plain array")
    save_screenshot(viewer, "napari-plain")
