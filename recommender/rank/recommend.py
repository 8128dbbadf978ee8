"""Candidates (model x quant x engine x batch x context) -> predictions -> hard constraints -> score -> ranking."""

from __future__ import annotations

import heapq
import math
from typing import Optional

from pydantic import Field

from recommender.core.collector import collector_paused
from recommender.core.engines import engine_spec
from recommender.core.freshness import dated_of, newer_sibling
from recommender.core.records import CatalogReader, Strict
from recommender.rank.candidates import (Candidate, CandidateBuilder, CandidateKey, KeyTable, candidate_keys,
                                         skips_base)
from recommender.rank.launch import launch_recipe
from recommender.rank.query import Query
from recommender.rank.quality import EVIDENCE_ORDER, RISK_QUANTILE, evidence_rows
from recommender.score.order import (STRONGEST_EXCLUDED, choose_batches_arrays, cost_columns, least_parts,
                                     no_fit_notes, over_limit_alternative, over_limit_note, quality_bounds,
                                     quality_values, rank_arrays, unweighed_notes, value_scale)

# The best-first search (best_first): variants built in its first round; each round builds twice as many as the last.
FIRST_ROUND_VARIANTS = 64
# A bound is compared with the shown scores, which are rounded to SCORE_DECIMALS (6): a margin of 1e-6 keeps the
# comparison exact whatever the rounding did (score.order.SCORE_DECIMALS).
BOUND_MARGIN = 1e-6
EVIDENCE_ROWS = 5  # top rows whose accuracy evidence is listed (--explain, the HTML report)


class NewerSibling(Strict):
    """The top pick's newer sibling in the catalog (recommender.core.freshness.newer_sibling), with both release
    dates."""

    model: str
    released: Optional[str]
    sibling: str
    sibling_released: Optional[str]


class Recommendation(Strict):
    query: Query
    candidates: list[Candidate]
    excluded: list[Candidate]  # strongest excluded candidates, with reasons
    counts: dict[str, int]
    notes: list[str] = Field(default_factory=list)
    evidence: list[dict] = Field(default_factory=list)  # the top rows' accuracy evidence (rank.quality.evidence_rows)
    # an offload plan only the latency limit holds back, more accurate than the top pick (score.order.
    # over_limit_alternative), shown beside the answer with what it costs
    alternatives: list[Candidate] = Field(default_factory=list)
    # for the text answer, not in its JSON: the shown models' release dates and the top pick's newer sibling
    released: dict[str, Optional[str]] = Field(default_factory=dict, exclude=True)
    newer_sibling: Optional[NewerSibling] = Field(default=None, exclude=True)


def recommend(catalog: CatalogReader, q: Query, local_weights: Optional[dict[tuple[str, str, str], str]] = None
              ) -> Recommendation:
    """The whole answer to one query: candidates predicted, limits applied, the feasible ones scored and ranked, and
    what the shown rows need to be read - notes, accuracy evidence, launch recipes (each shown row's, with the file
    ``local_weights`` names for its (model, quant, file format) when there is one), release dates, the top pick's
    newer sibling.

    Python's cyclic garbage collector is paused meanwhile: the ~10,000 candidate records are freed by reference
    counting as usual, and its full passes over them (they all stay alive until ranked) took about a quarter of the
    time."""
    with collector_paused():
        return _recommend(catalog, q, local_weights or {})


