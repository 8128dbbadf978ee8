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
"""

from __future__ import annotations

import re
import statistics
from typing import Optional

from .catalog.store import Catalog, ScoreRow
from .types import Metric

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


def _metric(row: Optional[ScoreRow], model_id: str) -> Metric:
    if row is None:
        return Metric(value=None, unit="%", provenance="unknown", basis="no published score for this model")
    parts = [f"{row.benchmark}" + (f" {row.shots}-shot" if row.shots else " (shots not stated)"),
             f"source: {row.source_url}"]
    if row.relation == "sibling":
        parts.append(f"score of sibling checkpoint {row.source_model}, same architecture, not {model_id}")
    if row.flags:
        parts.append("flags: " + ",".join(row.flags))
    return Metric(value=row.score, unit="%", provenance="published", basis="; ".join(parts))


class QualityIndex:
    """Quality lookups over one catalog, computed once per run."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._zh: dict[str, Metric] = {}
        self._en: dict[str, Metric] = {}
        self._ppl = self._ppl_ratios()

    def zh(self, model_id: str) -> Metric:
        if model_id not in self._zh:
            self._zh[model_id] = _metric(_pick(self.catalog.scores_for(model_id), ZH_BENCHMARKS), model_id)
        return self._zh[model_id]

    def en(self, model_id: str) -> Metric:
        if model_id not in self._en:
            self._en[model_id] = _metric(_pick(self.catalog.scores_for(model_id), EN_BENCHMARKS), model_id)
        return self._en[model_id]

    def ppl_ratio(self, quant: str) -> Metric:
        if quant in _FLOAT_QUANTS:
            return Metric(value=1.0, unit="ratio", provenance="estimated",
                          basis="16-bit weights are the reference: ratio 1 by definition")
        return self._ppl.get(quant) or Metric(
            value=None, unit="ratio", provenance="unknown",
            basis=f"no published perplexity for {quant} against 16-bit weights")

    def _ppl_ratios(self) -> dict[str, Metric]:
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
            out[q] = Metric(value=round(statistics.median(vals), 5), unit="ratio", provenance="estimated",
                            basis=f"median of ppl({q})/ppl(fp16) over {len(vals)} published llama.cpp wikitext "
                                  f"perplexities of Qwen2 GGUF models; source: {', '.join(sorted(urls[q]))}")
        return out
