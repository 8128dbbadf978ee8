"""Accuracy probes: item files, statistics and guards (no model), lm-eval wiring with a deliberately broken scorer."""

from __future__ import annotations

import json
import shutil

import pytest


from recommender.core.errors import UserError
from recommender.probes.accuracy import items as I, stats as S


# -- item files -------------------------------------------------------------------------------------------------
def test_shipped_item_files_match_manifest_and_license_sits_beside_them():
    m = I.manifest()
    for name, e in m["files"].items():
        if not e["shipped"]:
            continue
        path = I.BENCH_DIR / e["task"] / name
        assert I.sha256_file(path) == e["sha256"], name
        assert len(I.load_items(path)) == e["n"]
    for task, lic in (("ceval", "LICENSE-DATA"), ("cmmlu", "LICENSE-DATA"), ("mmlu", "LICENSE")):
        assert (I.BENCH_DIR / task / lic).is_file() and (I.BENCH_DIR / task / "SOURCE.md").is_file()
    assert "NonCommercial-ShareAlike" in (I.BENCH_DIR / "cmmlu" / "LICENSE-DATA").read_text()[:200]


def test_subsets_are_the_seeded_stratified_selection_of_the_full_set():
    full = I.load_items(I.items_path("ceval", "full")[0])
    assert len(full) == 1346
    shipped = I.load_items(I.items_path("ceval", "150")[0])
    assert I.select(full, 150, "ceval") == shipped  # the same questions on every build
    counts: dict[str, int] = {}
    for d in full:
        counts[d["subject"]] = counts.get(d["subject"], 0) + 1
    got: dict[str, int] = {}
    for d in shipped:
        got[d["subject"]] = got.get(d["subject"], 0) + 1
    for s, c in counts.items():  # proportional allocation: within one item of the subject's quota
        assert abs(got.get(s, 0) - 150 * c / 1346) < 1.0 + 1e-9, s
    assert len({d["id"] for d in shipped}) == 150


def test_a_changed_item_file_is_refused(tmp_path, monkeypatch):
    shutil.copytree(I.BENCH_DIR, tmp_path / "benchmarks")
    p = tmp_path / "benchmarks" / "mmlu" / I.file_name("mmlu", "50")
    lines = p.read_text(encoding="utf-8").splitlines()
    d = json.loads(lines[0])
    d["answer"] = (d["answer"] + 1) % 4
    p.write_text("\n".join([json.dumps(d, ensure_ascii=False, sort_keys=True)] + lines[1:]) + "\n", encoding="utf-8")
    monkeypatch.setattr(I, "BENCH_DIR", tmp_path / "benchmarks")
    with pytest.raises(UserError, match="sha256"):
        I.items_path("mmlu", "50")
    with pytest.raises(UserError):
        I.parse_items("70")


# -- statistics -------------------------------------------------------------------------------------------------
def _recs(correct: list[bool], subjects: list[str] | None = None, lls=None) -> list[dict]:
    return [{"id": f"q{i}", "subject": (subjects or ["s"] * len(correct))[i], "correct": c,
             "pick": 0 if c else 1, "answer": 0, "loglikelihoods": lls or [-1.0, -2.0, -3.0, -4.0]}
            for i, c in enumerate(correct)]


def test_interval_and_paired_tests_agree_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    # Wilson with one stratum: statsmodels/scipy's Wilson interval for 30/100
    s = S.stratified(_recs([True] * 30 + [False] * 70))
    ci = stats.binomtest(30, 100).proportion_ci(method="wilson")
    assert s["ci_low"] == pytest.approx(ci.low, abs=2e-3) and s["ci_high"] == pytest.approx(ci.high, abs=2e-3)
    # McNemar exact p-value = two-sided binomial test on the discordant pairs
    base = _recs([True] * 20 + [False] * 30)
    other = _recs([True] * 12 + [False] * 8 + [True] * 3 + [False] * 27)
    p = S.paired(base, other)
    assert (p["baseline_only_right"], p["other_only_right"]) == (8, 3)
    assert p["delta"] == pytest.approx((3 - 8) / 50)
    assert p["mcnemar_p"] == pytest.approx(stats.binomtest(3, 11, 0.5).pvalue)
    assert p["ci_low"] < p["delta"] < p["ci_high"] < 0.05
    # stratification by subject never widens a proportional sample's interval much, and narrows it when subjects
    # differ: 2 subjects, one always right, one always wrong
    strat = S.stratified(_recs([True] * 20 + [False] * 20, ["a"] * 20 + ["b"] * 20))
    plain = S.stratified(_recs([True] * 20 + [False] * 20))
    assert strat["ci_high"] - strat["ci_low"] < plain["ci_high"] - plain["ci_low"]


