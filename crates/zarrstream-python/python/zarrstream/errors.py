"""The exceptions of zarrstream.

Every exception the package raises derives from :class:`ZarrstreamError` and from the
built-in class a Python programmer would catch for that failure, so both
``except zarrstream.ZarrstreamError`` and ``except ValueError`` (or ``OSError``, …) work.
"""

from __future__ import annotations

import errno as _errno
import json as _json

__all__ = [
    "ArrayFullError",
    "ClosedError",
    "DiskFullError",
    "FrameConflictError",
    "FrameIndexError",
    "IndexedUnsupportedError",
    "InternalError",
    "InvalidFrameError",
    "InvalidPlateError",
    "InvalidSpecError",
    "NeedsRecoveryError",
    "NotAStoreError",
    "NotOwnedError",
    "RemoteConflictError",
    "RemoteCredentialsError",
    "RemoteNoBucketError",
    "RemoteStoreError",
    "RemoteURLError",
    "RemoteUnreachableError",
    "ResumeMismatchError",
    "ResumeUnsupportedError",
    "ShardTruncatedError",
    "StoreExistsError",
    "StoreIOError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StagingError",
    "StorePermissionError",
    "UnknownArrayError",
    "UploadError",
    "WorkingSetError",
    "ZarrstreamError",
]


class ZarrstreamError(Exception):
    """Base class of every zarrstream exception."""


class InvalidSpecError(ZarrstreamError, ValueError):
    """An impossible array shape, codec, dtype, option or OME setting."""


class InvalidPlateError(InvalidSpecError):
    """An impossible :class:`~zarrstream.Plate` layout: a well outside its rows or
    columns, a well given twice, a field count of 0, a row or column name that is
    empty, not alphanumeric or given twice, an acquisition id given twice, …"""


class InvalidFrameError(ZarrstreamError, ValueError):
    """A frame whose shape, size or dtype is not the array's."""


class ClosedError(ZarrstreamError, ValueError):
    """The writer was already closed (as for a closed file, a ``ValueError``)."""


class ArrayFullError(ZarrstreamError, IndexError):
    """The array's append axis is bounded and every frame has been written."""


class FrameIndexError(ZarrstreamError, IndexError):
    """A frame index (``write_frame``, ``skip_frame``) the array cannot take: not one
    coordinate per leading axis, a coordinate out of bounds (a negative one too: indices
    do not wrap around as numpy's do), or outside the window of rows an unbounded axis 0
    keeps open. The frame was not taken; the writer goes on. :attr:`index` is the index
    given."""

    #: The index given.
    index: tuple[int, ...] = ()


class FrameConflictError(ZarrstreamError, ValueError):
    """A frame index already written (or skipped), or appended and indexed frames mixed
    on one writer (a writer takes either :meth:`~zarrstream.Writer.append` or
    :meth:`~zarrstream.Writer.write_frame`). The frame was not taken; the writer goes
    on. :attr:`index` is the index given (empty for an ``append``)."""

    #: The index given.
    index: tuple[int, ...] = ()


class IndexedUnsupportedError(ZarrstreamError, NotImplementedError):
    """Frames written by index into an array that takes appended frames only: an
    OME-Zarr image with pyramid levels, or a writer with per-frame metadata."""

    #: The index given.
    index: tuple[int, ...] = ()


class WorkingSetError(ZarrstreamError, ValueError):
    """The acquisition order keeps more shard files open at once than
    ``max_open_shards`` allows (raised by the constructor for a declared
    ``acquisition_order``, by ``write_frame`` for frames that stray too far from the
    declared or storage order; the frame is not taken and the writer goes on). The
    message names the budget and what to do."""

    #: What is open (``"shards"``).
    what: str | None = None
    #: How many the order needs open at once.
    needed: int | None = None
    #: The option that bounds it (``"max_open_shards"``).
    limit: str | None = None
    #: Its value.
    budget: int | None = None


class NotAStoreError(ZarrstreamError, ValueError):
    """The path is not a Zarr array zarrstream can read."""


class StoreIOError(ZarrstreamError, OSError):
    """An operating-system error while writing or reading a store."""

    def __str__(self) -> str:
        # Without an errno, OSError would print "[Errno None] None: <filename>".
        if self.errno is None and self.args:
            return str(self.args[0])
        return super().__str__()


