"""Issue 23: the ranked accuracy pays for uncertainty, evidence classes, source dates, reasoning tokens (pure
functions, no catalog)."""

from __future__ import annotations

import pytest

from recommender.core.records import Figure
from recommender.rank.candidates import REASONING_TOKEN_RATIO, reasoning_tokens
from recommender.rank.quality import RISK_Z, evidence_class, ranked_accuracy, source_dates


def _fig(v, lo, hi, prov="estimated"):
    return Figure(value=v, unit="points", provenance=prov, interval=(lo, hi))


def test_a_wide_estimate_does_not_outrank_a_published_figure_inside_its_interval():
    published = _fig(68.4, 63.4, 73.4, "published")  # SD 2.55
    guess = _fig(70.0, 54.0, 86.0)  # +-16 points: the published value is well inside
    for risk in ("moderate", "averse"):
        assert ranked_accuracy(guess, risk).value < ranked_accuracy(published, risk).value
    # neutral ranks on the point value, as before
    assert ranked_accuracy(guess, "neutral").value == 70.0 > ranked_accuracy(published, "neutral").value


def test_ranked_accuracy_is_the_stated_lower_quantile():
    f = _fig(60.0, 50.2, 68.0)  # low side SD = 9.8 / 1.96 = 5
    assert ranked_accuracy(f, "moderate").value == pytest.approx(60.0 - RISK_Z["moderate"] * 5.0)
    assert ranked_accuracy(f, "averse").value == pytest.approx(60.0 - 1.645 * 5.0)
    assert "16th percentile" in ranked_accuracy(f, "moderate").basis
    # no interval, no value: used as they are
    assert ranked_accuracy(Figure(55.0, "points", "measured"), "averse").value == 55.0
    assert ranked_accuracy(Figure(None, "points", "unknown"), "averse").value is None


def test_evidence_class_is_the_weakest_group():
    f = _fig(70.0, 60.0, 80.0)
    assert evidence_class(f, [{"provenance": "bridged"}, {"provenance": "published"}]) == "bridged"
    assert evidence_class(f, [{"provenance": "published"}, {"provenance": "estimated"}]) == "estimated"
    assert evidence_class(f, [{"provenance": "measured"}]) == "measured"
    assert evidence_class(f, [None]) == "estimated"  # no table row: the run-time size estimate
    assert evidence_class(Figure(None, "points", "unknown"), [{"provenance": "published"}]) == "unknown"


def test_source_dates_reads_the_dates_the_sources_state():
    s = ("lmarena_text_20250804; livebench[2025_04_02,2026_01_08]; card[Qwen3-30B card (date 2025-07 (name suffix "
         "2507)): MMLU-Pro 78.4; https://x]; hf_open_llm_leaderboard_v2 (m)")
    d = source_dates(s)
    assert "2025-08-04 (LMArena)" in d and "LiveBench 2025-04-02, 2026-01-08" in d
    assert "2025-07 (name suffix 2507)" in d and "2025-03-21 (OLL v2 final snapshot)" in d
    assert source_dates("") == "not stated"


class _Spec:
    def __init__(self, kind):
        self.checkpoint_kind = kind


def test_reasoning_checkpoints_pay_for_their_thinking_hybrids_are_planned_non_thinking():
    r, mode = reasoning_tokens(_Spec("reasoning"), 256)
    assert r == round((REASONING_TOKEN_RATIO - 1) * 256) and mode.startswith("thinking") and "2507.04023" in mode
    assert reasoning_tokens(_Spec("hybrid"), 256) == (0, reasoning_tokens(_Spec("hybrid"), 256)[1])
    assert reasoning_tokens(_Spec("hybrid"), 256)[1].startswith("non-thinking")
    assert reasoning_tokens(_Spec("instruct"), 256)[0] == 0
