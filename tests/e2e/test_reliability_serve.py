"""Issue 28 (round 2 of "nothing lost, nothing poisoned"): `probe serve` against a scripted server on 127.0.0.1
(tests/fake_openai.py) that does not stream, sends the wrong JSON types, impossible counts, never-ending or dripping
streams, huge lines, escape sequences; measured rows that must not poison later commands; row ids under concurrency;
credentials that must not be written anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BIN, assert_user_error
from fake_openai import FakeOpenAI

MID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMALL = ("--prompt-tokens", "16", "--output-tokens", "8", "--repeats", "1", "--model-id", MID)


def _serve(cli, url: str, *extra: str, env: dict | None = None):
    return cli("probe", "serve", "--url", url, *SMALL, *extra, env=env)


def _stored(cli) -> list[dict]:
    r = cli("catalog", "measurements", "--json", "--model", MID)
    assert r.code == 0, r.err
    return [m for m in r.json() if m["raw"].get("source") == "probe serve"]


def _probe(mode: str, tmp_path: Path, context: int | None = None, **settings):
    """run_serve_probe in this process against the fake server (no CLI process start: the machine is shared)."""
    from recommender.catalog.store import Catalog
    from recommender.core.paths import base_catalog_path
    from recommender.probes import serve as S

    with FakeOpenAI(mode) as srv:
        s = S.ServeSettings(url=srv.url, **{"prompt_tokens": 16, "output_tokens": 8, "repeats": 1, **settings})
        cat = Catalog(base_catalog_path(None), tmp_path / "none.duckdb")
        try:
            return S.run_serve_probe(s, cat, model_id=MID, context_tokens=context)
        finally:
            cat.close()


def _refused(mode: str, tmp_path: Path, **kw) -> str:
    """The one-line message run_serve_probe refuses the server with."""
    from recommender.core.errors import UserError

    with pytest.raises(UserError) as e:
        _probe(mode, tmp_path, **kw)
    msg = e.value.message
    assert "\n" not in msg and "\x1b" not in msg, msg
    return msg


def _one_line(r) -> None:
    assert_user_error(r)
    assert "Traceback" not in r.err and r.err.count("error:") == 1, r.err


# -- High 1: a non-streaming answer or an impossible count is no `ok` row -------------------------------------------
def test_a_server_that_does_not_stream_stores_no_ok_row(cli, user_catalog, tmp_path):
    with FakeOpenAI("json_body") as srv:
        r = _serve(cli, srv.url)
    _one_line(r)
    assert "one chunk" in r.err and "does not stream" in r.err, r.err
    assert not user_catalog.exists()
    msg = _refused("one_chunk", tmp_path)
    assert "one chunk" in msg and "does not stream" in msg, msg


@pytest.mark.parametrize("mode,fragment", [("huge_usage", "completion_tokens = a number 2147483648"),
                                           ("usage_more", "completion_tokens = 400"),
                                           ("negative_usage", "completion_tokens = a number -5"),
                                           ("usage_str", "a string")])
def test_impossible_token_counts_are_refused_naming_what_the_server_sent(tmp_path, mode, fragment):
    msg = _refused(mode, tmp_path)
    assert "the server at" in msg and "sent" in msg and fragment in msg, msg


@pytest.mark.parametrize("opt,value", [("--quant", "Q9_JUNK"), ("--model-id", "no/such-model-anywhere")])
def test_junk_quant_and_model_id_are_refused(cli, user_catalog, opt, value):
    args = [a for a in SMALL]
    if opt == "--model-id":
        args[args.index("--model-id") + 1] = value
    with FakeOpenAI("ok") as srv:
        r = cli("probe", "serve", "--url", srv.url, *args, *((opt, value) if opt == "--quant" else ()))
    _one_line(r)
    assert not user_catalog.exists()


def _write_bad_row(user_catalog: Path, **figures) -> str:
    """A TPOT-0 `ok` row as an earlier version stored it (written with SQL, past today's checks)."""
    import duckdb

    from recommender.catalog.store import _MEASUREMENT_COLS, UserCatalog
    from recommender.core.records import Measurement

    UserCatalog(user_catalog).close()  # create the overlay with its schema
    m = Measurement(id="badrow0000000001", hardware_fingerprint="fp", hardware_name="NVIDIA GeForce RTX 4090",
                    engine="llama.cpp", engine_version="x", model_id=MID, quant="Q4_K_M", batch=1,
                    context_tokens=4096, prompt_tokens=512, output_tokens=128, ttft_ms=10.0, tpot_ms=0.0,
                    decode_tokens_per_s=None, throughput_tokens_per_s=None, raw={}, measured_at="2026-01-01T00:00:00")
    m = m.model_copy(update=figures)
    d = m.model_dump()
    d["raw_json"] = json.dumps(d.pop("raw"))
    con = duckdb.connect(str(user_catalog))
    con.execute(f"INSERT INTO measurements ({', '.join(_MEASUREMENT_COLS)}) VALUES "
                f"({', '.join('?' * len(_MEASUREMENT_COLS))})", [d[c] for c in _MEASUREMENT_COLS])
    con.close()
    return m.id


def test_a_stored_tpot_zero_row_is_skipped_with_a_warning_and_can_be_removed(cli, user_catalog):
    rid = _write_bad_row(user_catalog)
    r = cli("estimate", MID, "--gpu", "RTX 4090", "--quant", "Q4_K_M", "--context", "4096", "--json")
    assert r.code == 0, r.err
    assert "warning: skipping measurement badrow0000000001" in r.err and "tpot_ms 0.0" in r.err, r.err
    assert "Traceback" not in r.err
    listed = cli("catalog", "measurements", "--model", MID)
    assert listed.code == 0 and "INVALID badrow0000000001" in listed.out, listed.out
    rm = cli("catalog", "measurements", "--remove", rid)
    assert rm.code == 0 and "removed 1 measured row" in rm.err, rm.err
    assert cli("catalog", "measurements", "--remove", rid).code == 2  # gone
    r = cli("estimate", MID, "--gpu", "RTX 4090", "--quant", "Q4_K_M", "--context", "4096", "--json")
    assert r.code == 0 and "warning" not in r.err, r.err


def test_the_writer_refuses_an_impossible_row():
    from recommender.core.errors import UserError
    from recommender.core.records import check_measurement, Measurement

    m = Measurement(id="x", hardware_fingerprint="fp", hardware_name="h", engine="llama.cpp", engine_version="v",
                    model_id=MID, quant="Q4_K_M", batch=1, context_tokens=4096, prompt_tokens=16, output_tokens=8,
                    ttft_ms=5.0, tpot_ms=2.0, decode_tokens_per_s=500.0)
    assert check_measurement(m) is m
    for bad in ({"tpot_ms": 0.0}, {"tpot_ms": 2e-11}, {"output_tokens": 2 ** 31}, {"prompt_tokens": -3},
                {"ttft_ms": float("nan")}, {"decode_tokens_per_s": 5.0}, {"batch": 0}, {"tpot_ms": None,
                                                                                      "decode_tokens_per_s": None}):
        with pytest.raises(UserError):
            check_measurement(m.model_copy(update=bad))
    # a failed row needs sane counts only
    assert check_measurement(m.model_copy(update={"status": "failed", "tpot_ms": None, "decode_tokens_per_s": None}))


# -- High 3: rows are not lost ----------------------------------------------------------------------------------------
def test_repeated_levels_store_every_row(cli, user_catalog):
    with FakeOpenAI("ok") as srv:
        r = _serve(cli, srv.url, "--concurrency", "1,1,1,2,2", "--json")
    assert r.code == 0, r.err
    ids = [x["id"] for x in r.json()["items"]]
    assert len(ids) == 5 == len(set(ids))
    assert {m["id"] for m in _stored(cli)} == set(ids)


def test_four_concurrent_probes_store_every_row(cli, user_catalog):
    env = {**os.environ, "RECOMMENDER_USER_CATALOG": str(user_catalog), "COLUMNS": "100"}
    env.pop("RECOMMENDER_CATALOG", None)
    with FakeOpenAI("ok") as srv:
        procs = [subprocess.Popen([str(BIN / "recommender"), "probe", "serve", "--url", srv.url, *SMALL,
                                   "--concurrency", "1,2", "--json"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
        outs = [p.communicate(timeout=120) for p in procs]
    saved = set()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        saved |= {x["id"] for x in json.loads(out)["items"]}
    assert len(saved) == 8
    assert {m["id"] for m in _stored(cli)} == saved


# -- High 2: --timeout bounds the whole command; reads are bounded ----------------------------------------------------
@pytest.mark.parametrize("mode", ["never_ending", "keepalive", "drip", "models_drip"])
def test_timeout_bounds_the_whole_probe(tmp_path, mode):
    limit = 3.0
    t0 = time.monotonic()
    msg = _refused(mode, tmp_path, context=2048, timeout_s=limit)
    took = time.monotonic() - t0
    assert took < limit + 1.5, (took, msg)
    assert "time limit" in msg or "within" in msg or "does not end" in msg, msg


def test_timeout_bounds_the_command_end_to_end(cli, user_catalog):
    limit = 6
    with FakeOpenAI("drip") as srv:
        t0 = time.monotonic()
        r = _serve(cli, srv.url, "--timeout", str(limit), "--context", "2048")
        took = time.monotonic() - t0
    _one_line(r)
    assert took < limit + 15, (took, r.err)  # the limit plus the process start (seconds on a loaded machine)
    assert not user_catalog.exists()


@pytest.mark.parametrize("mode,fragment", [("big_line", "line over 1 MiB"), ("big_body", "MiB of stream"),
                                           ("models_big", "over 16 MiB")])
def test_reads_are_bounded(tmp_path, mode, fragment):
    msg = _refused(mode, tmp_path, timeout_s=60)
    assert fragment in msg, msg


def test_timeout_must_be_a_finite_number_of_seconds(cli, user_catalog):
    from recommender.cli.common import check_seconds
    from recommender.core.errors import UserError

    for value in (float("inf"), float("nan"), -1.0, 0.0, 1e309):
        with pytest.raises(UserError):
            check_seconds(value, "--timeout")
    r = cli("probe", "serve", "--url", "http://127.0.0.1:9/v1", "--timeout", "inf")
    _one_line(r)
    assert "--timeout" in r.err


# -- Medium 4: malformed answers are one line naming what the server sent ----------------------------------------------
@pytest.mark.parametrize("mode,fragment", [("choices_str", "choices = a string"), ("choices_int", "choices = a number"),
                                           ("choices_dict", "choices = an object"),
                                           ("choices_list_int", "choices[0] = a number"),
                                           ("text_int", "choices[0].text = a number"),
                                           ("text_list", "choices[0].text = a list"),
                                           ("n_ctx_lots", "n_ctx = a string \"lots\""),
                                           ("n_ctx_huge", "n_ctx = a number 1e+38"),
                                           ("n_ctx_str_num", "n_ctx = a string"),
                                           ("models_int", "not an OpenAI-compatible server"),
                                           ("data_str", "not an OpenAI-compatible server")])
def test_malformed_answers_are_one_line(tmp_path, mode, fragment):
    msg = _refused(mode, tmp_path)
    assert fragment in msg and "time limit" not in msg, msg


def test_a_malformed_answer_through_the_cli_is_exit_2_without_a_traceback(cli, user_catalog):
    with FakeOpenAI("choices_dict") as srv:
        r = _serve(cli, srv.url)
    _one_line(r)
    assert "choices = an object" in r.err


def test_malformed_answers_after_the_warm_up_are_one_line_not_a_false_time_limit(cli, user_catalog, monkeypatch):
    from recommender.probes import serve as S

    with FakeOpenAI("ok") as srv:  # warm up on good answers, then the sweep's answers turn bad
        settings = S.ServeSettings(url=srv.url, prompt_tokens=16, output_tokens=8, concurrency=(2,), repeats=1)
        info = S.discover(srv.url)
        probe = S.ServeProbe(settings, info)
        probe.warm_up()
        srv.set_mode("choices_str")
        from recommender.core.errors import UserError

        with pytest.raises(UserError, match="choices = a string"):
            probe.level(2, seed0=1000)


def test_props_as_a_list_and_junk_timings_are_not_a_crash(tmp_path):
    assert "context window" in _refused("props_list", tmp_path)  # not llama-server: no context window known
    out = _probe("timings_str", tmp_path)
    assert out.rows[0].status == "ok" and out.rows[0].raw["server_timings"] is None


# -- Medium 5 / 7: secrets and escape sequences ----------------------------------------------------------------------
def test_credentials_in_the_url_are_used_but_never_written(cli, user_catalog):
    with FakeOpenAI("ok") as srv:
        url = srv.url.replace("http://", "http://bob:s3cretpw@") + "?api_key=k3ykey"
        r = _serve(cli, url, "--json")
    assert r.code == 0, r.err
    for text in (r.out, r.err, json.dumps(_stored(cli))):
        assert "s3cretpw" not in text and "k3ykey" not in text
    assert "***@127.0.0.1" in r.json()["server"]["url"]
    with FakeOpenAI("never_ending") as srv:  # an error line with the URL in it
        r = _serve(cli, srv.url.replace("http://", "http://bob:s3cretpw@"), "--timeout", "5", "--context", "2048")
    _one_line(r)
    assert "s3cretpw" not in r.err


def test_a_crash_file_has_no_credentials(tmp_path, monkeypatch, capsys):
    import typer

    from recommender.cli.common import run_app

    monkeypatch.setenv("RECOMMENDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_TOKEN", "hf_faketokenfaketokenfaketoken12")
    monkeypatch.setattr(sys, "argv", ["recommender", "probe", "serve", "--url",
                                      "http://bob:s3cretpw@h:1/v1?api_key=k3ykey"])
    app = typer.Typer()

    @app.command()
    def boom() -> None:
        raise RuntimeError("failed for http://bob:s3cretpw@h:1/v1 with hf_faketokenfaketokenfaketoken12")

    with pytest.raises(SystemExit):
        run_app(app, [])
    err = capsys.readouterr().err
    where = err.split("the traceback is in ", 1)[1].split(" ")[0]
    text = Path(where).read_text() + err
    assert "RuntimeError" in text
    for secret in ("s3cretpw", "k3ykey", "faketoken"):
        assert secret not in text


def test_markup_and_escapes_from_the_server_and_the_url_print_as_text(cli, user_catalog):
    with FakeOpenAI("escapes") as srv:
        r = _serve(cli, srv.url + "?x=[/]")
        assert r.code == 0, r.err
    assert "MarkupError" not in r.err and "\x1b" not in r.out + r.err
    listed = cli("catalog", "measurements", "--model", MID)
    assert listed.code == 0 and "\x1b" not in listed.out and "\x07" not in listed.out
    assert "\\x1b" in listed.out  # shown, escaped
