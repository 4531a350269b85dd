"""The examples the book and the README show from ``examples/python/``: each runs here as
a user would run it, and what it wrote is read back with zarr-python."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import zarr

REPO = Path(__file__).resolve().parents[4]


def _load(name: str) -> ModuleType:
    path = REPO / "examples" / "python" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quickstart = _load("quickstart")
    monkeypatch.chdir(tmp_path)  # the example writes ./run.zarr
    stats = quickstart.main()
    store = tmp_path / "run.zarr"
    assert stats.frames_written == 64 and stats.frames_dropped == 0
    array = zarr.open_array(store, mode="r")
    assert array.shape == (64, 512, 512) and array.dtype == np.uint16
    expected = np.stack(list(quickstart.simulated_camera(64)))
    np.testing.assert_array_equal(array[:], expected)
