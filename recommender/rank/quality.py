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
