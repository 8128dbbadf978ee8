"""Parsing of user quantities and the scoring rules a user relies on."""

import pytest


from recommender.core.errors import UserError
from recommender.core.units import GIB, parse_latency_ms, parse_memory, parse_tokens
from recommender.score.weighted import DEFAULT_WEIGHTS, normalize, parse_weights, score_rows


@pytest.mark.parametrize("text,expected", [
    ("24", 24 * GIB), ("24GiB", 24 * GIB), ("24 GiB", 24 * GIB), ("24GB", 24 * 10**9), ("24576MiB", 24 * GIB),
    ("0.5TiB", 512 * GIB), ("16g", 16 * GIB),
])
def test_memory_forms(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["-24", "0", "abc", "24 parsecs", "1000000", "12MB"])
def test_memory_rejects(text):
    with pytest.raises(UserError) as e:
        parse_memory(text)
    assert e.value.hint


@pytest.mark.parametrize("text,ms", [("800ms", 800), ("0.8s", 800), ("800", 800), ("1.5 s", 1500), ("250us", 0.25)])
def test_latency_forms(text, ms):
    assert parse_latency_ms(text) == pytest.approx(ms)


@pytest.mark.parametrize("text", ["fast", "-5ms", "0", "800 parsecs"])
def test_latency_rejects(text):
    with pytest.raises(UserError):
        parse_latency_ms(text)


def test_tokens():
    assert parse_tokens("32K") == 32768 and parse_tokens("4096") == 4096
    with pytest.raises(UserError):
        parse_tokens("lots")


def test_default_weights_are_the_briefs():
    # the brief's weights; the task-accuracy weight sits on the workload's task mix (acc) under the default value
    # functions and on C-Eval (zh) under the brief's min-max / z-score
    w = parse_weights(None)
    assert w == pytest.approx({"latency": 0.30, "vram": 0.25, "ppl": 0.20, "zh": 0.0, "en": 0.0, "acc": 0.25})
    assert parse_weights(None, "minmax") == pytest.approx(
        {"latency": 0.30, "vram": 0.25, "ppl": 0.20, "zh": 0.25, "en": 0.0, "acc": 0.0})
    assert sum(DEFAULT_WEIGHTS.values()) == pytest.approx(1.0)


def test_weights_partial_override_renormalizes():
    w = parse_weights("latency=0.6")
    assert sum(w.values()) == pytest.approx(1.0)
    assert w["latency"] == pytest.approx(0.6 / 1.3)


@pytest.mark.parametrize("text", ["speed=1", "latency=-1", "latency=x", "latency", "latency=0,vram=0,ppl=0,acc=0"])
def test_weights_rejects(text):
    with pytest.raises(UserError):
        parse_weights(text)


def test_minmax_and_missing_worst():
    assert normalize([10, 20, None, 30]) == [0.0, 0.5, 1.0, 1.0]
    assert normalize([10, 20, None, 30], missing="mean") == [0.0, 0.5, 0.5, 1.0]


def test_zscore_missing_gets_worst_seen():
    z = normalize([1.0, 2.0, 3.0, None], method="zscore")
    assert z[0] < 0 < z[2] and z[3] == z[2]


def test_lower_cost_wins_and_missing_never_helps():
    rows = [
        {"latency": 100.0, "vram": 8e9, "ppl": 1.01, "zh": 20.0},  # zh is a cost: 100 - accuracy
        {"latency": 200.0, "vram": 16e9, "ppl": 1.00, "zh": 30.0},
        {"latency": 100.0, "vram": 8e9, "ppl": 1.01, "zh": None},  # same as row 0 but zh unknown
    ]
    scores = [s for s, _ in score_rows(rows, parse_weights(None, "minmax"))]
    assert scores[0] < scores[2]  # unknown accuracy is never better than a known one
