"""Reads a Zarr v3 array out of an S3-compatible store and compares it with the expected data.

Run inside the pinned interop environment (tests/interop/venv.py), e.g. by the Rust tests
after recording into Garage (crates/zarrstream-testkit/src/garage/):

    s3_read.py --endpoint http://127.0.0.1:PORT --bucket B --key-prefix P
               (--expect FILE | --expect-prefix-of FILE)
               [--dtype DTYPE --shape D0,D1,...] [--expect-shape D0,D1,...]
               [--region garage] [--readers zarr-python,tensorstore,zarrs]

The array is the one whose `zarr.json` is at `s3://B/P/zarr.json`. Credentials come from
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; the bucket is addressed path-style.

Readers (default: zarr-python,tensorstore):
  zarr-python   zarr 3.1 over fsspec/s3fs (`zarr.storage.FsspecStore`), its own pipeline
  tensorstore   the zarr3 driver on tensorstore's own s3 kvstore (`aws_credentials`
                `{"type": "environment"}`), a fresh Context (no cache)
  zarrs         zarr 3.1 over fsspec/s3fs with the zarrs Rust codec pipeline, strictly

Expected data (FILE):
  * a `.npy` file (NumPy format 1.0, 2.0 or 3.0, loaded with `allow_pickle=False`). A
    writer without NumPy can make one by hand: the 6 bytes `\\x93NUMPY`, the bytes 1 0, a
    little-endian u16 header length H, then H bytes of ASCII header such as
    `{'descr': '<u2', 'fortran_order': False, 'shape': (5, 6, 7), }` padded with spaces
    and ending in `\\n` so that 10 + H is a multiple of 64, then the elements in C order.
    `descr` is a NumPy type string: |u1 |i1 <u2 <i2 <u4 <i4 <u8 <i8 <f4 <f8 |b1 ...
  * any other file: raw elements in C order; `--dtype` (a NumPy dtype such as `<u2` or
    `uint16`, little-endian unless it says otherwise) and `--shape` give their type and
    shape; axis 0 of `--shape` may be -1 (as many frames as the file holds; write it
    `--shape=-1,6,7`, since argparse takes a bare `-1,...` for an option).

Checks:
  --expect FILE            the array read has FILE's dtype and shape and equal elements
  --expect-prefix-of FILE  a recording still running: the array read may be shorter along
                           axis 0 (at least 1 frame, at most FILE's); its other axes and dtype
                           are FILE's, and every frame present equals FILE's frame
  --expect-shape S         besides, the array read has exactly shape S
Comparisons are bitwise (NaN payloads and -0.0 must come back exactly).

Prints one line per reader, `PASS reader: ...` or `FAIL reader: why`, and exits 0 if every
reader passed, 1 if any failed, 2 on bad arguments or an unreadable FILE.
"""

import argparse
import os
import sys
import traceback

import numpy as np


def parse_shape(text):
    try:
        return tuple(int(d) for d in text.split(",") if d.strip() != "")
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}")


