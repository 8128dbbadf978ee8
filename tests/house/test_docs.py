"""Docs that cannot drift: the counts README.md and docs/ state are the data's (bench/doc_counts.py), every file they
or a comment / docstring cite is in the repository, every module they name imports, no development-machine path is
left in them, and the package docstrings, docs/architecture.md and tests/house/test_layering.py number the layers alike."""

from __future__ import annotations

import ast
import functools
import glob
import importlib
import importlib.util
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import doc_counts  # noqa: E402

SKIP_DIRS = {".git", ".venv", "__pycache__", "build", "dist", ".device"}


def _python_files() -> list[Path]:
    return [p for p in sorted(ROOT.rglob("*.py")) if not SKIP_DIRS & set(p.relative_to(ROOT).parts)]


def _prose(path: Path) -> str:
    """A Markdown file whole; of a Python file its comments and docstrings (the code's strings are data)."""
    src = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return src
    out = [t.string for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append(doc)
    return "\n".join(out)


@functools.cache
def _texts() -> list[tuple[str, str]]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *_python_files()]
    return [(str(p.relative_to(ROOT)), _prose(p)) for p in paths]


def test_documented_counts_are_the_datas():
    """Each marked count (<!-- n:NAME -->) is what the shipped catalog, the quant table and the profiles hold now:
    a helper who adds models, profiles or quantizations reruns `python bench/doc_counts.py --write`."""
    assert not doc_counts.stale(doc_counts.counts())
    assert sum(len(doc_counts.SPAN.findall(p.read_text(encoding="utf-8"))) for p in doc_counts.documents()) >= 10


def test_a_stale_count_is_caught():
    values = doc_counts.counts()
    text = "<!-- n:models -->3<!-- /n --> models, <!-- n:nothing -->1<!-- /n -->"
    new, unknown = doc_counts.rewrite(text, values)
    assert unknown == ["nothing"] and f"-->{doc_counts.fmt(values['models'])}<!--" in new


# A repository path: a top-level folder of this repository, then a path; `{a,b}` alternatives and `<name>`
# placeholders are globbed. A path right after `COMMIT:` (git show) or another repository's name (`owner/repo path`)
# is another tree's and is not checked.
_TOP = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in SKIP_DIRS and not p.name.startswith("."))
_PATH = re.compile(r"(?<![\w./:@-])((?:%s|\.ci)/(?:[\w.*-]|\{[\w,.-]+\}|<[\w-]+>|/)*[\w*}>])"
                   % "|".join(map(re.escape, _TOP)))
_OTHER_REPO = re.compile(r"[\w-]+/[\w.-]+ $")  # "intel/auto-round " right before a path: that repository's file


def _citations(text: str) -> list[str]:
    return [m[1].rstrip(".") for m in _PATH.finditer(text) if not _OTHER_REPO.search(text[max(0, m.start() - 60):m.start()])]


def _exists(cited: str) -> bool:
    pattern = re.sub(r"<[\w-]+>", "*", cited)
    alts = re.findall(r"\{([\w,.-]+)\}", pattern)
    options = [pattern]
    for alt in alts:
        options = [o.replace("{" + alt + "}", a, 1) for o in options for a in alt.split(",")]
    return all(glob.glob(str(ROOT / o)) for o in options)


def test_every_cited_file_is_in_the_repository():
    missing = [f"{where}: {m}" for where, text in _texts() for m in _citations(text) if not _exists(m)]
    assert not missing, "cited but not in the repository:\n" + "\n".join(missing)


_MODULE = re.compile(r"(?<![\w./-])((?:recommender|evaluators)(?:\.[A-Za-z_]\w*)+)")


def _resolves(dotted: str) -> bool:
    """A module, or a module's attribute (recommender.model.quant.QUANTS, ...Predictor.predict)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            if importlib.util.find_spec(name) is None:
                continue
        except ModuleNotFoundError:
            continue
        try:
            obj = importlib.import_module(name)
        except ImportError:  # the module is there; it needs a package this machine lacks (lm_eval, vllm ...)
            return True
        for attr in parts[i:]:
            fields = getattr(obj, "model_fields", None)  # a pydantic record's field is no class attribute
            if isinstance(fields, dict) and attr in fields:
                return True
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


# GGUF metadata keys the synthetic-model writer stores under the "recommender." prefix: keys, not modules
_GGUF_KEYS = set(re.findall(r'add_\w+\("(recommender\.\w+)"',
                            (ROOT / "recommender" / "probes" / "synthetic.py").read_text(encoding="utf-8")))


def test_every_named_module_imports():
    """Module names from before the move to packages (the flat modules quant, calibration ... of commit 41fc1aa) are
    gone: every dotted recommender. / evaluators. name in the docs, comments and docstrings imports."""
    names = sorted({(where, m.rstrip(".")) for where, text in _texts() for m in _MODULE.findall(text)})
    bad = [f"{where}: {m}" for where, m in names
           if not m.endswith(("py", "md")) and m not in _GGUF_KEYS and not _resolves(m)]
    assert not bad, "names no module or attribute:\n" + "\n".join(bad)


_DEV_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|tmp)/[\w./-]*")


def test_no_development_machine_paths():
    found = [f"{where}: {m}" for where, text in _texts() for m in _DEV_PATH.findall(text)]
    assert not found, "absolute paths of a development machine:\n" + "\n".join(found)


def _layers_of_test_layering() -> dict[str, int]:
    doc = ast.get_docstring(ast.parse((ROOT / "tests" / "house" / "test_layering.py").read_text(encoding="utf-8")))
    line = next(ln for ln in doc.splitlines() if ln.strip().startswith("1 core"))
    out = {}
    for part in line.split("·"):
        n, *pkgs = part.replace(",", " ").split()
        out.update({p: int(n) for p in pkgs})
    return out


def test_one_numbering_of_the_layers():
    layers = _layers_of_test_layering()
    assert layers == {"core": 1, "model": 2, "hardware": 2, "score": 2, "evaluators": 2, "predict": 3, "catalog": 4,
                      "rank": 4, "probes": 5, "search": 6, "cli": 7}
    arch = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawn = {m[1]: int(m[0]) for m in re.findall(r"^(\d)\s+(?:recommender/)?(\w+)/", arch, re.M)}
    assert drawn == layers, "docs/architecture.md's diagram"
    for pkg, n in layers.items():
        init = ROOT / ("evaluators" if pkg == "evaluators" else f"recommender/{pkg}") / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert doc.startswith(f"Layer {n},"), f"{init.relative_to(ROOT)}: its docstring opens 'Layer {n}, ...'"


@pytest.mark.parametrize("cited,ok", [("recommender/model/quant.py", True), ("recommender/quant.py", False),
                                      ("bench/results/h200-llamabench-<name>.jsonl", True),
                                      ("sources/published_perf/aiconfigurator_gemm_{decode,prefill}.csv", True),
                                      ("sources/published_perf/aiconfigurator_gemm_{decode,nothing}.csv", False)])
def test_the_citation_check_can_fail(cited, ok):
    assert _exists(cited) is ok
