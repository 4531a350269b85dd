"""neuroglancer, the upstream web client, opens what zarrstream records over HTTP and
shows it: headless Chromium (Debian's, driven by Playwright, WebGL 2 from SwiftShader)
loads neuroglancer's client as the ``neuroglancer`` wheel ships and serves it, the
viewer opens ``zarr3://http://127.0.0.1:PORT/...`` from a plain static file server in
this process, and each screenshot shows a known pattern where the state puts it.

The arrays hold a dim background (100) and bright squares (2000) at known places:

* a plain sharded array ``(t, y, x)`` whose square moves with ``t`` (the view picks
  one frame, in the second shard), with the shard index at the end and at the start;
* an OME-Zarr 0.5 image ``(t, c, y, x)`` with two channels, one square each, a patch
  of one-pixel stripes (2000 and 0) in the first, and a three-level pyramid (2×2
  means): seen at full resolution (level 0 read: the stripes drawn as stripes) and
  zoomed out four times (neuroglancer then reads level 2 of the multiscale, and only
  it: the stripes drawn as their mean, an even 1000, which no sampling of level 0 at
  that zoom would give).

Each test asserts: neuroglancer reports every source loaded and every visible chunk
in (``viewer.isReady()``, what neuroglancer's own screenshot tool waits for) with no
layer error; the server answered every request without error and the shard index was
read where the writer put it; the screenshot's bright pixels form the squares, at
the places the state's position and zoom map them to (within 2 screen pixels), in
each channel's colour, over a dark background. And the waits are not vacuous: a
missing store and a zarr.json that is not an array's are layer errors, and a host
that ignores byte ranges never gets the view ready (a timeout at the deadline).

Screenshots go to ``$ZARRSTREAM_SCREENSHOTS`` (the Rust driver's
target/viewer-screenshots) or a temporary directory; ``ZARRSTREAM_UPDATE_SCREENSHOTS=1``
also copies the OME views to docs/book/src/images/neuroglancer-*.png.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarrstream

from ng_support import (
    LayerError,
    ScreenMap,
    StoreServer,
    bright_box,
    chromium,
    overlay_rects,
    panel_rect,
    require,
    save_screenshot,
    screenshots_dir,
    stable_screenshot,
    wait_until_loaded,
)

try:
    import neuroglancer
    import playwright.sync_api  # noqa: F401
except ImportError as e:
    require(f"Python package {e.name}", False,
            "install crates/zarrstream-python/tests/viewers/requirements.txt")

pytestmark = pytest.mark.timeout(240)

BACKGROUND, BRIGHT = 100, 2000
#: The page's size in CSS pixels (device scale 1: one CSS pixel, one screenshot pixel).
VIEWPORT = {"width": 800, "height": 600}
#: How long neuroglancer may take to open a store and draw every visible chunk
#: (SwiftShader on two shared cores: a few seconds when idle).
LOAD_SECONDS = 90

# neuroglancer's default image shader maps the data type's whole range (0-65535 for
# uint16) to black-white, whatever the store says: 2.41.2 applies no omero window or
# colour, neither from OME-Zarr 0.5's attributes.ome.omero (where zarrstream writes it)
# nor from a top-level attributes.omero (0.4's place; tried by hand), so 2000 would be
# 3 % grey. The states below set each layer's `normalized` range to [0, 2500] so the
# squares are clearly bright and the background (100) stays dark (4 % grey).
RANGE = [0, 2500]


# -- the stores -----------------------------------------------------------------------

#: The plain array: (t, y, x), a 64×64 square per frame at (y0, x0).
PLAIN_SIDE = 64
PLAIN_SQUARES = {0: (160, 32), 1: (136, 96), 2: (48, 144)}
PLAIN_SHAPE = (256, 256)
#: The frame the plain view shows: in the second shard (shards hold 2 frames).
PLAIN_T = 2


def write_plain(path: Path, index_location: str) -> None:
    with zarrstream.Writer(path, shape=(None, *PLAIN_SHAPE), chunks=(1, 64, 64),
                           shards=(2, *PLAIN_SHAPE), dtype="uint16",
                           dimension_names=("t", "y", "x"),
                           index_location=index_location) as w:
        for t in range(len(PLAIN_SQUARES)):
            y0, x0 = PLAIN_SQUARES[t]
            frame = np.full(PLAIN_SHAPE, BACKGROUND, np.uint16)
            frame[y0:y0 + PLAIN_SIDE, x0:x0 + PLAIN_SIDE] = BRIGHT
            w.append(frame)
    assert w.stats.frames_written == len(PLAIN_SQUARES)


#: The OME image: (t, c, y, x), 1024×1024 at 0.5 µm, one 128×128 square per channel
#: at (y0, x0); a level-2 pixel is 4×4 of these, so each square is exact at every level.
OME_SHAPE = (1024, 1024)
OME_SIDE = 128
OME_SQUARES = {"DAPI": (320, 576), "GFP": (576, 256)}
#: One-pixel vertical stripes, 2000 on even columns and 0 on odd ones, in DAPI, at
#: (y0, x0), OME_SIDE square: their mean (1000) at levels 1 and 2.
OME_STRIPES = (576, 576)
#: Each channel's colour in the view: magenta and green.
OME_COLORS = {"DAPI": (255, 0, 255), "GFP": (0, 255, 0)}
PIXEL_SIZE = 0.5e-6  # metres


def write_ome(path: Path, index_location: str) -> None:
    channels = list(OME_SQUARES)
    frame = np.full((len(channels), *OME_SHAPE), BACKGROUND, np.uint16)
    for c, (y0, x0) in enumerate(OME_SQUARES.values()):
        frame[c, y0:y0 + OME_SIDE, x0:x0 + OME_SIDE] = BRIGHT
    y0, x0 = OME_STRIPES
    frame[0, y0:y0 + OME_SIDE, x0:x0 + OME_SIDE:2] = BRIGHT
    frame[0, y0:y0 + OME_SIDE, x0 + 1:x0 + OME_SIDE:2] = 0
    ome = zarrstream.Ome(name="pattern", channels=channels, omero=True, levels=3,
                         pixel_size=(0.5, 0.5), space_unit="micrometer")
    with zarrstream.Writer(path, shape=(None, len(channels), *OME_SHAPE),
                           chunks=(1, 1, 256, 256), shards=(1, len(channels), *OME_SHAPE),
                           dtype="uint16", index_location=index_location, ome=ome) as w:
        w.append(frame)
    assert w.stats.frames_written == len(channels)
    for level in range(3):
        assert (path / str(level) / "c" / "0" / "0" / "0" / "0").is_file()


def index_bytes(array: Path) -> tuple[str, int]:
    """Where the array's shard index lies and how many bytes it takes (16 per inner
    chunk, 4 more with its crc32c), from its zarr.json."""
    meta = json.loads((array / "zarr.json").read_text())
    (sharding,) = [c for c in meta["codecs"] if c["name"] == "sharding_indexed"]
    conf = sharding["configuration"]
    chunks = int(np.prod([-(-s // c) for s, c in zip(meta["chunk_grid"]["configuration"]
                                                     ["chunk_shape"], conf["chunk_shape"])]))
    crc = any(c["name"] == "crc32c" for c in conf["index_codecs"])
    return conf.get("index_location", "end"), 16 * chunks + (4 if crc else 0)


# -- the browser and the viewer -------------------------------------------------------

@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def ng() -> Iterator[Any]:
    neuroglancer.set_server_bind_address("127.0.0.1")
    yield neuroglancer
    neuroglancer.stop()


class PageLog:
    """What the page reported: uncaught errors, console errors, failed responses."""

    def __init__(self, page: Any) -> None:
        self.page_errors: list[str] = []
        self.console_errors: list[str] = []
        self.failed: list[str] = []
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        page.on("response", lambda r: r.status >= 400 and self.failed.append(
            f"{r.status} {r.url}"))
        # neuroglancer cancels requests for chunks it no longer needs (the view
        # settling): net::ERR_ABORTED is not a failure; anything else is.
        page.on("requestfailed", lambda r: r.failure != "net::ERR_ABORTED"
                and self.failed.append(f"{r.failure} {r.url}"))

    def check(self, store_url: str) -> None:
        assert not self.page_errors, f"uncaught errors in the page: {self.page_errors}"
        # The only failure allowed is the viewer server's missing favicon.
        failed = [f for f in self.failed if not f.endswith("/favicon.ico")]
        assert not failed, f"requests failed: {failed}"
        store_errors = [e for e in self.console_errors if store_url in e]
        assert not store_errors, f"console errors about the store: {store_errors}"


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, PageLog]]:
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    p = context.new_page()
    log = PageLog(p)
    try:
        yield p, log
    finally:
        context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshots_dir(tmp_path_factory.mktemp("neuroglancer-screenshots"))


def show(ng: Any, page: Any, state: dict[str, Any]) -> tuple[np.ndarray, ScreenMap]:
    """Opens a viewer on ``state`` in ``page``, waits until neuroglancer has every
    visible chunk drawn, and returns the screenshot and where data lands in it."""
    viewer = ng.Viewer()
    viewer.set_state(ng.ViewerState(state))
    deadline = time.monotonic() + LOAD_SECONDS
    page.goto(viewer.get_viewer_url(), timeout=LOAD_SECONDS * 1000)
    # The pointer off the panel: no hover read-outs or menus in the picture.
    page.mouse.move(VIEWPORT["width"] // 2, 5)
    wait_until_loaded(page, deadline)
    image = stable_screenshot(page, deadline)
    shown = page.evaluate("() => viewer.state.toJSON()")
    # The client kept the state's view (position and zoom are what the mapping uses).
    assert shown["layout"] == "xy"
    assert shown["crossSectionScale"] == pytest.approx(state["crossSectionScale"])
    assert shown["displayDimensions"] == ["x", "y"]
    names = list(shown["dimensions"])
    px, py = (shown["position"][names.index(d)] for d in ("x", "y"))
    left, top, width, height = panel_rect(page)
    return image, ScreenMap(left, top, width, height, px, py, state["crossSectionScale"],
                            tuple(overlay_rects(page)))


def base_state(dimensions: dict[str, list[Any]], position: list[float], scale: float,
               layers: list[dict[str, Any]]) -> dict[str, Any]:
    """An ``xy`` view with x to the right and y down, ``scale`` data units (of the
    global dimensions) per screen pixel, without the overlays (axis lines, scale bar,
    the yellow data bounds) that would draw over the picture."""
    return {
        "dimensions": dimensions,
        "displayDimensions": ["x", "y"],
        "position": position,
        "crossSectionScale": scale,
        "layout": "xy",
        "showAxisLines": False,
        "showScaleBar": False,
        "showDefaultAnnotations": False,
        "layers": layers,
    }


# -- what the screenshot must show ----------------------------------------------------

def check_squares(image: np.ndarray, where: ScreenMap,
                  squares: dict[str, tuple[tuple[int, int, int, int], tuple[int, int, int]]],
                  extent: tuple[int, int],
                  elsewhere: tuple[tuple[int, int, int, int], ...] = ()) -> dict[str, Any]:
    """For each square (its data box ``(y0, y1, x0, x1)`` and colour): the pixels of
    that colour inside the array's screen area form a box within 2 pixels of where the
    view maps the square, bright inside; the array's other pixels, but for the data
    boxes ``elsewhere``, are dark. Returns the measurements (for the failure
    message)."""
    img = image.astype(np.int32)
    # The array's area on screen, within the panel, 3 pixels in from their edges.
    av0, av1, au0, au1 = where.box(0, extent[0], 0, extent[1])
    av0 = max(av0, round(where.top)) + 3
    au0 = max(au0, round(where.left)) + 3
    av1 = min(av1, round(where.top + where.height)) - 3
    au1 = min(au1, round(where.left + where.width)) - 3
    assert av1 - av0 > 50 and au1 - au0 > 50, "the array is not on screen"
    area = np.zeros(img.shape[:2], bool)
    area[av0:av1, au0:au1] = True
    # Not the HTML neuroglancer lays over the panel (its labels are coloured too).
    for left, top, width, height in where.overlays:
        area[max(int(top) - 1, 0):int(top + height) + 2,
             max(int(left) - 1, 0):int(left + width) + 2] = False
    covered = np.zeros_like(area)
    for y0, y1, x0, x1 in elsewhere:
        v0, v1, u0, u1 = where.box(y0, y1, x0, x1)
        covered[max(v0 - 3, 0):v1 + 3, max(u0 - 3, 0):u1 + 3] = True
    area &= ~covered
    found: dict[str, Any] = {}
    for name, ((y0, y1, x0, x1), color) in squares.items():
        on = np.array(color) > 0
        # A pixel of this colour: its lit components bright, the others dark.
        mask = (img[..., on].min(axis=-1) > 128) & area
        if (~on).any():
            mask &= img[..., ~on].max(axis=-1) < 64
        want = where.box(y0, y1, x0, x1)
        got = bright_box(img, mask)
        found[name] = {"expected": want, "found": got}
        assert got is not None, f"{name}: no bright pixels of its colour on screen"
        assert all(abs(a - b) <= 2 for a, b in zip(got, want)), (
            f"{name}: bright box {got} (v0, v1, u0, u1) is not where the view puts "
            f"the square, {want}")
        v0, v1, u0, u1 = want
        inner = img[v0 + 3:v1 - 3, u0 + 3:u1 - 3][..., on]
        assert inner.mean() > 180, f"{name}: the square is not bright ({inner.mean():.0f})"
        assert mask[v0 + 3:v1 - 3, u0 + 3:u1 - 3].mean() > 0.99, f"{name}: holes"
        covered[max(v0 - 3, 0):v1 + 3, max(u0 - 3, 0):u1 + 3] = True
    rest = area & ~covered
    background = img[rest]
    found["background_max"] = int(background.max())
    found["background_mean"] = float(background.mean())
    found["background_bright_box"] = bright_box(img, rest & (img.max(axis=-1) >= 40))
    # 100 of [0, 2500] is 4 % grey: about 10 of 255.
    assert background.max() < 40, f"the background is not dark: {found}"
    assert background.mean() > 2, f"the background is black: is the array drawn? {found}"
    return found


def data_requests(server: StoreServer, array: str) -> list[Any]:
    return [r for r in server.log() if r.path.startswith(f"/{array}/")]


def check_store_requests(server: StoreServer, root: Path, arrays: list[str]) -> None:
    """Every request answered without error; each array's shards were read by byte
    ranges, the index among them at the end or start, where the writer put it."""
    bad = [r for r in server.log() if r.status >= 400]
    assert not bad, f"the store server answered errors: {bad}"
    for array in arrays:
        location, size = index_bytes(root / array)
        reads = [r for r in data_requests(server, array)
                 if "/c/" in r.path and r.method == "GET"]
        assert reads, f"no shard of {array} was read"
        assert all(r.status == 206 and r.range for r in reads), (
            f"{array}: shards read whole, not by ranges: {reads}")
        index_reads = []
        for r in reads:
            shard_size = (root / r.path.lstrip("/")).stat().st_size
            first, _, last = r.range.removeprefix("bytes=").partition("-")
            if location == "start":
                hit = first == "0" and last == str(size - 1)
            elif first == "":
                hit = last == str(size)
            else:
                hit = int(first) == shard_size - size and int(last) == shard_size - 1
            if hit:
                index_reads.append(r)
        assert index_reads, (
            f"{array}: no read of the {size}-byte index at the {location} of a shard: "
            f"{reads}")


# -- the tests ------------------------------------------------------------------------

@pytest.mark.parametrize("index_location", ["end", "start"])
def test_plain_array(ng: Any, page: tuple[Any, PageLog], tmp_path: Path, shots: Path,
                     index_location: str) -> None:
    p, log = page
    root = tmp_path / "store"
    root.mkdir()
    write_plain(root / "plain.zarr", index_location)
    server = StoreServer(root)
    try:
        source = f"zarr3://{server.url}/plain.zarr/"
        state = base_state(
            # A plain array's dimensions are unitless, one unit a voxel.
            {"x": [1, ""], "y": [1, ""], "t": [1, ""]},
            # The view's centre: voxel i spans [i, i+1), so t = 2.5 is frame 2.
            [PLAIN_SHAPE[1] / 2, PLAIN_SHAPE[0] / 2, PLAIN_T + 0.5],
            0.5,  # two screen pixels per voxel: the 256² frame is 512² on screen
            [{"type": "image", "name": "plain", "source": source,
              "shaderControls": {"normalized": {"range": RANGE}}}])
        image, where = show(ng, p, state)
        save_screenshot(image, shots, f"neuroglancer-plain-{index_location}.png")
        y0, x0 = PLAIN_SQUARES[PLAIN_T]
        check_squares(image, where,
                      {"square": ((y0, y0 + PLAIN_SIDE, x0, x0 + PLAIN_SIDE),
                                  (255, 255, 255))},
                      PLAIN_SHAPE)
        log.check(server.url)
        check_store_requests(server, root, ["plain.zarr"])
        # Frame 2 lies in the second shard along t: that shard was read.
        assert any(r.path == "/plain.zarr/c/1/0/0" for r in server.log())
    finally:
        server.close()


def ome_state(source: str, scale: float) -> dict[str, Any]:
    """The OME image, one layer per channel (the `c'` axis neuroglancer makes of OME's
    channel axis, fixed per layer), each in its colour."""
    layers = []
    for c, name in enumerate(OME_SQUARES):
        hex_color = "".join(f"{v:02x}" for v in OME_COLORS[name])
        layers.append({
            "type": "image", "name": name, "source": source,
            # The channel, by index: neuroglancer centres OME's channel axis on
            # integers (unlike space, where voxel i spans [i, i+1)).
            "localDimensions": {"c'": [1, ""]}, "localPosition": [c],
            # Each layer at full opacity (an image layer's default is 0.5), added up.
            "opacity": 1.0, "blend": "additive",
            # neuroglancer's default shader with a colour: as for the plain array,
            # the normalized range is the state's, not the data type's.
            "shader": ("#uicontrol invlerp normalized\n"
                       f'#uicontrol vec3 color color(default="#{hex_color}")\n'
                       "void main() { emitRGB(color * normalized()); }"),
            "shaderControls": {"normalized": {"range": RANGE}},
        })
    return base_state(
        # The image's axes as neuroglancer reads OME's: space in metres, time unitless.
        {"x": [PIXEL_SIZE, "m"], "y": [PIXEL_SIZE, "m"], "t": [1, ""]},
        [OME_SHAPE[1] / 2, OME_SHAPE[0] / 2, 0.5],
        scale,
        layers)


def ome_squares() -> dict[str, Any]:
    return {name: ((y0, y0 + OME_SIDE, x0, x0 + OME_SIDE), OME_COLORS[name])
            for name, (y0, x0) in OME_SQUARES.items()}


def stripes_box() -> tuple[int, int, int, int]:
    y0, x0 = OME_STRIPES
    return y0, y0 + OME_SIDE, x0, x0 + OME_SIDE


def check_stripes(image: np.ndarray, where: ScreenMap, level: int) -> dict[str, Any]:
    """The stripes' screen box, 3 pixels in, in DAPI's colour (red and blue, no
    green): at level 0 and one screen pixel per pixel, whole columns alternate bright
    and dark; from level 2, all of it is their mean, 1000 of [0, 2500] (102 of 255)."""
    v0, v1, u0, u1 = where.box(*stripes_box())
    patch = image[v0 + 3:v1 - 3, u0 + 3:u1 - 3].astype(np.int32)
    assert patch[..., 1].max() < 40, "green in the DAPI stripes"
    lit = patch[..., [0, 2]].min(axis=-1)
    columns = lit.mean(axis=0)
    found = {"level": level, "min": int(lit.min()), "max": int(lit.max()),
             "bright_columns": float((columns > 150).mean()),
             "dark_columns": float((columns < 40).mean())}
    if level == 0:
        assert 0.4 <= found["bright_columns"] <= 0.6, f"no stripes at level 0: {found}"
        assert 0.4 <= found["dark_columns"] <= 0.6, f"no stripes at level 0: {found}"
        assert np.all(np.abs(np.diff(columns)) > 100), f"columns do not alternate: {found}"
    else:
        assert 87 <= found["min"] and found["max"] <= 117, (
            f"the stripes are not their mean at level {level}: {found}")
    return found


def levels_read(server: StoreServer) -> set[int]:
    return {int(r.path.split("/")[2]) for r in data_requests(server, "image.zarr")
            if "/c/" in r.path}


@pytest.mark.parametrize("index_location", ["end", "start"])
def test_ome_image_and_pyramid(ng: Any, browser: Any, page: tuple[Any, PageLog],
                               tmp_path: Path, shots: Path, index_location: str) -> None:
    p, log = page
    root = tmp_path / "store"
    root.mkdir()
    write_ome(root / "image.zarr", index_location)
    server = StoreServer(root)
    try:
        source = f"zarr3://{server.url}/image.zarr/"
        docs = index_location == "end"

        # Full resolution: one screen pixel per level-0 pixel, the middle of the image.
        image, where = show(ng, p, ome_state(source, 1.0))
        save_screenshot(image, shots, f"neuroglancer-ome-{index_location}.png",
                        "neuroglancer-ome.png" if docs else None)
        check_squares(image, where, ome_squares(), OME_SHAPE, (stripes_box(),))
        check_stripes(image, where, 0)
        log.check(server.url)
        meta = [r.path for r in data_requests(server, "image.zarr") if "/c/" not in r.path]
        # neuroglancer read the image group's OME metadata and each level's array.
        assert "/image.zarr/zarr.json" in meta
        assert {"/image.zarr/0/zarr.json", "/image.zarr/1/zarr.json",
                "/image.zarr/2/zarr.json"} <= set(meta)
        assert 0 in levels_read(server), "level 0 was not read at full resolution"
        check_store_requests(server, root, ["image.zarr/0"])

        # Zoomed out 4×: the whole image in 256² screen pixels, where neuroglancer's
        # multiscale picks level 2 (4×4 level-0 pixels each), and reads nothing else.
        server.clear()
        context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
        try:
            p2 = context.new_page()
            log2 = PageLog(p2)
            image, where = show(ng, p2, ome_state(source, 4.0))
            save_screenshot(image, shots, f"neuroglancer-ome-level2-{index_location}.png",
                            "neuroglancer-ome-level2.png" if docs else None)
            check_squares(image, where, ome_squares(), OME_SHAPE, (stripes_box(),))
            check_stripes(image, where, 2)
            log2.check(server.url)
        finally:
            context.close()
        assert levels_read(server) == {2}, (
            f"zoomed out, neuroglancer read levels {levels_read(server)}, not level 2")
        check_store_requests(server, root, ["image.zarr/2"])
    finally:
        server.close()


@pytest.mark.parametrize("case", ["missing", "not-an-array", "no-byte-ranges"])
def test_unreadable_store_fails(ng: Any, page: tuple[Any, PageLog], tmp_path: Path,
                                case: str) -> None:
    """The waiting above fails when neuroglancer cannot show the array (the checks are
    not vacuous): no store there (404) or a zarr.json that is not an array's, and the
    layer reports the error; a host that ignores byte ranges (the whole shard, 200, for
    a read of its index), and the chunks never arrive: a timeout at the deadline."""
    p, _ = page
    root = tmp_path / "store"
    root.mkdir()
    if case == "not-an-array":
        (root / "plain.zarr").mkdir()
        (root / "plain.zarr" / "zarr.json").write_text('{"zarr_format": 3, "node_type": 7}')
    elif case == "no-byte-ranges":
        write_plain(root / "plain.zarr", "end")
    server = StoreServer(root, ranges=case != "no-byte-ranges")
    try:
        viewer = ng.Viewer()
        viewer.set_state(ng.ViewerState(base_state(
            {"x": [1, ""], "y": [1, ""], "t": [1, ""]}, [128, 128, 0.5], 0.5,
            [{"type": "image", "name": "plain",
              "source": f"zarr3://{server.url}/plain.zarr/"}])))
        p.goto(viewer.get_viewer_url(), timeout=LOAD_SECONDS * 1000)
        if case == "no-byte-ranges":
            with pytest.raises(TimeoutError, match="not ready"):
                wait_until_loaded(p, time.monotonic() + 10)
            # It was not for want of asking: the shard was fetched, whole.
            assert any(r.path.startswith("/plain.zarr/c/") and r.status == 200
                       for r in server.log())
        else:
            with pytest.raises(LayerError):
                wait_until_loaded(p, time.monotonic() + LOAD_SECONDS)
    finally:
        server.close()
