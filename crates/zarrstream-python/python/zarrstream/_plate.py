"""OME-Zarr 0.5 high-content screening plates: the layout a :class:`Recording` writes
field by field."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from . import _native
from .errors import InvalidPlateError

__all__ = ["Acquisition", "Plate", "PlateImage"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Acquisition:
    """One acquisition of a :class:`Plate` (a pass over the plate: a time point, a
    staining round). Times are integer seconds since the Unix epoch."""

    id: int
    name: str | None = None
    description: str | None = None
    start_time: int | None = None
    end_time: int | None = None

    def _config(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}


class PlateImage(NamedTuple):
    """One field image of a :class:`Plate`: where it is, and its key in the
    :class:`Recording` (``"ROW/COLUMN/PATH"``)."""

    row: str
    column: str
    field: int
    acquisition: int | None
    key: str


def _names(value: int | Sequence[str], what: str) -> int | list[str]:
    if isinstance(value, bool) or not isinstance(value, (int, Sequence)) or isinstance(
            value, (str, bytes)):
        raise TypeError(f"Plate {what} must be a count or a sequence of names, not "
                        f"{value!r}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidPlateError(f"Plate {what} = {value} must not be negative")
        return value
    return [str(v) for v in value]


def _well(w: str | Sequence[str]) -> str:
    if isinstance(w, str):
        return w
    row, column = w
    return f"{row}/{column}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plate:
    """The layout of an OME-Zarr 0.5 high-content screening plate, as acquire-zarr's HCS
    settings describe one. Give it to :class:`Recording` (``plate=``, with ``image=``
    the :class:`ArraySpec` of every field image)::

        plate = zarrstream.Plate(rows=8, columns=12, fields=4, name="screen 7")
        with zarrstream.Recording("screen.ome.zarr", plate=plate, image=spec) as rec:
            for image in plate.images():   # as the stage visits them
                rec.append(image.key, camera.snap())

    Args:
        rows: Row names (``[A-Za-z0-9]+``, unique), or how many (``8``: ``A`` … ``H``).
        columns: Column names, or how many (``12``: ``"1"`` … ``"12"``).
        wells: The wells present, in the order visited, as ``"B/3"`` or ``("B", "3")``
            (default every well, row by row).
        fields: Fields of view per well and acquisition (at least 1).
        acquisitions: :class:`Acquisition` (or mappings of its keywords); with them,
            every well has ``fields`` images per acquisition.
        name: The plate's name.

    The layout is checked by the library: an impossible one (a well outside the rows or
    columns, a field count of 0, a duplicate well or name, …) raises
    :class:`InvalidPlateError` (a ``ValueError``) from :meth:`images`, :meth:`key` and
    :class:`Recording`.
    """

    rows: int | Sequence[str]
    columns: int | Sequence[str]
    wells: Sequence[str | tuple[str, str]] | None = None
    fields: int = 1
    acquisitions: Sequence[Acquisition | Mapping[str, Any]] = ()
    name: str | None = None

    def _config(self) -> dict[str, Any]:
        if isinstance(self.fields, bool) or not isinstance(self.fields, int):
            raise TypeError(f"Plate fields must be an int, not {self.fields!r}")
        if self.fields < 0:
            raise InvalidPlateError(f"plate field count {self.fields} must be at least 1")
        config: dict[str, Any] = {
            "rows": _names(self.rows, "rows"),
            "columns": _names(self.columns, "columns"),
            "fields": self.fields,
        }
        if self.wells is not None:
            config["wells"] = [_well(w) for w in self.wells]
        acquisitions = []
        for a in self.acquisitions:
            if not isinstance(a, Acquisition):
                try:
                    a = Acquisition(**a)
                except TypeError as e:
                    raise TypeError(f"Plate acquisitions: {e}") from e
            acquisitions.append(a._config())
        if acquisitions:
            config["acquisitions"] = acquisitions
        if self.name is not None:
            config["name"] = self.name
        return config

    def _json(self) -> str:
        return json.dumps(self._config())

    def images(self) -> list[PlateImage]:
        """Every field image, in the order a screening microscope visits them (and the
        recording's array order): acquisition by acquisition, well by well, each well's
        fields in turn. Its key is ``ROW/COLUMN/PATH``, PATH numbering the well's images
        (acquisition index × fields + field)."""
        return [PlateImage(*i) for i in _native.plate_images(self._json())]

    def key(self, row: str, column: str, field: int = 0,
            acquisition: int | None = None) -> str:
        """The key of field ``field`` of well ``row``/``column`` (of acquisition
        ``acquisition``, by id, for a plate with acquisitions)."""
        return _native.plate_image_key(self._json(), row, column, field, acquisition)
