#!/usr/bin/env python3
"""Record a pymmcore-plus multi-dimensional acquisition (MDA) into OME-Zarr through
zarrstream, with simulated Python devices (no Micro-Manager installation needed).

    python examples/python/pymmcore_plus_mda.py OUT.ome.zarr [--t 3] [--c 2] [--z 4]
        [--positions 1] [--height 64] [--width 96] [--format zarrstream]

``UniMMCore`` (pymmcore-plus's core that loads devices written in Python) drives a
simulated camera, a focus stage, an XY stage and a light source whose ``Line``
property is the ``Channel`` config group. ``core.mda.run(sequence, output=settings)``
hands every frame to ome-writers, and ome-writers writes the arrays through zarrstream
once ``zarrstream.ome_writers.register()`` has added the ``"zarrstream"`` format.

Every frame is reproducible: :func:`expected_frame` derives its pixels from a seed, the
frame's serial number and the state of the devices when it was exposed (light line,
focus and XY positions), so a reader can recompute what the camera produced. The
camera also keeps a copy of each frame it produced (:attr:`SimulatedCamera.produced`).

Needs pymmcore-plus >= 0.18, ome-writers 0.3.2 and useq-schema.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import ome_writers
import useq
from pymmcore_plus.experimental.unicore import (
    CameraDevice,
    GenericDevice,
    StageDevice,
    UniMMCore,
    XYStageDevice,
)

__all__ = [
    "CHANNELS",
    "SEED",
    "DeviceState",
    "LightSource",
    "Mda",
    "SimulatedCamera",
    "SimulatedFocus",
    "SimulatedXYStage",
    "acquisition_settings",
    "expected_frame",
    "make_core",
    "make_sequence",
    "run",
    "zarrstream_available",
]

#: Seed of the simulated camera's pixels.
SEED = 20261124
#: The light source's lines, each a preset of the ``Channel`` config group.
CHANNELS = ("DAPI", "FITC", "Cy5")
#: Labels of the devices :func:`make_core` loads.
CAMERA, FOCUS, XY, LIGHT = "Camera", "Focus", "XY", "Light"
#: Name of the channel config group.
CHANNEL_GROUP = "Channel"


@dataclasses.dataclass(frozen=True)
class DeviceState:
    """What the camera saw when it exposed a frame: its serial number (0, 1, … over the
    camera's life), the light line and the stage positions in micrometres."""

    serial: int
    line: str
    z_um: float
    x_um: float
    y_um: float


def expected_frame(state: DeviceState, shape: tuple[int, int],
                   dtype: npt.DTypeLike = "uint16", seed: int = SEED) -> npt.NDArray[Any]:
    """The pixels the simulated camera produces in ``state``: 12-bit noise from an RNG
    seeded with ``seed``, the serial number, the line and the positions (rounded to
    nanometres), so equal states give equal frames and any difference shows."""
    key = [seed, state.serial, zlib.crc32(state.line.encode()),
           *(int(round(v * 1000)) + 2**40 for v in (state.z_um, state.x_um, state.y_um))]
    rng = np.random.default_rng(key)
    dt = np.dtype(dtype)
    high = min(4096, int(np.iinfo(dt).max) + 1) if dt.kind in "ui" else 4096
    return rng.integers(0, high, size=shape, dtype=np.int64).astype(dt)


class LightSource(GenericDevice):
    """A light source with one property, ``Line``: which of :data:`CHANNELS` is on."""

    def __init__(self) -> None:
        super().__init__()
        self.line = CHANNELS[0]
        self.register_property(
            "Line", default_value=CHANNELS[0], allowed_values=CHANNELS,
            getter=lambda dev: dev.line, setter=LightSource._set_line)

    def _set_line(self, value: str) -> None:
        self.line = str(value)


class SimulatedFocus(StageDevice):
    """A focus drive that moves instantly."""

    def __init__(self) -> None:
        super().__init__()
        self.z_um = 0.0

    def set_position_um(self, val: float) -> None:
        """Moves to ``val`` micrometres."""
        self.z_um = float(val)

    def get_position_um(self) -> float:
        """The position in micrometres."""
        return self.z_um

    def home(self) -> None:
        """Moves to 0."""
        self.z_um = 0.0

    def stop(self) -> None:
        """Nothing to stop: moves are instant."""

    def set_origin(self) -> None:
        """Calls the current position 0."""
        self.z_um = 0.0


class SimulatedXYStage(XYStageDevice):
    """An XY stage that moves instantly."""

    def __init__(self) -> None:
        super().__init__()
        self.x_um = 0.0
        self.y_um = 0.0

    def set_position_um(self, x: float, y: float) -> None:
        """Moves to ``(x, y)`` micrometres."""
        self.x_um, self.y_um = float(x), float(y)

    def get_position_um(self) -> tuple[float, float]:
        """The position in micrometres."""
        return self.x_um, self.y_um

    def home(self) -> None:
        """Moves to (0, 0)."""
        self.x_um = self.y_um = 0.0

    def stop(self) -> None:
        """Nothing to stop: moves are instant."""

    def set_origin_x(self) -> None:
        """Calls the current x 0."""
        self.x_um = 0.0

    def set_origin_y(self) -> None:
        """Calls the current y 0."""
        self.y_um = 0.0


class SimulatedCamera(CameraDevice):
    """A camera whose frames are :func:`expected_frame` of the devices' state at each
    exposure; it keeps ``(state, frame)`` of every frame it produced in
    :attr:`produced`."""

    def __init__(self, light: LightSource, focus: SimulatedFocus, xy: SimulatedXYStage,
                 height: int = 64, width: int = 96, dtype: str = "uint16",
                 seed: int = SEED) -> None:
        super().__init__()
        self._light, self._focus, self._xy = light, focus, xy
        self._shape = (int(height), int(width))
        self._dtype = np.dtype(dtype)
        self._seed = seed
        self._exposure_ms = 10.0
        self.produced: list[tuple[DeviceState, npt.NDArray[Any]]] = []

    def get_exposure(self) -> float:
        """Exposure time in milliseconds."""
        return self._exposure_ms

    def set_exposure(self, exposure: float) -> None:
        """Sets the exposure time in milliseconds (the simulation does not wait)."""
        self._exposure_ms = float(exposure)

    def shape(self) -> tuple[int, int]:
        """``(height, width)`` of a frame."""
        return self._shape

    def dtype(self) -> npt.DTypeLike:
        """The pixel type."""
        return self._dtype

    def state(self) -> DeviceState:
        """The state the next frame is exposed in."""
        return DeviceState(len(self.produced), self._light.line, self._focus.z_um,
                           self._xy.x_um, self._xy.y_um)

    def start_sequence(
        self, n: int | None,
        get_buffer: Callable[[Sequence[int], npt.DTypeLike], npt.NDArray[Any]],
    ) -> Iterator[Mapping[str, Any]]:
        """Fills ``n`` buffers (forever when ``n`` is ``None``) with
        :func:`expected_frame` and yields each frame's state as its metadata."""
        count = 0
        while n is None or count < n:
            state = self.state()
            pixels = expected_frame(state, self._shape, self._dtype, self._seed)
            buf = get_buffer(self._shape, self._dtype)
            buf[:] = pixels
            self.produced.append((state, pixels))
            count += 1
            yield {"serial": str(state.serial), "line": state.line}


@dataclasses.dataclass
class Mda:
    """The core and the Python devices :func:`make_core` loaded into it."""

    core: UniMMCore
    camera: SimulatedCamera
    focus: SimulatedFocus
    xy: SimulatedXYStage
    light: LightSource


def make_core(height: int = 64, width: int = 96, dtype: str = "uint16",
              seed: int = SEED) -> Mda:
    """A ``UniMMCore`` with the simulated camera, focus stage, XY stage and light
    source loaded, initialised and selected, and the ``Channel`` group defined on the
    light's ``Line`` property. (No pixel size: the C++ core's pixel size configs
    cannot refer to Python devices' properties, so y and x scales stay unknown.)"""
    core = UniMMCore()
    light, focus, xy = LightSource(), SimulatedFocus(), SimulatedXYStage()
    camera = SimulatedCamera(light, focus, xy, height, width, dtype, seed)
    for label, device in ((LIGHT, light), (FOCUS, focus), (XY, xy), (CAMERA, camera)):
        core.loadPyDevice(label, device)
        core.initializeDevice(label)
    core.setCameraDevice(CAMERA)
    core.setFocusDevice(FOCUS)
    core.setXYStageDevice(XY)
    for line in CHANNELS:
        core.defineConfig(CHANNEL_GROUP, line, LIGHT, "Line", line)
    core.setChannelGroup(CHANNEL_GROUP)
    # No shutter device: the engine would fail opening and closing one.
    core.setAutoShutter(False)
    return Mda(core, camera, focus, xy, light)


def make_sequence(t: int = 3, c: int = 2, z: int = 4, positions: int = 1,
                  z_step_um: float = 1.5) -> useq.MDASequence:
    """A time × position × channel × z sequence (useq's default ``tpgcz`` order): ``c``
    channels from :data:`CHANNELS`, ``z`` planes ``z_step_um`` apart around the current
    focus, and ``positions`` stage positions (none, i.e. the current one, when 1)."""
    if not 1 <= c <= len(CHANNELS):
        raise ValueError(f"c must be 1 to {len(CHANNELS)}, got {c}")
    kwargs: dict[str, Any] = {
        "time_plan": {"interval": 0, "loops": t},
        "channels": [{"group": CHANNEL_GROUP, "config": line} for line in CHANNELS[:c]],
    }
    if z > 1:
        kwargs["z_plan"] = {"range": z_step_um * (z - 1), "step": z_step_um}
    if positions > 1:
        kwargs["stage_positions"] = [
            {"x": 100.0 * i, "y": -50.0 * i, "z": 10.0 * i}
            for i in range(positions)]
    return useq.MDASequence(**kwargs)


def zarrstream_available() -> bool:
    """Whether ``zarrstream.ome_writers`` can be imported (and so registered)."""
    try:
        import zarrstream.ome_writers  # noqa: F401
    except ImportError:
        return False
    return True


def acquisition_settings(path: str | Path, backend: str | Mapping[str, Any] = "zarrstream",
                         overwrite: bool = True) -> ome_writers.AcquisitionSettings:
    """ome-writers settings writing OME-Zarr at ``path`` through ``backend``:
    ``"zarrstream"`` or ``{"name": "ome-zarr", "backend": "zarrstream"}`` (registered
    here), or one of ome-writers' own Zarr backends (``"tensorstore"``,
    ``"zarr-python"``, …), by name or in the same dict form. pymmcore-plus fills in the
    dimensions and the dtype from the sequence and the camera."""
    name = backend.get("backend") if isinstance(backend, Mapping) else backend
    if name in ("zarrstream", "auto"):
        import zarrstream.ome_writers

        zarrstream.ome_writers.register()
    fmt = dict(backend) if isinstance(backend, Mapping) else backend
    return ome_writers.AcquisitionSettings.model_validate(
        {"root_path": str(path), "format": fmt, "overwrite": overwrite})


def run(path: str | Path, t: int = 3, c: int = 2, z: int = 4, positions: int = 1,
        height: int = 64, width: int = 96, dtype: str = "uint16",
        backend: str | Mapping[str, Any] = "zarrstream",
        ) -> tuple[Mda, useq.MDASequence]:
    """Runs :func:`make_sequence` on :func:`make_core`'s devices, writing OME-Zarr at
    ``path`` through ``backend``; returns the core with its devices (the camera's
    :attr:`~SimulatedCamera.produced` lists every frame) and the sequence run."""
    mda = make_core(height, width, dtype)
    sequence = make_sequence(t, c, z, positions)
    settings = acquisition_settings(path, backend)
    mda.core.mda.run(sequence, output=settings)
    return mda, sequence


def _describe(path: Path) -> list[dict[str, Any]]:
    """Every array under ``path``: its key, shape, dtype, chunks and who wrote it."""
    out = []
    for meta in sorted(path.rglob("zarr.json")):
        doc = json.loads(meta.read_text())
        if doc.get("node_type") != "array":
            continue
        attrs = doc.get("attributes", {})
        out.append({
            "array": str(meta.parent.relative_to(path)),
            "shape": doc["shape"],
            "dtype": doc["data_type"],
            "dimension_names": doc.get("dimension_names"),
            "written_by": "zarrstream" if "zarrstream" in attrs else "other",
        })
    return out


def main() -> None:
    """Command line: run one acquisition and print what was written."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="output OME-Zarr directory")
    parser.add_argument("--t", type=int, default=3, help="time points")
    parser.add_argument("--c", type=int, default=2, help=f"channels (≤ {len(CHANNELS)})")
    parser.add_argument("--z", type=int, default=4, help="z planes")
    parser.add_argument("--positions", type=int, default=1, help="stage positions")
    parser.add_argument("--height", type=int, default=64)
    parser.add_argument("--width", type=int, default=96)
    parser.add_argument("--dtype", default="uint16")
    parser.add_argument("--format", default="zarrstream",
                        help="ome-writers backend: zarrstream (default), tensorstore, …")
    args = parser.parse_args()
    mda, sequence = run(args.path, args.t, args.c, args.z, args.positions,
                        args.height, args.width, args.dtype, args.format)
    print(json.dumps({
        "path": str(args.path),
        "backend": args.format,
        "sequence_shape": dict(sequence.sizes),
        "frames_produced": len(mda.camera.produced),
        "arrays": _describe(args.path),
    }, indent=2))


if __name__ == "__main__":
    main()
