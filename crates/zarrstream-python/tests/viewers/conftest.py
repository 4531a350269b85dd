"""Fixtures of the viewer tests: napari in a real Qt window (under the X server
``tests/viewers.rs`` starts, or any ``DISPLAY``) and ``zarrstream record``.

Run by ``cargo test -p zarrstream-python --test viewers``; by hand::

    xvfb-run -a target/viewer-venv/bin/python -m pytest crates/zarrstream-python/tests/viewers

with the wheel installed in that environment and ``ZARRSTREAM_RECORD`` naming the
``zarrstream`` command-line binary (default: ``target/debug/zarrstream``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from viewer_support import REPO, process_events, skip_or_fail


@pytest.fixture(scope="session")
def record_cmd() -> list[str]:
    """``zarrstream record`` (the binary ``ZARRSTREAM_RECORD``, else target/debug/zarrstream)."""
    path = Path(os.environ.get("ZARRSTREAM_RECORD",
                               REPO / "target" / "debug" / "zarrstream"))
    if not path.is_file():
        skip_or_fail(f"no zarrstream binary at {path}: `cargo build -p zarrstream-cli` "
                     "or set ZARRSTREAM_RECORD")
    return [str(path), "record"]


@pytest.fixture
def viewer() -> Iterator[Any]:
    """A napari viewer in a shown Qt window, closed after the test."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        skip_or_fail("no DISPLAY: run under Xvfb (tests/viewers.rs starts one; by hand "
                     "use xvfb-run -a)")
    import napari

    v = napari.Viewer(show=True, title="zarrstream viewer test")
    # The window at a fixed size, so screenshots are alike from run to run.
    v.window._qt_window.resize(1100, 640)
    process_events(0.1)
    try:
        yield v
    finally:
        v.close()
        process_events(0.05)
