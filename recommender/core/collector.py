"""Python's cyclic garbage collector paused over a stretch of work that builds many objects which all stay alive
until it ends (a command's catalog, tables and records): reference counting frees them as usual, and the collector's
passes over them - which find nothing to free - are skipped. `recommend` has paused it so since issue 16
(rank/recommend.py); `sensitivity` and `tune` (issue 26) and the import of a command's module do too."""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def collector_paused():
    """The cyclic collector off inside the block, as it was after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