def _recommend(catalog: CatalogReader, q: Query, local_weights: dict[tuple[str, str, str], str]) -> Recommendation:
    """Top-down: the candidates (rank), ranked (score), the shown rows dressed (rank), then the notes."""
    import numpy as np  # noqa: PLC0415  (numpy where configurations are ranked as arrays)

    builder = CandidateBuilder(catalog, q)
    keys = candidate_keys(q, builder)
    # every configuration's figures as arrays (the vectorized Predictor), ranked as arrays; records for the rows shown
    table = builder.table(keys)
    if q.normalization == "value":  # every score is the candidate's own: the best first, until none can be shown
        idx, result = best_first(keys, table, q)
    else:  # min-max, z-score: every row moves the scale, so every row takes part (as numbers)
        idx = list(range(len(keys)))
        table.fill(idx)
        result = rank_arrays(table.columns(), idx, q)
    ranked, strongest = shown_records(table, result)
    feasible = result[2]
    cols = cost_columns(table.columns(), q.normalization)
    answer = unweighed_notes(q.weights, q.normalization, q.workload.rank_by == "goodput",
                             lambda key: bool((~np.isnan(cols[key][feasible])).any())) if len(feasible) else []
    if not ranked:  # nothing fits: the notes read every exclusion's reasons (an unknown latency among them)
        answer += no_fit_notes([c for c in (table.record(i) for i in idx) if c.excluded])
    # the partial-offload plans among the rows taken up (score.order.over_limit_alternative reads only those)
    alt = over_limit_alternative([table.row(i) for i in idx if keys[i].gpu_layers is not None] if ranked else [],
                                 ranked, q)
    if alt is not None and hasattr(alt, "_table"):  # a row of the vectorized Predictor: shown as its record
        alt = alt.full()
    alt_note = over_limit_note(alt, ranked[0], q) if alt is not None else None
    value = q.normalization == "value"
    evidence = evidence_rows(builder.tasks, ranked[:EVIDENCE_ROWS], tuple(q.workload.accuracy_tasks)) if value else []
    for c in ranked:  # the rows shown: how to run each (recommender.rank.launch), from a file found here if any
        c.launch = launch_recipe(c, q.hardware, q.machine,
                                 local_weights=local_weights.get((c.model, c.quant, engine_spec(c.engine).file_format)),
                                 load_mode=q.load_mode)
    for c in (*strongest, *([alt] if alt is not None else [])):
        c.launch = launch_recipe(c, q.hardware, q.machine, load_mode=q.load_mode)
    notes = _notes(builder, q, answer, ranked, evidence) + ([alt_note] if alt_note is not None else [])
    offload = sum(k.gpu_layers is not None for k in keys)
    return Recommendation(query=q, candidates=ranked, excluded=strongest,
                          # candidates: the grid (tune's, with --no-offload); offload: the partial-offload
                          # configurations added to it (candidate_keys), among the predicted ones when shown
                          counts={"candidates": len(keys) - offload, "offload": offload,
                                  "predicted": len(idx), "feasible": len(feasible),
                                  "excluded": len(idx) - len(feasible), "models": len({k.model for k in keys})},
                          notes=notes, alternatives=[alt] if alt is not None else [], evidence=evidence,
                          released={c.model: builder.models[c.model].release_date for c in ranked},
                          newer_sibling=top_sibling(builder.models, ranked[0].model) if ranked else None)


def _notes(builder: CandidateBuilder, q: Query, answer: list[str], ranked: list, evidence: list[dict]) -> list[str]:
    """What the user should know about the answer: stale calibrations, ``answer`` (score.order.unweighed_notes: weights
    with nothing to weigh; no_fit_notes: why nothing fits), base checkpoints left out, the top pick's accuracy evidence
    (``evidence``: the top rows' evidence_rows)."""
    notes = []
    if builder.predictor.stale:
        notes.append(f"{builder.predictor.stale} stored calibration(s) come from another version and were ignored: "
                     f"rerun `recommender calibrate` on that machine")
    notes += answer
    base = [m for m, spec in builder.models.items() if not builder.wanted and skips_base(q, spec, builder.wanted)]
    if base:
        notes.append(f"{len(base)} base (not chat-tuned) or classifier checkpoint(s) not ranked for the {q.workload.name} workload: "
                     f"add --include-base, or name one with --model")
    if q.normalization == "value" and ranked:
        top = ranked[0].figures["task_accuracy"]
        notes.append(f"task accuracy = {' + '.join(q.workload.accuracy_tasks)} (en: Open LLM Leaderboard v2 scale, "
                     f"zh: C-Eval %), in points; docs/scoring.md")
        ev = [e["evidence"] for e in evidence[:2]]
        ranked_fig = ranked[0].figures.get("task_accuracy_ranked")
        notes.append(f"the top pick's task accuracy is {ev[0]} ({top.value:.1f}"
                     + (f", 95 % interval {top.interval[0]:.1f}-{top.interval[1]:.1f}" if top.interval else "")
                     + f"); ranked on {RISK_QUANTILE[q.risk]} (--risk {q.risk})"
                     + (f" = {ranked_fig.value:.1f}" if ranked_fig is not None and ranked_fig.value is not None else ""))
        if len(ev) > 1 and EVIDENCE_ORDER.index(ev[0]) > EVIDENCE_ORDER.index(ev[1]):
            notes.append(f"the top pick's accuracy evidence ({ev[0]}) is weaker than #2's ({ranked[1].model}: "
                         f"{ev[1]})")
        if ev[0] == "estimated":
            notes.append("measure the top pick's accuracy with `recommender probe accuracy`")
    return notes


def top_sibling(models: dict, model_id: str) -> Optional[NewerSibling]:
    """The newer sibling of ``model_id`` among the catalog's ``models`` (recommender.core.freshness), or None."""
    sib = newer_sibling(dated_of(models[model_id]), [dated_of(s) for s in models.values()])
    return None if sib is None else NewerSibling(model=model_id, released=models[model_id].release_date,
                                                 sibling=sib.id, sibling_released=sib.release_date)


