"""The Python face of the writer: keyword arguments in, numpy frames in, stats out."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import _native
from ._lifecycle import _Lifecycle
from ._native import NativeSession as _NativeSession
from .errors import (
    ClosedError,
    FrameConflictError,
    FrameIndexError,
    IndexedUnsupportedError,
    InvalidFrameError,
    InvalidSpecError,
    WorkingSetError,
    ZarrstreamError,
)

__all__ = ["Latency", "MemoryEstimate", "MemoryUsage", "Ome", "Stats", "Writer",
           "estimate_memory"]

#: The element types zarrstream writes, by numpy name.
DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32",
          "float64")


@dataclasses.dataclass(frozen=True)
class Ome:
    """OME-Zarr 0.5 image settings: passing ``ome=Ome(...)`` (or ``ome=True`` for the
    defaults) to :class:`Writer` writes an image group with the array at ``path/0`` and,
    with ``levels``, a live multiscale pyramid.

    Every field left ``None`` takes the library's default.
    """

    #: The image's name in the multiscales metadata.
    name: str | None = None
    #: Physical pixel size ``(y, x)`` in ``space_unit``.
    pixel_size: tuple[float, float] | None = None
    #: Step between z planes in ``space_unit``.
    z_step: float | None = None
    #: Time between frames along ``t``, as seconds or a ``timedelta``.
    frame_interval: float | datetime.timedelta | None = None
    #: ``"micrometer"``, ``"nanometer"``, ``"millimeter"``, …
    space_unit: str | None = None
    #: ``"second"``, ``"millisecond"``, …
    time_unit: str | None = None
    #: Channel names (one per entry of the ``c`` axis).
    channels: Sequence[str] | None = None
    #: ``omero`` rendering metadata: ``True`` for one channel per entry of ``c``
    #: labelled with ``channels``, coloured from a palette, each displayed over a
    #: window taken from the frames recorded (the 0.1 % and 99.9 % quantiles of
    #: sampled pixels, republished with the image while recording, so napari opens it
    #: at a readable contrast); or one mapping per channel with ``label``, ``color``
    #: (``"RRGGBB"``), ``active`` and optionally ``window``
    #: (``{"min", "max", "start", "end"}``, kept as given; without it the channel's
    #: window follows the data).
    omero: bool | Sequence[Mapping[str, Any]] | None = None
    #: Pyramid levels including full resolution (1 = none), or ``"auto"``.
    levels: int | Literal["auto"] | None = None
    #: How levels are reduced: ``"mean"``, ``"decimate"``, ``"min"``, ``"max"``.
    downsample: str | None = None
    #: Whether levels also halve ``z``.
    downsample_z: bool | None = None

    def _config(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if field.name == "frame_interval":
                seconds = (value.total_seconds()
                           if isinstance(value, datetime.timedelta) else float(value))
                out["frame_interval_ms"] = seconds * 1e3
            elif field.name == "pixel_size":
                out["pixel_size"] = [float(v) for v in value]
            elif field.name == "channels":
                out["channels"] = [str(c) for c in value]
            elif field.name == "omero":
                if value is True:
                    out["omero"] = "auto"
                elif value is not False:
                    out["omero"] = {"channels": [
                        {"active": True, **dict(c)} for c in value]}
            else:
                out[field.name] = value
        return out


@dataclasses.dataclass(frozen=True)
class Latency:
    """A latency distribution over a recording, in nanoseconds."""

    count: int
    min: int
    mean: float
    max: int
    p50: int
    p90: int
    p99: int
    p999: int


@dataclasses.dataclass(frozen=True)
class MemoryUsage:
    """Bytes held by a writer's own buffers (frame pool, staging, encoding workers'
    scratch and encoders, mapped shard pages, pyramid levels), counted by the writer
    where it allocates and frees them."""

    #: Bytes held now (in :attr:`Stats.memory`: after closing, 0 once all is freed).
    current: int
    #: The most bytes held at once so far.
    peak: int


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """The most memory a writer (or recording) will use, by part, in bytes: an upper
    bound derived from how the writer sizes its buffers (:func:`estimate_memory`).

    :attr:`resident` (every part but :attr:`page_cache`) bounds what the writer adds to
    the process's resident memory; :attr:`total` adds the file pages it lets the page
    cache hold. Where the sink is left to the file system (``"auto"``), each part is the
    largest of the sinks the writer may end up with.
    """

    #: Level 0's frame pool.
    frame_pool: int
    #: Level 0's staging groups (chunks deeper than one frame).
    staging: int
    #: The encoding workers: a slot of scratch each (pwrite and direct sinks) and the
    #: codec's context and scratch per kind of array.
    encoders: int
    #: Shard pages mapped by the sink for every shard that may be open at once (the
    #: whole file with mmap, the working index with direct).
    mapped_shards: int
    #: Every pyramid level below level 0 (pools, encoders, mapped shards).
    pyramid: int
    #: Thread stacks and malloc arenas (256 KiB per thread), latency histograms,
    #: per-frame metadata columns.
    bookkeeping: int
    #: File pages left in the page cache, not mapped (not in RSS).
    page_cache: int

    @property
    def resident(self) -> int:
        """Every part but :attr:`page_cache`: the bound on resident memory."""
        return (self.frame_pool + self.staging + self.encoders + self.mapped_shards
                + self.pyramid + self.bookkeeping)

    @property
    def total(self) -> int:
        """:attr:`resident` plus :attr:`page_cache`."""
        return self.resident + self.page_cache

    @classmethod
    def _from_native(cls, text: str) -> MemoryEstimate:
        d = json.loads(text)
        return cls(**{f.name: int(d[f.name]) for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class Stats:
    """What a finished recording reports (:meth:`Writer.close`).

    Always ``frames_pushed == frames_written + frames_dropped``.
    """

    #: Frames offered to :meth:`Writer.append`, :meth:`Writer.write_frame`,
    #: :meth:`Writer.skip` and :meth:`Writer.skip_frame`.
    frames_pushed: int
    #: Frames accepted and written.
    frames_written: int
    #: Frames dropped (``backpressure="drop"``) or skipped (``skip``, ``skip_frame``).
    frames_dropped: int
    #: Raw bytes of the written frames.
    bytes_in: int
    #: Bytes of all shard files as finished.
    bytes_stored: int
    #: Shard files written.
    shards: int
    #: Seconds from the first frame until the recording was closed.
    seconds: float
    #: Time spent inside each push.
    push_latency_ns: Latency
    #: From each frame's arrival to all its chunks being in their shard.
    frame_latency_ns: Latency
    #: The sink used: ``"direct"``, ``"pwrite"`` or ``"mmap"``.
    sink: str
    #: Bytes of the frame pool.
    pool_bytes: int
    #: Bytes of staging buffers for chunks deeper than one frame.
    staging_bytes: int
    #: Bytes held by the writer's own buffers: the peak over the recording, and what
    #: was still held after closing (0).
    memory: MemoryUsage

    @classmethod
    def _from_native(cls, d: dict[str, Any]) -> Stats:
        d = dict(d)
        d["push_latency_ns"] = Latency(**d["push_latency_ns"])
        d["frame_latency_ns"] = Latency(**d["frame_latency_ns"])
        d["memory"] = MemoryUsage(**d["memory"])
        return cls(**d)

    @property
    def throughput_mib_s(self) -> float:
        """Raw frame bytes per second, in MiB/s."""
        return self.bytes_in / 2**20 / self.seconds if self.seconds > 0 else 0.0


def _dtype_name(dtype: npt.DTypeLike) -> str:
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise InvalidSpecError(f"dtype {dtype!r} is not a numpy dtype") from e
    if dt.name not in DTYPES or not dt.isnative and dt.itemsize > 1:
        raise InvalidSpecError(
            f"dtype {dt.str} is not supported: zarrstream writes {', '.join(DTYPES)} "
            "(native byte order)")
    return dt.name


def _json_number(value: Any) -> Any:
    """A numpy scalar as the Python number JSON takes; anything else as it is (the
    library checks it)."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _shape(value: Any) -> Any:
    """A shape as the library takes it: ``None`` (an unbounded axis) as 0. The library
    checks the entries and names the key in its error."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return value
    return [0 if v is None else _json_number(v) for v in value]


def _ms(value: Any) -> Any:
    """A duration in seconds (a number or a ``timedelta``) as the milliseconds of the
    configuration's ``_ms`` keys; anything else as it is, for the library to refuse."""
    seconds = _seconds(value)
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        return seconds * 1e3
    return seconds


