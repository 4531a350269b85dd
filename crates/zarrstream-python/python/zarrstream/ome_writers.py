"""zarrstream as an ome-writers backend (and so as pymmcore-plus' writer).

>>> import zarrstream.ome_writers
>>> zarrstream.ome_writers.register()  # doctest: +SKIP
>>> settings = ome_writers.AcquisitionSettings(root_path="run.ome.zarr",
...     dimensions=..., dtype="uint16", format="zarrstream")  # doctest: +SKIP
>>> with ome_writers.create_stream(settings) as stream:  # doctest: +SKIP
...     for frame in camera:
...         stream.append(frame)

After :func:`register`, ``format="zarrstream"``, ``format={"name": "ome-zarr",
"backend": "zarrstream"}`` and ``"auto"`` (where zarrstream is tried first among the
OME-Zarr backends) select :class:`ZarrstreamBackend`.

The division of labour is that of ome-writers' acquire-zarr backend: ome-writers (through
yaozarrs) writes every group ``zarr.json`` with the OME-Zarr 0.5 metadata (image,
bioformats2raw series, plate and wells) and the per-frame metadata; zarrstream writes
only the arrays, one per position at ``<image>/0``, all of them in one
:class:`zarrstream.Recording` (``existing_group=True``: it joins the groups yaozarrs
made and never rewrites their ``zarr.json``), so every position shares one set of
encoding workers and one memory budget however many positions there are.

Every frame is written where ome-writers' router puts it, at its storage index
(:meth:`zarrstream.Writer.write_frame`), and each array is told the acquisition's loop
order (``acquisition_order``: ome-writers' acquisition dimensions, position left out, as
names of the storage dimensions), so every storage order ome-writers allows is written
as the frames come, none held in memory. Skipped frames (``stream.skip``) are
:meth:`~zarrstream.Writer.skip_frame`: they read as the fill value. The backend refuses
(through ``is_incompatible``, which makes ``"auto"`` fall through to the next backend)
element types and compressions zarrstream does not write, and an unbounded dimension
that the storage order moves off the first axis (zarrstream's one unbounded axis).

Only ome-writers 0.3.x is supported: the registration reaches into its registry and
pydantic schema, which are internal and change between minor versions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, get_args

import numpy as np

from ._recording import ArraySpec, Recording
from ._writer import DTYPES, Writer
from .errors import InvalidSpecError

try:
    import ome_writers as _ow
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "zarrstream.ome_writers needs ome-writers 0.3.x: pip install 'ome-writers==0.3.*'"
    ) from _e

#: The ome-writers versions whose internals this module was written against.
SUPPORTED_OME_WRITERS = "0.3"

if not str(_ow.__version__).startswith(SUPPORTED_OME_WRITERS + "."):
    raise ImportError(
        f"zarrstream.ome_writers supports ome-writers {SUPPORTED_OME_WRITERS}.x only "
        f"(found {_ow.__version__}): it registers itself through ome-writers' internal "
        "backend registry and schema, which differ in other versions. Install "
        f"'ome-writers=={SUPPORTED_OME_WRITERS}.*'."
    )

from ome_writers import _schema as _ow_schema  # noqa: E402
from ome_writers import _stream as _ow_stream  # noqa: E402
from ome_writers._backends._yaozarrs import YaozarrsBackend  # noqa: E402

if TYPE_CHECKING:
    from ome_writers._schema import AcquisitionSettings

__all__ = [
    "BACKEND_NAME",
    "SUPPORTED_OME_WRITERS",
    "LiveArray",
    "PositionArray",
    "ZarrstreamBackend",
    "register",
]

#: The name ome-writers knows this backend by (``format="zarrstream"``).
BACKEND_NAME = "zarrstream"

#: ome-writers' compression names -> zarrstream codecs. ``blosc-lz4`` and ``blosc-zstd``
#: take the levels (5 and 3, byte shuffle) ome-writers' acquire-zarr backend and yaozarrs
#: use, so every backend writes the same codec; ``zstd`` the level of yaozarrs' plain
#: ``ZstdCodec``.
CODECS: dict[str, str] = {
    "none": "none",
    "blosc-lz4": "lz4:5",
    "blosc-zstd": "blosc-zstd:3",
    "zstd": "zstd:3",
}


# -----------------------------------------------------------------------------------
# The backend
# -----------------------------------------------------------------------------------


class _ArraySpec(NamedTuple):
    """What yaozarrs asked for one position's array (its custom-writer call)."""

    path: Path
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    shards: tuple[int, ...] | None
    dimension_names: list[str] | None