def best_first(keys: list[CandidateKey], table: KeyTable, q: Query) -> tuple[list[int], tuple]:
    """(the keys taken up, in enumeration order; score.order.rank_arrays' (ranked, strongest excluded, feasible) of
    them) of a value-method query, taking up only the variants (model x quant) that can be shown.

    A variant's quality alone bounds the score of each of its configurations from below, and a model's quality floor
    (CandidateBuilder.quality_floor: no quantization cost) bounds each of its variants (score.order.quality_bounds).
    Models and variants wait in one queue by bound: a model taken from it puts its variants in, a variant taken is
    built (every engine, context and batch of it). Each round builds twice as many variants as the last and ranks
    what is built so far; the search stops when the smallest bound left is above both the last ranked score (q.top
    rows) and the STRONGEST_EXCLUDED-th strongest excluded one: no configuration left could enter either list, or
    tie with a row in it. The answer - ranked rows, strongest excluded, their scores and figures - is the full
    enumeration's (tests/predict/test_prepass.py); only the counts of feasible and excluded configurations cover the
    predicted ones alone. Each configuration keeps its place in the enumeration, so ties are broken as in the full
    list.

    When one of the two lists stays shorter than its length whatever is taken up (fewer models than q.top could be
    ranked: on a CPU most fit no limit), that search stops only when the queue is empty, so every key is taken up.
    The answer is then searched with tighter bounds (_rounds with ``least``): the vector path has predicted every
    configuration it covers, so whether a limit excludes each is known, and its latency and memory u. A variant
    waits in a queue of bounds over its feasible configurations, which the last ranked score stops, and in one over
    its excluded ones, which the strongest excluded stop, each adding to its quality the least latency and memory u
    of those configurations (score.order.least_parts; one the vector path left out counts at its best case in both).
    The keys taken up, and so the counts, are still every key."""
    import numpy as np  # noqa: PLC0415  (numpy where configurations are ranked as arrays)

    builder = table.builder
    cols = table.columns()
    vcode, mcode, known = table.variant_codes(), cols["model"], table.vectorized
    # each variant's first key and its model, by code; each model's variants
    first = np.full(int(vcode.max()) + 1 if len(vcode) else 0, len(keys), dtype=np.int64)
    np.minimum.at(first, vcode, np.arange(len(keys)))
    v_model = mcode[first].tolist()
    by_model: dict[int, list[int]] = {}
    for v, m in enumerate(v_model):
        by_model.setdefault(m, []).append(v)
    names = table.variant_names()
    # quality first (the builder's figures), then the scores that bound it (score.order)
    floors = {m: builder.quality_floor(names[vs[0]][0]) for m, vs in by_model.items()}
    scale = value_scale(q)
    memo: dict = {}  # value-method scores of the built rows, kept between rounds (score.order.rank_arrays)
    could = ((~cols["blocked"]) | ~known, cols["blocked"] | ~known)  # could be ranked, could be excluded
    n_models = int(mcode.max()) + 1 if len(mcode) else 0
    per_model = np.bincount(mcode[could[0]], minlength=n_models)
    short = (int((np.minimum(per_model, q.per_model) if q.per_model > 0 else per_model).sum()) < q.top
             or len(set(mcode[could[1]].tolist())) < STRONGEST_EXCLUDED)
    least = None
    if short:  # (each variant's, each model's) least u and whether it has such rows: feasible ones, excluded ones
        parts = least_parts(cols, q, scale, known, [(code, rows) for rows in could for code in (vcode, mcode)])
        least = [parts[:2], parts[2:]]
    built = np.zeros(len(keys), dtype=bool)
    search = _Rounds(builder, q, scale, names, vcode, first.tolist(), by_model, floors, least)
    for taken, heads in search:
        # the figures ranking reads of this round's variants (the vector path has the rest; a record over the
        # memory budget is predicted only if its score's lower bound could place it: KeyTable.fill's defer)
        table.fill(taken, defer=True)
        built[taken] = True
        answer = rank_arrays(cols, np.flatnonzero(built), q, memo, resolve=table.resolve)
        if _stops(heads, answer, q):
            break
    if not short:
        return np.flatnonzero(built).tolist(), answer
    idx = np.arange(len(keys))  # every key taken up, as the quality-only search does
    table.fill(idx[~known], defer=True)  # the records of the rest: which limits exclude them
    feasible = idx[~cols["blocked"]]
    if q.workload.rank_by == "goodput":
        feasible = choose_batches_arrays(cols, feasible)
    table.fill(feasible)  # their quality figures (recommend's notes of weights with nothing to weigh read them)
    return idx.tolist(), (answer[0], answer[1], feasible)


