#!/usr/bin/env python3
"""Watch a recording grow in napari while zarrstream writes it.

    python examples/python/napari_live.py OUT.ome.zarr [--frames N] [--fps F] [--size PX]

Records a synthetic two-channel camera (a bright square drifting over a noisy background,
a few hot pixels) with the Python package, on a thread, into an OME-Zarr 0.5 image with
``omero`` metadata, while napari shows it and follows it: every ``--poll`` seconds the
published extent along t is read from the level arrays' ``zarr.json``; when it grew, or
the group's ``omero`` windows changed, the layers get the longer arrays, the windows as
contrast limits (unless you changed them) and the slider moves to the newest frame
(unless you moved it). Closing the window (or Ctrl-C) ends the recording at the frame
it has reached, closed properly.

Needs zarrstream, napari with a Qt binding (PyQt6) and napari-ome-zarr
(``crates/zarrstream-python/tests/viewers/requirements.txt`` pins a working set;
``crates/zarrstream-python/tests/viewers/test_live.py`` runs this under Xvfb).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

import zarrstream

CHANNELS = ("A", "B")
#: Counts of the background, of each channel's square, and of the hot pixels.
BACKGROUND, SQUARE, HOT = 100, (2000, 900), 60000


def camera_frame(t: int, c: int, size: int = 256) -> np.ndarray:
    """Frame ``t`` of channel ``c``: noise around ``BACKGROUND``, a square of ``SQUARE[c]``
    a quarter of the frame wide drifting diagonally, and three hot pixels.
    Deterministic: the same ``(t, c, size)`` always gives the same frame."""
    rng = np.random.default_rng([t, c, size])
    frame = rng.normal(BACKGROUND, 6, (size, size)).round().astype(np.uint16)
    y, x = square_origin(t, c, size)
    side = size // 4
    frame[y:y + side, x:x + side] = SQUARE[c] + rng.integers(0, 40, (side, side))
    frame[hot_pixels(size)] = HOT
    return frame


def hot_pixels(size: int = 256) -> tuple[list[int], list[int]]:
    """The hot pixels' rows and columns (the same in every frame)."""
    return [7, size // 2, size - 9], [size - 5, 11, size // 3]


def square_origin(t: int, c: int, size: int = 256) -> tuple[int, int]:
    """Where the square of frame ``t`` of channel ``c`` starts (row, column)."""
    span = size - size // 4
    return (t * 5 + c * span // 2) % span, (t * 7 + c * span // 3) % span


def record(path: str | os.PathLike[str], frames: int = 60, fps: float = 10.0,
           size: int = 256, stop: threading.Event | None = None) -> zarrstream.Stats:
    """Records ``frames`` time points of both channels at ``fps`` into the OME-Zarr image
    ``path`` and returns the writer's statistics. One time point per shard, so each
    frame is published (and visible to readers) as soon as it is written."""
    ome = zarrstream.Ome(name="live", channels=CHANNELS, omero=True, levels=2,
                         frame_interval=1.0 / fps)
    with zarrstream.Writer(path, shape=(None, len(CHANNELS), size, size),
                           chunks=(1, 1, size, size), shards=(1, len(CHANNELS), size, size),
                           dtype="uint16", dimension_names=("t", "c", "y", "x"),
                           ome=ome) as w:
        start = time.monotonic()
        for t in range(frames):
            if stop is not None and stop.is_set():
                break
            w.append(np.stack([camera_frame(t, c, size) for c in range(len(CHANNELS))]))
            # Paced as a camera would be.
            time.sleep(max(0.0, start + (t + 1) / fps - time.monotonic()))
    return w.stats


def published_extent(path: str | os.PathLike[str]) -> int:
    """Frames along t that every level has published (0 before the first)."""
    extents = []
    root = Path(path)
    try:
        group = json.loads((root / "zarr.json").read_text())
        for ds in group["attributes"]["ome"]["multiscales"][0]["datasets"]:
            extents.append(json.loads((root / ds["path"] / "zarr.json").read_text())["shape"][0])
    except (OSError, KeyError, ValueError):
        return 0  # not created yet, or between two publications
    return min(extents) if extents else 0


def omero_windows(path: str | os.PathLike[str]) -> list[tuple[float, float]]:
    """Each channel's ``omero`` display window ``(start, end)`` as now published."""
    try:
        group = json.loads((Path(path) / "zarr.json").read_text())
        return [(float(ch["window"]["start"]), float(ch["window"]["end"]))
                for ch in group["attributes"]["ome"]["omero"]["channels"]]
    except (OSError, KeyError, ValueError):
        return []


class LiveImage:
    """Shows the OME-Zarr image at ``path`` in ``viewer`` and keeps it current while it
    is recorded: a Qt timer calls :meth:`refresh` every ``poll`` seconds."""

    def __init__(self, viewer: Any, path: str | os.PathLike[str], poll: float = 0.2):
        from qtpy.QtCore import QTimer

        self.viewer = viewer
        self.path = os.fspath(path)
        self.layers: list[Any] = []
        #: The extents along t shown so far, in order (one entry per update).
        self.history: list[int] = []
        #: The omero windows ``(start, end)`` per channel as last applied.
        self.windows: list[tuple[float, float]] = []
        self._timer = QTimer()
        self._timer.timeout.connect(self.refresh)
        self._timer.start(int(poll * 1000))
        self.refresh()

    @property
    def extent(self) -> int:
        return self.history[-1] if self.history else 0

    def stop(self) -> None:
        self._timer.stop()

    def refresh(self) -> bool:
        """Updates the layers when more frames or new windows were published; returns
        whether anything changed."""
        extent = published_extent(self.path)
        windows = omero_windows(self.path)
        if extent == 0 or (extent == self.extent and windows == self.windows):
            return False
        if not self.layers:
            # The first time as a user opens it: napari-ome-zarr makes one layer per
            # channel, coloured and windowed from the group's omero metadata.
            self.layers = self.viewer.open(self.path, plugin="napari-ome-zarr")
            # The windows it applied (read after ours: they may be newer).
            self.windows = [tuple(layer.contrast_limits) for layer in self.layers]
        else:
            self._update(extent, windows)
        # Follow the newest frame unless the slider was moved away from the last one.
        t = self.viewer.dims.current_step[0]
        if not self.history or t >= self.extent - 1:
            self.viewer.dims.set_current_step(0, extent - 1)
        self.history.append(extent)
        return True

    def _update(self, extent: int, windows: list[tuple[float, float]]) -> None:
        from napari_ome_zarr._reader import napari_get_reader

        reader = napari_get_reader(self.path)
        if reader is None:
            return
        data, meta, _ = reader(self.path)[0]
        # Every level cut to the extent all of them have published.
        data = [level[:extent] for level in data]
        axis = meta.get("channel_axis")
        for i, layer in enumerate(self.layers):
            if axis is None:
                layer.data = data
            else:
                index = (slice(None),) * axis + (i,)
                layer.data = [level[index] for level in data]
            # A window the user has not changed follows the published one.
            if (i < min(len(windows), len(self.windows)) and windows[i] != self.windows[i]
                    and tuple(layer.contrast_limits) == self.windows[i]):
                lo, hi = layer.contrast_limits_range
                layer.contrast_limits_range = (min(lo, windows[i][0]), max(hi, windows[i][1]))
                layer.contrast_limits = windows[i]
        self.windows = windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", help="the OME-Zarr image to create (must not exist)")
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--fps", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--poll", type=float, default=0.2, help="seconds between checks")
    args = parser.parse_args()

    import napari

    stop = threading.Event()
    recorder = threading.Thread(target=record, name="camera", daemon=True,
                                args=(args.store, args.frames, args.fps, args.size, stop))
    recorder.start()
    viewer = napari.Viewer(title=f"zarrstream live: {args.store}")
    live = LiveImage(viewer, args.store, args.poll)
    try:
        napari.run()
    except KeyboardInterrupt:
        pass
    finally:
        # The recording ends with the window: closed at the frame it has reached.
        live.stop()
        stop.set()
        recorder.join()
    print(f"{args.store}: {published_extent(args.store)} time points")


if __name__ == "__main__":
    main()