class LiveArray:
    """One position's array while it is being recorded, for ome-writers' ``view()``
    and ``get_arrays()``: the shape ome-writers expects (the high-water mark of the
    frames written and skipped so far, like its own Zarr backends' resizing), read from
    disk read-only.

    zarrstream publishes a shard only complete (renamed into place), so a read sees
    whole shards: frames whose shard is still being filled or encoded read as the fill
    value until it is, as do rows beyond the array's published shape.
    """

    def __init__(self, writer: PositionArray | Writer, shape: tuple[int, ...],
                 fill_value: float, unbounded: bool) -> None:
        self._writer = writer
        self._path = writer.path
        self.shape: tuple[int, ...] = shape
        self._unbounded = unbounded
        self.dtype: np.dtype[Any] = writer.dtype
        self._fill = fill_value
        self._reader: Any = None

    @property
    def path(self) -> str:
        """The array's directory."""
        return self._path

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self.shape)

    def grow(self, index: Sequence[int]) -> None:
        """Extends :attr:`shape` to hold ``index`` (a storage index over the non-frame
        axes)."""
        if any(i >= s for i, s in zip(index, self.shape)):
            self.shape = tuple(max(s, i + 1) for s, i in zip(self.shape, index)) + tuple(
                self.shape[len(index):])

    def _open(self, rows: int) -> Any:
        """A read-only handle on the array, reopened while its published append axis is
        shorter than ``rows`` (zarrstream republishes ``zarr.json`` as rows complete)."""
        if self._reader is None or self._reader.shape[0] < rows:
            try:
                import zarr
            except ImportError:
                import tensorstore as ts

                spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": self._path}}
                self._reader = ts.open(spec, read=True, write=False).result()
            else:
                self._reader = zarr.open_array(self._path, mode="r")
        return self._reader

    def _read(self, reader: Any, selection: tuple[Any, ...]) -> np.ndarray[Any, Any]:
        if hasattr(reader, "get_orthogonal_selection"):  # zarr-python
            return np.asarray(reader.get_orthogonal_selection(selection))
        return np.asarray(reader.oindex[selection].read().result())  # tensorstore

    def __getitem__(self, key: Any) -> np.ndarray[Any, Any]:
        """Basic indexing (integers and slices) over :attr:`shape`. Along an unbounded
        append axis, rows beyond the shape (another position may be ahead of this one)
        read as the fill value rather than raising."""
        keys = list(key) if isinstance(key, tuple) else [key]
        if any(k is Ellipsis for k in keys):
            at = keys.index(Ellipsis)
            keys[at:at + 1] = [slice(None)] * (self.ndim - len(keys) + 1)
        if len(keys) > self.ndim:
            raise IndexError(f"too many indices for a {self.ndim}-dimensional array")
        keys += [slice(None)] * (self.ndim - len(keys))
        # Per axis: the coordinates selected, and whether the axis is kept.
        picks: list[np.ndarray[Any, Any]] = []
        kept: list[bool] = []
        for axis, (k, n) in enumerate(zip(keys, self.shape)):
            open_ended = axis == 0 and self._unbounded
            if isinstance(k, slice):
                if open_ended and k.stop is not None and k.stop > n:
                    n = k.stop
                picks.append(np.arange(*k.indices(n)))
                kept.append(True)
            else:
                i = int(k)
                if open_ended and i >= n:
                    n = i + 1
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for an axis of size {n}")
                picks.append(np.array([i % n]))
                kept.append(False)
        out = np.full([len(p) for p in picks], self._fill, dtype=self.dtype)
        if out.size:
            reader = self._open(int(picks[0].max()) + 1)
            rows = picks[0] < reader.shape[0]
            if rows.any():
                selection = (picks[0][rows], *picks[1:])
                out[rows] = self._read(reader, selection)
        return out.reshape([len(p) for p, k in zip(picks, kept) if k])

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        a = self[...]
        return a.astype(dtype) if dtype is not None else a

    def __repr__(self) -> str:
        return f"<zarrstream LiveArray {self._path!r} shape={self.shape} dtype={self.dtype}>"


