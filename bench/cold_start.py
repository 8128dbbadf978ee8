"""Cold start of `recommend` as a whole process (interpreter start + imports + catalog read + ranking + output).

Prints the median and spread of N runs of `recommend --vram 24 --max-latency 800ms --json` (stdout discarded),
next to a bare `python -c pass` measured in the same run, so the ratio does not depend on the machine's speed.
`--baseline CHECKOUT` also times the same command from another checkout of the project (e.g. a `git worktree` of
an older commit) in alternation with this one, each with its own warm read cache, and prints the paired ratio.
Target: <= 0.5 s (llmfit answers in 0.55 s over its 15,855 models).

    .venv/bin/python bench/cold_start.py [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - t0)
    return out


ARGS = ["--vram", "24", "--max-latency", "800ms", "--json"]
ENTRY = ("import sys, importlib.util as u\n"
         "sys.argv = ['recommend'] + sys.argv[1:]\n"
         "if u.find_spec('recommender.cli.recommend_cmd') and hasattr(__import__('recommender.cli.recommend_cmd', "
         "fromlist=['main']), 'main'):\n"
         "    from recommender.cli.recommend_cmd import main\n"
         "else:\n"
         "    from recommender.cli import recommend_main as main\n"
         "main()\n")


def paired(baseline: Path, runs: int) -> dict:
    """This checkout and `baseline` in turn (A B A B ...), as whole processes, each with its own read cache."""
    import os  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        def cmd_env(tree: Path, name: str):
            env = {**os.environ, "PYTHONPATH": str(tree), "RECOMMENDER_CACHE": str(Path(tmp) / name),
                   "RECOMMENDER_USER_CATALOG": str(Path(tmp) / name / "none.duckdb")}
            env.pop("RECOMMENDER_CATALOG", None)
            return [sys.executable, "-c", ENTRY, *ARGS], env, str(tree)

        a, b = cmd_env(here, "this"), cmd_env(baseline.resolve(), "baseline")
        for cmd, env, cwd in (a, b):  # warm: file cache, .pyc files, each read cache
            subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        ta, tb, ca, cb = [], [], [], []
        for _ in range(runs):
            for (cmd, env, cwd), out, cpu in ((a, ta, ca), (b, tb, cb)):
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=True)
                out.append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    ratios = [x / y for x, y in zip(ta, tb)]
    cpu_ratios = [x / y for x, y in zip(ca, cb)]
    return {"this_median_s": statistics.median(ta), "baseline_median_s": statistics.median(tb),
            "paired_ratio_median": statistics.median(ratios), "paired_ratio_min": min(ratios),
            "paired_ratio_max": max(ratios), "this_cpu_median_s": statistics.median(ca),
            "baseline_cpu_median_s": statistics.median(cb), "paired_cpu_ratio_median": statistics.median(cpu_ratios),
            "baseline": str(baseline)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--baseline", type=Path, help="another checkout to time against, in the same run")
    args = ap.parse_args()
    exe = shutil.which("recommend") or str(Path(sys.executable).parent / "recommend")
    cmd = [exe, "--vram", "24", "--max-latency", "800ms", "--json"]
    timed(cmd, 1)  # warm the OS file cache; a first run after install also compiles .pyc files
    rec = timed(cmd, args.runs)
    bare = timed([sys.executable, "-c", "pass"], args.runs)
    res = {}
    if args.baseline:
        res = paired(args.baseline, args.runs)
    res |= {"recommend_median_s": statistics.median(rec), "recommend_min_s": min(rec), "recommend_max_s": max(rec),
           "python_bare_median_s": statistics.median(bare), "runs": args.runs,
           "ratio_to_bare_python": statistics.median(rec) / statistics.median(bare), "target_s": 0.5}
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"recommend --vram 24 --max-latency 800ms --json: median {res['recommend_median_s']:.3f} s "
              f"(min {res['recommend_min_s']:.3f}, max {res['recommend_max_s']:.3f}, {args.runs} runs)")
        print(f"bare python -c pass:                          median {res['python_bare_median_s']:.3f} s")
        print(f"ratio {res['ratio_to_bare_python']:.1f}x bare interpreter; target <= {res['target_s']} s: "
              f"{'met' if res['recommend_median_s'] <= res['target_s'] else 'NOT met'}")
        if args.baseline:
            print(f"this checkout / {args.baseline} (alternating, {args.runs} pairs): median ratio "
                  f"{res['paired_ratio_median']:.3f} (min {res['paired_ratio_min']:.3f}, max "
                  f"{res['paired_ratio_max']:.3f}); medians {res['this_median_s']:.3f} s vs {res['baseline_median_s']:.3f} s")
            print(f"  CPU time (user + sys, less sensitive to a busy machine): median ratio "
                  f"{res['paired_cpu_ratio_median']:.3f}; {res['this_cpu_median_s']:.3f} s vs "
                  f"{res['baseline_cpu_median_s']:.3f} s")


if __name__ == "__main__":
    main()
