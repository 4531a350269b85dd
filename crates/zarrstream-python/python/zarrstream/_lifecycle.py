"""What a :class:`~zarrstream.Writer` and a :class:`~zarrstream.Recording` share: the
abort, the context manager and the finalizer."""

from __future__ import annotations

import warnings
from types import TracebackType
from typing import Any, Self

from .errors import ZarrstreamError


class _Lifecycle:
    """A recording that must end: ``close()`` finishes it, ``abort(reason)`` stops it, a
    ``with`` block does one of the two, and a forgotten one is finished (with a
    ``ResourceWarning``) when it is collected. Subclasses set ``_native`` and ``_path``
    and define ``closed``, ``close`` and ``_live``."""

    _native: Any
    _path: str

    @property
    def closed(self) -> bool:
        raise NotImplementedError

    def close(self) -> object:
        raise NotImplementedError

    def _live(self) -> Any:
        raise NotImplementedError

    def abort(self, reason: str = "aborted") -> None:
        """Stops at once: frames accepted so far are still written, and every array's
        ``zarr.json`` records the state ``aborted`` with ``reason``."""
        self._live().abort(str(reason))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.closed:
            return
        if exc_type is None:
            self.close()
            return
        try:
            self.abort(f"{exc_type.__name__}: {exc}")
        except ZarrstreamError:
            # The exception leaving the block (a full disk, say) is the one to see; the
            # recording already stopped on it and kept what it had accepted.
            pass

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is not None and not native.closed:
            name = type(self).__name__
            warnings.warn(
                f"zarrstream.{name}({self._path!r}) was never closed; finishing it now. "
                "Use it as a context manager or call close().",
                ResourceWarning,
                stacklevel=2,
            )
            try:
                native.finish()
            except Exception:  # noqa: BLE001 - nothing can be raised from __del__
                pass
