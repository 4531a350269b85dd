"""What the neuroglancer test drives: an HTTP server for Zarr stores (CORS and byte
ranges, as neuroglancer's zarr3 reader needs them, every request logged), headless
Debian Chromium through Playwright, and neuroglancer's own viewer (the client the
``neuroglancer`` wheel ships, served by the package's Python server) waited on until
its chunks are in.

Every wait here takes a deadline (``time.monotonic()`` seconds) and raises
``TimeoutError`` past it, naming what it waited for.
"""

from __future__ import annotations

import dataclasses
import http.server
import io
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

#: Debian's Chromium (tools/viewers/install-deps installs it).
CHROMIUM = os.environ.get("ZARRSTREAM_CHROMIUM", "/usr/bin/chromium")

#: Headless Chromium as it runs here: no sandbox (root), and nothing that phones
#: home (the machine reaches no host but the package registries). WebGL 2, which
#: neuroglancer needs, comes from SwiftShader (ANGLE on its Vulkan CPU device); Debian's
#: Chromium 156 still falls back to it by itself, logging that the automatic fallback
#: is deprecated in favour of --enable-unsafe-swiftshader, so it is asked for by name
#: (Playwright passes that flag too).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@dataclasses.dataclass(frozen=True)
class Request:
    """One request the store server answered."""

    method: str
    path: str
    range: str | None
    status: int


class StoreServer:
    """Serves ``root`` over HTTP on 127.0.0.1 (a free port) from a thread, as a static
    file host would serve a Zarr store to a browser: CORS on every answer, single byte
    ranges (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``) answered 206 with
    ``Content-Range``, HEAD, and OPTIONS preflights. ``requests`` logs every answer.

    ``ranges=False`` makes it a host that ignores ``Range`` (the whole file, 200), to
    show what neuroglancer does then."""

    def __init__(self, root: Path, ranges: bool = True) -> None:
        self.root = Path(root)
        self.ranges = ranges
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(server.root), **kwargs)

            def end_headers(self) -> None:
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
                self.send_header("Access-Control-Allow-Headers", "Range, Content-Type")
                self.send_header("Access-Control-Expose-Headers",
                                 "Content-Range, Content-Length, Accept-Ranges, ETag")
                if server.ranges:
                    self.send_header("Accept-Ranges", "bytes")
                super().end_headers()

            def send_response(self, code: int, message: str | None = None) -> None:
                server._record(Request(self.command, self.path,
                                       self.headers.get("Range"), code))
                super().send_response(code, message)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_OPTIONS(self) -> None:
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def send_head(self) -> Any:
                spec = self.headers.get("Range")
                path = self.translate_path(self.path)
                if spec is None or not os.path.isfile(path) or not server.ranges:
                    return super().send_head()
                size = os.path.getsize(path)
                m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", spec)
                if m is None or (m.group(1) == "" and m.group(2) == ""):
                    self.send_error(416, "only one byte range is served")
                    return None
                first, last = m.group(1), m.group(2)
                if first == "":
                    start, end = max(0, size - int(last)), size - 1
                else:
                    start = int(first)
                    end = min(int(last), size - 1) if last else size - 1
                if start >= size or end < start:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                with open(path, "rb") as f:
                    f.seek(start)
                    body = f.read(end - start + 1)
                self.send_response(206)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return io.BytesIO(body)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="store-server", daemon=True)
        self._thread.start()

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def log(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


def remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


# What the page reports about the viewer each time it is polled: whether neuroglancer
# says every visible chunk is in (viewer.isReady(), what its own screenshot tool waits
# for), and each layer's data-source state (an error shown in the layer's source tab).
_VIEWER_STATUS_JS = """() => {
  const v = window.viewer;
  if (v === undefined) return {viewer: false};
  const layers = [];
  for (const managed of v.layerManager.managedLayers) {
    const layer = managed.layer;
    const sources = [];
    for (const ds of (layer && layer.dataSources) || []) {
      const s = ds.loadState;
      sources.push(s === undefined ? {state: "loading"}
        : (s.error !== undefined ? {state: "error", error: String(s.error.message || s.error)}
           : {state: "loaded"}));
    }
    layers.push({name: managed.name, type: layer ? layer.type : null, sources});
  }
  return {viewer: true, ready: v.isReady(), layers};
}"""


@dataclasses.dataclass
class ViewerStatus:
    ready: bool
    layers: list[dict[str, Any]]

    def errors(self) -> list[str]:
        return [f"layer {layer['name']}: {s['error']}" for layer in self.layers
                for s in layer["sources"] if s["state"] == "error"]

    def all_loaded(self) -> bool:
        return bool(self.layers) and all(
            s["state"] == "loaded" for layer in self.layers for s in layer["sources"])


def viewer_status(page: Any) -> ViewerStatus | None:
    s = page.evaluate(_VIEWER_STATUS_JS)
    if not s["viewer"]:
        return None
    return ViewerStatus(ready=bool(s["ready"]), layers=s["layers"])


class LayerError(AssertionError):
    """neuroglancer could not open a layer's data source."""


def wait_until_loaded(page: Any, deadline: float, poll: float = 0.25) -> ViewerStatus:
    """Polls the viewer until every layer's source is open and neuroglancer reports
    every visible chunk loaded (``viewer.isReady()``). Raises :class:`LayerError` as
    soon as a source fails, ``TimeoutError`` at the deadline."""
    last: ViewerStatus | None = None
    while True:
        last = viewer_status(page)
        if last is not None:
            if last.errors():
                raise LayerError("; ".join(last.errors()))
            if last.ready and last.all_loaded():
                return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"neuroglancer not ready by the deadline: {last}")
        page.wait_for_timeout(poll * 1000)