def arguments(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--endpoint", required=True, help="S3 endpoint URL, http://HOST:PORT")
    p.add_argument("--bucket", required=True)
    p.add_argument("--key-prefix", required=True,
                   help="the array's key prefix inside the bucket (zarr.json is P/zarr.json)")
    p.add_argument("--region", default="garage")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--expect", metavar="FILE", help="the full expected array")
    how.add_argument("--expect-prefix-of", metavar="FILE",
                     help="the array read is a leading part (axis 0) of FILE's")
    p.add_argument("--dtype", help="element type of a raw FILE (NumPy dtype string)")
    p.add_argument("--shape", type=parse_shape, help="shape of a raw FILE, D0 may be -1")
    p.add_argument("--expect-shape", type=parse_shape,
                   help="the exact shape the array read must have")
    p.add_argument("--readers", default="zarr-python,tensorstore",
                   help="comma-separated, from zarr-python, tensorstore, zarrs")
    a = p.parse_args(argv)
    a.readers = [r.strip() for r in a.readers.split(",") if r.strip()]
    unknown = [r for r in a.readers if r not in READERS]
    if unknown or not a.readers:
        p.error(f"unknown reader(s) {unknown}; choose from {sorted(READERS)}")
    a.key_prefix = a.key_prefix.strip("/")
    if not a.key_prefix:
        p.error("--key-prefix must name a prefix (the array is not read from a bucket's root)")
    a.file = a.expect or a.expect_prefix_of
    raw = not a.file.endswith(".npy")
    if raw and (a.dtype is None or a.shape is None):
        p.error(f"{a.file} is not a .npy file: give --dtype and --shape for its raw elements")
    if not raw and (a.dtype is not None or a.shape is not None):
        p.error("--dtype and --shape describe raw files only; a .npy file carries its own")
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        if not os.environ.get(var):
            p.error(f"{var} is not set (the credentials come from the environment)")
    return a


def load_expected(a):
    if a.file.endswith(".npy"):
        e = np.load(a.file, allow_pickle=False)
    else:
        dtype = np.dtype(a.dtype)
        if dtype.byteorder == "=":
            dtype = dtype.newbyteorder("<")
        e = np.fromfile(a.file, dtype=dtype).reshape(a.shape)
    # Readers hand back native byte order; the expected values are compared in it too.
    return np.ascontiguousarray(e.astype(e.dtype.newbyteorder("="), copy=False))


def short_error(e):
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
    msg = str(e).strip() or repr(e)
    cause = e.__cause__ or e.__context__
    if cause is not None and str(cause).strip() and str(cause).strip() not in msg:
        msg += f" [caused by {type(cause).__name__}: {str(cause).strip()}]"
    return f"{type(e).__name__}: {msg}{where}"


# ---------------------------------------------------------------- readers


def fsspec_store(a):
    from zarr.storage import FsspecStore

    return FsspecStore.from_url(
        f"s3://{a.bucket}/{a.key_prefix}",
        read_only=True,
        storage_options={
            "endpoint_url": a.endpoint,
            "key": os.environ["AWS_ACCESS_KEY_ID"],
            "secret": os.environ["AWS_SECRET_ACCESS_KEY"],
            "client_kwargs": {"region_name": a.region},
            "config_kwargs": {"s3": {"addressing_style": "path"}},
            # A recording in progress changes objects between reads: no listing cache.
            "use_listings_cache": False,
            "skip_instance_cache": True,
        },
    )


def close(store):
    """Closes s3fs's aiohttp session, which s3fs leaves open in asynchronous mode (the mode
    FsspecStore uses) and aiohttp then reports as unclosed at exit."""
    from zarr.core.sync import sync

    creator = getattr(store.fs, "_s3creator", None)
    if creator is not None:
        sync(creator.__aexit__(None, None, None))


def read_zarr_python(a, pipeline):
    import zarr

    config = {"codec_pipeline.path": pipeline}
    if "zarrs" in pipeline:
        # The Rust pipeline or an error, never a silent fallback to Python's.
        config.update({"codec_pipeline.strict": True, "codec_pipeline.validate_checksums": True})
    store = fsspec_store(a)
    try:
        with zarr.config.set(config):
            return zarr.open_array(store=store, mode="r", zarr_format=3)[...]
    finally:
        close(store)


def read_python(a):
    return read_zarr_python(a, "zarr.core.codec_pipeline.BatchedCodecPipeline")


def read_zarrs(a):
    import zarrs  # noqa: F401  (fails early when the pipeline is missing)

    return read_zarr_python(a, "zarrs.ZarrsCodecPipeline")


def read_tensorstore(a):
    import tensorstore as ts

    spec = {
        "driver": "zarr3",
        "kvstore": {
            "driver": "s3",
            "bucket": a.bucket,
            "path": a.key_prefix + "/",
            "endpoint": a.endpoint,
            "aws_region": a.region,
            "aws_credentials": {"type": "environment"},
        },
        "open": True,
    }
    t = ts.open(spec, read=True, context=ts.Context()).result()
    return t.read().result()


READERS = {"zarr-python": read_python, "tensorstore": read_tensorstore, "zarrs": read_zarrs}


# ---------------------------------------------------------------- comparison


def first_differences(got, want, limit=3):
    g = got.view(np.uint8).reshape(got.shape + (-1,)) if got.ndim else got
    w = want.view(np.uint8).reshape(want.shape + (-1,)) if want.ndim else want
    diff = np.argwhere(np.any(g != w, axis=-1))[:limit]
    return ", ".join(f"at {tuple(int(i) for i in ix)}: {got[tuple(ix)]!r} != {want[tuple(ix)]!r}"
                     for ix in diff)


def compare(got, expected, a):
    """None if `got` is what the arguments ask for, else why not."""
    got = np.ascontiguousarray(got)
    if got.dtype != expected.dtype:
        return f"dtype {got.dtype} != expected {expected.dtype}"
    if a.expect_shape is not None and got.shape != a.expect_shape:
        return f"shape {got.shape} != --expect-shape {a.expect_shape}"
    if a.expect is not None:
        want = expected
        if got.shape != want.shape:
            return f"shape {got.shape} != expected {want.shape}"
    else:
        if got.ndim != expected.ndim or got.shape[1:] != expected.shape[1:]:
            return f"shape {got.shape} is not a prefix along axis 0 of {expected.shape}"
        if not 1 <= got.shape[0] <= expected.shape[0]:
            return f"{got.shape[0]} frames; expected 1 to {expected.shape[0]}"
        want = expected[: got.shape[0]]
    if got.tobytes() != want.tobytes():
        return f"values differ, {first_differences(got, np.ascontiguousarray(want))}"
    return None


def main(argv):
    a = arguments(argv)
    try:
        expected = load_expected(a)
    except (OSError, ValueError) as e:
        print(f"cannot load the expected data {a.file}: {short_error(e)}", file=sys.stderr)
        return 2
    failed = False
    for name in a.readers:
        try:
            got = READERS[name](a)
        except Exception as e:  # noqa: BLE001  (any reader error is a FAIL line)
            print(f"FAIL {name}: s3://{a.bucket}/{a.key_prefix}: {short_error(e)}")
            failed = True
            continue
        why = compare(got, expected, a)
        if why is None:
            print(f"PASS {name}: s3://{a.bucket}/{a.key_prefix} {got.dtype} {got.shape}")
        else:
            print(f"FAIL {name}: s3://{a.bucket}/{a.key_prefix}: {why}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
