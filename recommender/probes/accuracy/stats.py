"""Intervals, paired deltas and validity guards for multiple-choice accuracy (pure Python; no scipy needed).

Accuracy p = correct / n (the mean lm-eval reports). Its 95 % interval is a Wilson score interval (Wilson 1927) on
the effective sample size of a subject-stratified sample (Kish's design effect; Korn & Graubard 1998):

    var_strat = Σ_h (n_h/n)² · s_h² / n_h,    s_h² = p_h (1 − p_h) · n_h / (n_h − 1)   (subjects h with n_h ≥ 2;
                                                  subjects with one item are pooled into one stratum)
    n_eff = p (1 − p) / var_strat   (n when var_strat is 0 or p is 0 or 1)

Items are allocated to subjects in proportion to their size, so n_h/n is the subject's weight. No finite-population
correction: the interval is for the model's accuracy on questions like these, and so is conservative as an interval
for the full-set score (bench/accuracy_subsets.py measures how often it covers the full set).

Paired difference of two variants on the same items (b = their accuracy minus the baseline's): flips
n10 (baseline right, variant wrong) and n01 (baseline wrong, variant right); delta = (n01 − n10)/n; interval:
Wald on the paired table after adding 1/2 to each of its four cells (Agresti & Min 2005, "Simple improved confidence
intervals for comparing matched proportions", Stat. Med. 24:729); McNemar's exact p-value = two-sided binomial test
of n01 against n01 + n10 at 1/2.
"""

from __future__ import annotations

import math
from typing import Optional

Z95 = 1.959963984540054  # standard normal 97.5 % quantile
EQUAL_LL_TOL = 1e-6  # options whose log-likelihoods differ by less than this are "scored equal"
BROKEN_SHARE = 0.5  # share of items with all options equal that marks the log-prob path as broken
POSITION_BIAS_SHARE = 0.9  # share of items answered with one letter that is flagged as position bias


def wilson(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    if n <= 0:
        return 0.0, 1.0
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0)) / d
    return max(0.0, c - h), min(1.0, c + h)


def stratified(records: list[dict]) -> dict:
    n = len(records)
    k = sum(1 for r in records if r["correct"])
    p = k / n if n else 0.0
    strata: dict[str, list[bool]] = {}
    for r in records:
        strata.setdefault(r["subject"], []).append(bool(r["correct"]))
    pooled: list[bool] = []
    groups = []
    for v in strata.values():
        (groups.append(v) if len(v) >= 2 else pooled.extend(v))
    if len(pooled) >= 2:
        groups.append(pooled)
    elif pooled:  # a single left-over item: joins the smallest stratum
        if groups:
            min(groups, key=len).extend(pooled)
        else:
            groups.append(pooled)
    var = 0.0
    for g in groups:
        nh = len(g)
        ph = sum(g) / nh
        s2 = ph * (1 - ph) * nh / (nh - 1) if nh > 1 else p * (1 - p)
        var += (nh / n) ** 2 * s2 / nh
    n_eff = p * (1 - p) / var if var > 0 and 0 < p < 1 else float(n)
    lo, hi = wilson(p, n_eff)
    return {"n": n, "correct": k, "accuracy": p, "ci_low": lo, "ci_high": hi, "n_eff": n_eff,
            "strata": len(groups)}


