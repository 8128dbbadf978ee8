"""The counts README.md and docs/ state about the shipped tree, taken from the data at run time.

Each count sits in a marked span, ``<!-- n:NAME -->VALUE<!-- /n -->`` (invisible in rendered Markdown), that this
script rewrites from the shipped catalog, the quantization table and the GPU profiles:

    .venv/bin/python bench/doc_counts.py            # print the counts
    .venv/bin/python bench/doc_counts.py --write    # rewrite every marked span
    .venv/bin/python bench/doc_counts.py --check    # exit 1 if a span is not the data's count (tests/house/test_docs.py)

A rebuilt catalog (models, measured rows, scores added) or a new profile or quantization makes --check fail until
--write is run. Counts of past runs (benchmark logs: "the 38-model catalog of that day") are not marked.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recommender.catalog.build import REFUSED_META_KEY  # noqa: E402
from recommender.catalog.store import Catalog  # noqa: E402
from recommender.core.records import CHAT_CHECKPOINTS  # noqa: E402
from recommender.core.paths import SHIPPED_CATALOG  # noqa: E402
from recommender.hardware.profiles import load_profiles, match_profile  # noqa: E402
from recommender.model.quant import QUANTS  # noqa: E402

SPAN = re.compile(r"<!-- n:([a-z0-9_]+) -->([^<]*)<!-- /n -->")
DESCRIPTIONS = {
    "models": "models in the shipped catalog",
    "chat_models": "models in the shipped catalog whose checkpoint is instruct / chat / hybrid / reasoning",
    "refused_configs": "configs in sources/configs the last build refused, each with a reason (catalog meta)",
    "variants": "(model, quantization) variants in the shipped catalog",
    "published_scores": "published benchmark scores in the shipped catalog",
    "measurements": "measured probe rows in the shipped catalog",
    "h200_rows": "measured rows of the shipped catalog on an NVIDIA H200",
    "h200_models": "models with measured rows on an NVIDIA H200 in the shipped catalog",
    "cpu_rows": "measured rows of the shipped catalog on a CPU (hardware with no GPU profile, or a CPU profile)",
    "quantizations": "quantizations of recommender.model.quant.QUANTS",
    "gpu_profiles": "GPU profiles in profiles/hardware/",
}


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def counts(catalog: Path = SHIPPED_CATALOG) -> dict[str, int]:
    profiles = load_profiles()
    cat = Catalog(catalog)  # the shipped file alone (no user overlay), opened as the tool opens it
    try:
        n = {t: cat.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
             for t in ("models", "variants", "published_scores", "measurements")}
        rows = cat.con.execute("SELECT hardware_name, model_id FROM measurements WHERE status = 'ok'").fetchall()
        # the same test as `catalog list` uses for its "instruct / chat / hybrid / reasoning" count
        n["chat_models"] = sum(1 for s in cat.models().values() if s.checkpoint in CHAT_CHECKPOINTS)
        n["refused_configs"] = len(json.loads(cat.meta().get(REFUSED_META_KEY, "[]")))
    finally:
        cat.close()
    on = [(match_profile(name, profiles), model) for name, model in rows]
    h200 = [model for p, model in on if p is not None and p.name.startswith("H200")]
    n["h200_rows"], n["h200_models"] = len(h200), len(set(h200))
    n["cpu_rows"] = sum(1 for p, _ in on if p is None or p.backend == "cpu")
    n["quantizations"] = len(QUANTS)
    n["gpu_profiles"] = len(profiles)
    assert set(n) == set(DESCRIPTIONS)
    return n


def fmt(v: int) -> str:
    return f"{v:,}"


def rewrite(text: str, values: dict[str, int]) -> tuple[str, list[str]]:
    """The text with every marked span set to its count, and the names of spans with no such count."""
    unknown = [name for name, _ in SPAN.findall(text) if name not in values]
    return SPAN.sub(lambda m: (f"<!-- n:{m[1]} -->{fmt(values[m[1]])}<!-- /n -->" if m[1] in values else m[0]),
                    text), unknown


def stale(values: dict[str, int]) -> list[str]:
    """'file: name says X, the data Y' for every span that is not its count (or names no count)."""
    out = []
    for path in documents():
        for name, shown in SPAN.findall(path.read_text(encoding="utf-8")):
            rel = path.relative_to(ROOT)
            if name not in values:
                out.append(f"{rel}: <!-- n:{name} --> is no count (known: {', '.join(sorted(values))})")
            elif shown != fmt(values[name]):
                out.append(f"{rel}: {name} says {shown}, the data {fmt(values[name])}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the marked spans of README.md and docs/*.md")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a marked span is stale")
    a = ap.parse_args(argv)
    values = counts()
    if a.check:
        bad = stale(values)
        for line in bad:
            print(line, file=sys.stderr)
        if bad:
            print("rerun `python bench/doc_counts.py --write`", file=sys.stderr)
        return 1 if bad else 0
    if a.write:
        for path in documents():
            text = path.read_text(encoding="utf-8")
            new, unknown = rewrite(text, values)
            if unknown:
                print(f"{path.relative_to(ROOT)}: unknown counts {unknown}", file=sys.stderr)
                return 1
            if new != text:
                path.write_text(new, encoding="utf-8")
                print(f"wrote {path.relative_to(ROOT)}")
        return 0
    for name, v in values.items():
        print(f"{name:17} {fmt(v):>7}  {DESCRIPTIONS[name]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
