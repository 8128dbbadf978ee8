"""`recommender tune --storage postgresql://...`: several worker processes on one study in a real PostgreSQL server
(the one .ci/run starts, $RECOMMENDER_TEST_PG_URL; else one started here from Debian's postgresql binaries)."""

import json
import os
import subprocess

import pytest

from conftest import BIN, assert_user_error
import pg_server

pytest.importorskip("optuna")
pytest.importorskip("psycopg")

SMALL = ["Qwen/Qwen2.5-7B", "--gpu", "RTX 4090", "--quant", "Q4_K_M", "--quant", "Q8_0", "--quant", "F16"]
WORKERS, TRIALS = 3, 8


@pytest.fixture(scope="module")
def pg_url():
    url = os.environ.get("RECOMMENDER_TEST_PG_URL")
    if url:
        yield url
        return
    if pg_server.bin_dir() is None:
        pytest.skip("no PostgreSQL server given ($RECOMMENDER_TEST_PG_URL) and no postgresql binaries here; "
                    ".ci/run installs and starts one")
    url, root = pg_server.start()
    try:
        yield url
    finally:
        pg_server.stop(root)


def test_workers_share_one_study_in_postgres(pg_url, user_catalog):
    """Three `recommender tune` processes started together on one PostgreSQL study: the server's trials table holds
    every worker's trials, each worker's count is its --trials, and the study's best is the best a worker reported."""
    import optuna
    import psycopg

    env = {**os.environ, "RECOMMENDER_USER_CATALOG": str(user_catalog)}
    env.pop("RECOMMENDER_CATALOG", None)
    cmd = [str(BIN / "recommender"), "tune", *SMALL, "--vram", "24", "--trials", str(TRIALS), "--storage", pg_url,
           "--study-name", "team", "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(WORKERS)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert json.loads(out)["storage"].endswith("@" + pg_url.split("@", 1)[1])  # the shared server, redacted
    study = optuna.load_study(study_name="team", storage=pg_url)
    trials = study.get_trials()
    assert len(trials) == WORKERS * TRIALS
    workers = {t.user_attrs["worker"] for t in trials}
    assert {str(p.pid) for p in procs} == {w.rsplit(":", 1)[1] for w in workers}
    assert sorted(sum(1 for t in trials if t.user_attrs["worker"] == w) for w in workers) == [TRIALS] * WORKERS
    # the rows are in the server itself, not in a local file
    with psycopg.connect(pg_url) as con, con.cursor() as cur:
        cur.execute("select count(*) from trials t join studies s on s.study_id = t.study_id "
                    "where s.study_name = 'team'")
        assert cur.fetchone()[0] == WORKERS * TRIALS
    bests = [json.loads(out)["best"]["score"] for out, _ in outs]
    assert study.best_value == pytest.approx(min(b for b in bests if b is not None))


def test_bad_postgres_url_is_a_user_error(pg_url, cli):
    """A server that is not there: one error line and a hint, exit 2."""
    bad = pg_url.rsplit(":", 1)[0].rsplit("@", 1)[0] + "@127.0.0.1:1/nodb"
    r = cli("tune", *SMALL, "--vram", "24", "--trials", "2", "--storage", bad)
    assert_user_error(r)
    assert r.err.startswith("error: cannot open storage")
