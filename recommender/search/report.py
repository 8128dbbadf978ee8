"""What `recommend --report` shows, computed: every feasible candidate with its quality, latency and memory figures,
the Pareto front over those three, the weight sensitivity (tornado), and the exclusion reasons counted.

Figures are read through the Figure records (docs/json.md: ``candidate.figures[name]`` with value and provenance),
never through scoring internals, so the report follows whatever the ranking's figures are."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from recommender.core.records import CatalogReader
from recommender.rank.candidates import Candidate, enumerate_candidates
from recommender.rank.query import LATENCY_FIELD, Query
from recommender.search.sensitivity import analyse, DEFAULT_SPAN, DEFAULT_STEP

# Quality figures the chart can put on its y axis: (figure, weight key, unit, higher is better).
# (figure, weight it follows, unit, higher is better): under value the score weighs the workload's task accuracy
# (acc), so the chart plots that figure, with its interval
QUALITY_AXES = (("task_accuracy", "acc", "points", True), ("zh_accuracy", "zh", "%", True),
                ("en_accuracy", "en", "%", True), ("ppl_ratio", "ppl", "ratio", False))


@dataclass
class Point:
    candidate: Candidate
    quality: float
    latency_ms: float
    memory_bytes: float
    on_front: bool = False
    interval: Optional[tuple[float, float]] = None  # the quality figure's 95 % interval, where it has one


@dataclass
class ReportData:
    query: Query
    feasible: int
    total: int
    quality_figure: Optional[str]
    quality_unit: str
    quality_higher_better: bool
    latency_figure: str
    points: list[Point]
    unplotted: dict[str, int]  # why a feasible candidate is not on the chart -> count
    exclusion_reasons: list[tuple[str, int]]  # reason (numbers masked) -> candidates, most common first
    sensitivity: list = field(default_factory=list)  # NormalizationSensitivity records
    sensitivity_step: float = DEFAULT_STEP
    sensitivity_span: float = DEFAULT_SPAN


def dominates(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    """a is at least as good as b on every axis (all costs: lower is better) and better on one."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def pareto_front(costs: Sequence[tuple[float, float, float]]) -> list[bool]:
    """For each cost vector, whether no other one dominates it (sorted sweep: O(n² ) worst case, n ≤ a few
    thousand candidates)."""
    order = sorted(range(len(costs)), key=lambda i: costs[i])
    front: list[int] = []
    out = [False] * len(costs)
    for i in order:  # a dominator sorts before what it dominates
        if not any(dominates(costs[j], costs[i]) for j in front):
            front.append(i)
            out[i] = True
    return out


def _quality_axis(feasible: list[Candidate], weights: dict[str, float]) -> Optional[tuple[str, str, bool]]:
    """The quality figure with the largest weight that some feasible candidate has a value for."""
    axes = sorted(QUALITY_AXES, key=lambda a: -weights.get(a[1], 0.0))
    for name, _, unit, higher in axes:
        if any(_value(c, name) is not None for c in feasible):
            return name, unit, higher
    return None


def _value(c: Candidate, name: str) -> Optional[float]:
    f = c.figures.get(name)
    return None if f is None else f.value


def _reason_kind(reason: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "#", reason).strip()


def report_data(catalog: CatalogReader, q: Query, with_sensitivity: bool = True) -> ReportData:
    cands = enumerate_candidates(catalog, q)
    feasible = [c for c in cands if not c.excluded]
    lat = LATENCY_FIELD[q.latency_metric]
    axis = _quality_axis(feasible, q.weights)
    points, unplotted = [], {}
    for c in feasible:
        qv, lv, mv = (_value(c, axis[0]) if axis else None), _value(c, lat), _value(c, "total_vram_bytes")
        missing = [n for n, v in (("quality", qv), ("latency", lv), ("memory", mv)) if v is None]
        if missing:
            k = "unknown " + " and ".join(missing)
            unplotted[k] = unplotted.get(k, 0) + 1
            continue
        f = c.figures.get(axis[0])
        points.append(Point(c, float(qv), float(lv), float(mv), interval=f.interval if f is not None else None))
    if points:
        higher = axis[2]
        flags = pareto_front([(-p.quality if higher else p.quality, p.latency_ms, p.memory_bytes) for p in points])
        for p, f in zip(points, flags):
            p.on_front = f
    counts: dict[str, int] = {}
    for c in cands:
        for r in c.excluded:
            k = _reason_kind(r)
            counts[k] = counts.get(k, 0) + 1
    sens = []
    if with_sensitivity and len(feasible) > 1:
        sens, _ = analyse(feasible, q, DEFAULT_STEP, DEFAULT_SPAN, [q.normalization])
    return ReportData(q, len(feasible), len(cands), axis[0] if axis else None, axis[1] if axis else "",
                      axis[2] if axis else True, lat, points, unplotted,
                      sorted(counts.items(), key=lambda kv: -kv[1]), sens)
