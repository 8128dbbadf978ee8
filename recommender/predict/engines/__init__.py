"""Each engine's planning rules, one module per engine, behind one protocol (:class:`EngineRules`, base.py).

``rules_for(name)`` is the only way the estimator reaches them: an engine whose record (recommender.core.engines) has
no rules module here is refused with an error, never planned with another engine's numbers. Adding an engine: its
EngineSpec record and one module here that registers in RULES.
"""

from __future__ import annotations

from recommender.core.engines import ENGINE_SPECS
from recommender.core.errors import UserError
from recommender.predict.engines import llama_cpp, transformers, vllm
from recommender.predict.engines.base import EngineRules

RULES: dict[str, EngineRules] = {r.name: r for r in (llama_cpp.RULES, vllm.RULES, transformers.RULES)}


def rules_for(engine: str) -> EngineRules:
    """The rules of an engine by its canonical name; a UserError for an engine without rules."""
    r = RULES.get(engine)
    if r is None:
        known = [e.name for e in ENGINE_SPECS]
        raise UserError(f"no planning rules for engine {engine!r} (recommender/predict/engines/ has none)",
                        hint=f"engines with rules: {', '.join(RULES)}" + (
                            "" if engine in known else f"; engines known: {', '.join(known)}"))
    return r