def _durability(value: str | float | datetime.timedelta) -> Any:
    """``durability`` as the library takes it: a mode's name as it is, a group-commit
    interval (seconds or a ``timedelta``) as ``{"periodic": {"interval_ms": …}}``."""
    if isinstance(value, str):
        return value
    return {"periodic": {"interval_ms": _ms(value)}}


def _fill_value(value: float) -> Any:
    """A fill value as the library takes it: the floats JSON has no number for spelled
    as Zarr v3 spells them (``"NaN"``, ``"Infinity"``, ``"-Infinity"``)."""
    value = _json_number(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"
    return value


def _array_config(
    *,
    shape: Sequence[int | None],
    chunks: Sequence[int],
    shards: Sequence[int],
    dtype: npt.DTypeLike | None = None,
    codec: str | None = None,
    fill_value: float | None = None,
    dimension_names: Sequence[str] | None = None,
    crc32c: bool | None = None,
    index_location: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    ome: Ome | Mapping[str, Any] | bool | None = None,
    frame_meta: Mapping[str, str] | None = None,
    frame_meta_json: bool = False,
) -> dict[str, Any]:
    """One array's sections of the library's JSON configuration: ``array``, and
    ``ome`` and ``frame_meta`` when given."""
    config: dict[str, Any] = {
        "shape": _shape(shape),
        "chunk_shape": _shape(chunks),
        "shard_shape": _shape(shards),
    }
    optional: dict[str, Any] = {
        "codec": codec, "crc32c": crc32c, "index_location": index_location,
    }
    config.update({k: v for k, v in optional.items() if v is not None})
    if dtype is not None:
        config["dtype"] = _dtype_name(dtype)
    if fill_value is not None:
        config["fill_value"] = _fill_value(fill_value)
    if dimension_names is not None:
        config["dimension_names"] = [str(n) for n in dimension_names]
    if attributes is not None:
        config["attributes"] = dict(attributes)
    sections: dict[str, Any] = {"array": config}
    if frame_meta is not None or frame_meta_json:
        sections["frame_meta"] = {"fields": dict(frame_meta or {}),
                                  "json": bool(frame_meta_json)}
    if ome is not None and ome is not False:
        if ome is True:
            sections["ome"] = {}
        elif isinstance(ome, Ome):
            sections["ome"] = ome._config()
        else:
            sections["ome"] = Ome(**ome)._config()
    return sections


def _options_config(
    *,
    threads: int | None = None,
    pin_threads: bool | None = None,
    background_nice: int | None = None,
    sink: str | None = None,
    pool_frames: int | None = None,
    spare_groups: int | None = None,
    backpressure: str | None = None,
    durability: str | float | datetime.timedelta | None = None,
    packing: str | None = None,
    chunk_order: str | None = None,
    acquisition_order: Sequence[str | int] | None = None,
    max_open_shards: int | None = None,
    overwrite: bool = False,
    resume: bool = False,
    existing_group: bool | None = None,
) -> dict[str, Any]:
    """The ``writer`` section of the library's JSON configuration (with the two keys
    of indexed frames, ``acquisition_order`` and ``max_open_shards``, which the native
    module resolves in every array of a recording)."""
    config: dict[str, Any] = {"overwrite": bool(overwrite)}
    if resume:
        config["resume"] = True
    if existing_group is not None:
        config["existing_group"] = bool(existing_group)
    optional: dict[str, Any] = {
        "threads": threads, "pin_threads": pin_threads,
        "background_nice": background_nice, "sink": sink, "pool_frames": pool_frames,
        "spare_groups": spare_groups, "backpressure": backpressure, "packing": packing,
        "chunk_order": chunk_order,
    }
    config.update({k: v for k, v in optional.items() if v is not None})
    if durability is not None:
        config["durability"] = _durability(durability)
    if acquisition_order is not None:
        config["acquisition_order"] = _acquisition_order(acquisition_order)
    if max_open_shards is not None:
        if isinstance(max_open_shards, bool) or not isinstance(
                max_open_shards, (int, np.integer)):
            raise TypeError(f"max_open_shards must be an int, not {max_open_shards!r}")
        if max_open_shards < 1:
            raise InvalidSpecError(f"max_open_shards {max_open_shards} must be at least 1")
        config["max_open_shards"] = int(max_open_shards)
    return {"writer": config}


def _acquisition_order(order: Sequence[str | int]) -> list[str] | list[int]:
    """``acquisition_order`` as the native module takes it: dimension names or storage
    axis numbers, outermost loop first."""
    if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
        raise TypeError(
            "acquisition_order must be a sequence of dimension names or of axis numbers "
            f"(outermost loop first, e.g. ('c', 't', 'z')), not {order!r}")
    items = list(order)
    if all(isinstance(v, str) for v in items):
        return [str(v) for v in items]
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
        axes = [int(v) for v in items]
        if any(a < 0 for a in axes):
            raise InvalidSpecError(
                f"invalid acquisition order: {tuple(axes)} has a negative axis number")
        return axes
    raise TypeError(
        "acquisition_order must be all dimension names or all axis numbers, not "
        f"{order!r}")


def _frame_index(index: Sequence[int] | int) -> list[int]:
    """A frame index as the native module takes it: one non-negative int per leading
    axis. Negative coordinates are refused here (they would wrap around in numpy; a
    frame written at the wrong place is worse than an error)."""
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        items: list[Any] = [index]
    elif isinstance(index, (str, bytes)) or not isinstance(index, (Sequence, np.ndarray)):
        raise TypeError(f"a frame index is a sequence of ints, not {index!r}")
    else:
        items = list(index)
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"frame index {index!r}: {v!r} is not an int")
        out.append(int(v))
    for axis, v in enumerate(out):
        if v < 0:
            e = FrameIndexError(
                f"frame index {out}: coordinate {v} on axis {axis} is out of bounds "
                "(negative coordinates do not wrap around)")
            e.index = tuple(out)
            raise e
    return out


