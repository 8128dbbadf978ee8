"""How the parent starts a worker process, isolated from the directory the user runs the command in.

``python -m evaluators.worker`` puts the current directory first on the child's ``sys.path``: an ``evaluators/``
folder (or a ``runpy.py``, ``json.py`` ...) where the user happens to stand (an unpacked model repository, a checkout)
would run instead of the worker. The child is started with ``-P`` (Python >= 3.11: no unsafe path prepended) and a
bootstrap that drops every relative entry of ``sys.path`` ('' and '.', also from PYTHONPATH), puts the folder this
very ``evaluators`` package was imported from first, and only then imports anything, so the child runs the same code
as the parent. PYTHONPATH's absolute entries are kept (the tests load a fake engine through it).
"""

from __future__ import annotations

import os
import warnings
import sys
from pathlib import Path

PACKAGE_PARENT = str(Path(__file__).resolve().parents[1])  # the folder holding evaluators/ (and recommender/)

# sys and os are already loaded when -c runs (nothing is found through sys.path for them); runpy is imported only
# after the relative entries are gone.
_BOOT = ("import sys, os; "
         "sys.path[:] = [p for p in sys.path if p and os.path.isabs(p)]; "
         "sys.path.insert(0, sys.argv[1]); "
         "import runpy; m = sys.argv[2]; sys.argv[:] = [m] + sys.argv[3:]; "
         "runpy.run_module(m, run_name='__main__', alter_sys=True)")


def worker_argv(module: str) -> list[str]:
    """The command line of a worker (``evaluators.worker`` / ``evaluators.accuracy_worker``)."""
    flags = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *flags, "-c", _BOOT, PACKAGE_PARENT, module]


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the parent's, with PYTHONPATH reduced to absolute entries (an empty entry means the
    current directory) and PYTHONSAFEPATH set (Python >= 3.11, for anything the worker itself starts)."""
    env = {**os.environ, **(extra or {})}
    raw = env.get("PYTHONPATH", "")
    parts = [p for p in raw.split(os.pathsep) if p and os.path.isabs(p)]
    if raw and len(parts) != len(raw.split(os.pathsep)):  # `export PYTHONPATH=$PYTHONPATH:/x` with it unset
        warnings.warn(f"PYTHONPATH {raw!r} has an empty or relative entry (the current directory): left out of the "
                      "probe's child process, which would otherwise run code from this folder", stacklevel=2)
    if parts:
        env["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        env.pop("PYTHONPATH", None)
    env["PYTHONSAFEPATH"] = "1"
    return env