class StoreExistsError(StoreIOError, FileExistsError):
    """The store path exists and ``overwrite=True`` was not given."""


class StoreNotFoundError(StoreIOError, FileNotFoundError):
    """The store (or a file of it) does not exist."""


class StorePermissionError(StoreIOError, PermissionError):
    """The operating system refused access to the store."""


class StoreLockedError(StoreIOError):
    """Another live writer is recording into this store."""


class DiskFullError(StoreIOError):
    """The file system is full (``errno.ENOSPC``). Every shard finished before the
    failure stays readable."""


class UnknownArrayError(ZarrstreamError, KeyError):
    """A :class:`~zarrstream.Recording` has no array of that key."""

    def __str__(self) -> str:
        # KeyError's str() is the repr of its argument; the message reads better plain.
        return str(self.args[0]) if self.args else ""


class ResumeMismatchError(InvalidSpecError):
    """``resume=True`` with an array setting that differs from the array on disk;
    :attr:`field` names it (``"codec"``, ``"chunk_shape"``, ``"dtype"``, …)."""

    #: The setting that differs.
    field: str | None = None


class ResumeUnsupportedError(ZarrstreamError, NotImplementedError):
    """``resume=True`` for an array this version cannot continue."""


class NotOwnedError(StoreExistsError):
    """The path is a Zarr group zarrstream did not create (or not a group at all): a
    :class:`~zarrstream.Recording` adds arrays to someone else's group only with
    ``existing_group=True``, and never rewrites that group's ``zarr.json``."""


class NeedsRecoveryError(StoreIOError):
    """The store was left by a writer that did not finish: run
    :func:`zarrstream.recover` on it first."""


class ShardTruncatedError(StoreIOError):
    """Another process truncated a shard file while the writer was filling it
    (:attr:`filename` names it). The shards published before stay readable; the cut
    shard is kept for :func:`zarrstream.recover`; the writer is closed."""


class RemoteStoreError(ZarrstreamError):
    """Base class of the failures of an object-store destination (``s3://…``); each
    subclass also derives from the built-in class that fits it. The message names the
    destination URL (never its credentials)."""


class RemoteURLError(RemoteStoreError, ValueError):
    """The object-store URL or a store option cannot be used (an unknown scheme, no
    bucket in the URL, an unknown ``store_options`` key)."""


class RemoteCredentialsError(RemoteStoreError, PermissionError):
    """The object store refused the credentials: an unknown key, a wrong secret, or a
    key without rights on the bucket. Nothing was written."""


class RemoteNoBucketError(RemoteStoreError, FileNotFoundError):
    """The bucket (or container) does not exist. Nothing was written."""


class RemoteUnreachableError(RemoteStoreError, ConnectionError):
    """The object store did not answer (connection refused, timed out, name not
    resolved) within ``upload_timeout``. Nothing was written."""


class UploadError(RemoteStoreError, ConnectionError):
    """An upload failed after its retries: the store went away during the recording.
    Every finished shard not yet uploaded stays in :attr:`staging`;
    :func:`zarrstream.upload_staged` sends it when the store is back."""

    #: The staging directory that keeps the data not yet uploaded.
    staging: str | None = None


class RemoteConflictError(RemoteStoreError, FileExistsError):
    """Another coordinator published the shared ``zarr.json`` of an array recorded in
    parts in between (seen only on stores that enforce conditional writes)."""


class StagingError(RemoteStoreError, FileExistsError):
    """The staging directory (:attr:`staging`) holds another destination's data or data
    not yet uploaded: :func:`zarrstream.upload_staged` it first, or choose another
    ``staging_dir``."""

    #: The staging directory in the way.
    staging: str | None = None


class InternalError(ZarrstreamError, RuntimeError):
    """A bug in zarrstream (a panic or a dead writer thread); please report it.

    The :class:`~zarrstream.Writer` or :class:`~zarrstream.Recording` it came from is
    closed for good: its state cannot be trusted, so every later call raises
    :class:`ClosedError` (as the C API answers ``ZS_E_CLOSED``); ``close()`` raises
    this error again, ``abort()`` ends it quietly, and the frames accepted before it
    are kept."""


