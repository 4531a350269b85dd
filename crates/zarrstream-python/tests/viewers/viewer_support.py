"""Helpers of the viewer tests: the Qt event loop with deadlines, napari's rendering of
one layer, screenshots, the readability check; ``conftest.py`` has the fixtures.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[4]
#: Where every screenshot goes; with ZARRSTREAM_UPDATE_SCREENSHOTS=1 also docs/book/src/images/.
SCREENSHOTS = Path(os.environ.get("ZARRSTREAM_SCREENSHOTS",
                                  REPO / "target" / "viewer-screenshots"))
DOCS_IMAGES = REPO / "docs" / "book" / "src" / "images"
#: The most bytes a screenshot committed to docs/book/src/images may take.
DOCS_IMAGE_LIMIT = 200_000


def in_ci() -> bool:
    v = os.environ.get("CI", "")
    return v not in ("", "false", "0")


def skip_or_fail(why: str) -> None:
    """A loud skip, or a failure with CI=true."""
    if in_ci():
        pytest.fail(why)
    print(f"\n{'!' * 78}\nSKIPPED: {why}\n{'!' * 78}", file=sys.stderr)
    pytest.skip(why)


def process_events(seconds: float = 0.0) -> None:
    """Lets Qt handle what is pending (timers, paints) for about ``seconds``."""
    from qtpy.QtWidgets import QApplication

    end = time.monotonic() + seconds
    while True:
        QApplication.processEvents()
        if time.monotonic() >= end:
            return
        time.sleep(0.01)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Runs the Qt event loop until ``predicate()`` is true; fails after ``timeout``
    seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        process_events(0.02)


def intensity(image: np.ndarray) -> np.ndarray:
    """A screenshot's brightness per pixel (0 to 255): the largest of R, G and B, which
    for napari's black-to-colour colormaps is the layer's value through its window."""
    return image[..., :3].max(axis=2).astype(np.int32)


def layer_figure(viewer: Any, layer: Any) -> np.ndarray:
    """napari's rendering of ``layer`` alone over its data extent, one screen pixel per
    level-0 pixel (``export_figure``); the other layers are hidden for it and shown
    again after. Contrast, colormap and the current slice are as napari has them."""
    shown = {id(o): o.visible for o in viewer.layers}
    try:
        for other in viewer.layers:
            other.visible = other is layer
        process_events(0.05)
        return viewer.export_figure(flash=False)
    finally:
        for other in viewer.layers:
            other.visible = shown[id(other)]
        process_events(0.05)


def save_screenshot(viewer: Any, name: str) -> Path:
    """Saves the whole napari window as ``target/viewer-screenshots/<name>.png`` (and,
    with ``ZARRSTREAM_UPDATE_SCREENSHOTS=1``, as ``docs/book/src/images/<name>.png``), palette
    PNG so that it stays small. Returns the path under target/."""
    from PIL import Image

    process_events(0.1)
    shot = viewer.screenshot(canvas_only=False, flash=False)
    image = Image.fromarray(shot[..., :3]).quantize(colors=128, dither=Image.Dither.NONE)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    out = SCREENSHOTS / f"{name}.png"
    image.save(out, optimize=True)
    print(f"screenshot: {out} ({out.stat().st_size} bytes)")
    if os.environ.get("ZARRSTREAM_UPDATE_SCREENSHOTS") == "1":
        size = out.stat().st_size
        assert size <= DOCS_IMAGE_LIMIT, f"{out} is {size} bytes, over {DOCS_IMAGE_LIMIT}"
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, DOCS_IMAGES / out.name)
        print(f"screenshot: updated {DOCS_IMAGES / out.name}")
    return out


def assert_readable(screen: np.ndarray, bright: np.ndarray, background: np.ndarray,
                    what: str) -> None:
    """The bright feature and the background, as napari shows them, at least half the
    display range (128 of 255) apart."""
    hi, lo = float(np.median(screen[bright])), float(np.median(screen[background]))
    print(f"{what}: bright feature {hi:.0f}/255, background {lo:.0f}/255")
    assert hi - lo >= 128, (
        f"{what}: unreadable contrast as opened: the bright feature shows at {hi:.0f}/255 "
        f"and the background at {lo:.0f}/255 (less than half the display range apart)")
