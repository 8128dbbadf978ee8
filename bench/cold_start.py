"""Cold start of `recommend` as a whole process (interpreter start + imports + catalog read + ranking + output).

Prints the median and spread of N runs of `recommend --vram 24 --max-latency 800ms --json` (stdout discarded),
next to a bare `python -c pass` measured in the same run, so the ratio does not depend on the machine's speed.
Target: <= 0.5 s (llmfit answers in 0.55 s over its 15,855 models).

    .venv/bin/python bench/cold_start.py [--runs 10]
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    exe = shutil.which("recommend") or str(Path(sys.executable).parent / "recommend")
    cmd = [exe, "--vram", "24", "--max-latency", "800ms", "--json"]
    timed(cmd, 1)  # warm the OS file cache; a first run after install also compiles .pyc files
    rec = timed(cmd, args.runs)
    bare = timed([sys.executable, "-c", "pass"], args.runs)
    res = {"recommend_median_s": statistics.median(rec), "recommend_min_s": min(rec), "recommend_max_s": max(rec),
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


if __name__ == "__main__":
    main()
