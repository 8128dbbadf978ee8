"""Quality terms of the score: Chinese-task accuracy, English accuracy, and the perplexity cost of quantization.

- ``zh``: C-Eval accuracy, else C-Eval (non-thinking), else CMMLU (percent). A score of this checkpoint comes first
  (the publisher's own before a THIRD-PARTY one, then 5-shot before unstated before 0-shot); a base/instruct sibling's
  score is used only when the checkpoint has none on these benchmarks, and says so.
- ``en``: MMLU (5-shot preferred), same rules. Not weighted by default (weight ``en`` = 0).
- ``ppl``: relative perplexity of the quantized weights against the same model's 16-bit weights,
  ``ppl(quant) / ppl(f16)``. Absolute perplexities of different models are not comparable (different tokenizers), the
  ratio is: it measures the damage quantization does. Source: the median ratio over the published llama.cpp
  wikitext perplexities of the Qwen2 GGUF family (Qwen2-{0.5B,1.5B,7B,57B-A14B,72B}-Instruct-GGUF model card).
  16-bit variants are 1.0 by definition; quantizations without a published figure are unknown.

Measured figures (``recommender probe accuracy``, docs/accuracy.md) come first: for a model AND quantization with an
ok accuracy row (not flagged ``broken-logprobs``), ``zh`` is its C-Eval (else CMMLU) accuracy and ``en`` its MMLU
accuracy — the row with the most items, then the newest — marked ``measured``, with the item file, its checksum, n,
the 95 % interval and any guard flag in the basis. ``ppl`` is measured when the same model has perplexity rows of
this quantization and of a 16-bit variant on the same shipped texts: ``exp((NLL_q - NLL_16) / tokens)`` over the
texts (same tokenizer, same tokens), the ratio the published figure estimates. Bits-per-byte is shown by the probe
for comparisons across models (tokenizer-fair) but is not the score's ``ppl`` term: across models it would mostly
re-measure model quality, which ``zh``/``en`` already carry; the ratio isolates what quantization costs.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Optional


from recommender.core.records import CatalogReader, Figure, ScoreRow

ZH_BENCHMARKS = ("C-Eval", "C-Eval (non-thinking)", "CMMLU")
EN_BENCHMARKS = ("MMLU",)
_SHOT_ORDER = {"5": 0, None: 1, "": 1, "0": 2}
_FLOAT_QUANTS = {"F16", "BF16"}
_GGUF_PPL_RE = re.compile(r"^(?P<model>.+)-GGUF:(?P<quant>[a-z0-9_]+)$")


def _pick(rows: list[ScoreRow], benchmarks: tuple[str, ...]) -> Optional[ScoreRow]:
    cands = [r for r in rows if r.benchmark in benchmarks]
    if not cands:
        return None
    cands.sort(key=lambda r: (r.relation != "same", benchmarks.index(r.benchmark), "THIRD-PARTY" in r.flags,
                              "SECONDARY" in r.flags, _SHOT_ORDER.get(r.shots, 3)))
    return cands[0]


def _metric(row: Optional[ScoreRow], model_id: str) -> Figure:
    if row is None:
        return Figure(value=None, unit="%", provenance="unknown", basis="no published score for this model")
    parts = [f"{row.benchmark}" + (f" {row.shots}-shot" if row.shots else " (shots not stated)"),
             f"source: {row.source_url}"]
    if row.relation == "sibling":
        parts.append(f"score of sibling checkpoint {row.source_model}, same architecture, not {model_id}")
    if row.flags:
        parts.append("flags: " + ",".join(row.flags))
    return Figure(value=row.score, unit="%", provenance="published", basis="; ".join(parts))


MEASURED_ZH_TASKS = ("ceval", "cmmlu")
MEASURED_EN_TASKS = ("mmlu",)
_TASK_LABEL = {"ceval": "C-Eval val", "cmmlu": "CMMLU test", "mmlu": "MMLU test"}


def _measured_metric(rows: list[dict], tasks: tuple[str, ...]) -> Optional[Figure]:
    cands = [r for r in rows if r["task"] in tasks and "broken-logprobs" not in (r["flags"] or "")]
    if not cands:
        return None
    r = min(cands, key=lambda r: (tasks.index(r["task"]), -r["n"]))  # rows arrive newest first: min is stable
    flags = [f for f in (r["flags"] or "").split(",") if f]
    basis = (f"{_TASK_LABEL[r['task']]} {r['shots']}-shot, {r['items_file']} (n={r['n']}, sha256 "
             f"{r['items_sha256'][:12]}), 95 % CI [{100 * r['ci_low']:.1f}, {100 * r['ci_high']:.1f}] %, "
             f"{r['variant']} on {r['engine']} {r['engine_version']}, {r['hardware_name']}, {r['measured_at']}, "
             f"row {r['id']}" + (f"; flags: {','.join(flags)}" if flags else ""))
    return Figure(value=round(100 * r["accuracy"], 2), unit="%", provenance="measured", basis=basis)


class QualityIndex:
    """Quality lookups over one catalog, computed once per run."""

    def __init__(self, catalog: CatalogReader) -> None:
        self.catalog = catalog
        self._zh: dict[tuple, Figure] = {}
        self._en: dict[tuple, Figure] = {}
        self._published: dict[tuple[str, tuple[str, ...]], Figure] = {}  # (model, benchmarks): same for every quant
        self._ppl = self._ppl_ratios()
        acc, ppl = catalog.measured_quality()
        self._acc: dict[tuple[str, str], list[dict]] = {}
        for r in acc:
            self._acc.setdefault((r["model_id"], r["quant"]), []).append(r)
        self._ppl_rows: dict[str, list[dict]] = {}
        for r in ppl:
            self._ppl_rows.setdefault(r["model_id"], []).append(r)

    def zh(self, model_id: str, quant: Optional[str] = None) -> Figure:
        key = (model_id, quant)
        if key not in self._zh:
            m = _measured_metric(self._acc.get(key, []), MEASURED_ZH_TASKS) if quant else None
            self._zh[key] = m or self._published_metric(model_id, ZH_BENCHMARKS)
        return self._zh[key]

    def en(self, model_id: str, quant: Optional[str] = None) -> Figure:
        key = (model_id, quant)
        if key not in self._en:
            m = _measured_metric(self._acc.get(key, []), MEASURED_EN_TASKS) if quant else None
            self._en[key] = m or self._published_metric(model_id, EN_BENCHMARKS)
        return self._en[key]

    def _published_metric(self, model_id: str, benchmarks: tuple[str, ...]) -> Figure:
        key = (model_id, benchmarks)
        if key not in self._published:
            self._published[key] = _metric(_pick(self.catalog.scores_for(model_id), benchmarks), model_id)
        return self._published[key]

    def measured_ppl_ratio(self, model_id: str, quant: str) -> Optional[Figure]:
        rows = self._ppl_rows.get(model_id)
        if not rows or quant in _FLOAT_QUANTS:
            return None
        latest: dict[tuple[str, str], dict] = {}
        for r in rows:  # newest first: the first row per (quant, text) wins
            latest.setdefault((r["quant"], r["text_sha256"]), r)
        for ref_q in ("BF16", "F16"):
            pairs = [(latest[(quant, t)], latest[(ref_q, t)]) for (q, t) in latest
                     if q == quant and (ref_q, t) in latest and latest[(ref_q, t)]["tokens"] == latest[(quant, t)]["tokens"]]
            if pairs:
                tokens = sum(a["tokens"] for a, _ in pairs)
                ratio = math.exp(sum(a["nll_nats"] - b["nll_nats"] for a, b in pairs) / tokens)
                return Figure(value=round(ratio, 5), unit="ratio", provenance="measured",
                              basis=f"exp((NLL_{quant} - NLL_{ref_q})/tokens) over {len(pairs)} shipped text(s), "
                                    f"{tokens} tokens: {', '.join(a['text_file'] for a, _ in pairs)}; rows "
                                    f"{', '.join(a['id'] for a, _ in pairs)}")
        return None

    def ppl_ratio(self, quant: str, model_id: Optional[str] = None) -> Figure:
        if model_id:
            m = self.measured_ppl_ratio(model_id, quant)
            if m:
                return m
        if quant in _FLOAT_QUANTS:
            return Figure(value=1.0, unit="ratio", provenance="estimated",
                          basis="16-bit weights are the reference: ratio 1 by definition")
        return self._ppl.get(quant) or Figure(
            value=None, unit="ratio", provenance="unknown",
            basis=f"no published perplexity for {quant} against 16-bit weights")

    def _ppl_ratios(self) -> dict[str, Figure]:
        by_model: dict[str, dict[str, tuple[float, str]]] = {}
        for sm, bench, _shots, score, url, _note, _flags in self.catalog.all_scores():
            m = _GGUF_PPL_RE.match(sm)
            if bench == "wikitext PPL" and m:
                by_model.setdefault(m["model"], {})[m["quant"]] = (score, url)
        ratios: dict[str, list[float]] = {}
        urls: dict[str, set[str]] = {}
        for model, table in by_model.items():
            if "fp16" not in table:
                continue
            ref = table["fp16"][0]
            for q, (ppl, url) in table.items():
                if q != "fp16":
                    ratios.setdefault(q.upper(), []).append(ppl / ref)
                    urls.setdefault(q.upper(), set()).add(url)
        out = {}
        for q, vals in ratios.items():
            out[q] = Figure(value=round(statistics.median(vals), 5), unit="ratio", provenance="estimated",
                            basis=f"median of ppl({q})/ppl(fp16) over {len(vals)} published llama.cpp wikitext "
                                  f"perplexities of Qwen2 GGUF models; source: {', '.join(sorted(urls[q]))}")
        return out


# -- comparable task accuracy and quantization cost (docs/quality-method.md, docs/scoring.md) -----------------------

GROUP_LABEL = {"en": "en (OLL v2 average, normalized)", "zh": "zh (C-Eval %, Qwen3 report harness)"}
Q_REF_PARAMS = 8e9  # quant_quality.csv's points_8b are at 8B parameters; cost(P) = points_8b * (P / 8B) ** -alpha
MEASURE_HINT = "measure it with `recommender probe accuracy`"
_Z95 = 1.96


def _pkind(prov: str) -> str:
    """The Figure provenance of a table row: bridged figures are estimates (a fit maps them onto the scale)."""
    return "published" if prov == "published" else "estimated"


def _line(pts: list[tuple[float, float]]) -> tuple[float, float, float, int]:
    """Least-squares line y = a + b x: (a, b, residual RMSE with n - 2 degrees of freedom, n)."""
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx > 0 else 0.0
    a = my - b * mx
    return a, b, math.sqrt(sum((y - a - b * x) ** 2 for x, y in pts) / max(n - 2, 1)), n


class TaskAccuracy:
    """The workload's task accuracy A in points on comparable scales: the mean of its groups (en, zh) from
    sources/quality/model_quality.csv. A measured row of this model AND quant (probe accuracy) replaces its group:
    C-Eval / CMMLU for zh, MMLU mapped onto the OLL v2 scale for en. A model the table lacks gets an estimate from its
    size alone (least squares over the catalog models the table has), marked estimated, with its interval and how to
    measure it."""

    def __init__(self, catalog: CatalogReader, quality: "QualityIndex", models: dict, workload: str = "") -> None:
        self.workload = workload  # a code specialist's estimate serves the code workload only
        self.table = catalog.model_quality()
        self.quality = quality
        self.models = models
        self._fit: dict[str, Optional[tuple[float, float, float, int]]] = {}
        self._cache: dict[tuple, tuple[Figure, bool]] = {}
        self._groups: dict[tuple, tuple[Figure, bool]] = {}

    def _measured_quant(self, model_id: str, quant: Optional[str]) -> Optional[str]:
        """``quant`` when probe accuracy measured this model at it, else None: the model's figures then serve every
        quant alike (computed once per model, not once per quant)."""
        return quant if quant is not None and (model_id, quant) in self.quality._acc else None

    def group(self, model_id: str, grp: str, quant: Optional[str] = None) -> tuple[Figure, bool]:
        """(figure of one group, measured?). A measured row of this model and quant wins: C-Eval / CMMLU for zh (the
        zh scale is C-Eval %), MMLU for en, mapped onto the OLL v2 scale (mmlu_bridge)."""
        key = (model_id, grp, self._measured_quant(model_id, quant))
        if key not in self._groups:
            self._groups[key] = self._group(*key)
        return self._groups[key]

    def _group(self, model_id: str, grp: str, quant: Optional[str]) -> tuple[Figure, bool]:
        if grp == "zh" and quant:
            m = _measured_metric(self.quality._acc.get((model_id, quant), []), MEASURED_ZH_TASKS)
            if m is not None:
                return Figure(value=m.value, unit="points", provenance="measured", basis=f"zh: {m.basis}",
                              interval=m.interval), True
        if grp == "en" and quant:
            m = _measured_metric(self.quality._acc.get((model_id, quant), []), MEASURED_EN_TASKS)
            bridge = self.mmlu_bridge() if m is not None else None
            if m is not None and bridge is not None:
                a, b, rmse, n = bridge
                v = a + b * m.value
                return Figure(value=round(v, 2), unit="points", provenance="measured",
                              interval=(round(v - _Z95 * rmse, 2), round(v + _Z95 * rmse, 2)),
                              basis=f"{GROUP_LABEL['en']}: measured MMLU {m.value:.1f} % mapped by {a:.1f} + "
                                    f"{b:.3f} x MMLU (least squares over {n} catalog models with a published MMLU and "
                                    f"OLL v2 figure, RMSE {rmse:.1f} points); {m.basis}"), True
        row = self.table.get((model_id, grp))
        if row is not None and row["provenance"] == "estimated" and self.workload and self.workload != "code" \
                and "specialist: code" in (row["flags"] or "") and "borrowed from text base" not in (row["flags"] or ""):
            return Figure(value=None, unit="points", provenance="unknown",
                          basis=f"{GROUP_LABEL[grp]}: a code-specialist checkpoint with no {grp} figure of its own or "
                                f"of its text base; its regression estimate ({row['value_points']:.1f}) is not used "
                                f"for the {self.workload} workload; {MEASURE_HINT}"), False
        if row is not None:
            basis = (f"{GROUP_LABEL[grp]} {row['value_points']:.1f} [{row['interval_low']:.1f}, "
                     f"{row['interval_high']:.1f}] {row['provenance']}: {row['method'][:160]}")
            if row["provenance"] == "estimated":
                basis += f"; {MEASURE_HINT}"
            return Figure(value=row["value_points"], unit="points", provenance=_pkind(row["provenance"]), basis=basis,
                          interval=(row["interval_low"], row["interval_high"])), False
        return self._size_estimate(model_id, grp), False

    def mmlu_bridge(self) -> Optional[tuple[float, float, float, int]]:
        """OLL v2 average = a + b x MMLU %, fitted on the catalog models with both their own published MMLU and a
        published or bridged OLL v2 figure: (a, b, RMSE, n), None with fewer than 5."""
        if not hasattr(self, "_mmlu_bridge"):
            pts = []
            for mid in self.models:
                f, r = self.quality.en(mid), self.table.get((mid, "en"))
                if f.value is not None and f.provenance == "published" and "sibling" not in f.basis and r \
                        and r["provenance"] != "estimated":
                    pts.append((f.value, r["value_points"]))
            self._mmlu_bridge = _line(pts) if len(pts) >= 5 else None
        return self._mmlu_bridge

    def _size_estimate(self, model_id: str, grp: str) -> Figure:
        if grp not in self._fit:
            pts = [(math.log10(spec.params_active), r["value_points"]) for (mid, g), r in self.table.items()
                   if g == grp and r["provenance"] != "estimated" and (spec := self.models.get(mid)) is not None
                   and spec.params_active > 0]
            self._fit[grp] = _line(pts) if len(pts) >= 3 else None
        fit, spec = self._fit[grp], self.models.get(model_id)
        if fit is None or spec is None or spec.params_active <= 0:
            return Figure(value=None, unit="points", provenance="unknown",
                          basis=f"no comparable {grp} figure and nothing to estimate it from; {MEASURE_HINT}")
        a, b, rmse, n = fit
        v = a + b * math.log10(spec.params_active)
        return Figure(value=round(v, 2), unit="points", provenance="estimated",
                      interval=(round(v - _Z95 * rmse, 2), round(v + _Z95 * rmse, 2)),
                      basis=f"{GROUP_LABEL[grp]}: no figure for this model; estimated from its size alone "
                            f"({a:.1f} + {b:.1f} x log10(active params), least squares over {n} catalog models with "
                            f"published or bridged figures, RMSE {rmse:.1f} points); {MEASURE_HINT}")

    def evidence(self, model_id: str, quant: Optional[str], groups: tuple[str, ...]) -> str:
        """measured / published / bridged / estimated / unknown: the weakest evidence of the groups A averages."""
        fig, _measured = self.accuracy(model_id, quant, groups)
        rows = [{"provenance": "measured"} if self.group(model_id, g, quant)[1] else self.table.get((model_id, g))
                for g in groups]
        return evidence_class(fig, rows)

    def accuracy(self, model_id: str, quant: Optional[str], groups: tuple[str, ...]) -> tuple[Figure, bool]:
        """(A, every group measured?) for these groups: their mean, named in the basis."""
        quant = self._measured_quant(model_id, quant)
        key = (model_id, quant, groups)
        if key not in self._cache:
            parts = [(g, *self.group(model_id, g, quant)) for g in groups]
            if any(f.value is None for _, f, _ in parts):
                fig = Figure(value=None, unit="points", provenance="unknown",
                             basis="; ".join(f.basis for _, f, _ in parts if f.value is None))
            else:
                v = sum(f.value for _, f, _ in parts) / len(parts)
                provs = {f.provenance for _, f, _ in parts}
                prov = next(p for p in ("unknown", "estimated", "published", "measured") if p in provs)
                ivs = [f.interval for _, f, _ in parts]
                iv = None
                if all(ivs):  # groups' errors taken as independent: half-widths added in quadrature / n
                    half = math.sqrt(sum(((hi - lo) / 2) ** 2 for lo, hi in ivs)) / len(parts)
                    iv = (round(v - half, 2), round(v + half, 2))
                tasks = " + ".join(g for g, _, _ in parts)
                fig = Figure(value=round(v, 3), unit="points", provenance=prov, interval=iv,
                             basis=f"tasks: {tasks} (mean, equal weights) - " + " | ".join(
                                 f"{g}: {f.basis}" for g, f, _ in parts))
            self._cache[key] = (fig, all(m for _, _, m in parts))
        return self._cache[key]


# --risk: the task accuracy the ranking uses is a lower quantile of A's interval, so that an estimate with a wide
# interval does not outrank a published figure inside it (issue 23). z of the standard normal; the interval's lower
# half-width / 1.96 is the SD on the low side (the logit intervals of model_quality.csv are asymmetric).
RISK_Z = {"neutral": 0.0, "moderate": 1.0, "averse": 1.645}
RISK_QUANTILE = {"neutral": "the point value (mean)", "moderate": "the 16th percentile (mean - 1 SD)",
                 "averse": "the 5th percentile (mean - 1.645 SD)"}
DEFAULT_RISK = "moderate"


def ranked_accuracy(fig: Figure, risk: str = DEFAULT_RISK) -> Figure:
    """The figure the score ranks on: ``fig``'s lower quantile at this risk level (RISK_Z), from its interval's low
    side; a figure without an interval is used as it is (said so)."""
    z = RISK_Z[risk]
    if fig.value is None or z == 0.0 or not fig.interval:
        return Figure(value=fig.value, unit=fig.unit, provenance=fig.provenance, interval=fig.interval,
                      basis=f"risk {risk}: " + ("the point value" if fig.interval or fig.value is None
                                                else "no interval, the point value"))
    sd_low = max(fig.value - fig.interval[0], 0.0) / _Z95
    return Figure(value=round(fig.value - z * sd_low, 3), unit=fig.unit, provenance=fig.provenance,
                  interval=fig.interval,
                  basis=f"risk {risk}: {RISK_QUANTILE[risk]} of A {fig.value:.1f} [{fig.interval[0]:.1f}, "
                        f"{fig.interval[1]:.1f}] = {fig.value:.1f} - {z:g} x {sd_low:.2f}")


EVIDENCE_ORDER = ("measured", "published", "bridged", "estimated", "unknown")


def evidence_class(figure: Figure, table_rows: list[Optional[dict]]) -> str:
    """measured / published / bridged / estimated / unknown of a task accuracy: the weakest of its groups (the table
    rows' provenance; a measured figure is measured)."""
    if figure.value is None:
        return "unknown"
    worst = 0
    for r in table_rows:
        p = r["provenance"] if r else "estimated"
        worst = max(worst, EVIDENCE_ORDER.index(p) if p in EVIDENCE_ORDER else 3)
    return EVIDENCE_ORDER[worst]


_DATED = [(re.compile(r"hf_open_llm_leaderboard_v2"), "2025-03-21 (OLL v2 final snapshot)"),
          (re.compile(r"lmarena_text_(\d{4})(\d{2})(\d{2})"), r"\1-\2-\3 (LMArena)"),
          (re.compile(r"Qwen3 Technical Report"), "2025-05 (Qwen3 Technical Report)")]
_LB = re.compile(r"livebench\[([0-9_,]+)\]")
_CARD_DATE = re.compile(r"card\[[^\]]*?\(date (.*?)\): ")


def source_dates(text: str) -> str:
    """The dates of the sources a model_quality row names (OLL v2 snapshot, LMArena, LiveBench releases, card dates),
    as written there."""
    out = []
    for rx, label in _DATED:
        for m in rx.finditer(text or ""):
            out.append(m.expand(label))
    for m in _LB.finditer(text or ""):
        out.append("LiveBench " + ", ".join(r.replace("_", "-") for r in m.group(1).split(",")))
    for m in _CARD_DATE.finditer(text or ""):
        out.append(m.group(1))
    return "; ".join(dict.fromkeys(out)) or "not stated"


def evidence_rows(tasks: "TaskAccuracy", cands: list, groups: tuple[str, ...]) -> list[dict]:
    """The evidence table of ranked rows (``--explain``, the HTML report): per row its task accuracy, the figure the
    ranking used, the planned thinking mode and, per group, the figure, its interval, class (measured / published /
    bridged / estimated / unknown), source and date."""
    out = []
    for c in cands:
        acc = c.figures["task_accuracy"]
        ranked = c.figures.get("task_accuracy_ranked", acc)
        think = c.figures.get("thinking_tokens")
        parts = []
        for g in groups:
            fig, measured = tasks.group(c.model, g, c.quant)
            row = tasks.table.get((c.model, g))
            cls = "measured" if measured else (row["provenance"] if row and fig.value is not None else
                                               "unknown" if fig.value is None else "estimated")
            src = fig.basis if measured or row is None else f"{row['method'][:200]} | sources: {row['sources'][:200]}"
            parts.append({"group": g, "value": fig.value, "interval": fig.interval, "class": cls,
                          "source": src, "date": "this machine" if measured else source_dates(
                              (row or {}).get("sources", "") + " " + (row or {}).get("method", ""))})
        out.append({"rank": c.rank, "model": c.model, "quant": c.quant, "task_accuracy": acc.value,
                    "interval": acc.interval, "ranked_accuracy": ranked.value,
                    "evidence": tasks.evidence(c.model, c.quant, groups),
                    "mode": think.basis.split(" (")[0].split(":")[0] if think else "not stated",
                    "thinking_tokens": think.value if think else None, "groups": parts})
    return out


def quant_cost(table: dict[str, dict], quant: str, params_active: int, measured: bool = False) -> Figure:
    """Accuracy points quantization costs this model: points_8b(quant) x (P_active / 8B) ** -alpha
    (sources/quality/quant_quality.csv: llama.cpp's KLD ladder x 10.88 points per nat x the task mix, Qwen / Red Hat
    recovery tables; docs/quality-method.md section 7). 0 when the accuracy was measured on this very quant."""
    if measured:
        return Figure(value=0.0, unit="points", provenance="measured",
                      basis=f"the task accuracy was measured on {quant}: its cost is already in it")
    row = table.get(quant)
    if row is None:
        return Figure(value=None, unit="points", provenance="unknown",
                      basis=f"{quant} is not in the quantization-cost table (sources/quality/quant_quality.csv)")
    scale = _quant_cost_scale(row, params_active)
    prov = "published" if row["provenance"] == "reference" else "estimated"
    return Figure(value=quant_cost_value(table, quant, params_active, measured), unit="points", provenance=prov,
                  interval=(round(row["points_low"] * scale, 4), round(row["points_high"] * scale, 4)),
                  basis=f"{row['points_8b']:.3f} points at 8B x ({params_active / 1e9:.2f}B / 8B)^-"
                        f"{row['size_exponent']:.3f} ({row['provenance']}): {row['basis'][:160]}")


def _quant_cost_scale(row: dict, params_active: int) -> float:
    return (max(params_active, 1) / Q_REF_PARAMS) ** -row["size_exponent"]


def quant_cost_value(table: dict[str, dict], quant: str, params_active: int, measured: bool = False) -> Optional[float]:
    """quant_cost's value alone (no Figure: the ranking reads the number of every variant, the record only of the rows
    shown)."""
    if measured:
        return 0.0
    row = table.get(quant)
    if row is None:
        return None
    return round(row["points_8b"] * _quant_cost_scale(row, params_active), 4)
