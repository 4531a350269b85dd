#!/usr/bin/env python3
"""Record a simulated camera into a sharded Zarr v3 array through zarrstream's C API,
with ctypes (no compiled Python extension).

    python3 examples/python/record.py STORE [--frames N] [--lib PATH]

The shared library is --lib, else $ZARRSTREAM_LIB, else libzarrstream.so from this
repository's target/release or target/debug (cargo build --release -p zarrstream-capi).
Needs numpy. Writes FRAMES (default 64) frames of 256 x 256 uint16, the same
deterministic camera as examples/c/record.c, and prints the memory estimate ("estimate:
JSON"), the memory in use before finishing ("memory: CURRENT PEAK") and the statistics
as JSON.
"""

import argparse
import ctypes
import json
import os
import sys

import numpy as np

# Return codes, as in include/zarrstream.h (capi/tests/c_api.rs checks they match).
ZS_OK = 0
ZS_DROPPED = 1
ZS_E_INVALID_CONFIG = -1
ZS_E_FRAME_SIZE = -2
ZS_E_DISK_FULL = -3
ZS_E_IO = -4
ZS_E_CLOSED = -5
ZS_E_INTERNAL = -6
ZS_E_INVALID_ARGUMENT = -7
ZS_E_EXISTS = -8
ZS_E_LOCKED = -9
ZS_E_ARRAY_FULL = -10
ZS_E_NO_ARRAY = -11
ZS_E_SPEC_MISMATCH = -12
ZS_E_NEEDS_RECOVERY = -13
ZS_E_UNSUPPORTED = -14
ZS_E_INVALID_PLATE = -15
ZS_E_REMOTE_CREDENTIALS = -16
ZS_E_REMOTE_NO_BUCKET = -17
ZS_E_REMOTE_UNREACHABLE = -18
ZS_E_REMOTE_UPLOAD = -19
ZS_E_REMOTE = -20
ZS_E_SHARD_TRUNCATED = -21
ZS_E_INDEX = -22
ZS_E_DUPLICATE_FRAME = -23
ZS_E_WORKING_SET = -24

HEIGHT = WIDTH = 256
BEAD = 16


class ZarrstreamError(Exception):
    """A negative return code and zs_last_error()'s message."""

    def __init__(self, code, message):
        super().__init__(f"{message} (code {code})")
        self.code = code


