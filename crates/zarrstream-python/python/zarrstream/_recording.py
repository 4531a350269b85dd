"""Several arrays recorded at once into one Zarr group, with one set of encoding workers."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import _native
from ._lifecycle import _Lifecycle
from ._plate import Plate
from ._writer import (
    MemoryEstimate,
    MemoryUsage,
    Ome,
    Stats,
    _Session,
    _array_config,
    _config_json,
    _destination,
    _keywords,
    _options_config,
    _remote_config,
)
from .errors import (
    ClosedError,
    FrameConflictError,
    InvalidFrameError,
    InvalidSpecError,
    UnknownArrayError,
    ZarrstreamError,
)

__all__ = ["ArraySpec", "Recording", "RecordingStats"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ArraySpec:
    """One array of a :class:`Recording`: the array keywords of :class:`Writer`, with
    the same names and defaults (every field left ``None`` takes the library's).

    ``ome`` makes the key an OME-Zarr image group with the array at ``<key>/0``;
    ``frame_meta`` / ``frame_meta_json`` store per-frame metadata beside the array, at
    ``<key>/frame_meta/<field>``.
    """

    shape: Sequence[int | None]
    chunks: Sequence[int]
    shards: Sequence[int]
    dtype: npt.DTypeLike | None = None
    codec: str | None = None
    fill_value: float | None = None
    dimension_names: Sequence[str] | None = None
    crc32c: bool | None = None
    index_location: Literal["end", "start"] | None = None
    attributes: Mapping[str, Any] | None = None
    ome: Ome | Mapping[str, Any] | bool | None = None
    frame_meta: Mapping[str, Literal["float64", "int64"]] | None = None
    frame_meta_json: bool = False

    def _config(self) -> dict[str, Any]:
        return _array_config(**{f.name: getattr(self, f.name)
                                for f in dataclasses.fields(self)})


def _as_spec(what: str, spec: ArraySpec | Mapping[str, Any]) -> ArraySpec:
    """``spec``, or the :class:`ArraySpec` its keywords make."""
    if isinstance(spec, ArraySpec):
        return spec
    if not isinstance(spec, Mapping):
        raise InvalidSpecError(f"{what}: {spec!r} is not an ArraySpec or a mapping")
    try:
        return ArraySpec(**spec)
    except TypeError as e:
        raise InvalidSpecError(f"{what}: {e}") from e


@dataclasses.dataclass(frozen=True)
class RecordingStats:
    """What a finished :class:`Recording` reports: each array's :class:`Stats`, and
    their sum (latencies over every array's frames; ``seconds`` the longest array's)."""

    #: Per array key, in the order given.
    arrays: dict[str, Stats]
    #: Summed over the arrays.
    total: Stats

    @classmethod
    def _from_native(cls, d: Mapping[str, Any]) -> RecordingStats:
        arrays = {str(key): Stats._from_native(s) for key, s in d["arrays"].items()}
        return cls(arrays=arrays, total=Stats._from_native(d["total"]))


def _entries(arrays: (Mapping[str, ArraySpec | Mapping[str, Any]]
                      | Sequence[tuple[str, ArraySpec | Mapping[str, Any]]]),
             ) -> list[dict[str, Any]]:
    """The ``arrays`` entries of the library's recording configuration."""
    pairs = list(arrays.items() if isinstance(arrays, Mapping) else arrays)
    if not pairs:
        raise InvalidSpecError("a recording needs at least one array")
    entries = []
    for key, spec in pairs:
        if not isinstance(key, str):
            raise InvalidSpecError(f"array key {key!r} is not a string")
        entries.append({"key": key, **_as_spec(f"array {key!r}", spec)._config()})
    return entries


@dataclasses.dataclass(frozen=True)
class _Geometry:
    frame_shape: tuple[int, int]
    dtype: np.dtype[Any]
    spec: dict[str, Any]


class Recording(_Session):
    """Records frames into several arrays of one Zarr v3 group at ``path`` (several
    cameras, stage positions, …) with **one** set of encoding workers and one memory
    budget shared by every array.

    ``arrays`` maps each array's key (a relative ``/`` path in the group: ``"cam0"``,
    ``"A/1/0"``) to its :class:`ArraySpec` (or a mapping of the same keywords). The
    other keywords are :class:`Writer`'s options, shared by every array;
    ``pool_frames`` is the total frame budget, split so every array gets as many
    frames. Pushes into different arrays from different threads run at once (each array
    has its own lock; the interpreter lock is released while pushing)::

        import zarrstream

        arrays = {
            "cam0": zarrstream.ArraySpec(shape=(None, 512, 512), chunks=(1, 512, 512),
                                         shards=(16, 512, 512), dtype="uint16"),
            "cam1": zarrstream.ArraySpec(shape=(None, 256, 256), chunks=(1, 256, 256),
                                         shards=(16, 256, 256), dtype="uint8"),
        }
        with zarrstream.Recording("run.zarr", arrays, threads=4) as rec:
            rec.append("cam0", frame0)
            rec.append("cam1", frame1)
        print(rec.stats.total.frames_written)

    Leaving the ``with`` block by an exception aborts every array, keeping every frame
    accepted so far.

    An OME-Zarr high-content screening plate: ``plate=`` a :class:`Plate` and
    ``image=`` the :class:`ArraySpec` of every field image (each an OME-Zarr image;
    ``ome`` defaults to ``{}``), instead of ``arrays``. The keys are the plate's
    ``ROW/COLUMN/PATH`` (:meth:`Plate.images`, :meth:`Plate.key`), in the order a
    screening microscope visits them; the root group holds the plate metadata and each
    well group its images::

        plate = zarrstream.Plate(rows=2, columns=3, fields=2)
        image = zarrstream.ArraySpec(shape=(None, 512, 512), chunks=(1, 512, 512),
                                     shards=(1, 512, 512), dtype="uint16")
        with zarrstream.Recording("plate.ome.zarr", plate=plate, image=image) as rec:
            for field in plate.images():
                rec.append(field.key, camera.snap())

    Args:
        path: The group directory. Created (refused if it exists, unless
            ``overwrite``); with ``existing_group=True`` an existing Zarr group someone
            else made receives the arrays, its ``zarr.json`` left as it is.
        arrays: Key -> :class:`ArraySpec` (or a mapping of its keywords), or a sequence
            of ``(key, spec)`` pairs (not with ``plate``).
        plate: A :class:`Plate`: every field of view is an array (give ``image``).
        image: With ``plate``: the :class:`ArraySpec` (or a mapping of its keywords) of
            every field image.
        existing_group: Add the arrays to an existing Zarr group zarrstream did not
            create (otherwise :class:`NotOwnedError`, a ``FileExistsError``).
        overwrite: Replace an existing group (or, with ``existing_group``, the arrays'
            directories only).
        resume: Continue every array where it ended (each array setting must match
            what is on disk, else :class:`ResumeMismatchError`, a ``ValueError``).
        acquisition_order: For frames written by index (:meth:`write_frame`): the
            acquisition's loop order over the leading axes, outermost first, shared by
            every array: dimension names (resolved in each array's
            ``dimension_names``, which must give the same axes) or storage axis numbers.
            As for :class:`Writer`.
        max_open_shards: The most shard files reserved and not yet finished at once,
            per array (default 4096).
        attributes: Attributes of the root group, set once it is created.
        staging_dir, staging_budget, part_size, uploads_in_flight, upload_timeout,
            store_options: With an object-store URL as ``path`` (``s3://bucket/prefix``):
            as for :class:`Writer` (the whole group is staged and uploaded; a recording
            is not recorded in parts).

    Raises:
        InvalidSpecError: (a ``ValueError``) for impossible shapes, options or keys
            (a key given twice, a key inside another's, ``..``, …).
        InvalidPlateError: (an :class:`InvalidSpecError`) for an impossible plate
            layout (a well outside its rows or columns, a field count of 0, …).
        StoreExistsError: (a ``FileExistsError``) when ``path`` exists.
        NotOwnedError: (a ``FileExistsError``) for a foreign group without
            ``existing_group=True``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        arrays: (Mapping[str, ArraySpec | Mapping[str, Any]]
                 | Sequence[tuple[str, ArraySpec | Mapping[str, Any]]] | None) = None,
        *,
        plate: Plate | None = None,
        image: ArraySpec | Mapping[str, Any] | None = None,
        threads: int | None = None,
        pin_threads: bool | None = None,
        background_nice: int | None = None,
        sink: Literal["auto", "direct", "pwrite", "mmap"] | None = None,
        pool_frames: int | None = None,
        spare_groups: int | None = None,
        backpressure: Literal["block", "drop"] | None = None,
        durability: str | float | datetime.timedelta | None = None,
        packing: Literal["compact", "sparse"] | None = None,
        chunk_order: Literal["c", "morton"] | None = None,
        acquisition_order: Sequence[str | int] | None = None,
        max_open_shards: int | None = None,
        existing_group: bool = False,
        overwrite: bool = False,
        resume: bool = False,
        attributes: Mapping[str, Any] | None = None,
        staging_dir: str | os.PathLike[str] | None = None,
        staging_budget: int | None = None,
        part_size: int | None = None,
        uploads_in_flight: int | None = None,
        upload_timeout: float | datetime.timedelta | None = None,
        store_options: Mapping[str, str] | None = None,
    ) -> None:
        self._native = None
        self._stats: RecordingStats | None = None
        # The error that stopped an array (a full disk, say), raised again by close()
        # rather than a bare "closed".
        self._failure: ZarrstreamError | None = None
        self._path = _destination(path)
        config: dict[str, Any] = _options_config(
            threads=threads, pin_threads=pin_threads, background_nice=background_nice,
            sink=sink, pool_frames=pool_frames, spare_groups=spare_groups,
            backpressure=backpressure, durability=durability, packing=packing,
            chunk_order=chunk_order, acquisition_order=acquisition_order,
            max_open_shards=max_open_shards, overwrite=overwrite, resume=resume,
            existing_group=existing_group)
        config.update(_remote_config(
            staging_dir=staging_dir, staging_budget=staging_budget, part_size=part_size,
            uploads_in_flight=uploads_in_flight, upload_timeout=upload_timeout,
            store_options=store_options))
        if plate is not None:
            if arrays is not None:
                raise InvalidSpecError(
                    "a plate's arrays are its field images: give image=, not arrays")
            if not isinstance(plate, Plate):
                raise TypeError(f"plate must be a zarrstream.Plate, not {plate!r}")
            if image is None:
                raise InvalidSpecError("a plate needs image=, the ArraySpec of every "
                                       "field image")
            field = _as_spec("image", image)
            if field.ome is None:
                field = dataclasses.replace(field, ome={})
            config["plate"] = plate._config()
            config["image"] = field._config()
        else:
            if image is not None:
                raise InvalidSpecError("image= is the field image of a plate: give "
                                       "plate= too, or use arrays")
            if arrays is None:
                raise InvalidSpecError("a recording needs arrays (or plate= and image=)")
            config["arrays"] = _entries(arrays)
        if attributes is not None:
            config["attributes"] = dict(attributes)
        self._native = _native.NativeSession(self._path, _config_json(config), True)
        self._keys: tuple[str, ...] = tuple(self._native.keys)
        self._arrays: dict[str, _Geometry] = {}
        for key in self._keys:
            spec = self._native.spec(key)
            shape = tuple(spec["shape"])
            self._arrays[key] = _Geometry((int(shape[-2]), int(shape[-1])),
                                          np.dtype(str(spec["dtype"])), spec)

    @staticmethod
    def estimate_memory(
        arrays: (Mapping[str, ArraySpec | Mapping[str, Any]]
                 | Sequence[tuple[str, ArraySpec | Mapping[str, Any]]]),
        **options: Any,
    ) -> MemoryEstimate:
        """The most memory a :class:`Recording` of ``arrays`` with these options (the
        keywords of :class:`Recording` but ``path`` and ``attributes``) will use, by
        part: every array's pools, staging, mapped shards and pyramid levels, the
        shared encoding workers counted once. Nothing is created.

        Raises:
            InvalidSpecError: (a ``ValueError``) for what :class:`Recording` would
                refuse as impossible shapes, options or keys.
            TypeError: for a keyword :class:`Recording` does not take.
        """
        known = _keywords("writer")
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"estimate_memory() got an unexpected keyword argument {unknown[0]!r}")
        config = {**_options_config(**options), "arrays": _entries(arrays)}
        return MemoryEstimate._from_native(
            _native.estimate_recording_memory(_config_json(config)))

    def memory_in_use(self) -> MemoryUsage:
        """The bytes the recording's own buffers hold now and at most so far (every
        array's and the shared workers'), as it counts them. After closing:
        ``stats.total.memory``."""
        if self._stats is not None:
            return self._stats.total.memory
        current, peak = self._live().memory_in_use()
        return MemoryUsage(current=current, peak=peak)

    # -- properties -------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The group path given."""
        return self._path

    @property
    def keys(self) -> tuple[str, ...]:
        """The arrays' keys, in the order given."""
        return self._keys

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` was called."""
        return self._native is None or self._native.closed

    @property
    def stats(self) -> RecordingStats:
        """The statistics of the closed recording."""
        if self._stats is None:
            raise ClosedError("stats are known once the recording is closed")
        return self._stats

    def _array(self, key: str) -> _Geometry:
        try:
            return self._arrays[key]
        except (KeyError, TypeError):
            raise UnknownArrayError(f"the recording has no array {key!r}") from None

    def spec(self, key: str) -> dict[str, Any]:
        """Array ``key`` as created: ``shape``, ``chunk_shape``, ``shard_shape``,
        ``dtype``, ``codec``, ``fill_value``, ``dimension_names``."""
        return dict(self._array(key).spec)

    def frame_shape(self, key: str) -> tuple[int, int]:
        """The shape of one frame of array ``key``."""
        return self._array(key).frame_shape

    def dtype(self, key: str) -> np.dtype[Any]:
        """The element type of array ``key``."""
        return self._array(key).dtype

    def frames_pushed(self, key: str) -> int:
        """Frames offered to array ``key`` so far (written, dropped and skipped)."""
        self._array(key)
        if self._stats is not None:
            return self._stats.arrays[key].frames_pushed
        return self._live().frames_pushed(key)

    def frames_encoded(self, key: str) -> int:
        """Frames of array ``key`` whose chunks are all encoded into their shards."""
        self._array(key)
        if self._stats is not None:
            return self._stats.arrays[key].frames_written
        return self._live().frames_encoded(key)

    # -- recording --------------------------------------------------------------------

    _what = "recording"

    def _geometry(self, key: str | None) -> tuple[tuple[int, int], np.dtype[Any]]:
        g = self._array(key)  # type: ignore[arg-type]
        return g.frame_shape, g.dtype

    def _stats_from(self, d: dict[str, Any]) -> RecordingStats:
        return RecordingStats._from_native(d)

    def append(self, key: str, frames: npt.ArrayLike, *,
               meta: Mapping[str, float] | None = None, meta_json: Any = None) -> int:
        """Appends one frame or a stack of frames to array ``key``, as
        :meth:`Writer.append` (the same frame forms, metadata and return value).

        Raises:
            UnknownArrayError: (a ``KeyError``) for a key the recording does not have.
            InvalidFrameError: (a ``ValueError``) on a wrong shape or dtype.
            ClosedError: after :meth:`close`.
        """
        return self._append(key, frames, meta, meta_json)

    def write_frame(self, key: str, index: Sequence[int] | int,
                    frame: npt.ArrayLike) -> bool:
        """Writes one frame of array ``key`` at ``index``, its coordinates on the
        array's leading axes, in any order, as :meth:`Writer.write_frame` (the same
        frame forms, return value and errors). An array takes either appended or
        indexed frames; arrays of one recording may differ.

        Raises:
            UnknownArrayError: (a ``KeyError``) for a key the recording does not have.
            FrameIndexError: (an ``IndexError``) for an index of the wrong length, out
                of bounds (negative coordinates included) or outside the window of an
                unbounded axis 0.
            FrameConflictError: (a ``ValueError``) for an index written before, or an
                array appended to.
            IndexedUnsupportedError: (a ``NotImplementedError``) for an image with
                pyramid levels or an array with frame metadata.
            WorkingSetError: (a ``ValueError``) for a frame that strays further from
                the declared order than ``max_open_shards`` allows.
            InvalidFrameError: (a ``ValueError``) on a wrong shape or dtype.
        """
        return self._write_frame(key, index, frame)

    def skip_frame(self, key: str, index: Sequence[int] | int) -> None:
        """Marks the frame of array ``key`` at ``index`` as one that will not come: it
        reads as the fill value and counts as dropped (see
        :meth:`Writer.skip_frame`)."""
        self._skip_frame(key, index)

    def skip(self, key: str, n: int = 1) -> None:
        """Counts ``n`` frames of array ``key`` that never came as dropped, keeping
        their places (they read as the fill value)."""
        self._skip(key, n)

    def _attribute(self, name: str, text: str | None, array: str | None,
                   group: bool) -> None:
        if array is None and group:
            raise InvalidSpecError("group=True names an array's image group: give array=")
        if array is not None:
            self._array(array)
        self._live().set_attribute(str(name), text, array, group)

    def set_attribute(self, name: str, value: Any, *, array: str | None = None,
                      group: bool = False) -> None:
        """Sets the attribute ``name`` to ``value`` (anything ``json.dumps`` takes) of
        the root group (``array=None``), of array ``array``, or with ``group=True`` of
        its OME-Zarr image group; ``zarr.json`` is republished at once, atomically,
        every other key kept (also those of a group zarrstream did not create)."""
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidSpecError(f"attribute {name!r} is not JSON: {e}") from e
        self._attribute(name, text, array, group)

    def remove_attribute(self, name: str, *, array: str | None = None,
                         group: bool = False) -> None:
        """Removes the attribute ``name`` (see :meth:`set_attribute`)."""
        self._attribute(name, None, array, group)

    def close(self) -> RecordingStats:
        """Finishes every array (each even if another fails) and returns the
        statistics; calling it again returns them again. Raises the first array's
        error, if one failed."""
        if self._stats is not None:
            return self._stats
        self._stats = self._close()
        return self._stats

    def __repr__(self) -> str:
        state = "closed" if self.closed else "recording"
        return f"zarrstream.Recording({self._path!r}, keys={list(self._keys)}, {state})"
