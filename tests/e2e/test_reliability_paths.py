"""Issue 28, Medium 8 and Low: report paths that are FIFOs or links to non-files, NUL bytes in catalog paths,
4,301-digit integers in config.json, progress of a long predicted `tune` -- each one clean line (in process: fast)."""

from __future__ import annotations

import json
import os

import pytest

from recommender.core.errors import UserError


def test_report_to_a_fifo_or_a_link_to_one_or_to_dev_null_is_refused(tmp_path):
    from recommender.cli.common import check_report_path

    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    (tmp_path / "to-fifo.html").symlink_to(fifo)
    (tmp_path / "to-null.html").symlink_to("/dev/null")
    (tmp_path / "dangling.html").symlink_to(tmp_path / "nowhere" / "x.html")
    for name in ("fifo.html", "to-fifo.html", "to-null.html", "dangling.html"):
        with pytest.raises(UserError, match="not a regular file"):
            check_report_path(str(tmp_path / name))
    (tmp_path / "real.html").write_text("old")
    (tmp_path / "to-real.html").symlink_to(tmp_path / "real.html")
    assert check_report_path(str(tmp_path / "to-real.html")) == tmp_path / "to-real.html"
    assert check_report_path(str(tmp_path / "new.html")) == tmp_path / "new.html"


def test_a_nul_byte_in_a_catalog_path_is_one_line():
    from recommender.core.paths import base_catalog_path

    with pytest.raises(UserError, match="NUL byte"):  # (an environment variable cannot hold one)
        base_catalog_path("a\x00b")


def test_a_4301_digit_integer_in_config_json_is_one_line(tmp_path):
    from recommender.catalog.ingest import read_config

    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", "hidden_size": ' + "9" * 4301 + "}")
    with pytest.raises(UserError, match="4300 digits"):
        read_config(p)
    p.write_text(json.dumps({"model_type": "llama"}))
    assert read_config(p)["model_type"] == "llama"


def test_a_long_predicted_study_says_where_it_is(monkeypatch, capsys):
    from recommender.cli import tune_cmd

    clock = iter([0.0, 1.0, 6.0, 7.0, 12.5])
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    show = tune_cmd._every(5.0, 100)
    for i in range(4):
        show(f"trial {i}: x")
    err = capsys.readouterr().err
    assert err == "trial 1: x (of 100 trials)\ntrial 3: x (of 100 trials)\n", err


def test_a_locked_tune_storage_is_reported_as_locked(tmp_path):
    import sqlite3

    from recommender.search.tune import check_sqlite_storage

    db = tmp_path / "tune.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE studies (study_id INTEGER)")
    holder.execute("BEGIN EXCLUSIVE")  # what a writer mid-transaction holds
    try:
        with pytest.raises(UserError, match="locked by another process"):
            check_sqlite_storage(f"sqlite:///{db}?timeout=0")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    check_sqlite_storage(f"sqlite:///{db}")  # free again: an Optuna file (its studies table)


def test_an_empty_pythonpath_entry_is_left_out_of_probe_children_with_a_warning(monkeypatch):
    from evaluators.spawn import worker_argv, worker_env

    monkeypatch.setenv("PYTHONPATH", ":/x")  # what `export PYTHONPATH=$PYTHONPATH:/x` gives when it was unset
    with pytest.warns(UserWarning, match="empty or relative entry"):
        env = worker_env()
    assert env["PYTHONPATH"] == "/x" and env["PYTHONSAFEPATH"] == "1"
    assert "-P" in worker_argv("evaluators.worker")  # the cwd is not on the child's sys.path either
