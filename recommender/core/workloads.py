"""Workload presets (profiles/workloads/*.yaml), strictly validated."""

from __future__ import annotations

from pathlib import Path
from typing import Optional


from recommender.core.errors import UserError
from recommender.core.fuzzy import resolve
from recommender.core.paths import PROFILES_DIR
from recommender.core.records import Workload

DEFAULT_WORKLOAD = "chat"


def load_workloads(directory: Optional[Path] = None) -> dict[str, Workload]:
    import yaml  # noqa: PLC0415
    from pydantic import ValidationError  # noqa: PLC0415

    directory = directory or PROFILES_DIR / "workloads"
    out = {}
    for p in sorted(directory.glob("*.yaml")):
        try:
            data = yaml.load(p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            wl = Workload.model_validate(data)
        except (yaml.YAMLError, ValidationError, TypeError) as e:
            first = str(e).splitlines()
            raise UserError(f"invalid workload profile {p}: {' '.join(first[:3])}",
                            hint="fix the YAML; fields: name, prompt_tokens, output_tokens, contexts, batches") from None
        out[wl.name] = wl
    return out


def get_workload(name: str, directory: Optional[Path] = None) -> Workload:
    wls = load_workloads(directory)
    key = resolve(name, wls.keys(), "workload", hint_cmd=f"workloads: {', '.join(sorted(wls))}")
    return wls[key]
