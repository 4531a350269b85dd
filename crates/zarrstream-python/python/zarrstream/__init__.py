"""zarrstream: record camera streams into sharded Zarr v3 arrays at the speed of the camera.

>>> import numpy as np, zarrstream
>>> with zarrstream.Writer("run.zarr", shape=(None, 512, 512), chunks=(1, 256, 256),
...                        shards=(16, 512, 512), dtype="uint16") as w:  # doctest: +SKIP
...     w.append(np.zeros((100, 512, 512), dtype="uint16"))  # 100 frames in one call
>>> w.stats.frames_written  # doctest: +SKIP
100

The array is an ordinary Zarr v3 array: zarr-python, tensorstore, zarrs, napari and
neuroglancer open it, while it is being recorded too. ``zarrstream.Recording`` records
several arrays (cameras, positions) into one group with one set of encoding workers, or
an OME-Zarr high-content screening plate (``zarrstream.Plate``) field by field. ``zarrstream.ome_writers`` plugs
the writer into ome-writers (and so into pymmcore-plus).
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Mapping
from typing import Any

from . import _native
from ._plate import Acquisition, Plate, PlateImage
from ._recording import ArraySpec, Recording, RecordingStats
from ._writer import (
    DTYPES,
    _seconds,
    _store_options,
    Latency,
    MemoryEstimate,
    MemoryUsage,
    Ome,
    Stats,
    Writer,
    estimate_memory,
)
from .errors import (
    ArrayFullError,
    ClosedError,
    DiskFullError,
    FrameConflictError,
    FrameIndexError,
    IndexedUnsupportedError,
    InternalError,
    InvalidFrameError,
    InvalidPlateError,
    InvalidSpecError,
    NeedsRecoveryError,
    NotAStoreError,
    NotOwnedError,
    RemoteConflictError,
    RemoteCredentialsError,
    RemoteNoBucketError,
    RemoteStoreError,
    RemoteUnreachableError,
    RemoteURLError,
    ResumeMismatchError,
    ResumeUnsupportedError,
    ShardTruncatedError,
    StoreExistsError,
    StoreIOError,
    StoreLockedError,
    StoreNotFoundError,
    StagingError,
    StorePermissionError,
    UnknownArrayError,
    UploadError,
    WorkingSetError,
    ZarrstreamError,
)

__version__: str = _native.__version__

__all__ = [
    "DTYPES",
    "Acquisition",
    "ArrayFullError",
    "ArraySpec",
    "ClosedError",
    "DiskFullError",
    "FrameConflictError",
    "FrameIndexError",
    "IndexedUnsupportedError",
    "InternalError",
    "InvalidFrameError",
    "InvalidPlateError",
    "InvalidSpecError",
    "Latency",
    "MemoryEstimate",
    "MemoryUsage",
    "NeedsRecoveryError",
    "NotAStoreError",
    "NotOwnedError",
    "Ome",
    "Plate",
    "PlateImage",
    "Recording",
    "RecordingStats",
    "RemoteConflictError",
    "RemoteCredentialsError",
    "RemoteNoBucketError",
    "RemoteStoreError",
    "RemoteURLError",
    "RemoteUnreachableError",
    "ResumeMismatchError",
    "ResumeUnsupportedError",
    "ShardTruncatedError",
    "StagingError",
    "Stats",
    "StoreExistsError",
    "StoreIOError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StorePermissionError",
    "UnknownArrayError",
    "UploadError",
    "WorkingSetError",
    "Writer",
    "ZarrstreamError",
    "__version__",
    "estimate_memory",
    "inspect",
    "publish_parts",
    "recover",
    "upload_staged",
    "verify",
]


def recover(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Recovers the array at ``path`` after its writer died (a crash, a power loss):
    rebuilds every unfinished shard from its verified chunks and republishes
    ``zarr.json``, so readers see every frame whose chunks reached the disk.

    Returns the report of ``zarrstream recover --json``: ``frames_committed``,
    ``frames_recovered``, ``shards_recovered``, ``chunks_kept``, ``chunks_rejected``,
    ``shape``, … Running it on a healthy store changes nothing.

    Raises:
        StoreNotFoundError: (a ``FileNotFoundError``) when ``path`` does not exist.
        NotAStoreError: (a ``ValueError``) when it is not an array zarrstream wrote.
    """
    report: dict[str, Any] = json.loads(_native.recover(os.fspath(path)))
    return report


