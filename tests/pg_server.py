"""A throw-away PostgreSQL server on 127.0.0.1 for the `tune --storage` test: Debian's `postgresql` binaries, a fresh
cluster in a temporary directory owned by the `postgres` user (initdb refuses root), trust authentication on the
loopback address only, and a fresh database per run.

    python tests/pg_server.py start   -> prints `export RECOMMENDER_TEST_PG_URL=...` and `export RECOMMENDER_TEST_PG_DIR=...`
    python tests/pg_server.py stop DIR

.ci/run starts one for the whole test run; tests/search/test_tune_postgres.py starts its own when none was given and the
binaries are on this machine.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

PG_USER = "postgres"


def bin_dir():
    """The newest /usr/lib/postgresql/<version>/bin with initdb, else None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return os.path.dirname(found[-1]) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_pg(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """Run as the postgres user when we are root (initdb and postgres refuse to run as root)."""
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", PG_USER, "--", *cmd]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def start() -> tuple[str, str]:
    """Start a server; returns (database URL, cluster directory)."""
    bins = bin_dir()
    if bins is None:
        raise RuntimeError("PostgreSQL binaries not found (apt-get install postgresql)")
    root = tempfile.mkdtemp(prefix="recommender-pg-")
    if os.geteuid() == 0:
        pw = pwd.getpwnam(PG_USER)
        os.chown(root, pw.pw_uid, pw.pw_gid)
    data = os.path.join(root, "data")
    _as_pg([f"{bins}/initdb", "-D", data, "-A", "trust", "-U", PG_USER, "--no-sync"])
    port = _free_port()
    _as_pg([f"{bins}/pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-w", "-t", "60", "-o",
            f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=100", "start"])
    db = f"tune_{uuid.uuid4().hex[:10]}"
    for _ in range(50):
        try:
            _as_pg([f"{bins}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", PG_USER, db])
            break
        except subprocess.CalledProcessError:
            time.sleep(0.2)
    else:
        raise RuntimeError(f"createdb failed; see {root}/log")
    return f"postgresql://{PG_USER}@127.0.0.1:{port}/{db}", root


def stop(root: str) -> None:
    bins = bin_dir()
    data = os.path.join(root, "data")
    if bins and os.path.isdir(data):
        try:
            _as_pg([f"{bins}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"])
        except subprocess.CalledProcessError:
            pass
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["start"]:
        url, root = start()
        print(f"export RECOMMENDER_TEST_PG_URL={url}")
        print(f"export RECOMMENDER_TEST_PG_DIR={root}")
    elif sys.argv[1:2] == ["stop"] and len(sys.argv) == 3:
        stop(sys.argv[2])
    else:
        sys.exit("usage: pg_server.py start | stop DIR")