def stable_screenshot(page: Any, deadline: float, settle: int = 2) -> np.ndarray:
    """A screenshot of the page once ``settle`` consecutive captures are identical
    (the last chunks drawn): an RGB array."""
    previous: bytes | None = None
    same = 0
    while True:
        png = page.screenshot(timeout=max(1.0, remaining(deadline)) * 1000)
        if png == previous:
            same += 1
            if same >= settle - 1:
                return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
        else:
            same = 0
        previous = png
        if time.monotonic() >= deadline:
            raise TimeoutError("the viewer's picture did not settle by the deadline")
        page.wait_for_timeout(200)


def panel_rect(page: Any) -> tuple[float, float, float, float]:
    """The one rendered data panel's drawing area on the page: (left, top, width,
    height) in CSS pixels (the element's client box, inside its border)."""
    rects = page.evaluate("""() => Array.from(
        document.querySelectorAll('.neuroglancer-rendered-data-panel')).map(e => {
          const r = e.getBoundingClientRect();
          return [r.left + e.clientLeft, r.top + e.clientTop, e.clientWidth, e.clientHeight];
        })""")
    assert len(rects) == 1, f"expected one data panel (layout xy), found {rects}"
    return tuple(rects[0])


def overlay_rects(page: Any) -> list[tuple[float, float, float, float]]:
    """What neuroglancer draws over the data panel in HTML (the dimension labels at
    its top left, the buttons at its top right): (left, top, width, height) of every
    visible element inside it or on top of it."""
    return [tuple(r) for r in page.evaluate("""() => {
        const panel = document.querySelector('.neuroglancer-rendered-data-panel');
        const p = panel.getBoundingClientRect();
        const out = [];
        for (const e of document.querySelectorAll('body *')) {
          if (e === panel || e.contains(panel) || e.tagName === 'CANVAS') continue;
          const r = e.getBoundingClientRect();
          if (r.width === 0 || r.height === 0) continue;
          if (getComputedStyle(e).visibility === 'hidden') continue;
          if (r.right <= p.left || r.left >= p.right || r.bottom <= p.top
              || r.top >= p.bottom) continue;
          out.push([r.left, r.top, r.width, r.height]);
        }
        return out;
      }""")]


@dataclasses.dataclass(frozen=True)
class ScreenMap:
    """Where data coordinates land in a screenshot of an ``xy`` panel: neuroglancer
    draws ``position`` at the panel's centre and ``scale`` data units per CSS pixel
    (``crossSectionScale``), x to the right and y down. Voxel ``i`` spans ``[i, i+1)``.
    (Seen: neuroglancer 2.41.2 draws one pixel up and left of this, in a 796×549 panel,
    within the tests' 2-pixel tolerance.)"""

    left: float
    top: float
    width: float
    height: float
    position_x: float
    position_y: float
    scale: float
    #: Screen boxes (left, top, width, height) drawn over the panel.
    overlays: tuple[tuple[float, float, float, float], ...] = ()

    def to_screen(self, x: float, y: float) -> tuple[float, float]:
        u = self.left + self.width / 2 + (x - self.position_x) / self.scale
        v = self.top + self.height / 2 + (y - self.position_y) / self.scale
        return u, v

    def box(self, y0: float, y1: float, x0: float, x1: float) -> tuple[int, int, int, int]:
        """The screen box (v0, v1, u0, u1), pixel indices, of the data box
        ``[y0, y1) × [x0, x1)``."""
        u0, v0 = self.to_screen(x0, y0)
        u1, v1 = self.to_screen(x1, y1)
        return round(v0), round(v1), round(u0), round(u1)


def bright_box(image: np.ndarray, mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """The bounding box (v0, v1, u0, u1), end exclusive, of ``mask``'s true pixels."""
    vs, us = np.nonzero(mask)
    if vs.size == 0:
        return None
    return int(vs.min()), int(vs.max()) + 1, int(us.min()), int(us.max()) + 1


def in_ci() -> bool:
    return os.environ.get("CI", "") not in ("", "false", "0")


def require(what: str, ok: bool, how: str) -> None:
    """Skips loudly when ``what`` is missing, or fails with CI=true."""
    if ok:
        return
    why = f"{what} is missing: {how}"
    if in_ci():
        pytest.fail(why)
    print(f"\n{'!' * 78}\nSKIPPED: {why}\n{'!' * 78}", file=sys.stderr)
    pytest.skip(why, allow_module_level=True)


@contextmanager
def chromium(headless: bool = True) -> Iterator[Any]:
    """Debian's Chromium under Playwright (its own browser download is never used)."""
    require(CHROMIUM, os.path.exists(CHROMIUM), "run tools/viewers/install-deps")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=headless,
                                    args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield browser
        finally:
            browser.close()


def screenshots_dir(default: Path) -> Path:
    """``$ZARRSTREAM_SCREENSHOTS`` if set (the Rust driver points it at
    target/viewer-screenshots), else ``default``."""
    d = Path(os.environ.get("ZARRSTREAM_SCREENSHOTS") or default)
    d.mkdir(parents=True, exist_ok=True)
    return d


def save_screenshot(image: np.ndarray, directory: Path, name: str,
                    docs_name: str | None = None) -> Path:
    """Writes ``image`` as ``directory/name``; with ``ZARRSTREAM_UPDATE_SCREENSHOTS=1``
    also as ``docs/book/src/images/docs_name`` in the repository."""
    path = directory / name
    Image.fromarray(image).save(path, optimize=True)
    if docs_name and os.environ.get("ZARRSTREAM_UPDATE_SCREENSHOTS") == "1":
        docs = Path(__file__).resolve().parents[4] / "docs" / "book" / "src" / "images"
        docs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, docs / docs_name)
    return path