class PositionArray:
    """One position's array in the backend's :class:`zarrstream.Recording`: the part of
    :class:`zarrstream.Writer`'s interface the backend uses (``write_frame``,
    ``skip_frame``, ``append``, ``skip``, ``frames_pushed``, ``frames_encoded``,
    ``closed``, ``path``, ``dtype``)."""

    def __init__(self, recording: Recording, key: str, path: Path) -> None:
        self.recording = recording
        #: The array's key in the recording (its path under the root).
        self.key = key
        self._path = os.fspath(path)
        self.dtype: np.dtype[Any] = recording.dtype(key)

    @property
    def path(self) -> str:
        """The array's directory."""
        return self._path

    @property
    def closed(self) -> bool:
        """Whether the recording was closed."""
        return self.recording.closed

    @property
    def frames_pushed(self) -> int:
        """Frames offered to this position so far."""
        return self.recording.frames_pushed(self.key)

    @property
    def frames_encoded(self) -> int:
        """Frames of this position whose chunks are all encoded."""
        return self.recording.frames_encoded(self.key)

    def write_frame(self, index: Sequence[int], frame: Any) -> bool:
        """Writes one frame of this position's array at storage ``index``."""
        return self.recording.write_frame(self.key, index, frame)

    def skip_frame(self, index: Sequence[int]) -> None:
        """Marks the frame at storage ``index`` as one that will not come (fill)."""
        self.recording.skip_frame(self.key, index)

    def append(self, frames: Any) -> int:
        """Appends one frame (or a stack) to this position's array."""
        return self.recording.append(self.key, frames)

    def skip(self, frames: int = 1) -> None:
        """Counts ``frames`` frames of this position as dropped."""
        self.recording.skip(self.key, frames)

    def __repr__(self) -> str:
        return f"<zarrstream PositionArray {self.key!r} of {self.recording!r}>"