# How each kind of failure becomes an exception: the class, and for an ``OSError`` the
# errno it carries when the failure brings none. Keyed by the names of the library's
# ``ErrorKind`` (``_native.error_kinds()``), which decides the kind of every Rust error;
# a kind missing here is raised as an InternalError.
_KINDS: dict[str, tuple[type[ZarrstreamError], int | None]] = {
    "invalid_config": (InvalidSpecError, None),
    "invalid_argument": (InvalidSpecError, None),
    "invalid_plate": (InvalidPlateError, None),
    "invalid_frame": (InvalidFrameError, None),
    # Metadata that does not fit refuses its frame, like a frame of the wrong size.
    "invalid_frame_meta": (InvalidFrameError, None),
    "frame_index": (FrameIndexError, None),
    "duplicate_frame": (FrameConflictError, None),
    "mixed_frames": (FrameConflictError, None),
    "index_unsupported": (IndexedUnsupportedError, None),
    "working_set": (WorkingSetError, None),
    "array_full": (ArrayFullError, None),
    "closed": (ClosedError, None),
    "unknown_array": (UnknownArrayError, None),
    "exists": (StoreExistsError, _errno.EEXIST),
    "not_owned": (NotOwnedError, _errno.EEXIST),
    "locked": (StoreLockedError, _errno.EBUSY),
    "resume_mismatch": (ResumeMismatchError, None),
    "needs_recovery": (NeedsRecoveryError, None),
    "unsupported": (ResumeUnsupportedError, None),
    "disk_full": (DiskFullError, _errno.ENOSPC),
    "io": (StoreIOError, None),
    "not_found": (StoreNotFoundError, _errno.ENOENT),
    "not_a_store": (NotAStoreError, None),
    "shard_truncated": (ShardTruncatedError, None),
    "remote_url": (RemoteURLError, None),
    "remote_credentials": (RemoteCredentialsError, None),
    "remote_no_bucket": (RemoteNoBucketError, None),
    "remote_unreachable": (RemoteUnreachableError, None),
    "remote_upload": (UploadError, None),
    "remote_conflict": (RemoteConflictError, None),
    "remote_staging": (StagingError, None),
    "internal": (InternalError, None),
}


def _io_class(code: int | None) -> type[StoreIOError]:
    """The class of any other OS error, by its errno."""
    if code == _errno.ENOENT:
        return StoreNotFoundError
    if code in (_errno.EACCES, _errno.EPERM):
        return StorePermissionError
    if code == _errno.EEXIST:
        return StoreExistsError
    if code in (_errno.ENOSPC, _errno.EDQUOT):
        return DiskFullError
    return StoreIOError


def _from_native(kind: str, message: str, code: int | None,
                 path: str | None, field: str | None = None,
                 extra: str | None = None) -> ZarrstreamError:
    """Builds the exception for a failure of the native module (called from Rust):
    ``code`` is its errno, ``path`` its file (for an upload or a staging directory in
    the way, the staging directory), ``field`` the setting a resume found different,
    ``extra`` a JSON object of its other attributes."""
    cls, default_errno = _KINDS.get(kind, (InternalError, None))
    if kind == "io":
        cls = _io_class(code)
    exc: ZarrstreamError
    if issubclass(cls, StoreIOError):
        if code is None:
            code = default_errno
        # Without an errno, one argument: the exception prints just the message.
        exc = cls(code, message) if code is not None else cls(message)
        exc.filename = path
    else:
        # One argument: a remote OSError subclass prints just the message too.
        exc = cls(message)
    details = _json.loads(extra) if extra else {}
    if isinstance(exc, (FrameIndexError, FrameConflictError, IndexedUnsupportedError)):
        exc.index = tuple(int(i) for i in details.get("index", ()))
    elif isinstance(exc, WorkingSetError):
        exc.what = details.get("what")
        exc.needed = details.get("needed")
        exc.limit = details.get("limit")
        exc.budget = details.get("budget")
    elif isinstance(exc, ResumeMismatchError):
        exc.field = field
    elif isinstance(exc, (UploadError, StagingError)):
        exc.staging = path
    return exc
