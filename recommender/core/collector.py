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



def imports_begin() -> bool:
    """Before a module's imports, at its top level (tests/house/test_layering.py keeps the project's imports there):
    the collector off; returns whether it was on, for :func:`imports_end`."""
    was_enabled = gc.isenabled()
    gc.disable()
    return was_enabled


def imports_end(was_enabled: bool) -> None:
    """After the imports: what they built frozen out of the collector's sight (gc.freeze) - it all stays as long as
    the process, so neither its passes nor the first collection after the imports go over it (re-enabled as it was,
    a collection over all of it came at the next allocation: ~20 ms of a command's start, docs/benchmarks.md issue
    26) - and the collector back as it was."""
    gc.freeze()
    if was_enabled:
        gc.enable()