class ZarrstreamBackend(YaozarrsBackend):  # type: ignore[type-arg]
    """ome-writers' OME-Zarr backend writing arrays with zarrstream.

    yaozarrs lays out the hierarchy and writes every group's metadata (through
    ome-writers' ``YaozarrsBackend``); this class records every position's array, where
    yaozarrs would have created it, in one :class:`zarrstream.Recording` (one set of
    encoding workers for all positions), and writes each frame at the storage index
    ome-writers gives it, the acquisition order declared to the recording.

    A position name the recording cannot take as a path component (``c`` and names
    starting with ``.`` are reserved by zarrstream's recordings) makes the backend fall
    back to one :class:`zarrstream.Writer` per position, sharing the cores between them.
    """

    def __init__(self) -> None:
        super().__init__()
        self._specs: list[_ArraySpec] = []
        self._recording: Recording | None = None
        self._writers: list[PositionArray | Writer] = []
        self._live: list[LiveArray] = []
        #: The acquisition's loop order over the storage dimensions (positions left
        #: out), outermost first, as dimension names.
        self._order: tuple[str, ...] = ()
        self._frame_shape: tuple[int, int] = (0, 0)
        self._dtype: np.dtype[Any] = np.dtype("uint16")

    # -- compatibility ----------------------------------------------------------------

    @staticmethod
    def acquisition_order(settings: AcquisitionSettings) -> tuple[str, ...]:
        """The loop order of the acquisition over each array's axes (every dimension
        but the position and the frame's two), outermost first, by name: ome-writers'
        acquisition dimensions, whichever storage order puts them in."""
        return tuple(d.name for d in settings.index_dimensions)

    @staticmethod
    def crc32c_for(compression: str | None) -> bool | None:
        """Whether chunks carry zarrstream's crc32c checksum codec: not for ``"none"``
        (no codec but ``bytes``, as ome-writers' other backends write it); the
        library's default (with) otherwise."""
        return False if (compression or "none") == "none" else None

    @staticmethod
    def codec_for(compression: str | None) -> str:
        """zarrstream's codec for one of ome-writers' compression names.

        Raises:
            ValueError: for a compression zarrstream does not write (the message is
                what ``is_incompatible`` reports).
        """
        name = compression or "none"
        if name in CODECS:
            return CODECS[name]
        raise ValueError(
            f"Compression {name!r} is not supported by zarrstream. Use 'blosc-zstd', "
            "'blosc-lz4', 'zstd' or 'none' instead."
        )

    def is_incompatible(self, settings: AcquisitionSettings) -> Literal[False] | str:
        """Why zarrstream cannot write ``settings`` (a sentence), or ``False``."""
        try:
            self.codec_for(settings.compression)
        except ValueError as e:
            return str(e)
        dtype = np.dtype(settings.dtype).name if settings.dtype else ""
        if dtype not in DTYPES:
            return (
                f"Data type {settings.dtype!r} is not supported by zarrstream. "
                f"Supported: {', '.join(DTYPES)}."
            )
        storage = settings.storage_index_dimensions
        moved = [d.name for d in storage[1:] if d.count is None]
        if moved:
            return (
                f"zarrstream's only unbounded axis is the first storage axis; the storage "
                f"order {[d.name for d in storage]} puts the unbounded dimension "
                f"{moved[0]!r} after {storage[0].name!r}. Give {moved[0]!r} a count, or "
                "a storage order that keeps it first."
            )
        return False

    # -- preparation ------------------------------------------------------------------

    def _get_yaozarrs_writer(self) -> Callable[..., _ArraySpec]:
        """yaozarrs' array-creation hook: records what each position's array should be;
        the writers are created in :meth:`_post_prepare`, once yaozarrs has written
        every group."""

        def create_array(
            path: Path,
            shape: tuple[int, ...],
            dtype: Any,
            chunks: tuple[int, ...],
            *,
            shards: tuple[int, ...] | None = None,
            overwrite: bool = False,
            compression: str = "none",
            dimension_names: list[str] | None = None,
        ) -> _ArraySpec:
            return _ArraySpec(Path(path), tuple(shape), tuple(chunks),
                              None if shards is None else tuple(shards),
                              None if dimension_names is None else list(dimension_names))

        return create_array

    def _should_use_chunk_buffering(self, storage_dims: Any) -> bool:
        """Never: zarrstream stages chunks deeper than one frame itself."""
        return False

    def _post_prepare(self, settings: AcquisitionSettings) -> None:
        """Creates the recording, one array per position at the array path yaozarrs
        chose, in the groups yaozarrs made."""
        self._specs = list(self._arrays)  # the _ArraySpec each create_array returned
        storage_dims = settings.array_storage_dimensions
        index_dims = storage_dims[:-2]
        self._dtype = np.dtype(settings.dtype)
        self._frame_shape = (int(storage_dims[-2].count or 0), int(storage_dims[-1].count or 0))
        self._order = self.acquisition_order(settings)
        codec = self.codec_for(settings.compression)
        crc32c = self.crc32c_for(settings.compression)
        if self._root is None:  # set by YaozarrsBackend.prepare, which calls this
            raise RuntimeError("the backend is not prepared")
        root = self._root
        specs: list[tuple[str, ArraySpec]] = []
        for spec in self._specs:
            shape = [0 if (i == 0 and d.count is None) else s
                     for i, (d, s) in enumerate(zip(storage_dims, spec.shape))]
            names = spec.dimension_names or [d.name for d in storage_dims]
            key = Path(spec.path).resolve().relative_to(root).as_posix()
            specs.append((key, ArraySpec(
                shape=shape,
                chunks=spec.chunks,
                shards=spec.shards or spec.chunks,
                dtype=self._dtype,
                codec=codec,
                crc32c=crc32c,
                fill_value=0,
                dimension_names=names,
            )))
        # Declared by name (every array has the storage dimension names); an array of a
        # single frame (y, x) has no loop to declare.
        order = self._order if index_dims else None
        try:
            # yaozarrs made the groups (root, series, wells, images): join them, never
            # rewriting their documents.
            self._recording = Recording(root, specs, existing_group=True,
                                        acquisition_order=order)
        except InvalidSpecError as e:
            if "array key" not in str(e):
                raise
            self._writers = self._writers_per_position(specs, root, order)
        else:
            self._writers = [PositionArray(self._recording, key, root / key)
                             for key, _ in specs]
        unbounded = storage_dims[0].count is None
        self._live = [LiveArray(w, spec.shape, 0, unbounded)
                      for w, spec in zip(self._writers, self._specs)]
        self._arrays = list(self._live)

    @staticmethod
    def _writers_per_position(specs: Sequence[tuple[str, ArraySpec]], root: Path,
                              order: Sequence[str] | None) -> list[PositionArray | Writer]:
        """One :class:`Writer` per position (for keys a recording refuses), sharing the
        cores between them."""
        n = len(specs)
        threads = max(1, (os.cpu_count() or 1) // n) if n > 1 else None
        writers: list[PositionArray | Writer] = []
        try:
            for key, spec in specs:
                writers.append(Writer(
                    root / key, shape=spec.shape, chunks=spec.chunks, shards=spec.shards,
                    dtype=spec.dtype, codec=spec.codec, crc32c=spec.crc32c,
                    fill_value=spec.fill_value, dimension_names=spec.dimension_names,
                    acquisition_order=order, threads=threads))
        except BaseException:
            for w in writers:
                if isinstance(w, Writer):
                    w.abort("ome-writers could not prepare every position")
            raise
        return writers

    # -- recording --------------------------------------------------------------------

    def write(
        self,
        position_index: int,
        index: tuple[int, ...],
        frame: np.ndarray[Any, Any],
        *,
        frame_metadata: dict[str, Any] | None = None,
    ) -> None:
        """Writes ``frame`` at storage ``index`` of its position's array, in the order
        it comes (the array was told the acquisition order); nothing is held.

        Raises:
            zarrstream.FrameConflictError: (a ``ValueError``) for an index written (or
                skipped) before.
            zarrstream.FrameIndexError: (an ``IndexError``) for an index outside the
                array.
        """
        if self._finalized or not self._writers:
            raise RuntimeError("Cannot write: the backend is not prepared or is finalized.")
        a = np.asarray(frame)
        if a.dtype != self._dtype:
            a = a.astype(self._dtype)  # as ome-writers' zarr backends' assignment casts
        if a.shape != self._frame_shape:
            # Only leading axes of size 1 go; any other shape is an error, not a reshape.
            a = np.squeeze(a, axis=tuple(range(a.ndim - 2))) if a.ndim > 2 else a
            if a.shape != self._frame_shape:
                raise ValueError(
                    f"frame shape {np.shape(frame)} is not the array's frame shape "
                    f"{self._frame_shape}")
        self._writers[position_index].write_frame(index, a)
        self._live[position_index].grow(index)
        self._store_frame_metadata(position_index, index, frame_metadata)

    def advance(self, indices: Sequence[tuple[int, tuple[int, ...]]]) -> None:
        """Skips frames: each is marked as one that will not come
        (:meth:`zarrstream.Writer.skip_frame`), counted as dropped and read as the fill
        value, without encoding anything."""
        if self._finalized or not self._writers:
            raise RuntimeError("Cannot advance: the backend is not prepared or is finalized.")
        for pos, index in indices:
            self._writers[pos].skip_frame(index)
            self._live[pos].grow(index)

    def finalize(self) -> None:
        """Closes the recording (every position, even after one fails) or every
        writer, flushes ome-writers' metadata, then raises the first error if any.
        Frames never written or skipped read as the fill value."""
        errors: list[BaseException] = []
        if not self._finalized:
            # Frames that never came (the acquisition stopped early) read as the fill
            # value: closing finishes every shard.
            if self._recording is not None and not self._recording.closed:
                try:
                    self._recording.close()
                except Exception as e:  # noqa: BLE001 - collected, raised below
                    errors.append(e)
            for writer in self._writers:
                if not isinstance(writer, Writer) or writer.closed:
                    continue
                try:
                    writer.close()
                except Exception as e:  # noqa: BLE001 - collected, raised below
                    errors.append(e)
            self._writers = []
            self._live = []
        super().finalize()
        if errors:
            raise errors[0]

    # -- reading ----------------------------------------------------------------------

    @property
    def writers(self) -> list[PositionArray | Writer]:
        """Each position's array (empty once finalized): a :class:`PositionArray` of
        :attr:`recording`, or a :class:`zarrstream.Writer` per position in the
        fallback."""
        return list(self._writers)

    @property
    def recording(self) -> Recording | None:
        """The recording of every position (closed once finalized, its ``stats`` then
        known; ``None`` in the one-writer-per-position fallback)."""
        return self._recording


# -----------------------------------------------------------------------------------
# Registration
# -----------------------------------------------------------------------------------


def _metadata() -> Any:
    return _ow_stream.BackendMetadata(
        name=BACKEND_NAME,
        module_path=__name__,
        class_name=ZarrstreamBackend.__name__,
        format="ome-zarr",
        is_available=lambda: True,
    )


def _cast_format(value: Any, _original: Callable[[Any], Any]) -> Any:
    """ome-writers' string-to-format cast, knowing ``"zarrstream"`` too."""
    suffix = ""
    if isinstance(value, dict) and str(value.get("_backend_str", "")).lower() == BACKEND_NAME:
        value = dict(value)
        value.pop("_backend_str")
        suffix = value.get("suffix", "")
        value = BACKEND_NAME
    if isinstance(value, str) and value.lower() == BACKEND_NAME:
        fields = {"backend": BACKEND_NAME, **({"suffix": suffix} if suffix else {})}
        return _ow_schema.OmeZarrFormat.model_validate(fields)
    return _original(value)


def _registered() -> bool:
    return BACKEND_NAME in _ow_stream.AVAILABLE_BACKENDS


def register() -> None:
    """Registers zarrstream with ome-writers (idempotent).

    Afterwards ``ome_writers.create_stream`` writes through zarrstream for
    ``format="zarrstream"``, ``format={"name": "ome-zarr", "backend": "zarrstream"}``
    and ``"auto"`` (zarrstream first among the OME-Zarr backends; settings it refuses
    fall through to the next).

    Raises:
        RuntimeError: when ome-writers' internals are not the ones this module patches.
    """
    if _registered():
        return
    from pydantic.functional_validators import BeforeValidator

    zarr_format = _ow_schema.OmeZarrFormat
    settings_model = _ow_schema.AcquisitionSettings
    backend_field = zarr_format.model_fields.get("backend")
    format_field = settings_model.model_fields.get("format")
    casts = [i for i, m in enumerate(format_field.metadata if format_field else [])
             if isinstance(m, BeforeValidator) and m.func is _ow_schema._cast_format]
    if backend_field is None or format_field is None or len(casts) != 1:
        raise RuntimeError(
            f"ome-writers {_ow.__version__}'s schema is not the one zarrstream.ome_writers "
            "knows (OmeZarrFormat.backend, AcquisitionSettings.format with _cast_format)")

    # 1. The registry. 'auto' tries AVAILABLE_BACKENDS in dict order, so zarrstream goes
    #    first; the dict and lists are mutated in place because ome-writers' modules
    #    (and its tests' conftest) hold references to them.
    meta = _metadata()
    _ow_stream.BACKENDS.insert(0, meta)
    if BACKEND_NAME not in _ow_stream.VALID_BACKEND_NAMES:
        _ow_stream.VALID_BACKEND_NAMES.insert(0, BACKEND_NAME)
    others = list(_ow_stream.AVAILABLE_BACKENDS.items())
    _ow_stream.AVAILABLE_BACKENDS.clear()
    _ow_stream.AVAILABLE_BACKENDS[BACKEND_NAME] = meta
    _ow_stream.AVAILABLE_BACKENDS.update(others)

    # 2. The schema: OmeZarrFormat.backend is a Literal of backend names, so widen it
    #    and rebuild the model's validator from its (edited) fields.
    names = [n for n in _literal_names(backend_field.annotation) if n != "auto"]
    backend_field.annotation = Literal[tuple([*names, BACKEND_NAME, "auto"])]  # type: ignore[assignment]
    zarr_format.model_rebuild(force=True)

    # 3. AcquisitionSettings.format casts strings ("tensorstore", …) with _cast_format
    #    (a BeforeValidator): wrap it so "zarrstream" casts too, and rebuild the model so
    #    it embeds the rebuilt OmeZarrFormat.
    original = _ow_schema._cast_format
    format_field.metadata[casts[0]] = BeforeValidator(
        lambda value: _cast_format(value, original))
    settings_model.model_rebuild(force=True)


def _literal_names(annotation: Any) -> list[str]:
    """The strings of a ``Literal`` or a union of ``Literal``s."""
    out: list[str] = []
    for arg in get_args(annotation):
        if isinstance(arg, str):
            out.append(arg)
        else:
            out.extend(_literal_names(arg))
    return out