def test_guards_flag_chance_broken_scorer_and_mismatched_items():
    equal = S.summarize(_recs([True] * 13 + [False] * 37, lls=[-2.0, -2.0, -2.0, -2.0]))
    assert "broken-logprobs" in {f["flag"] for f in equal["flags"]}
    chance = S.summarize(_recs([True] * 14 + [False] * 36))
    assert "chance" in {f["flag"] for f in chance["flags"]}
    good = S.summarize(_recs([True] * 40 + [False] * 10))
    assert not {f["flag"] for f in good["flags"]} & {"chance", "broken-logprobs"}
    with pytest.raises(S.ItemMismatch):
        S.paired(_recs([True] * 5), _recs([True] * 6))


# -- lm-eval wiring, with a deliberately broken scorer ---------------------------------------------------------------
def test_broken_scorer_through_lm_eval_is_flagged(tmp_path):
    pytest.importorskip("lm_eval")
    from lm_eval.api.model import TemplateLM

    from evaluators import lm_tasks as T

    class ConstantLM(TemplateLM):  # every option gets the same log-likelihood: a broken log-prob path
        @property
        def eot_token_id(self):
            return 0

        def tok_encode(self, string, add_special_tokens=None, **kw):
            return list(string.encode("utf-8"))

        def _loglikelihood_tokens(self, requests, **kw):
            return [(-1.0, False) for _ in requests]

        def loglikelihood_rolling(self, requests, disable_tqdm=False):
            raise NotImplementedError

        def generate_until(self, requests, disable_tqdm=False):
            raise NotImplementedError

    path, _ = I.items_path("ceval", "50")
    recs = T.evaluate(ConstantLM(), {"ceval": T.task_config("ceval", path, 0)})["ceval"]
    assert [r["id"] for r in recs] == [d["id"] for d in I.load_items(path)]  # lm-eval scored exactly our items
    s = S.summarize(recs)
    assert s["flags"][0]["flag"] == "broken-logprobs"
    assert all(r["pick"] == 0 for r in recs)  # argmax of equal scores: always "A", the tell-tale of a broken path


def test_five_shot_prompt_is_lm_eval_layout():
    from evaluators import lm_tasks as T

    pre = T.fewshot_prefixes("mmlu", 5, I.dev_path("mmlu"))
    ex = pre["anatomy"]
    assert ex.count("\nAnswer: ") == 5 and ex.endswith("\n\n")
    assert len(pre) == 57  # every MMLU subject has its own five examples


def test_probe_accuracy_bad_input_is_one_error_line(cli, tmp_path):
    assert_bad = []
    for args in (["x.gguf", "--tasks", "gsm8k"], ["x.gguf", "--items", "70"], ["x.gguf", "--shots", "3"],
                 [str(tmp_path / "missing.gguf")], [str(tmp_path), "--tasks", "mmlu"]):
        r = cli("probe", "accuracy", *args)
        assert_bad.append((args, r.code))
        from tests.conftest import assert_user_error

        assert_user_error(r)


def test_full_sets_not_shipped_are_rebuilt_from_raw_csvs_with_the_manifest_checksum(tmp_path, monkeypatch):
    raw = I.default_data_dir()
    if raw is None:
        pytest.skip("no raw benchmark CSVs here (RECOMMENDER_BENCHMARK_DATA / ../shared/data/benchmarks)")
    monkeypatch.setenv("RECOMMENDER_CACHE", str(tmp_path))
    path, entry = I.items_path("mmlu", "full", raw)
    assert path.parent == tmp_path / "benchmarks" and not entry["shipped"]
    assert len(I.load_items(path)) == 14042