def per_subject(records: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in records:
        d = out.setdefault(r["subject"], {"n": 0, "correct": 0, "category": r.get("category", "")})
        d["n"] += 1
        d["correct"] += int(bool(r["correct"]))
    for d in out.values():
        d["accuracy"] = d["correct"] / d["n"]
    return dict(sorted(out.items()))


def binom_two_sided(k: int, n: int) -> float:
    """Exact two-sided binomial test at p = 1/2 (McNemar's exact test on the discordant pairs)."""
    if n == 0:
        return 1.0
    k = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def binom_upper_tail(k: int, n: int, p: float) -> float:
    """P(X >= k), X ~ Binomial(n, p): the one-sided p-value of 'better than chance'."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))


class ItemMismatch(ValueError):
    pass


def paired(base: list[dict], other: list[dict]) -> dict:
    """Paired comparison of `other` against `base` on identical items (else ItemMismatch)."""
    ids_b = [r["id"] for r in base]
    ids_o = [r["id"] for r in other]
    if ids_b != ids_o:
        only_b = len(set(ids_b) - set(ids_o))
        only_o = len(set(ids_o) - set(ids_b))
        raise ItemMismatch(f"the two runs scored different items ({len(ids_b)} vs {len(ids_o)}; "
                           f"{only_b} only in the baseline, {only_o} only in the other)")
    n = len(ids_b)
    n11 = n10 = n01 = n00 = 0
    for a, b in zip(base, other):
        if a["correct"] and b["correct"]:
            n11 += 1
        elif a["correct"]:
            n10 += 1
        elif b["correct"]:
            n01 += 1
        else:
            n00 += 1
    delta = (n01 - n10) / n if n else 0.0
    # Agresti-Min: +0.5 to each cell
    a, b, c, d = n11 + .5, n10 + .5, n01 + .5, n00 + .5
    m = a + b + c + d
    dm = (c - b) / m
    se = math.sqrt(max(((b + c) - (c - b) ** 2 / m) / m ** 2, 0.0))
    return {"n": n, "delta": delta, "ci_low": max(-1.0, dm - Z95 * se), "ci_high": min(1.0, dm + Z95 * se),
            "both_right": n11, "baseline_only_right": n10, "other_only_right": n01, "both_wrong": n00,
            "flips": n10 + n01, "mcnemar_p": binom_two_sided(n01, n01 + n10)}


def guards(records: list[dict], summary: dict, chance: float = 0.25) -> list[dict]:
    """Validity flags: each {'flag', 'message'}. 'broken-logprobs' makes a score unusable."""
    flags = []
    n = len(records)
    if not n:
        return [{"flag": "no-items", "message": "no items were scored"}]
    equal = sum(1 for r in records
                if not all(math.isfinite(x) for x in r["loglikelihoods"])
                or max(r["loglikelihoods"]) - min(r["loglikelihoods"]) < EQUAL_LL_TOL)
    if equal / n >= BROKEN_SHARE:
        flags.append({"flag": "broken-logprobs",
                      "message": f"{equal} of {n} items had every option scored equal (or not finite): the "
                                 f"log-probability path is broken, the accuracy is meaningless"})
    p_chance = binom_upper_tail(summary["correct"], n, chance)
    if summary["ci_low"] <= chance:
        flags.append({"flag": "chance",
                      "message": f"accuracy {100 * summary['accuracy']:.1f} % is indistinguishable from chance "
                                 f"({100 * chance:.0f} %): its 95 % interval reaches it (P(≥{summary['correct']}"
                                 f"/{n} by guessing) = {p_chance:.2f})"})
    picks: dict[int, int] = {}
    for r in records:
        picks[r["pick"]] = picks.get(r["pick"], 0) + 1
    top, cnt = max(picks.items(), key=lambda kv: kv[1])
    if cnt / n >= POSITION_BIAS_SHARE and not any(f["flag"] == "broken-logprobs" for f in flags):
        flags.append({"flag": "position-bias",
                      "message": f"option {'ABCD'[top]} was picked for {cnt} of {n} items: the model answers by "
                                 f"position, not content"})
    return flags


def summarize(records: list[dict], chance: float = 0.25) -> dict:
    s = stratified(records)
    s["chance"] = chance
    s["p_value_vs_chance"] = binom_upper_tail(s["correct"], s["n"], chance) if s["n"] else None
    s["flags"] = guards(records, s, chance)
    s["per_subject"] = per_subject(records)
    return s


def fmt_pct(x: Optional[float]) -> str:
    return "?" if x is None else f"{100 * x:.1f}"