def _stops(heads: tuple, answer: tuple, q: Query) -> bool:
    """Whether a search whose smallest bounds left are ``heads`` (of the configurations that could be ranked, of those
    that could be excluded; None: none left) stops at rank_arrays' ``answer``: each bound above the score its list
    needs, the last ranked one's (q.top rows) and the STRONGEST_EXCLUDED-th strongest excluded one's (a list still
    short takes any)."""
    ranked, strongest, _ = answer
    last = ranked[-1][1] if ranked and len(ranked) >= q.top else math.inf
    kth = strongest[-1][1] if len(strongest) >= STRONGEST_EXCLUDED else math.inf
    return all(h is None or h > s + BOUND_MARGIN for h, s in zip(heads, (last, kth)))


class _Rounds:
    """best_first's rounds, iterated: each gives (the keys of the variants it takes up, the smallest bounds left: of
    the configurations that could be ranked, of those that could be excluded; None when none is left). Variants and
    models are their codes (KeyTable.variant_codes, columns' model codes): ``names`` each variant's (model, quant),
    ``vcode`` each key's variant, ``first`` each variant's first key; ``by_model`` each model's variants, ``floors`` its quality floor.
    ``least`` None: one queue of quality-only bounds (both heads its head). Else a queue of the feasible
    configurations' bounds and one of the excluded ones' (``least``: for each, score.order.least_parts of the
    variants and of the models), taken up from whichever has the smaller head."""

    def __init__(self, builder: CandidateBuilder, q: Query, scale, names: list, vcode, first: list, by_model: dict,
                 floors: dict, least: Optional[list]) -> None:
        self.builder, self.q, self.scale, self.names, self.vcode, self.first = builder, q, scale, names, vcode, first
        self.by_model, self.least = by_model, least
        self.queues: list[list[tuple]] = [[] for _ in (least or [None])]  # (bound, first key, 0 model | 1 variant,
        self.done: set = set()  # code); the models put in and the variants taken up (from either queue)
        with_floor = [m for m, f in floors.items() if f is not None]
        self._put(with_floor, [quality_values(floors[m]) for m in with_floor],
                  [first[by_model[m][0]] for m in with_floor], 0)
        self._put_variants([v for m, f in floors.items() if f is None for v in by_model[m]])

    def _put(self, items: list, values: list, firsts: list, kind: int) -> None:
        q, scale = self.q, self.scale
        if self.least is None:
            for b, item, f in zip(quality_bounds(values, q, scale), items, firsts):
                heapq.heappush(self.queues[0], (b, f, kind, item))
            return
        for queue, per in zip(self.queues, self.least):
            lp, has = per[1 if kind == 0 else 0]
            for b, item, f in zip(quality_bounds(values, q, scale, {c: u[items] for c, u in lp.items()}), items,
                                  firsts):
                if has[item]:
                    heapq.heappush(queue, (b, f, kind, item))

    def _put_variants(self, vs: list[int]) -> None:
        self._put(vs, [self.builder.quality_costs(*self.names[v]) for v in vs], [self.first[v] for v in vs], 1)

    def _pop(self) -> Optional[tuple]:
        """The entry of the smallest bound left (None: none left), taken out of its queue."""
        if self.least is None:
            return heapq.heappop(self.queues[0]) if self.queues[0] else None
        best = None
        for queue in self.queues:
            while queue and (queue[0][2], queue[0][3]) in self.done:
                heapq.heappop(queue)
            if queue and (best is None or queue[0] < best[0]):
                best = queue
        if best is None:
            return None
        entry = heapq.heappop(best)
        self.done.add((entry[2], entry[3]))
        return entry

    def _heads(self) -> list:
        for queue in self.queues:
            while queue and (queue[0][2], queue[0][3]) in self.done:
                heapq.heappop(queue)
        hs = [queue[0][0] if queue else None for queue in self.queues]
        return hs * 2 if self.least is None else hs

    def __iter__(self):
        import numpy as np  # noqa: PLC0415  (numpy where configurations are ranked as arrays)
        step = FIRST_ROUND_VARIANTS
        while True:
            n, taken = 0, np.zeros(len(self.first), dtype=bool)
            while n < step:
                entry = self._pop()
                if entry is None:
                    break
                if entry[2] == 0:
                    self._put_variants(self.by_model[entry[3]])
                    continue
                taken[entry[3]] = True
                n += 1
            step *= 2
            heads = self._heads()
            yield np.flatnonzero(taken[self.vcode]), heads
            if all(h is None for h in heads):
                return


def shown_records(table: KeyTable, answer: tuple) -> tuple[list[Candidate], list[Candidate]]:
    """The records of score.order.rank_arrays' ranked and strongest excluded rows, with their rank and scores."""
    ranked = []
    for r, (i, score, parts) in enumerate(answer[0], 1):
        c = table.record(i)
        c.score, c.score_parts, c.rank = score, parts, r
        ranked.append(c)
    strongest = [table.record(i).model_copy(update={"score": score, "score_parts": parts})
                 for i, score, parts in answer[1]]
    return ranked, strongest
