"""Reads zarrstream arrays with three independent readers and compares every element.

Driven by tests/readers/interop.rs, run inside the pinned environment (tests/interop/venv.py):

    check.py matrix MANIFEST.json    metadata + whole-array + sub-region reads of every
                                     array, then the corrupted-shard (negative) checks
    check.py live MANIFEST.json      reads a store again and again while it is being
                                     recorded, then checks the finished array

Readers:
  zarr-python   zarr 3.1, its own BatchedCodecPipeline (asserted)
  zarrs         zarr 3.1 with codec_pipeline.path = zarrs.ZarrsCodecPipeline and
                codec_pipeline.strict = True: the Rust pipeline or an error, never a
                silent fallback to the Python pipeline (asserted on every open)
  tensorstore   the zarr3 driver on a file kvstore, a fresh Context per open (no cache)

The manifest (written by the Rust test) gives, per array, the store path, a raw
little-endian file holding the expected full array (fill value wherever no frame was
pushed), and the expected metadata. Comparisons are bitwise (floats included, so NaN
payloads, -0.0 and infinities must come back exactly). Every failure line names the
array, the reader, the read, the first differing elements, or the reader's own error.
Exit status: 0 if everything passed, 1 otherwise.
"""

import importlib.metadata
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np
import tensorstore as ts
import zarr
import zarrs  # noqa: F401  (registers nothing by itself; imported to fail early)
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarrs import ZarrsCodecPipeline

UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
ZARRS_CONFIG = {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline",
                "codec_pipeline.strict": True,
                "codec_pipeline.validate_checksums": True}
PYTHON_CONFIG = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}


def versions():
    names = ["zarr", "numcodecs", "tensorstore", "zarrs", "numpy"]
    return ", ".join(f"{n} {importlib.metadata.version(n)}" for n in names)


