"""The house rules: packages by layer, imports only downwards, no circles, the project's own modules imported at the
top (function-local imports are for heavy third-party packages only), and evaluators/ (the child side of a probe)
importing nothing of the project but recommender.core.

Layers, bottom up (docs/architecture.md):
    1 core · 2 model, hardware, score, evaluators · 3 predict · 4 catalog, rank · 5 probes · 6 search · 7 cli
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# package -> the packages it may import (itself included)
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "model": {"core", "model"},
    "hardware": {"core", "hardware"},
    "score": {"core", "score"},
    "evaluators": {"core", "evaluators"},
    "predict": {"core", "model", "hardware", "predict"},
    "catalog": {"core", "model", "hardware", "predict", "catalog"},
    "rank": {"core", "model", "hardware", "score", "predict", "rank"},
    "probes": {"core", "model", "hardware", "predict", "catalog", "evaluators", "probes"},
    "search": {"core", "model", "hardware", "score", "predict", "catalog", "rank", "probes", "evaluators", "search"},
    "cli": {"core", "model", "hardware", "score", "predict", "catalog", "rank", "probes", "evaluators", "search",
            "cli"},
    "": {"cli"},  # recommender/__init__.py, __main__.py
    "versions": {"core", "score", "predict", "versions"},  # recommender/versions.py: the labels of figures and scores
}
# imported inside functions on purpose: slow to import, and needed by few commands
HEAVY = {"duckdb", "optuna", "sklearn", "torch", "vllm", "llama_cpp", "lm_eval", "matplotlib", "transformers",
         "numpy", "gguf", "safetensors", "pynvml", "scipy", "accelerate"}
# child-side modules that only the child process imports (they may import heavy packages at the top)
CHILD_ONLY = {"evaluators.lmeval_llama", "evaluators.accuracy_worker", "evaluators.hf_from_gguf"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_of(mod: str) -> str:
    parts = mod.split(".")
    if parts[0] == "evaluators":
        return "evaluators"
    return parts[1] if len(parts) > 1 and parts[1] not in ("__main__",) else ""


def imports_of(path: Path, root: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module top) for every import in a file, function-local ones included."""
    mod = module_name(path, root)
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        # cli.common.deferred("recommender.<package>.<module>"): an import the CLI makes when an option asks for it; an edge like
        # any other (a name that is not a literal, or a deferred import outside cli/, is a fault of its own)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "deferred":
            arg = node.args[0] if node.args else None
            name = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else "<not a literal>"
            out.append((name if package_of(mod) == "cli" else f"{name} <deferred outside cli>", node.lineno, True))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            # `from pkg import module` imports the module
            for a in node.names:
                sub = f"{name}.{a.name}"
                target = sub if (root / (sub.replace(".", "/") + ".py")).is_file() or \
                    (root / sub.replace(".", "/") / "__init__.py").is_file() else name
                out.append((target, node.lineno, id(node) in top))
    return out


def project_files(root: Path) -> list[Path]:
    return sorted(p for d in ("recommender", "evaluators") for p in (root / d).rglob("*.py"))


def violations(root: Path) -> list[str]:
    errs = []
    graph: dict[str, set[str]] = {}
    for path in project_files(root):
        mod = module_name(path, root)
        pkg = package_of(mod)
        rel = path.relative_to(root)
        graph.setdefault(mod, set())
        for target, line, at_top in imports_of(path, root):
            if target.endswith(">") or (target.startswith("recommender.") and not any(
                    (root / (target.replace(".", "/") + suffix)).is_file() for suffix in (".py", "/__init__.py"))):
                errs.append(f"{rel}:{line}: deferred import of {target}: a literal name of a project module, "
                            f"from cli/ only")
                continue
            first = target.split(".")[0]
            if first in ("recommender", "evaluators"):
                graph[mod].add(target)
                tpkg = package_of(target)
                if target != "recommender" and tpkg not in ALLOWED.get(pkg, set()):
                    errs.append(f"{rel}:{line}: {pkg or 'recommender'} may not import {target} ({tpkg} layer)")
                if not at_top:
                    errs.append(f"{rel}:{line}: the project's own {target} imported inside a function")
            elif first in HEAVY and at_top and mod not in CHILD_ONLY:
                errs.append(f"{rel}:{line}: heavy {first} imported at the top (import it where it is used)")
    # circles between modules (function-local imports included)
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if t not in graph:
                continue
            if state.get(t) == 1:
                errs.append("circle: " + " -> ".join(stack[stack.index(t):] + [t]) if t in stack else t)
            elif not state.get(t):
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m, [m])
    return errs


def test_the_house_keeps_its_rules():
    assert violations(ROOT) == []


def test_every_package_says_what_it_is_and_exports_a_small_api():
    for pkg in ("core", "model", "hardware", "score", "predict", "catalog", "rank", "probes", "search"):
        init = ROOT / "recommender" / pkg / "__init__.py"
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), pkg
        names = [n for n in tree.body if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)]
        assert names, f"recommender/{pkg}/__init__.py has no __all__"


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("case, files, expect", [
    ("an arrow back up", {"recommender/core/units.py": "from recommender.rank.query import Query\n",
                          "recommender/rank/query.py": "Query = 1\n"}, "may not import recommender.rank.query"),
    ("a local import of our own", {"recommender/rank/query.py": "def f():\n    from recommender.core import x\n",
                                   "recommender/core/__init__.py": "x = 1\n"}, "imported inside a function"),
    ("a circle", {"recommender/rank/a.py": "from recommender.rank.b import y\n",
                  "recommender/rank/b.py": "from recommender.rank.a import x\n"}, "circle: recommender.rank.a"),
    ("a deferred import below the CLI", {"recommender/rank/query.py": "def f():\n    deferred('recommender.core')\n",
                                         "recommender/core/__init__.py": "x = 1\n"}, "from cli/ only"),
    ("a deferred import of no module", {"recommender/cli/a.py": "def f():\n    deferred('recommender.cli.b')\n"},
     "deferred import of recommender.cli.b"),
    ("a deferred circle", {"recommender/cli/a.py": "def f():\n    deferred('recommender.cli.b')\n",
                           "recommender/cli/b.py": "from recommender.cli.a import f\n"}, "circle: recommender.cli.a"),
    ("heavy at the top", {"recommender/predict/fit.py": "import sklearn\n"}, "heavy sklearn"),
    ("the child importing the parent", {"evaluators/base.py": "from recommender.probes.perf import run\n",
                                        "recommender/probes/perf.py": "run = 1\n"}, "evaluators may not import"),
])
def test_the_checker_sees_each_kind_of_fault(tmp_path, case, files, expect):
    for rel, text in files.items():
        _write(tmp_path, rel, text)
    for pkg in ("recommender", "evaluators"):
        (tmp_path / pkg).mkdir(exist_ok=True)
    assert any(expect in v for v in violations(tmp_path)), (case, violations(tmp_path))
