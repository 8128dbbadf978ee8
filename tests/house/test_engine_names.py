"""An engine is an object: its record (recommender.core.engines.EngineSpec) and its rules
(recommender.predict.engines) are the only places that decide by an engine's name.

The rule (an AST walk of every module of recommender/ and evaluators/): no comparison (``==``, ``!=``, ``in``,
``not in``, ``is``) has an engine's name as a string literal on either side (alone, or inside a literal tuple / list /
set), nor does a ``match`` case, outside
  - recommender/core/engines.py (the records) and recommender/predict/engines/ (each engine's rules).
Code elsewhere asks the record (``engine_spec(e).file_format == "gguf"``, ``.partial_offload``, ``.backends``...) or
the rules (``rules_for(e).prefill_chunks(n)``). Naming an engine is not comparing it: a default argument, a dict key
that registers an adapter under its name (evaluators.accuracy_worker.LM_BUILDERS, recommender.probes.perf._SYNTHETIC_FOLDER) or
a constant that names what an engine's server answers (probes/serve.VLLM_OWNED_BY) are allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from recommender.core.engines import ENGINE_SPECS, ENGINES, engine_spec, engines_running
from recommender.core.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = ("recommender/core/engines.py", "recommender/predict/engines/")
NAMES = frozenset(ENGINES)


def _strings(node: ast.AST):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for e in node.elts:
            yield from _strings(e)


def name_comparisons(source: str, names=NAMES) -> list[tuple[int, str]]:
    """(line, engine name) of every comparison or match case against an engine-name literal in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found = {s for side in (node.left, *node.comparators) for s in _strings(side)} & names
            out += [(node.lineno, n) for n in sorted(found)]
        elif isinstance(node, ast.match_case):
            found = {s for p in ast.walk(node.pattern) if isinstance(p, ast.MatchValue)
                     for s in _strings(p.value)} & names
            out += [(node.pattern.lineno, n) for n in sorted(found)]
    return out


def project_files() -> list[Path]:
    return sorted([*(ROOT / "recommender").rglob("*.py"), *(ROOT / "evaluators").rglob("*.py")])


def test_no_engine_name_comparison_outside_the_engine_modules():
    faults = []
    for path in project_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(ALLOWED):
            continue
        faults += [f"{rel}:{line} compares against {name!r}"
                   for line, name in name_comparisons(path.read_text(encoding="utf-8"))]
    assert not faults, ("ask the engine's record (recommender.core.engines) or its rules (recommender.predict."
                        "engines) instead:\n" + "\n".join(faults))


@pytest.mark.parametrize("code, hits", [
    ('if engine == "llama.cpp": pass', 1),
    ('x = engine != "vllm"', 1),
    ('ok = e in ("hf", "transformers")', 1),
    ('ok = "vllm" not in engines', 1),
    ('match engine:\n    case "llama.cpp":\n        pass', 1),
    ('x = {"vllm": 1}.get(engine)', 0),  # a registry keyed by name
    ('def f(engine="llama.cpp"): pass', 0),  # a default argument names, it does not compare
    ('if family == "gguf": pass', 0),
])
def test_the_walk_finds_comparisons_and_only_them(code, hits):
    assert len(name_comparisons(code)) == hits


def test_the_walk_fails_on_the_code_before_engines_were_records():
    """The code this rule replaced (analytical.py before the rules modules) is caught."""
    before = ('def kv_cache_bytes(spec, ctx, batch, engine="llama.cpp", kv_dtype="f16"):\n'
              '    if engine == "llama.cpp":\n        ctx = pad(ctx)\n'
              '    if engine != "vllm" or kv_dtype not in ("q8_0", "q4_0"):\n        return 0\n')
    assert [n for _, n in name_comparisons(before)] == ["llama.cpp", "vllm"]


def test_every_engine_has_rules_and_an_engine_without_is_refused():
    from recommender.predict.engines import RULES, rules_for

    assert set(RULES) == set(ENGINES), "an EngineSpec without a rules module (or rules without a record)"
    for e in ENGINE_SPECS:
        assert rules_for(e.name).name == e.name
    with pytest.raises(UserError, match="no planning rules"):
        rules_for("ollama")


def test_the_rules_protocol_refuses_an_engine_that_states_no_numbers():
    from recommender.predict.engines.base import EngineRules

    class Partial(EngineRules):  # no decode efficiency, MFU, overheads, buffers: cannot be built
        name = "partial"

    with pytest.raises(TypeError):
        Partial()


def test_lists_derive_from_the_records():
    from evaluators.base import ENGINES as ADAPTERS
    from recommender.model.quant import QUANTS
    from recommender.predict import constants as C
    from recommender.predict.split import ENGINE_MODES

    for q in QUANTS.values():
        assert q.engines == engines_running(q.family)
    for e in ENGINE_SPECS:
        assert C.ENGINE_KV_DTYPES[e.name] == e.kv_dtypes
        assert ENGINE_MODES.get(e.name, ()) == e.split_modes
        assert (e.name in ADAPTERS) == (e.adapter is not None)
        for fam, cc, _why in e.min_compute_capability:
            assert C.MIN_COMPUTE_CAPABILITY[(e.name, fam)][0] == cc
    assert engine_spec("llama.cpp").file_format == "gguf"


def test_accuracy_builders_match_the_records():
    """evaluators.accuracy_worker.LM_BUILDERS registers one builder per record's accuracy backend (read from its
    source: the module imports lm-eval's child-side code)."""
    tree = ast.parse((ROOT / "evaluators" / "accuracy_worker.py").read_text(encoding="utf-8"))
    keys = next([k.value for k in node.value.keys] for node in ast.walk(tree)
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "LM_BUILDERS")
    assert sorted(keys) == sorted(e.accuracy_backend for e in ENGINE_SPECS if e.accuracy_backend)
