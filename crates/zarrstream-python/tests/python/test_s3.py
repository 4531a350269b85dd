"""Recording to an object store from Python, against a real S3 server (Garage, started by
the ``s3`` fixtures of conftest.py), read back by zarr-python over s3fs and tensorstore's
own s3 driver: the frames, the typed errors (built-in classes), an array recorded in two
parts and published with ``publish_parts``, and a store that goes away mid-recording
whose data ``upload_staged`` sends later."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import garage
import numpy as np
import pytest
import tensorstore as ts
import zarr
from zarr.core.sync import sync
from zarr.storage import FsspecStore

import zarrstream

Y = X = 256


def frame(cam: int, f: int) -> np.ndarray:
    """Frame ``f`` of camera ``cam``: distinct everywhere, the same on every call."""
    base = (np.arange(Y * X, dtype=np.uint32).reshape(Y, X) * 7 + f * 131 + cam * 40_009)
    return (base % 65_521).astype(np.uint16)


def prefix() -> str:
    """A key prefix no other test uses (the session shares one bucket)."""
    return f"py-{uuid.uuid4().hex[:12]}.zarr"


def read_zarr(g: garage.Garage, key: str) -> np.ndarray:
    """The array at ``key`` read by zarr-python over s3fs (path-style, no caches)."""
    store = FsspecStore.from_url(
        f"s3://{g.bucket}/{key}", read_only=True,
        storage_options={
            "endpoint_url": g.endpoint, "key": g.key_id, "secret": g.secret,
            "client_kwargs": {"region_name": g.region},
            "config_kwargs": {"s3": {"addressing_style": "path"}},
            "use_listings_cache": False, "skip_instance_cache": True,
        })
    try:
        return np.asarray(zarr.open_array(store=store, mode="r", zarr_format=3)[...])
    finally:
        # s3fs leaves its aiohttp session open in asynchronous mode (FsspecStore's).
        creator = getattr(store.fs, "_s3creator", None)
        if creator is not None:
            sync(creator.__aexit__(None, None, None))


def read_tensorstore(g: garage.Garage, key: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The array at ``key`` read by tensorstore's zarr3 driver on its own s3 kvstore."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", g.key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", g.secret)
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "s3", "bucket": g.bucket, "path": key + "/",
                    "endpoint": g.endpoint, "aws_region": g.region,
                    "aws_credentials": {"type": "environment"}},
        "open": True,
    }
    return ts.open(spec, read=True, context=ts.Context()).result().read().result()


def options(g: garage.Garage, staging: Path, **overrides: Any) -> dict[str, Any]:
    """Writer keywords for ``g``: endpoint and credentials as ``store_options``."""
    return {"store_options": g.store_options(), "staging_dir": staging, "threads": 1,
            **overrides}


# ------------------------------------------------------------------------------ recording


def test_frames_recorded_to_s3_read_back_by_zarr_and_tensorstore(
        s3: garage.Garage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = prefix()
    url = f"s3://{s3.bucket}/{key}"
    staging = tmp_path / "staging"
    frames = np.stack([frame(0, f) for f in range(100)])
    # 48-frame shards of 6 MiB, uncompressed: each a multipart upload of two 5 MiB parts;
    # 100 frames leave a partial last shard.
    with zarrstream.Writer(url, shape=(None, Y, X), chunks=(1, 128, 128),
                           shards=(48, Y, X), dtype="uint16", codec="none",
                           **options(s3, staging, part_size=5 << 20,
                                     uploads_in_flight=2, upload_timeout=30.0,
                                     staging_budget=64 << 20)) as w:
        assert w.path == url, "the URL is passed through untouched"
        w.append(frames[:50])
        for f in frames[50:]:
            w.append(f)
    assert w.stats.frames_written == 100
    assert w.stats.frames_dropped == 0
    assert not any(staging.rglob("c/*")), "every shard left staging once uploaded"
    np.testing.assert_array_equal(read_zarr(s3, key), frames)
    np.testing.assert_array_equal(read_tensorstore(s3, key, monkeypatch), frames)
    assert not Path("s3:").exists(), "nothing was made at a local path"

    # The array is in the bucket: creating it again is refused as for a local store.
    with pytest.raises(FileExistsError) as e:
        zarrstream.Writer(url, shape=(None, Y, X), chunks=(1, 128, 128), shards=(48, Y, X),
                          **options(s3, tmp_path / "staging2"))
    assert isinstance(e.value, zarrstream.StoreExistsError)


def test_an_ome_image_goes_to_s3(s3: garage.Garage, tmp_path: Path) -> None:
    key = prefix()
    frames = np.stack([frame(1, f)[:64, :64] for f in range(10)])
    with zarrstream.Writer(f"s3://{s3.bucket}/{key}", shape=(None, 64, 64),
                           chunks=(1, 64, 64), shards=(4, 64, 64), dtype="uint16",
                           ome=zarrstream.Ome(pixel_size=(0.5, 0.5)),
                           **options(s3, tmp_path / "staging")) as w:
        w.append(frames)
    np.testing.assert_array_equal(read_zarr(s3, f"{key}/0"), frames)


# --------------------------------------------------------------------------------- errors


def refused(s3: garage.Garage, tmp_path: Path, url: str, **kw: Any) -> BaseException:
    staging = tmp_path / "staging"
    with pytest.raises(zarrstream.RemoteStoreError) as e:
        zarrstream.Writer(url, shape=(None, 64, 64), chunks=(1, 64, 64), shards=(4, 64, 64),
                          **options(s3, staging, **kw))
    assert not staging.exists(), "nothing staged for a destination that failed its checks"
    return e.value


def test_a_wrong_secret_is_permission_error(s3: garage.Garage, tmp_path: Path) -> None:
    url = f"s3://{s3.bucket}/{prefix()}"
    e = refused(s3, tmp_path, url,
                store_options=s3.store_options(aws_secret_access_key="0" * 64))
    assert isinstance(e, PermissionError)
    assert isinstance(e, zarrstream.RemoteCredentialsError)
    assert url in str(e) and "credentials" in str(e)
    assert "0" * 64 not in str(e), "the message never shows the secret"


def test_a_missing_bucket_is_file_not_found_error(s3: garage.Garage, tmp_path: Path) -> None:
    e = refused(s3, tmp_path, "s3://no-such-bucket/x.zarr")
    assert isinstance(e, FileNotFoundError)
    assert isinstance(e, zarrstream.RemoteNoBucketError)
    assert "s3://no-such-bucket/x.zarr" in str(e) and "bucket does not exist" in str(e)


def test_a_dead_endpoint_is_connection_error(s3: garage.Garage, tmp_path: Path) -> None:
    e = refused(s3, tmp_path, f"s3://{s3.bucket}/{prefix()}", upload_timeout=2,
                store_options=s3.store_options(aws_endpoint=garage.dead_endpoint()))
    assert isinstance(e, ConnectionError)
    assert isinstance(e, zarrstream.RemoteUnreachableError)
    assert "cannot be reached" in str(e)


def test_a_bad_url_or_store_option_is_value_error(s3: garage.Garage, tmp_path: Path) -> None:
    e = refused(s3, tmp_path, "s3:///x.zarr")
    assert isinstance(e, ValueError) and isinstance(e, zarrstream.RemoteURLError)
    assert "s3:///x.zarr" in str(e)
    with pytest.raises(TypeError, match="store_options must map str to str"):
        zarrstream.Writer(f"s3://{s3.bucket}/x.zarr", shape=(None, 64, 64),
                          chunks=(1, 64, 64), shards=(4, 64, 64),
                          store_options={"aws_allow_http": True})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="upload_timeout"):
        zarrstream.Writer(f"s3://{s3.bucket}/x.zarr", shape=(None, 64, 64),
                          chunks=(1, 64, 64), shards=(4, 64, 64), upload_timeout=-1)
    # Options the library refuses keep their library message (a ValueError).
    with pytest.raises(ValueError, match="part_size"):
        zarrstream.Writer(f"s3://{s3.bucket}/x.zarr", shape=(None, 64, 64),
                          chunks=(1, 64, 64), shards=(4, 64, 64), part_size=1 << 20,
                          store_options=s3.store_options())
    with pytest.raises(ValueError, match="part"):
        zarrstream.Writer(tmp_path / "local.zarr", shape=(None, 2, 64, 64),
                          chunks=(1, 1, 64, 64), shards=(4, 1, 64, 64), part=0)


# ---------------------------------------------------------------------------------- parts


def test_two_parts_and_publish_parts(s3: garage.Garage, tmp_path: Path) -> None:
    key = prefix()
    url = f"s3://{s3.bucket}/{key}"
    steps = 10
    with pytest.raises(ValueError, match="no part has published its progress yet"):
        zarrstream.publish_parts(url, store_options=s3.store_options())

    # Both parts are created before anything is published, as on acquisition PCs
    # started together.
    writers = [
        zarrstream.Writer(url, shape=(None, 2, Y, X), chunks=(1, 1, 128, 128),
                          shards=(4, 1, Y, X), dtype="uint16",
                          **options(s3, tmp_path / f"staging-{k}", part=k))
        for k in range(2)]
    for k, w in enumerate(writers):
        assert w.frame_shape == (Y, X)
        assert w.shape[1] == 1, "each part records its own camera"
    for t in range(steps):
        writers[0].append(frame(0, t))
    assert writers[0].close().frames_written == steps
    r = zarrstream.publish_parts(url, store_options=s3.store_options())
    assert (r["url"], r["parts"], r["extent0"], r["state"]) == (url, 2, 0, "running"), \
        "axis 0 shows only the steps every part has uploaded"
    for t in range(steps):
        writers[1].append(frame(1, t))
    assert writers[1].close().frames_written == steps
    r = zarrstream.publish_parts(url, store_options=s3.store_options())
    assert r == {"url": url, "parts": 2, "parts_found": 2, "extent0": steps,
                 "state": "finished", "published": True}
    again = zarrstream.publish_parts(url, store_options=s3.store_options())
    assert again["published"] is False, "an unchanged zarr.json is not rewritten"

    got = read_zarr(s3, key)
    want = np.stack([np.stack([frame(k, t) for k in range(2)]) for t in range(steps)])
    assert got.shape == (steps, 2, Y, X)
    np.testing.assert_array_equal(got, want)


# -------------------------------------------------------------------- the store goes away


def test_a_store_that_goes_away_keeps_the_data_for_upload_staged(
        s3_own: garage.Garage, tmp_path: Path) -> None:
    g = s3_own
    key = prefix()
    staging = tmp_path / "staging"
    w = zarrstream.Writer(f"s3://{g.bucket}/{key}", shape=(None, Y, X), chunks=(1, 128, 128),
                          shards=(48, Y, X), dtype="uint16", codec="none",
                          **options(g, staging, upload_timeout=3, staging_budget=32 << 20))
    for f in range(48):
        assert w.append(frame(0, f)) == 1
    g.stop()
    pushed = 48
    failure: zarrstream.UploadError | None = None
    # The recording goes on into staging until the uploader gives up (or the staging
    # budget is spent and the push waits for it); then the push raises.
    for f in range(48, 100_000):
        try:
            assert w.append(frame(0, f)) == 1
        except zarrstream.UploadError as e:
            failure = e
            break
        pushed += 1
    assert failure is not None
    assert isinstance(failure, ConnectionError)
    assert failure.staging == os.fspath(staging)
    assert f"zarrstream upload {staging}" in str(failure)
    with pytest.raises(zarrstream.UploadError):
        w.close()
    kept = [p for p in (staging / "c").rglob("*") if p.is_file()]
    assert kept, "finished shards stay in staging"

    g.restart()
    # The staging directory holds data not yet uploaded: no other recording may use it.
    with pytest.raises(FileExistsError) as refused:
        zarrstream.Writer(f"s3://{g.bucket}/other.zarr", shape=(None, 64, 64),
                          chunks=(1, 64, 64), shards=(4, 64, 64), **options(g, staging))
    assert isinstance(refused.value, zarrstream.StagingError)
    assert refused.value.staging == os.fspath(staging)
    report = zarrstream.upload_staged(staging, store_options=g.store_options())
    assert report["url"] == f"s3://{g.bucket}/{key}"
    assert report["shards"] == len(kept)
    assert report["bytes"] > 0 and report["documents"] >= 1
    assert not staging.exists(), "the staging directory goes once everything is uploaded"
    np.testing.assert_array_equal(read_zarr(g, key),
                                  np.stack([frame(0, f) for f in range(pushed)]))


def test_upload_staged_of_a_directory_without_a_recording(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        zarrstream.upload_staged(tmp_path)
    with pytest.raises(ValueError, match="upload_timeout"):
        zarrstream.upload_staged(tmp_path, upload_timeout=-1.0)


@pytest.mark.parametrize(("kind", "cls", "builtin"), [
    ("remote_url", zarrstream.RemoteURLError, ValueError),
    ("remote_credentials", zarrstream.RemoteCredentialsError, PermissionError),
    ("remote_no_bucket", zarrstream.RemoteNoBucketError, FileNotFoundError),
    ("remote_unreachable", zarrstream.RemoteUnreachableError, ConnectionError),
    ("remote_upload", zarrstream.UploadError, ConnectionError),
    ("remote_conflict", zarrstream.RemoteConflictError, FileExistsError),
    ("remote_staging", zarrstream.StagingError, FileExistsError),
])
def test_every_remote_failure_has_its_builtin_class(kind: str, cls: type, builtin: type) -> None:
    """The Python half of the mapping, for the kinds a single Garage cannot provoke (a
    second coordinator: Garage ignores conditional writes) as for the others."""
    from zarrstream.errors import _from_native

    e = _from_native(kind, "s3://b/x.zarr: what happened", None, "/scratch/staging")
    assert type(e) is cls
    assert isinstance(e, builtin) and isinstance(e, zarrstream.RemoteStoreError)
    assert str(e) == "s3://b/x.zarr: what happened"
    if cls in (zarrstream.UploadError, zarrstream.StagingError):
        assert e.staging == "/scratch/staging"


def test_a_recording_of_two_arrays_goes_to_s3(s3: garage.Garage, tmp_path: Path) -> None:
    key = prefix()
    spec = zarrstream.ArraySpec(shape=(None, 64, 64), chunks=(1, 64, 64), shards=(4, 64, 64),
                                dtype="uint16")
    frames = {cam: np.stack([frame(i, f)[:64, :64] for f in range(9)])
              for i, cam in enumerate(("cam0", "cam1"))}
    with zarrstream.Recording(f"s3://{s3.bucket}/{key}", {"cam0": spec, "cam1": spec},
                              **options(s3, tmp_path / "staging")) as rec:
        for f in range(9):
            for cam, data in frames.items():
                rec.append(cam, data[f])
    assert not (tmp_path / "staging").exists(), "uploaded, then removed"
    for cam, data in frames.items():
        np.testing.assert_array_equal(read_zarr(s3, f"{key}/{cam}"), data)


def test_a_url_folded_by_pathlib_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pass the URL as a str"):
        zarrstream.Writer(Path("s3://bucket/run.zarr"), shape=(None, 64, 64),
                          chunks=(1, 64, 64), shards=(4, 64, 64))
    assert not Path("s3:").exists()