def load(path=None):
    """Loads the shared library and declares the signatures of its functions."""
    if path is None:
        path = os.environ.get("ZARRSTREAM_LIB")
    if path is None:
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        for profile in ("release", "debug"):
            candidate = os.path.join(repo, "target", profile, "libzarrstream.so")
            if os.path.exists(candidate):
                path = candidate
                break
        else:
            sys.exit("record.py: libzarrstream.so not found; build it with "
                     "`cargo build --release -p zarrstream-capi` or pass --lib")
    lib = ctypes.CDLL(path)
    writer_p = ctypes.c_void_p  # the opaque zs_writer *
    lib.zs_writer_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                     ctypes.POINTER(writer_p)]
    lib.zs_writer_create.restype = ctypes.c_int
    lib.zs_writer_push.argtypes = [writer_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.zs_writer_push.restype = ctypes.c_int
    # char ** as void ** so the pointer survives to be freed (c_char_p would copy it).
    lib.zs_writer_finish.argtypes = [writer_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.zs_writer_finish.restype = ctypes.c_int
    lib.zs_estimate_memory.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.zs_estimate_memory.restype = ctypes.c_int
    lib.zs_writer_memory_in_use.argtypes = [writer_p, ctypes.POINTER(ctypes.c_uint64),
                                            ctypes.POINTER(ctypes.c_uint64)]
    lib.zs_writer_memory_in_use.restype = ctypes.c_int
    lib.zs_writer_abort.argtypes = [writer_p]
    lib.zs_writer_abort.restype = None
    lib.zs_string_free.argtypes = [ctypes.c_void_p]
    lib.zs_string_free.restype = None
    lib.zs_last_error.argtypes = []
    lib.zs_last_error.restype = ctypes.c_char_p
    lib.zs_version.argtypes = []
    lib.zs_version.restype = ctypes.c_char_p
    return lib


class Writer:
    """One zs_writer. As a context manager it finishes on success and aborts (keeping
    what was written) when the block raises."""

    def __init__(self, lib, store, config):
        self._lib = lib
        self._w = ctypes.c_void_p()
        rc = lib.zs_writer_create(os.fsencode(store), json.dumps(config).encode(),
                                  ctypes.byref(self._w))
        self._check(rc)

    def _check(self, rc):
        if rc < 0:
            raise ZarrstreamError(rc, self._lib.zs_last_error().decode(errors="replace"))
        return rc

    def push(self, frame):
        """Pushes one frame (a C-contiguous array of the array's dtype); False if
        back-pressure "drop" dropped it."""
        frame = np.ascontiguousarray(frame)
        rc = self._lib.zs_writer_push(self._w, frame.ctypes.data, frame.nbytes)
        return self._check(rc) != ZS_DROPPED

    def memory_in_use(self):
        """(current, peak) bytes held by the writer's own buffers."""
        current, peak = ctypes.c_uint64(), ctypes.c_uint64()
        self._check(self._lib.zs_writer_memory_in_use(self._w, ctypes.byref(current),
                                                      ctypes.byref(peak)))
        return current.value, peak.value

    def finish(self):
        """Finishes the recording and frees the writer; returns the statistics."""
        stats = ctypes.c_void_p()
        w, self._w = self._w, None
        self._check(self._lib.zs_writer_finish(w, ctypes.byref(stats)))
        try:
            return json.loads(ctypes.string_at(stats.value).decode())
        finally:
            self._lib.zs_string_free(stats)

    def abort(self):
        if self._w:
            w, self._w = self._w, None
            self._lib.zs_writer_abort(w)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.stats = self.finish()
        else:
            self.abort()
        return False


def estimate_memory(lib, config):
    """The memory estimate of the writer `config` describes, as a dict of bytes."""
    out = ctypes.c_void_p()
    rc = lib.zs_estimate_memory(json.dumps(config).encode(), ctypes.byref(out))
    if rc < 0:
        raise ZarrstreamError(rc, lib.zs_last_error().decode(errors="replace"))
    try:
        return json.loads(ctypes.string_at(out.value).decode())
    finally:
        lib.zs_string_free(out)


def camera_frame(t):
    """examples/c/record.c's camera: offset, hashed noise and a drifting bead."""
    y = np.arange(HEIGHT, dtype=np.uint32)[:, None]
    x = np.arange(WIDTH, dtype=np.uint32)[None, :]
    h = (x * np.uint32(73856093)) ^ (y * np.uint32(19349663)) ^ np.uint32((t * 83492791) & 0xFFFFFFFF)
    h ^= h >> np.uint32(13)
    frame = (100 + (h & np.uint32(15))).astype("<u2")
    by, bx = (t * 3) % (HEIGHT - BEAD), (t * 5) % (WIDTH - BEAD)
    frame[by:by + BEAD, bx:bx + BEAD] += 1000
    return frame


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--lib", help="path of libzarrstream.so")
    args = parser.parse_args()

    lib = load(args.lib)
    # Sections read by the Rust types, with their defaults (docs/config.schema.json).
    config = {
        "array": {
            "shape": [0, HEIGHT, WIDTH],
            "chunk_shape": [1, 128, 128],
            "shard_shape": [16, HEIGHT, WIDTH],
            "dtype": "uint16",
            "codec": "zstd:1",
            "dimension_names": ["t", "y", "x"],
            "attributes": {"camera": "examples/python/record.py"},
        },
        "writer": {"threads": 2},
    }
    print(f"zarrstream {lib.zs_version().decode()}: recording {args.frames} frames "
          f"of {HEIGHT} x {WIDTH} uint16 into {args.store}")
    try:
        print(f"estimate: {json.dumps(estimate_memory(lib, config))}")
        with Writer(lib, args.store, config) as w:
            for t in range(args.frames):
                w.push(camera_frame(t))
            print("memory: {} {}".format(*w.memory_in_use()))
    except ZarrstreamError as e:
        sys.exit(f"record.py: {e}")
    print(json.dumps(w.stats))


if __name__ == "__main__":
    main()
