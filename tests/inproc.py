"""The command line in this process: the `recommender` / `recommend` entry points (their ``main``) with argv set and
stdout / stderr captured, for input refused before any work is done, where a new process (~0.5-1 s to start, more
on a busy machine) buys nothing. One runner for tests/conftest.py (the ``cli_inproc`` fixture),
tests/house/test_properties.py and bench/hostile.py."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings


def run_in_process(argv: list[str], prog: str = "recommender") -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``prog argv`` run by its entry point in this process."""
    if prog == "recommend":
        from recommender.cli.recommend_cmd import main  # noqa: PLC0415
    else:
        from recommender.cli.app import main  # noqa: PLC0415
    from recommender.cli.common import state  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    code = 0
    saved_argv, saved_showwarning = sys.argv, warnings.showwarning  # run_app replaces showwarning
    sys.argv = [prog, *argv]  # click names the program (and its `--help` hints) after argv[0]
    state.catalog = None  # a --catalog given to an earlier call in this process
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(argv))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv, warnings.showwarning = saved_argv, saved_showwarning
        state.catalog = None
    return code, out.getvalue(), err.getvalue()