def _seconds(value: Any) -> Any:
    """A ``timedelta`` as its seconds, a numpy number as a Python one; anything else as
    it is (the library checks durations)."""
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return _json_number(value)


def _destination(path: str | os.PathLike[str]) -> str:
    """The path or URL the library takes. A URL inside a ``pathlib`` path has lost a
    slash (``Path("s3://b/x")`` is ``s3:/b/x``) and would be taken as a local
    directory: refused, naming the fix."""
    text = os.fspath(path)
    if isinstance(path, os.PathLike) and re.match(r"^[A-Za-z][A-Za-z0-9+]*:/[^/]", text):
        raise InvalidSpecError(
            f"{text!r} looks like an object-store URL that a pathlib path folded: "
            "pass the URL as a str")
    return text


def _store_options(options: Mapping[str, str] | None) -> list[tuple[str, str]]:
    """``store_options`` as the library takes them: ``object_store`` keys and values."""
    if options is None:
        return []
    if not isinstance(options, Mapping):
        raise TypeError(f"store_options must be a mapping of str to str, not {options!r}")
    out = []
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                f"store_options must map str to str: {key!r}: {value!r} is not a string pair")
        out.append((key, value))
    return out


def _remote_config(
    *,
    staging_dir: str | os.PathLike[str] | None = None,
    staging_budget: int | None = None,
    part_size: int | None = None,
    uploads_in_flight: int | None = None,
    upload_timeout: float | datetime.timedelta | None = None,
    part: int | None = None,
    coordinate: bool | None = None,
    store_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``remote`` section of the library's JSON configuration (durations in
    milliseconds)."""
    config: dict[str, Any] = {}
    if staging_dir is not None:
        config["staging_dir"] = os.fspath(staging_dir)
    optional: dict[str, Any] = {
        "staging_budget": staging_budget, "part_size": part_size,
        "uploads_in_flight": uploads_in_flight, "part": part,
    }
    config.update({k: v for k, v in optional.items() if v is not None})
    if coordinate is not None:
        config["coordinate"] = bool(coordinate)
    if upload_timeout is not None:
        config["upload_timeout_ms"] = _ms(upload_timeout)
    if store_options is not None:
        config["store_options"] = dict(_store_options(store_options))
    return {"remote": config} if config else {}


#: The keywords spelled differently from the configuration's keys.
_KEYWORD_OF_KEY = {"chunk_shape": "chunks", "shard_shape": "shards",
                   "upload_timeout_ms": "upload_timeout"}
#: An array's keywords that are sections of their own, not keys of ``array``.
_ARRAY_SECTIONS = ("ome", "frame_meta", "frame_meta_json")


def _keywords(section: str) -> set[str]:
    """The keywords of a section (``"array"``, ``"writer"``, ``"remote"``): its keys as
    the library's types read them (``_native.config_keys()``), named as the keywords
    name them."""
    keys = _native.config_keys()[section]
    names = {_KEYWORD_OF_KEY.get(k, k) for k in keys}
    return names | set(_ARRAY_SECTIONS) if section == "array" else names


def _split_keywords(what: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """:class:`Writer`'s keyword arguments (but ``path``) as the library's JSON
    configuration; an unknown keyword is a ``TypeError``, as for a call."""
    array_keys = _keywords("array")
    option_keys = _keywords("writer")
    remote_keys = _keywords("remote")
    unknown = sorted(set(kwargs) - array_keys - option_keys - remote_keys)
    if unknown:
        raise TypeError(f"{what}() got an unexpected keyword argument {unknown[0]!r}")
    return {
        **_array_config(**{k: v for k, v in kwargs.items() if k in array_keys}),
        **_options_config(**{k: v for k, v in kwargs.items() if k in option_keys}),
        **_remote_config(**{k: v for k, v in kwargs.items() if k in remote_keys}),
    }


def estimate_memory(*, shape: Sequence[int | None], chunks: Sequence[int],
                    shards: Sequence[int], **options: Any) -> MemoryEstimate:
    """The most memory a :class:`Writer` created with these keyword arguments (all of
    :class:`Writer`'s but ``path``) will use, by part, without creating anything::

        m = zarrstream.estimate_memory(shape=(None, 2048, 2048), chunks=(1, 512, 512),
                                       shards=(32, 2048, 2048), threads=2)
        print(m.resident / 2**20, "MiB")

    Raises:
        InvalidSpecError: (a ``ValueError``) for what :class:`Writer` would refuse as
            impossible shapes or options (the same message).
        TypeError: for a keyword :class:`Writer` does not take.
    """
    config = _split_keywords(
        "estimate_memory", {"shape": shape, "chunks": chunks, "shards": shards, **options})
    return MemoryEstimate._from_native(_native.estimate_memory(_config_json(config)))


def _config_json(config: Mapping[str, Any]) -> str:
    try:
        return json.dumps(config, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidSpecError(f"a setting cannot be expressed: {e}") from e


def _as_frames(frames: Any, frame_shape: tuple[int, int],
               dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``frames`` as an array of whole frames of ``frame_shape`` and ``dtype``, without
    copying."""
    if isinstance(frames, np.ndarray):
        a = frames
    else:
        try:
            view = memoryview(frames)
        except TypeError:
            view = None
        if view is not None and view.itemsize == 1 and view.format in ("B", "b", "c"):
            # Raw bytes of one or more frames.
            if not view.c_contiguous:
                view = memoryview(bytes(view))
            nbytes = view.nbytes
            frame_bytes = frame_shape[0] * frame_shape[1] * dtype.itemsize
            if nbytes == 0 or nbytes % frame_bytes:
                raise InvalidFrameError(
                    f"{nbytes} bytes are not a whole number of "
                    f"{frame_bytes}-byte frames {frame_shape} {dtype}")
            a = np.frombuffer(view, dtype=dtype).reshape(-1, *frame_shape)
        else:
            a = np.asarray(frames)
    if a.dtype != dtype:
        raise InvalidFrameError(
            f"frame dtype {a.dtype.str} is not the array's {dtype.str} "
            "(convert it with .astype())")
    if a.ndim < 2 or a.shape[-2:] != frame_shape:
        raise InvalidFrameError(
            f"frame shape {a.shape} does not end in the frame shape {frame_shape}")
    return a


def _as_frame(frame: Any, frame_shape: tuple[int, int],
              dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``frame`` as an array of exactly one frame (leading axes of size 1 allowed),
    without copying."""
    a = _as_frames(frame, frame_shape, dtype)
    if a.size != frame_shape[0] * frame_shape[1]:
        raise InvalidFrameError(
            f"write_frame takes one frame of shape {frame_shape}, not {a.shape}")
    return a


#: Errors of an indexed write that refuse the frame and leave the writer recording.
_REFUSED_FRAME = (InvalidFrameError, ClosedError, FrameIndexError, FrameConflictError,
                  IndexedUnsupportedError, WorkingSetError)


def _meta_text(meta: Mapping[str, float] | None, meta_json: Any) -> str | None:
    """The JSON of one frame's metadata (``FrameMeta::from_json``), or ``None``."""
    if meta is None and meta_json is None:
        return None
    doc: dict[str, Any] = {}
    if meta is not None:
        values = {}
        for name, value in meta.items():
            if isinstance(value, bool) or not isinstance(
                    value, (int, float, np.integer, np.floating)):
                raise InvalidFrameError(
                    f"frame metadata {name}: {value!r} is not a number")
            values[str(name)] = (int(value) if isinstance(value, (int, np.integer))
                                 else float(value))
        doc["values"] = values
    if meta_json is not None:
        doc["json"] = meta_json
    try:
        return json.dumps(doc, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidFrameError(f"frame metadata is not JSON: {e}") from e


class _Session(_Lifecycle):
    """What :class:`Writer` and :class:`~zarrstream.Recording` share beyond the
    lifecycle: the per-array calls over one ``_native.NativeSession``, where a writer's
    array is ``key=None`` and a recording's is named. One path for both, so a
    recording's array behaves as a writer does.

    After a call that failed with an internal error (a bug: a panic inside the
    library), the object refuses every later call with :class:`ClosedError`, as the C
    API does: its state cannot be trusted. ``abort`` still stops it, keeping every frame
    accepted before the failure; ``close`` raises that error."""

    _native: _NativeSession | None
    _failure: ZarrstreamError | None
    _what = "writer"

    def _geometry(self, key: str | None) -> tuple[tuple[int, int], np.dtype[Any]]:
        """The frame shape and dtype of array ``key``."""
        raise NotImplementedError

    def _stats_from(self, d: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _live(self) -> _NativeSession:
        if self._native is None or self._native.closed:
            raise ClosedError(f"the {self._what} is closed")
        return self._native

    def _append(self, key: str | None, frames: Any, meta: Mapping[str, float] | None,
                meta_json: Any) -> int:
        frame_shape, dtype = self._geometry(key)
        native = self._live()
        a = _as_frames(frames, frame_shape, dtype)
        if a.size == 0:
            return 0
        text = _meta_text(meta, meta_json)
        try:
            if text is None:
                accepted, _dropped = native.push(key, a)
            else:
                accepted, _dropped = native.push_with(key, a, text)
        except (InvalidFrameError, ClosedError, FrameConflictError):
            raise
        except ZarrstreamError as e:
            self._failure = self._failure or e
            raise
        return accepted

    def _write_frame(self, key: str | None, index: Sequence[int] | int,
                     frame: Any) -> bool:
        frame_shape, dtype = self._geometry(key)
        native = self._live()
        idx = _frame_index(index)
        a = _as_frame(frame, frame_shape, dtype)
        try:
            return native.write_frame(key, idx, a)
        except _REFUSED_FRAME:
            raise
        except ZarrstreamError as e:
            self._failure = self._failure or e
            raise

    def _skip_frame(self, key: str | None, index: Sequence[int] | int) -> None:
        self._geometry(key)
        native = self._live()
        idx = _frame_index(index)
        try:
            native.skip_frame(key, idx)
        except _REFUSED_FRAME:
            raise
        except ZarrstreamError as e:
            self._failure = self._failure or e
            raise

    def _skip(self, key: str | None, n: int) -> None:
        self._geometry(key)
        if n < 0:
            raise ValueError(f"cannot skip {n} frames")
        self._live().skip(key, int(n))

    def _close(self) -> Any:
        native = self._live()
        try:
            return self._stats_from(json.loads(native.finish()))
        except ClosedError:
            if self._failure is not None:
                raise self._failure from None
            raise


class Writer(_Session):
    """Records frames into a sharded Zarr v3 array (or an OME-Zarr 0.5 image) at ``path``.

    Axis 0 is the append axis (``shape[0] = 0`` or ``None``: unbounded); the last two
    axes are the frame. Frames go in C order over the leading axes: for ``(t, c, y, x)``,
    ``t0 c0``, ``t0 c1``, ``t1 c0``, …

    The keywords are the keys of the library's JSON configuration, whose types,
    defaults and meanings are in its JSON Schema, ``docs/config.schema.json``
    (``chunks`` and ``shards`` are ``chunk_shape`` and ``shard_shape`` there).

    Frames may also be written by index, in any order (:meth:`write_frame`), declaring
    the acquisition's loop order with ``acquisition_order``; a writer takes either
    appended or indexed frames::

        with zarrstream.Writer("run.zarr", shape=(10, 2, 5, 512, 512),
                               chunks=(1, 1, 1, 512, 512), shards=(10, 1, 1, 512, 512),
                               dimension_names=("t", "c", "z", "y", "x"),
                               acquisition_order=("c", "t", "z")) as w:
            for c in range(2):
                for t in range(10):
                    for z in range(5):
                        w.write_frame((t, c, z), camera.snap())

    Every keyword left ``None`` takes the Rust library's default (``dtype="uint16"``,
    ``codec="lz4:1"``, one encoding thread per core, blocking back-pressure, a flush per
    shard, …). Use it as a context manager; leaving the block by an exception aborts the
    recording, keeping every frame accepted so far and recording the reason::

        import numpy as np, zarrstream

        with zarrstream.Writer("run.zarr", shape=(None, 2048, 2048),
                               chunks=(1, 512, 512), shards=(32, 2048, 2048),
                               dtype="uint16", codec="lz4:1") as w:
            for frame in camera:            # each a (2048, 2048) uint16 array
                w.append(frame)
        print(w.stats.frames_written)

    ``path`` may be an object-store URL, ``"s3://bucket/prefix"`` (also ``gs://``,
    ``az://``, ``file:///shared/path``): the writer records into a local staging
    directory and uploads each finished shard, and each ``zarr.json`` only after the
    shards it covers, so readers of the bucket never see a shape ahead of the data;
    :meth:`close` returns once everything is in the store. Endpoint, region and
    credentials come from the environment (``AWS_ENDPOINT_URL``, ``AWS_REGION``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, …) and ``store_options``::

        w = zarrstream.Writer("s3://microscope/run-42.zarr", shape=(None, 2048, 2048),
                              chunks=(1, 512, 512), shards=(32, 2048, 2048),
                              staging_dir="/scratch/staging",
                              store_options={"aws_endpoint": "http://10.0.0.5:3900",
                                             "aws_region": "garage"})

    Args:
        path: The store directory to create (it must not exist unless ``overwrite``),
            or an object-store URL (``"s3://bucket/prefix"``).
        shape: Array shape; axis 0 ``0``/``None`` for an unbounded recording.
        chunks: Inner chunk shape (the unit of compression).
        shards: Shard shape (the unit of files), a multiple of ``chunks``.
        dtype: A numpy dtype or its name: int8, uint8, int16, uint16, int32, uint32,
                int64, uint64, float32, float64 (:data:`DTYPES`).
        codec: As ``record --codec`` spells it: ``"lz4:1"`` (Blosc1 LZ4 with byte
            shuffle, level 1), ``"blosc-zstd:3"`` (Blosc1 with zstd inside, as
            ome-writers names it), ``"zstd:3"``, ``"none"``; a Blosc codec may end in
            ``":bitshuffle"``, ``":noshuffle"`` or ``":shuffle"`` (the default, which a
            ``uint8`` array refuses as doing nothing: ``ValueError``).
        fill_value: The value of chunks never written (and of dropped frames).
        dimension_names: One name per axis (``("t", "c", "y", "x")``).
        crc32c: Whether each chunk carries a crc32c checksum.
        index_location: ``"end"`` or ``"start"`` of each shard.
        attributes: Extra entries for ``attributes`` in ``zarr.json``.
        ome: An :class:`Ome` (or ``True``, or a dict of its fields) to write an
            OME-Zarr 0.5 image.
        threads: Encoding threads (0 = one per core).
        pin_threads: Pin encoding threads to cores.
        background_nice: Niceness of the writer's threads (0 to 19).
        sink: ``"auto"``, ``"direct"``, ``"pwrite"`` or ``"mmap"``.
        pool_frames: Frame buffers (bounds memory for frames not yet encoded).
        spare_groups: Extra staging groups for chunks deeper than one frame.
        backpressure: ``"block"`` (never lose a frame) or ``"drop"`` (never stall the
            caller; drops are counted exactly).
        durability: ``"shard"`` (flush each shard), ``"none"``, or a group-commit
            interval in seconds (or a ``timedelta``).
        packing: ``"compact"`` or ``"sparse"``.
        chunk_order: ``"c"`` (default) or ``"morton"``: the order of the inner chunks'
            bytes in each shard file. Morton (as zarr-python writes shards) keeps the
            chunks of a spatial block together, so reading a region takes fewer byte
            ranges; the shard index stays in C order and readers need not know.
            ``sink="auto"`` then writes through ``"mmap"``; ``"direct"`` is refused.
        acquisition_order: For frames written by index (:meth:`write_frame`): the
            loop order of the acquisition over the leading axes, outermost first, as
            dimension names (``("c", "t", "z")`` for every time point of channel 0
            first, a z-stack at each, into storage ``t, c, z``) or as storage axis
            numbers (``(1, 0, 2)``). Shard files are then prepared in the order the
            acquisition reaches them and the shards it keeps open at once are budgeted
            for it (:class:`WorkingSetError` beyond ``max_open_shards``). An unbounded
            axis 0 must be outermost. Left out: storage order, as :meth:`append` takes
            frames; indexed frames may then stray from it only as far as appending keeps
            shards open. An impossible order is an :class:`InvalidSpecError`.
        max_open_shards: The most shard files reserved and not yet finished at once
            (default 4096); each holds its worst-case size on disk (and, with the mmap
            sink, in memory).
        frame_meta: Numeric per-frame fields, ``{"timestamp": "float64", "counter":
            "int64"}``: each becomes a 1-D Zarr array ``<path>/frame_meta/<name>`` with
            one value per frame (``append(frame, meta={...})``), published never ahead
            of the frames.
        frame_meta_json: Also store a free JSON value per frame (``meta_json=``), as the
            arrays ``frame_meta/json_offset``, ``json_length`` and ``json_bytes``.
        overwrite: Replace an existing store at ``path``.
        resume: Continue the array zarrstream finished (or ``recover`` repaired) at
            ``path``: the first frame appended follows its last one. Every array
            setting must be the one on disk (a difference raises
            :class:`ResumeMismatchError`, a ``ValueError`` naming the field); it cannot
            be combined with ``overwrite``.
        staging_dir: Object store: the local directory shards are finished in before
            upload (default ``$ZARRSTREAM_STAGING``, else the temporary directory);
            put it on the fastest local disk.
        staging_budget: Object store: bytes of finished shards that may wait for
            upload (default 2 GiB); beyond it :meth:`append` waits, or drops frames
            under ``backpressure="drop"``.
        part_size: Object store: bytes per part of a multipart upload (default 8 MiB,
            at least 5 MiB).
        uploads_in_flight: Object store: objects uploaded at once (default 4).
        upload_timeout: Object store: how long uploads may keep failing, in seconds
            (or a ``timedelta``; default 60), before :class:`UploadError`.
        part: Object store: this process records part ``part`` (the index on axis 1,
            whose chunk and shard extent must be 1; ``shape[1]`` is the number of
            parts) of an array several processes record; it appends only its own
            camera's frames. :func:`zarrstream.publish_parts` (or a writer with
            ``coordinate=True``) publishes the shared ``zarr.json``.
        coordinate: Object store, with ``part``: this process also publishes the
            shared ``zarr.json`` from every part's progress.
        store_options: Object store: ``object_store`` configuration keys over the
            environment, str to str: ``{"aws_endpoint": "http://host:3900",
            "aws_region": "…", "aws_access_key_id": "…", "aws_secret_access_key":
            "…"}`` (``google_*`` and ``azure_*`` keys for the other stores).

    Raises:
        InvalidSpecError: (a ``ValueError``) for impossible shapes or options.
        StoreExistsError: (a ``FileExistsError``) when ``path`` exists.
        DiskFullError: (an ``OSError`` with ``errno.ENOSPC``) when the disk is full.
        RemoteCredentialsError: (a ``PermissionError``) when the object store refuses
            the credentials.
        RemoteNoBucketError: (a ``FileNotFoundError``) when the bucket does not exist.
        RemoteUnreachableError: (a ``ConnectionError``) when the store does not answer.
        RemoteURLError: (a ``ValueError``) for a URL or store option that cannot be
            used.
        StagingError: (a ``FileExistsError``) when the staging directory holds data not
            yet uploaded (:func:`zarrstream.upload_staged` it first).
        UploadError: (a ``ConnectionError``) from :meth:`append` or :meth:`close` when
            the store went away mid-recording; :attr:`UploadError.staging` keeps what
            was not uploaded.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        shape: Sequence[int | None],
        chunks: Sequence[int],
        shards: Sequence[int],
        dtype: npt.DTypeLike | None = None,
        codec: str | None = None,
        fill_value: float | None = None,
        dimension_names: Sequence[str] | None = None,
        crc32c: bool | None = None,
        index_location: Literal["end", "start"] | None = None,
        attributes: Mapping[str, Any] | None = None,
        ome: Ome | Mapping[str, Any] | bool | None = None,
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
        frame_meta: Mapping[str, Literal["float64", "int64"]] | None = None,
        frame_meta_json: bool = False,
        overwrite: bool = False,
        resume: bool = False,
        staging_dir: str | os.PathLike[str] | None = None,
        staging_budget: int | None = None,
        part_size: int | None = None,
        uploads_in_flight: int | None = None,
        upload_timeout: float | datetime.timedelta | None = None,
        part: int | None = None,
        coordinate: bool | None = None,
        store_options: Mapping[str, str] | None = None,
    ) -> None:
        self._native = None
        self._stats: Stats | None = None
        # The error that stopped the recording (a full disk, say): the native writer
        # reports it once, so close() raises it again rather than a bare "closed".
        self._failure: ZarrstreamError | None = None
        config = {
            **_array_config(
                shape=shape, chunks=chunks, shards=shards, dtype=dtype, codec=codec,
                fill_value=fill_value, dimension_names=dimension_names, crc32c=crc32c,
                index_location=index_location, attributes=attributes, ome=ome,
                frame_meta=frame_meta, frame_meta_json=frame_meta_json),
            **_options_config(
                threads=threads, pin_threads=pin_threads, background_nice=background_nice,
                sink=sink, pool_frames=pool_frames, spare_groups=spare_groups,
                backpressure=backpressure, durability=durability, packing=packing,
                chunk_order=chunk_order, acquisition_order=acquisition_order,
                max_open_shards=max_open_shards, overwrite=overwrite, resume=resume),
            **_remote_config(
                staging_dir=staging_dir, staging_budget=staging_budget, part_size=part_size,
                uploads_in_flight=uploads_in_flight, upload_timeout=upload_timeout,
                part=part, coordinate=coordinate, store_options=store_options),
        }
        text = _config_json(config)
        self._path = _destination(path)
        self._native = _native.NativeSession(self._path, text)
        spec = self._native.spec()
        self._shape: tuple[int, ...] = tuple(spec["shape"])
        self._dtype: np.dtype[Any] = np.dtype(str(spec["dtype"]))
        self._frame_shape: tuple[int, int] = (self._shape[-2], self._shape[-1])
        self._spec = spec

    # -- properties -------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The store path (or object-store URL) given."""
        return self._path

    @property
    def shape(self) -> tuple[int, ...]:
        """The array shape as created (axis 0 is 0 when unbounded)."""
        return self._shape

    @property
    def chunks(self) -> tuple[int, ...]:
        """The inner chunk shape."""
        return tuple(self._spec["chunk_shape"])

    @property
    def shards(self) -> tuple[int, ...]:
        """The shard shape."""
        return tuple(self._spec["shard_shape"])

    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type."""
        return self._dtype

    @property
    def codec(self) -> str:
        """The inner codec, in ``record --codec`` spelling."""
        return str(self._spec["codec"])

    @property
    def frame_shape(self) -> tuple[int, int]:
        """The shape of one frame (the array's last two axes)."""
        return self._frame_shape

    @property
    def sink(self) -> str:
        """The sink writing shard files: ``"direct"``, ``"pwrite"`` or ``"mmap"``."""
        return str(self._spec["sink"])

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` was called."""
        return self._native is None or self._native.closed

    @property
    def frames_pushed(self) -> int:
        """Frames offered so far (written, dropped and skipped)."""
        if self._stats is not None:
            return self._stats.frames_pushed
        return self._live().frames_pushed()

    @property
    def frames_encoded(self) -> int:
        """Frames whose chunks are all encoded into their shards so far (they survive a
        crash of this process: ``zarrstream.recover`` restores them)."""
        if self._stats is not None:
            return self._stats.frames_written
        return self._live().frames_encoded()

    @property
    def stats(self) -> Stats:
        """The statistics of the closed recording."""
        if self._stats is None:
            raise ClosedError("stats are known once the writer is closed")
        return self._stats

    def memory_in_use(self) -> MemoryUsage:
        """The bytes the writer's own buffers hold now and at most so far (frame pool,
        staging, encoding workers, mapped shard pages, pyramid levels), as the writer
        counts them; :func:`estimate_memory` bounds it. After closing:
        :attr:`Stats.memory`."""
        if self._stats is not None:
            return self._stats.memory
        current, peak = self._live().memory_in_use()
        return MemoryUsage(current=current, peak=peak)

    # -- recording --------------------------------------------------------------------

    def _geometry(self, key: str | None) -> tuple[tuple[int, int], np.dtype[Any]]:
        return self._frame_shape, self._dtype

    def _stats_from(self, d: dict[str, Any]) -> Stats:
        return Stats._from_native(d)

    def append(self, frames: npt.ArrayLike, *, meta: Mapping[str, float] | None = None,
               meta_json: Any = None) -> int:
        """Appends one frame or a stack of frames.

        ``frames`` is any numpy array (or object with the buffer protocol) whose trailing
        shape is :attr:`frame_shape` and whose dtype is the array's; leading axes are
        frames in C order. Raw ``bytes`` of whole frames are taken too. C-contiguous input
        is pushed without an intermediate copy; other layouts are copied once. The
        interpreter lock is released while frames are copied and while waiting for a
        free buffer, so other Python threads (the camera's, a GUI) keep running; they
        must not write into ``frames`` until ``append`` returns.

        ``meta`` (numeric values of the writer's ``frame_meta`` fields) and ``meta_json``
        (any JSON value, with ``frame_meta_json=True``) go with a single frame; they are
        checked before the frame is pushed, so a frame is never stored without the
        metadata given for it.

        Returns the number of frames accepted (fewer than given only with
        ``backpressure="drop"``; drops are counted in :attr:`stats`).

        Raises:
            InvalidFrameError: (a ``ValueError``) on a wrong shape or dtype.
            ClosedError: after :meth:`close`.
            DiskFullError: (``OSError``, ``errno.ENOSPC``) when the disk fills.
        """
        return self._append(None, frames, meta, meta_json)

    def write_frame(self, index: Sequence[int] | int, frame: npt.ArrayLike) -> bool:
        """Writes one frame at ``index``, its coordinates on the leading axes (every
        axis but the frame's two, in storage order: ``(t, c, z)`` for a ``t, c, z, y,
        x`` array; an int for one leading axis), in any order.

        ``frame`` is one frame as :meth:`append` takes it (a numpy array of
        :attr:`frame_shape`, leading axes of size 1 allowed, or its raw bytes). A chunk
        is encoded once all its frames are in, a shard published once all its chunks
        are; :meth:`close` finishes the rest, frames that never came reading as the fill
        value. Declare the order frames come in with ``acquisition_order``. An unbounded
        axis 0 takes indices within a window of two rows of shard sets (the lowest row
        not yet complete and the next).

        Returns whether the frame was accepted (``False`` only when
        ``backpressure="drop"`` dropped it).

        Raises:
            FrameIndexError: (an ``IndexError``) for an index of the wrong length, a
                coordinate out of bounds (negative ones included: they do not wrap
                around) or outside the window of an unbounded axis 0.
            FrameConflictError: (a ``ValueError``) for an index written (or skipped)
                before, or a writer that :meth:`append` wrote to.
            IndexedUnsupportedError: (a ``NotImplementedError``) for an image with
                pyramid levels or a writer with ``frame_meta``.
            WorkingSetError: (a ``ValueError``) for a frame that strays further from the
                declared (or storage) order than ``max_open_shards`` allows.
            InvalidFrameError: (a ``ValueError``) on a wrong shape or dtype.

            After each of these the frame was not taken and the writer goes on.
        """
        return self._write_frame(None, index, frame)

    def skip_frame(self, index: Sequence[int] | int) -> None:
        """Marks the frame at ``index`` (as :meth:`write_frame` takes it) as one that
        will not come: it reads as the fill value and counts as dropped, and the chunks
        and shards waiting for it are finished now rather than at :meth:`close`.

        Raises what :meth:`write_frame` raises for the index.
        """
        self._skip_frame(None, index)

    def skip(self, frames: int = 1) -> None:
        """Counts ``frames`` frames the camera did not deliver as dropped, keeping their
        places: they read as the fill value."""
        self._skip(None, frames)

    def set_attribute(self, name: str, value: Any, *, group: bool = False) -> None:
        """Sets the attribute ``name`` (a namespace such as ``"acquisition"``) of the
        array, or with ``group=True`` of the OME-Zarr image group, to ``value`` (anything
        ``json.dumps`` takes), at any time during the recording.

        ``zarr.json`` is republished at once and atomically, every other key kept, the
        array's extent as last published (never ahead of the data); later publications
        keep the value. The writer's own namespaces (``"zarrstream"``; ``"ome"`` on the
        group) are refused with :class:`InvalidSpecError` (a ``ValueError``).
        """
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidSpecError(f"attribute {name!r} is not JSON: {e}") from e
        self._live().set_attribute(str(name), text, None, group)

    def remove_attribute(self, name: str, *, group: bool = False) -> None:
        """Removes the attribute ``name`` (see :meth:`set_attribute`)."""
        self._live().set_attribute(str(name), None, None, group)

    def close(self) -> Stats:
        """Finishes the recording: writes every accepted frame, publishes the final
        metadata and returns the statistics. Calling it again returns them again."""
        if self._stats is not None:
            return self._stats
        self._stats = self._close()
        return self._stats

    def __repr__(self) -> str:
        state = "closed" if self.closed else "recording"
        return (f"zarrstream.Writer({self._path!r}, shape={self._shape}, "
                f"dtype={self._dtype.name}, codec={self.codec!r}, {state})")