def inspect(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What the array at ``path`` holds, as ``zarrstream inspect --json`` reports it:
    ``array`` (shape, chunks, shards, dtype, codecs, state, ``frames_committed``),
    ``shards``, ``chunks_stored``, ``empty_chunks``, ``stored_bytes``, ``raw_bytes``,
    ``ratio``, and per-shard sizes under ``shard_list``.

    Raises:
        StoreNotFoundError: (a ``FileNotFoundError``) when ``path`` does not exist.
        NotAStoreError: (a ``ValueError``) when it is not an array zarrstream reads.
    """
    summary: dict[str, Any] = json.loads(_native.inspect(os.fspath(path)))
    return summary


def verify(path: str | os.PathLike[str], *, decode: bool = False) -> dict[str, Any]:
    """Checks every chunk of the array at ``path`` by its crc32c (and, with
    ``decode=True``, by decoding it), as ``zarrstream verify --json`` does.

    Returns the report: ``shards``, ``chunks_checked``, ``chunks_empty``,
    ``checked_by`` and ``problems`` (empty for a sound store; each names the shard and
    chunk). A damaged store is reported, not raised.

    Raises:
        StoreNotFoundError: (a ``FileNotFoundError``) when ``path`` does not exist.
        NotAStoreError: (a ``ValueError``) when it is not an array zarrstream reads.
    """
    report: dict[str, Any] = json.loads(_native.verify(os.fspath(path), decode))
    return report


def upload_staged(staging: str | os.PathLike[str], *,
                  store_options: Mapping[str, str] | None = None,
                  upload_timeout: float | datetime.timedelta = 60.0) -> dict[str, Any]:
    """Uploads what a recording to an object store left in its staging directory
    ``staging`` (the store went away: :class:`UploadError` names the directory in
    :attr:`UploadError.staging`; or the process died, after :func:`recover` on each
    array in it), republishes the metadata and removes the directory once everything is
    in the store, as ``zarrstream upload STAGING`` does. The destination is the one the
    recording named; ``store_options`` (endpoint, region, credentials, as for
    :class:`Writer`) go over the ``AWS_*`` environment.

    Returns ``{"url", "shards", "bytes", "documents"}``: what was sent.

    Raises:
        RemoteCredentialsError: (a ``PermissionError``) when the store refuses the
            credentials.
        RemoteUnreachableError: (a ``ConnectionError``) when it does not answer.
        UploadError: (a ``ConnectionError``) when uploads keep failing for
            ``upload_timeout`` seconds; the data stay in ``staging``.
        StoreNotFoundError: (a ``FileNotFoundError``) when ``staging`` is not a staging
            directory (it has no destination marker).
    """
    report: dict[str, Any] = json.loads(_native.upload_staged(
        os.fspath(staging), _store_options(store_options),
        _seconds(upload_timeout)))
    return report


def publish_parts(url: str, *,
                  store_options: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Publishes the shared ``zarr.json`` of the array at ``url`` that several processes
    record in parts (``Writer(url, part=K, …)``), from the parts' progress objects, as
    ``zarrstream publish URL`` does: the array as the parts describe it, axis 0 as long
    as the steps every part has uploaded. Run it at any time, from one place only (or
    give one writer ``coordinate=True`` instead).

    Returns ``{"url", "parts", "parts_found", "extent0", "state", "published"}``:
    ``state`` is ``"running"``, ``"finished"`` (every part finished) or ``"aborted"``;
    ``published`` whether ``zarr.json`` changed.

    Raises:
        RemoteURLError: (a ``ValueError``) when no part has published its progress yet,
            or the parts disagree.
        RemoteCredentialsError, RemoteNoBucketError, RemoteUnreachableError: as for
            :class:`Writer`.
    """
    report: dict[str, Any] = json.loads(
        _native.publish_parts(str(url), _store_options(store_options)))
    return report
