"""A pytest plugin (``-p zarrstream_ow_plugin``) for running ome-writers' own test suite
against zarrstream: registers the ``"zarrstream"`` backend when pytest imports it, which
is before ome-writers' ``tests/conftest.py`` reads ``AVAILABLE_BACKENDS`` to parametrise
its backend fixtures, so every backend-parametrised test also runs as ``[zarrstream]``.
"""

from __future__ import annotations

import zarrstream.ome_writers

zarrstream.ome_writers.register()