def short_error(e):
    """The reader's own error: type, message and the innermost frame it came from."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
    msg = str(e).strip() or repr(e)
    cause = e.__cause__ or e.__context__
    if cause is not None and str(cause).strip() and str(cause).strip() not in msg:
        msg += f" [caused by {type(cause).__name__}: {str(cause).strip()}]"
    return f"{type(e).__name__}: {msg}{where}"


# ---------------------------------------------------------------- readers


class Reader:
    name = "?"

    def open(self, path):
        raise NotImplementedError

    def read(self, handle, sel):
        raise NotImplementedError

    def meta(self, handle):
        raise NotImplementedError


def zarr_meta(a):
    sharding = a.metadata.codecs[0].to_dict() if len(a.metadata.codecs) == 1 else None
    return {
        "shape": list(a.shape),
        "chunk": list(a.chunks),
        "shard": list(a.shards) if a.shards is not None else None,
        "grid": list(a.metadata.chunk_grid.chunk_shape),
        "dtype": np.dtype(a.dtype),
        "fill": np.asarray(a.fill_value, dtype=a.dtype),
        "dims": list(a.metadata.dimension_names) if a.metadata.dimension_names else None,
        "outer_codecs": [c.to_dict()["name"] for c in a.metadata.codecs],
        "sharding": to_plain(sharding),
    }


class ZarrPython(Reader):
    name = "zarr-python"

    def open(self, path):
        with zarr.config.set(PYTHON_CONFIG):
            a = zarr.open_array(store=path, mode="r")
        pipeline = a._async_array.codec_pipeline
        if not isinstance(pipeline, BatchedCodecPipeline):
            raise AssertionError(f"expected zarr's BatchedCodecPipeline, got {type(pipeline)}")
        return a

    def read(self, a, sel):
        with zarr.config.set(PYTHON_CONFIG):
            return np.asarray(a[sel])

    def meta(self, a):
        return zarr_meta(a)


class Zarrs(Reader):
    name = "zarrs"

    def open(self, path):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with zarr.config.set(ZARRS_CONFIG):
                a = zarr.open_array(store=path, mode="r")
        pipeline = a._async_array.codec_pipeline
        if not isinstance(pipeline, ZarrsCodecPipeline):
            raise AssertionError(f"zarrs pipeline not in use: got {type(pipeline)}")
        if pipeline.impl is None or pipeline.python_impl is not None:
            raise AssertionError("ZarrsCodecPipeline fell back to the Python codec pipeline "
                                 f"(impl={pipeline.impl}, python_impl={pipeline.python_impl})")
        fallback = [str(w.message) for w in caught if "ZarrsCodecPipeline" in str(w.message)]
        if fallback:
            raise AssertionError(f"ZarrsCodecPipeline warned: {fallback}")
        return a

    def read(self, a, sel):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with zarr.config.set(ZARRS_CONFIG):
                out = np.asarray(a[sel])
        fallback = [str(w.message) for w in caught if "ZarrsCodecPipeline" in str(w.message)]
        if fallback:
            raise AssertionError(f"ZarrsCodecPipeline warned: {fallback}")
        return out

    def meta(self, a):
        return zarr_meta(a)


class TensorStore(Reader):
    name = "tensorstore"

    def open(self, path):
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}
        return ts.open(spec, open=True, read=True, context=ts.Context()).result()

    def read(self, t, sel):
        return np.asarray(t[sel].read().result())

    def meta(self, t):
        labels = list(t.domain.labels)
        codec = t.codec.to_json().get("codecs", [])
        return {
            "shape": list(t.domain.shape),
            "chunk": list(t.chunk_layout.read_chunk.shape),
            "shard": list(t.chunk_layout.write_chunk.shape),
            "grid": list(t.chunk_layout.write_chunk.shape),
            "dtype": np.dtype(t.dtype.numpy_dtype),
            "fill": np.asarray(t.fill_value, dtype=t.dtype.numpy_dtype),
            "dims": labels if any(labels) else None,
            "outer_codecs": [c["name"] for c in codec],
            "sharding": to_plain(codec[0]) if len(codec) == 1 else None,
        }


READERS = [ZarrPython(), Zarrs(), TensorStore()]


def to_plain(x):
    """Tuples to lists, recursively, so reader dicts compare with JSON."""
    if isinstance(x, dict):
        return {k: to_plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_plain(v) for v in x]
    return x


# ---------------------------------------------------------------- expectations


class Expected:
    def __init__(self, entry):
        self.e = entry
        self.name = entry["name"]
        self.path = entry["path"]
        self.dtype = np.dtype(entry["dtype"]).newbyteorder("<")
        self.shape = tuple(entry["shape"])
        self.chunk = tuple(entry["chunk"])
        self.shard = tuple(entry["shard"])
        self._data = None

    @property
    def data(self):
        if self._data is None:
            raw = np.fromfile(self.e["expected"], dtype=self.dtype)
            self._data = raw.reshape(self.shape).astype(self.dtype.newbyteorder("="))
        return self._data

    def fill_bits(self):
        return int(self.e["fill_hex"], 16)

    def sharding(self):
        e = self.e
        endian = {"name": "bytes", "configuration": {"endian": "little"}}
        inner = [endian]
        c = e["codec"]
        if c["name"] == "zstd":
            inner.append({"name": "zstd",
                          "configuration": {"level": c["level"], "checksum": False}})
        elif c["name"] == "blosc":
            inner.append({"name": "blosc", "configuration": {
                "cname": c["cname"], "clevel": c["clevel"], "shuffle": c["shuffle"],
                "typesize": self.dtype.itemsize, "blocksize": 0}})
        if e["crc32c"]:
            inner.append({"name": "crc32c"})
        return {"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(self.chunk),
            "codecs": inner,
            "index_codecs": [endian, {"name": "crc32c"}],
            "index_location": e["index_location"]}}


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(UNSIGNED[a.dtype.itemsize])


def fmt_value(v, dtype):
    v = np.asarray(v, dtype=dtype)
    if dtype.kind == "f":
        return f"{v.item()!r} (0x{int(bits(v.reshape(1))[0]):0{2 * dtype.itemsize}x})"
    return repr(v.item())


def compare(got, want, origin, limit=5):
    """None if `got` equals `want` bit for bit, else a description of the differences
    with absolute element indices (region origin added)."""
    if got.shape != want.shape:
        return f"shape {got.shape} != expected {want.shape}"
    if got.dtype.newbyteorder("=") != want.dtype.newbyteorder("="):
        return f"dtype {got.dtype} != expected {want.dtype}"
    diff = bits(got) != bits(want)
    n = int(diff.sum())
    if n == 0:
        return None
    lines = [f"{n} of {got.size} elements differ; first:"]
    for idx in np.argwhere(diff)[:limit]:
        i = tuple(int(v) for v in idx)
        absolute = tuple(o + v for o, v in zip(origin, i))
        lines.append(f"    element {list(absolute)}: expected {fmt_value(want[i], want.dtype)}, "
                     f"got {fmt_value(got[i], want.dtype)}")
    return "\n".join(lines)


def regions(shape, chunk, shard, seed):
    """Sub-regions as lists of (lo, hi) per axis: single inner chunks (first, last=edge,
    random), regions straddling shard borders, the far corner, a random box and a
    single element."""
    if any(s == 0 for s in shape):
        return []
    rng = np.random.default_rng(seed)
    out = []

    def chunk_region(pick):
        r = []
        for s, c in zip(shape, chunk):
            n = -(-s // c)
            i = pick(n)
            r.append((i * c, min(s, (i + 1) * c)))
        return r

    out.append(("inner chunk (first)", chunk_region(lambda n: 0)))
    out.append(("inner chunk (last, edge)", chunk_region(lambda n: n - 1)))
    out.append(("inner chunk (random)", chunk_region(lambda n: int(rng.integers(0, n)))))
    for k in range(2):
        r = []
        for s, c, sh in zip(shape, chunk, shard):
            borders = list(range(sh, s, sh))
            if borders:
                b = borders[int(rng.integers(0, len(borders)))]
                reach = c * (k + 1)
                r.append((max(0, b - int(rng.integers(1, reach + 1))),
                          min(s, b + int(rng.integers(1, reach + 1)))))
            else:
                lo = int(rng.integers(0, s))
                r.append((lo, int(rng.integers(lo + 1, s + 1))))
        out.append((f"straddling shard borders #{k + 1}", r))
    out.append(("far corner (edge shards)",
                [(max(0, s - sh - 3), s) for s, sh in zip(shape, shard)]))
    box = []
    for s in shape:
        lo = int(rng.integers(0, s))
        box.append((lo, int(rng.integers(lo + 1, s + 1))))
    out.append(("random box", box))
    out.append(("single element", [(p, p + 1) for p in
                                   (int(rng.integers(0, s)) for s in shape)]))
    seen, unique = set(), []
    for label, r in out:
        key = tuple(r)
        if key not in seen:
            seen.add(key)
            unique.append((label, r))
    return unique


def sel_of(region):
    return tuple(slice(lo, hi) for lo, hi in region)


# ---------------------------------------------------------------- matrix


class Failures:
    def __init__(self):
        self.items = []

    def add(self, array, reader, what, detail):
        line = f"FAIL [{array}] [{reader}] {what}: {detail}"
        self.items.append(line)
        print(line, flush=True)


def normalize(sharding, dtype):
    """zarr-python reports the inner `bytes` codec of a 1-byte data type without its
    `endian` (we write `"endian": "little"`, tensorstore echoes it): ignore it there.
    tensorstore reports a `blosc` codec without shuffle without its `typesize` (which
    only a shuffle uses; we write it, as zarr-python does): ignore it there too."""
    if not sharding:
        return sharding
    s = json.loads(json.dumps(sharding))
    for c in s.get("configuration", {}).get("codecs", []):
        if c.get("name") == "bytes" and dtype.itemsize == 1:
            c.pop("configuration", None)
        conf = c.get("configuration", {})
        if c.get("name") == "blosc" and conf.get("shuffle") == "noshuffle":
            conf.pop("typesize", None)
    return s


def check_meta(ex, reader, m, fails):
    e = ex.e
    problems = []
    want = {
        "shape": list(ex.shape), "chunk": list(ex.chunk), "shard": list(ex.shard),
        "grid": list(ex.shard), "dims": e["dimension_names"],
        "outer_codecs": ["sharding_indexed"],
    }
    for k, v in want.items():
        if m[k] != v:
            problems.append(f"{k}: reader reports {m[k]!r}, expected {v!r}")
    if m["dtype"].newbyteorder("=") != ex.dtype.newbyteorder("="):
        problems.append(f"dtype: reader reports {m['dtype']}, expected {ex.dtype}")
    got_fill = int(bits(m["fill"].reshape(1).astype(ex.dtype.newbyteorder("=")))[0])
    if got_fill != ex.fill_bits():
        problems.append(f"fill value: reader reports {m['fill']!r} (0x{got_fill:x}), "
                        f"expected {e['fill_display']} ({e['fill_hex']})")
    if normalize(m["sharding"], ex.dtype) != normalize(ex.sharding(), ex.dtype):
        problems.append(f"sharding codec: reader reports {json.dumps(m['sharding'])}, "
                        f"expected {json.dumps(ex.sharding())}")
    for p in problems:
        fails.add(ex.name, reader.name, "metadata", p)
    return not problems


def check_array(ex, fails, stats):
    full = [(0, s) for s in ex.shape]
    regs = regions(ex.shape, ex.chunk, ex.shard, seed=sum(map(ord, ex.name)))
    for reader in READERS:
        t0 = time.monotonic()
        ok = True
        try:
            h = reader.open(ex.path)
        except Exception as e:  # noqa: BLE001 (the reader's own error is the report)
            fails.add(ex.name, reader.name, "open", short_error(e))
            continue
        try:
            ok &= check_meta(ex, reader, reader.meta(h), fails)
        except Exception as e:  # noqa: BLE001
            fails.add(ex.name, reader.name, "metadata", short_error(e))
            ok = False
        for label, region in [("whole array", full)] + regs:
            what = f"read {label} {region_str(region)}"
            try:
                got = reader.read(h, sel_of(region))
            except Exception as e:  # noqa: BLE001
                fails.add(ex.name, reader.name, what, short_error(e))
                ok = False
                continue
            diff = compare(got, ex.data[sel_of(region)], [lo for lo, _ in region])
            if diff:
                fails.add(ex.name, reader.name, what, diff)
                ok = False
        dt = time.monotonic() - t0
        stats.append((ex.name, reader.name, ok, 1 + len(regs), dt))


def region_str(region):
    return "[" + ", ".join(f"{lo}:{hi}" for lo, hi in region) + "]"


# ---------------------------------------------------------------- negative


CRC_WORDS = ("checksum", "digest", "crc")


def check_negative(neg, by_name, fails, notes):
    """A corrupted copy of a matrix array.

    expect "reject": every reader must refuse the whole-array read with a checksum
    error; zarr-python and tensorstore must also refuse a read of just the damaged inner
    chunk (zarrs does not verify the inner crc32c on partial reads: reported as a note).
    expect "silent" (control, no crc32c anywhere): every read succeeds and returns the
    clean values except exactly one element, so the flipped byte is in the data.
    """
    base = by_name[neg["base"]]
    name = neg["name"]
    region = [tuple(r) for r in neg["region"]]
    reads = [("whole array", [(0, s) for s in base.shape]),
             (f"damaged inner chunk {region_str(region)}", region)]
    for reader in READERS:
        for label, reg in reads:
            what = f"corrupted {neg['corrupted']} in {neg['shard_key']}: read {label}"
            try:
                h = reader.open(neg["path"])
                got = reader.read(h, sel_of(reg))
            except Exception as e:  # noqa: BLE001
                err = short_error(e)
                if neg["expect"] == "silent":
                    fails.add(name, reader.name, what, f"control read failed: {err}")
                elif any(w in err.lower() for w in CRC_WORDS):
                    print(f"ok   [{name}] [{reader.name}] {what}: rejected: {err}", flush=True)
                else:
                    fails.add(name, reader.name, what,
                              f"rejected, but not by a checksum check: {err}")
                continue
            want = base.data[sel_of(reg)]
            differing = int((bits(got) != bits(want)).sum()) if got.shape == want.shape else -1
            if neg["expect"] == "silent":
                if differing == 1:
                    print(f"ok   [{name}] [{reader.name}] {what}: control: no checksum, "
                          "so the flipped element came back unnoticed", flush=True)
                else:
                    fails.add(name, reader.name, what, f"control: {differing} elements "
                              "differ from the clean array, expected exactly 1")
                continue
            outcome = ("returned the correct values" if differing == 0 else
                       f"returned {differing} corrupted value(s) without an error")
            if reader.name == "zarrs" and label != "whole array":
                note = (f"[{name}] zarrs partial read {outcome}: zarrs does not verify the "
                        "inner crc32c when it decodes part of a shard")
                notes.append(note)
                print(f"note {note}", flush=True)
                continue
            fails.add(name, reader.name, what, f"no error raised; the reader {outcome}")


# ---------------------------------------------------------------- modes


def run_matrix(manifest):
    arrays = [Expected(e) for e in manifest["arrays"]]
    by_name = {a.name: a for a in arrays}
    fails, stats, notes = Failures(), [], []
    t0 = time.monotonic()
    for ex in arrays:
        check_array(ex, fails, stats)
        ok = all(s[2] for s in stats if s[0] == ex.name)
        print(f"{'ok  ' if ok else 'FAIL'} {ex.name}: "
              + ", ".join(f"{r} {dt:.2f}s" for n, r, _, _, dt in stats if n == ex.name),
              flush=True)
        ex._data = None
    for neg in manifest.get("negative", []):
        check_negative(neg, by_name, fails, notes)
    print()
    print(f"readers: {versions()}")
    print(f"{'array':<34} {'zarr-python':>12} {'zarrs':>12} {'tensorstore':>12}")
    for ex in arrays:
        row = {s[1]: s for s in stats if s[0] == ex.name}
        cells = [f"{'pass' if row[r.name][2] else 'FAIL'} {row[r.name][3]} reads"
                 if r.name in row else "FAIL open" for r in READERS]
        print(f"{ex.name:<34} " + " ".join(f"{c:>12}" for c in cells))
    checks = len(arrays) * len(READERS)
    passed = sum(1 for s in stats if s[2])
    print(f"interop matrix: {len(arrays)} arrays x {len(READERS)} readers: {passed} of "
          f"{checks} array-reader checks clean; {len(manifest.get('negative', []))} "
          f"corrupted stores; {time.monotonic() - t0:.1f} s")
    if fails.items:
        print(f"\n{len(fails.items)} failure(s):")
        for f in fails.items:
            print(f)
        return 1
    return 0


def run_live(manifest):
    """Reads the store repeatedly while it is recorded. Every read must equal the first
    shape[0] rows of the expected array, shape[0] must never shrink, and the finished
    array must be exact."""
    ex = Expected(manifest["live"])
    path = ex.path
    timeout = manifest["live"]["timeout_s"]
    ready = manifest["live"]["ready_file"]
    fails = Failures()
    full = ex.data
    with open(ready, "w") as f:
        f.write("ready")
    deadline = time.monotonic() + timeout
    meta_path = os.path.join(path, "zarr.json")
    while not os.path.exists(meta_path):
        if time.monotonic() > deadline:
            print(f"FAIL [{ex.name}] zarr.json never appeared at {meta_path}")
            return 1
        time.sleep(0.01)
    last = {r.name: 0 for r in READERS}
    seen = {r.name: set() for r in READERS}
    reads = {r.name: 0 for r in READERS}
    state = "running"
    final_rows = ex.shape[0]
    while state == "running":
        if time.monotonic() > deadline:
            fails.add(ex.name, "-", "live", f"recording did not finish within {timeout} s")
            break
        for reader in READERS:
            try:
                h = reader.open(path)
                shape = reader.meta(h)["shape"]
            except Exception as e:  # noqa: BLE001
                fails.add(ex.name, reader.name, "live open", short_error(e))
                continue
            rows = shape[0]
            what = f"live read of shape {shape}"
            if list(shape[1:]) != list(ex.shape[1:]) or rows > final_rows:
                fails.add(ex.name, reader.name, what, f"shape not within final {ex.shape}")
                continue
            if rows < last[reader.name]:
                fails.add(ex.name, reader.name, what,
                          f"shape[0] shrank from {last[reader.name]} to {rows}")
            last[reader.name] = rows
            try:
                got = reader.read(h, tuple(slice(None) for _ in shape))
            except Exception as e:  # noqa: BLE001
                fails.add(ex.name, reader.name, what, short_error(e))
                continue
            diff = compare(got, full[:rows], [0] * len(shape))
            if diff:
                fails.add(ex.name, reader.name, what, diff)
            reads[reader.name] += 1
            seen[reader.name].add(rows)
        with open(meta_path, encoding="utf-8") as f:
            state = json.load(f)["attributes"]["zarrstream"]["state"]
        if len(fails.items) > 20:
            break
    if state != "finished":
        fails.add(ex.name, "-", "live", f"recording ended in state {state!r}")
    for reader in READERS:
        print(f"live [{reader.name}]: {reads[reader.name]} reads during the recording, "
              f"shape[0] seen: {sorted(seen[reader.name])}")
        partial = [s for s in seen[reader.name] if 0 < s < final_rows]
        if len(partial) < 2:
            fails.add(ex.name, reader.name, "live",
                      f"saw only {sorted(seen[reader.name])} rows while recording; the "
                      "recording was too short to read it at two growing sizes")
    # The finished array: exact shape, content and metadata.
    for reader in READERS:
        try:
            h = reader.open(path)
            check_meta(ex, reader, reader.meta(h), fails)
            got = reader.read(h, tuple(slice(None) for _ in ex.shape))
        except Exception as e:  # noqa: BLE001
            fails.add(ex.name, reader.name, "final read", short_error(e))
            continue
        diff = compare(got, full, [0] * len(ex.shape))
        if diff:
            fails.add(ex.name, reader.name, "final read", diff)
    print(f"readers: {versions()}")
    if fails.items:
        print(f"\n{len(fails.items)} failure(s):")
        for f in fails.items:
            print(f)
        return 1
    print("live: every read during and after the recording was exact")
    return 0


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("matrix", "live"):
        print(__doc__)
        return 2
    with open(sys.argv[2], encoding="utf-8") as f:
        manifest = json.load(f)
    return run_matrix(manifest) if sys.argv[1] == "matrix" else run_live(manifest)


if __name__ == "__main__":
    sys.exit(main())
