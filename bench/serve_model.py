"""The serving model (recommender/predict/serving.py) against a published closed-loop vLLM sweep.

Reference: sources/published_perf/vllm_serve_sweep.csv, `vllm bench serve --max-concurrency N --request-rate inf` of
Qwen2.5-0.5B-Instruct BF16 on one L4 (vLLM 0.23.0; 256-token prompts, 128 output tokens, --ignore-eos), published at
https://ai.wmx.dev/benchmarks. Nothing here is fitted on it.

For each concurrency N the Predictor predicts the configuration at batch N (prompt 256, output 128, context 384) and
``Predictor.serving`` turns it into the figures under load. Printed per N and summarized:
  - request throughput (N / E2E) against the published req/s;
  - output throughput against the published out tok/s;
  - TPOT against (E2E p50 - TTFT p50) / (n_out - 1) of the published row (the page prints no TPOT);
  - TTFT against the published TTFT p50;
  - the scaling ratio req/s(N) / req/s(1), predicted against published: the serving model's own part, apart from the
    single-GPU speed figures it starts from.
Beside the unified model, the figures of the former `tune --goodput` model (TTFT = the prefill of all N prompts,
TPOT = the decode step alone, req/s = N / (TTFT + (n_out - 1) TPOT)) are printed for comparison.

    PYTHONPATH=. .venv/bin/python bench/serve_model.py [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

from recommender.hardware.profiles import find_profile, load_profiles
from recommender.model.arch import spec_from_config
from recommender.predict.predictor import Config, Predictor

ROOT = Path(__file__).resolve().parents[1]
SWEEP_CSV = ROOT / "sources/published_perf/vllm_serve_sweep.csv"
CONFIG = ROOT / "sources/published_perf/Qwen2.5-0.5B-Instruct.config.json"
QUANT = {"BF16": "BF16"}


def rows() -> list[dict]:
    with SWEEP_CSV.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def predictions() -> list[dict]:
    """One record per published row: the published figures and the unified and former models' predictions."""
    out = []
    spec = spec_from_config(json.loads(CONFIG.read_text(encoding="utf-8")), "Qwen/Qwen2.5-0.5B-Instruct")
    profiles = load_profiles()
    for r in rows():
        hw = find_profile(r["profile"], profiles)
        n, p_in, n_out = int(r["concurrency"]), int(r["input_tokens"]), int(r["output_tokens"])
        predictor = Predictor(hw)
        pred = predictor.predict(spec, Config(model=spec.id, quant=QUANT[r["dtype"]], engine=r["engine"],
                                                  context_tokens=p_in + n_out, batch=n, prompt_tokens=p_in,
                                                  output_tokens=n_out))
        s = {k: f.value for k, f in predictor.serving(spec, pred).items()}
        old_e2e = pred.ttft_ms + (n_out - 1) * pred.tpot_ms
        out.append({
            "concurrency": n,
            "published": {"request_throughput_per_s": float(r["request_throughput_per_s"]),
                          "output_throughput_tokens_per_s": float(r["output_throughput_tokens_per_s"]),
                          "tpot_ms": (float(r["e2e_p50_ms"]) - float(r["ttft_p50_ms"])) / (n_out - 1),
                          "ttft_ms": float(r["ttft_p50_ms"])},
            "unified": {"request_throughput_per_s": s["request_throughput_per_s"],
                        "output_throughput_tokens_per_s": s["output_throughput_tokens_per_s"],
                        "tpot_ms": s["serve_tpot_ms"], "ttft_ms": s["serve_ttft_ms"]},
            "former_tune": {"request_throughput_per_s": n * 1000.0 / old_e2e,
                            "output_throughput_tokens_per_s": n * n_out * 1000.0 / old_e2e,
                            "tpot_ms": pred.tpot_ms, "ttft_ms": pred.ttft_ms},
        })
    base = {k: next(x for x in out if x["concurrency"] == 1)[k]["request_throughput_per_s"]
            for k in ("published", "unified", "former_tune")}
    for x in out:
        for k in base:
            x[k]["scaling"] = x[k]["request_throughput_per_s"] / base[k]
    return out


def errors(preds: list[dict], model: str, figure: str) -> list[float]:
    """Signed relative errors (predicted / published - 1) of one figure, per concurrency."""
    return [x[model][figure] / x["published"][figure] - 1.0 for x in preds]


def summary(errs: list[float]) -> str:
    a = sorted(abs(e) for e in errs)
    return (f"median |error| {statistics.median(a) * 100:.1f} %, max {a[-1] * 100:.1f} %, "
            f"median signed {statistics.median(errs) * 100:+.1f} %")


FIGURES = ("request_throughput_per_s", "output_throughput_tokens_per_s", "tpot_ms", "ttft_ms", "scaling")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    preds = predictions()
    if args.json:
        print(json.dumps(preds, indent=1))
        return
    print("== serving model against the published vLLM sweep (Qwen2.5-0.5B-Instruct BF16, L4, vLLM 0.23.0, "
          "256 in / 128 out, closed loop) ==")
    print(f"{'N':>3} | {'req/s pub':>9} {'unified':>8} {'former':>7} | {'TPOT pub':>8} {'unified':>8} {'former':>7} "
          f"| {'TTFT pub':>8} {'unified':>8} {'former':>7} | {'scaling pub':>11} {'unified':>8}")
    for x in preds:
        p, u, f = x["published"], x["unified"], x["former_tune"]
        print(f"{x['concurrency']:>3} | {p['request_throughput_per_s']:>9.2f} {u['request_throughput_per_s']:>8.2f} "
              f"{f['request_throughput_per_s']:>7.2f} | {p['tpot_ms']:>8.2f} {u['tpot_ms']:>8.2f} {f['tpot_ms']:>7.2f} "
              f"| {p['ttft_ms']:>8.1f} {u['ttft_ms']:>8.1f} {f['ttft_ms']:>7.1f} | {p['scaling']:>11.2f} "
              f"{u['scaling']:>8.2f}")
    for model in ("unified", "former_tune"):
        for fig in FIGURES:
            print(f"{model:<11} {fig:<31} {len(preds)} rows: {summary(errors(preds, model, fig))}")


if __name__ == "__main__":
    main()
