"""Each engine's planning rules, one module per engine, behind one protocol (:class:`EngineRules`, base.py).

``rules_for(name)`` is the only way the estimator reaches them: an engine whose record (recommender.core.engines) has
no rules module here is refused with an error, never planned with another engine's numbers. The modules are found
from the records (``EngineSpec.rules_module``), so adding an engine is its record and one module here that defines
``RULES``; tests/house/test_engine_names.py checks that every record has its rules.
"""

from __future__ import annotations

import importlib

from recommender.core.engines import ENGINE_SPECS
from recommender.core.errors import UserError
from recommender.predict.engines.base import EngineRules


def _load() -> dict[str, EngineRules]:
    out: dict[str, EngineRules] = {}
    for e in ENGINE_SPECS:
        if not e.rules_module:
            continue
        try:
            mod = importlib.import_module(f"{__name__}.{e.rules_module}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{e.rules_module}":
                raise  # the module exists and fails to import: a fault, not a missing engine
            continue
        rules = getattr(mod, "RULES", None)
        if isinstance(rules, EngineRules) and rules.name == e.name:
            out[e.name] = rules
    return out


RULES: dict[str, EngineRules] = _load()


def rules_for(engine: str) -> EngineRules:
    """The rules of an engine by its canonical name; a UserError for an engine without rules."""
    r = RULES.get(engine)
    if r is None:
        known = [e.name for e in ENGINE_SPECS]
        raise UserError(f"no planning rules for engine {engine!r} (recommender/predict/engines/ has none)",
                        hint=f"engines with rules: {', '.join(RULES)}" + (
                            "" if engine in known else f"; engines known: {', '.join(known)}"))
    return r
