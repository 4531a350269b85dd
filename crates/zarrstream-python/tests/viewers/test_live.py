"""The live example (examples/python/napari_live.py): napari follows a recording while the
Python package writes it, its extent along t growing as frames are published, the last
frame shown as the camera produced it, at the contrast the group's omero window gives."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path

import numpy as np
import pytest
from viewer_support import (REPO, assert_readable, intensity, layer_figure,
                            process_events, save_screenshot, wait_until)

#: The camera runs at FPS until the viewer has shown at least GROWTH extents while it
#: records (napari's first open of the image, plugin discovery included, takes one to a
#: few seconds on a loaded machine), then stops; MAX_FRAMES bounds it (60 s).
FPS, SIZE, GROWTH, MAX_FRAMES = 10.0, 256, 4, 600


def load_example():
    spec = importlib.util.spec_from_file_location(
        "napari_live", REPO / "examples" / "python" / "napari_live.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_live_view_follows_recording(tmp_path: Path, viewer) -> None:
    live_mod = load_example()
    path = tmp_path / "live.ome.zarr"
    # The viewer watches before the first frame, as a user starting it with the camera.
    live = live_mod.LiveImage(viewer, path, poll=0.05)
    stats: list = []
    failure: list[BaseException] = []
    enough = threading.Event()

    def camera() -> None:
        try:
            stats.append(live_mod.record(path, MAX_FRAMES, FPS, SIZE, stop=enough))
        except BaseException as e:  # reported by the test below
            failure.append(e)

    recorder = threading.Thread(target=camera, name="camera", daemon=True)
    recorder.start()
    # (extent shown, recording still running) each time the layer's extent changed.
    seen: list[tuple[int, bool]] = []

    def observe() -> bool:
        running = recorder.is_alive()
        if live.layers:
            extent = live.layers[0].data[0].shape[0]
            if not seen or seen[-1][0] != extent:
                seen.append((extent, running))
        if sum(1 for _, r in seen if r) >= GROWTH:
            enough.set()
        # Done when the recording is, and the viewer has caught up with its last
        # publication (the windows too: the writer republishes them when it finishes).
        return (not running and bool(stats) and live.extent == frames_of(stats[0])
                and live.windows == live_mod.omero_windows(path))

    def frames_of(st) -> int:
        # frames_written counts 2-D frames: one per channel and time point.
        return st.frames_written // len(live_mod.CHANNELS)

    try:
        wait_until(observe, MAX_FRAMES / FPS + 60, "the viewer to show every frame recorded")
    finally:
        live.stop()
        enough.set()
        recorder.join(timeout=30)
    assert not failure, f"the recording failed: {failure[0]!r}"
    frames = frames_of(stats[0])
    # Every time point of both channels was written, and all of them are published.
    assert stats[0].frames_written == frames * len(live_mod.CHANNELS)
    assert live_mod.published_extent(path) == frames
    print(f"extents shown (extent, recording): {seen}")
    extents = [e for e, _ in seen]
    assert extents == sorted(set(extents)), f"the extent along t went back: {extents}"
    while_recording = [e for e, running in seen if running]
    assert len(while_recording) >= GROWTH and while_recording[0] < frames, (
        f"the layer did not grow while recording: extents {seen}")
    assert all(len(layer.data[0]) == frames for layer in live.layers)

    # The slider followed the recording to its last frame.
    last = frames - 1
    assert viewer.dims.current_step[0] == last
    omero = json.loads((path / "zarr.json").read_text())["attributes"]["ome"]["omero"]
    side = SIZE // 4
    for c, layer in enumerate(live.layers):
        # The last published frame, as napari holds it, is the one the camera produced.
        np.testing.assert_array_equal(np.asarray(layer.data[0][last]),
                                      live_mod.camera_frame(last, c, SIZE))
        # Its contrast is the window the writer republished last.
        window = omero["channels"][c]["window"]
        assert list(layer.contrast_limits) == pytest.approx([window["start"], window["end"]])
        # And on screen: that frame's square, bright, where the camera put it.
        screen = intensity(layer_figure(viewer, layer))
        assert screen.shape == (SIZE, SIZE)
        y, x = live_mod.square_origin(last, c, SIZE)
        inner = np.zeros((SIZE, SIZE), bool)
        inner[y + 2:y + side - 2, x + 2:x + side - 2] = True
        background = np.ones((SIZE, SIZE), bool)
        background[max(y - 2, 0):y + side + 2, max(x - 2, 0):x + side + 2] = False
        background[live_mod.hot_pixels(SIZE)] = False
        assert_readable(screen, inner, background, f"live {layer.name}")
        lit = screen > 128
        assert not lit[background].any() and lit[inner].all(), (
            f"{layer.name}: the square of frame {last} is not where the camera put it")
    process_events(0.1)
    save_screenshot(viewer, "napari-live")
