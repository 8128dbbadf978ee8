"""Cold start of `recommend` as a whole process (interpreter start + imports + catalog read + ranking + output).

Prints the median and spread of N runs of `recommend --vram 24 --max-latency 800ms --json` (stdout discarded),
next to a bare `python -c pass` measured in the same run, so the ratio does not depend on the machine's speed.
`--baseline CHECKOUT` also times the same command from another checkout of the project (e.g. a `git worktree` of
an older commit) in alternation with this one, each with its own warm read cache, and prints the paired ratio.
The peer users compare us with, llmfit (`pip install llmfit`, the `bench` extra), is timed in the same run on its
`fit -n 10 --json` (its top 10 for this machine over its 15,855 entries), in alternation with `recommend`;
target (issue 16): recommend / llmfit median ratio <= 0.7.

Every command runs with byte-code caching on (PYTHONDONTWRITEBYTECODE is dropped from its environment), so the warm
run writes the .pyc files a user's install has (pip compiles them at install time) and the timed runs read them.
With it set - as it is in this workplace's shell - each run compiled the project's ~100 modules from source again,
about 0.2 s of every `recommend` and more for a tree that imports more of them at start (docs/benchmarks.md).

    .venv/bin/python bench/cold_start.py [--runs 10] [--baseline CHECKOUT [--extra ARGS] [--this-extra ARGS]
                                                [--this-catalog DUCKDB]]
    .venv/bin/python bench/cold_start.py --questions [--runs 5] [--tools] [--write]

``--questions`` (issue 26) times the nine questions of the quality issue (A-I with E'; I is the serve question,
`recommend --gpu L40S --workload serve`) against llmfit in one run: per round, each question's `recommend --json`
and then its llmfit counterpart (PEER_ARGS: the same memory budget through llmfit's ``--memory`` override, its
``fit -n 10 --json``), question after question, so machine load hits both sides of a pair alike. The ratio of a
question is the median over the rounds of recommend / llmfit of the same round. ``--tools`` also times
``recommender sensitivity --vram 24 --max-latency 800ms --json`` and ``recommender tune --trials 300 --json``
(whole processes, the median of ``--runs``; ``--tune-runs`` for tune, 1 by default). ``--write`` prints the markdown table
docs/benchmarks.md shows. Targets (issue 26): median ratio <= 1.0, none above 1.3, the serve question <= 1.0,
sensitivity <= 1 s, tune --trials 300 <= 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a timed command: this one's, byte-code caching on (module docstring), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | extra


def timed(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
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


# (label, recommend arguments): the nine questions of the quality issue (bench/evidence.py QUESTIONS), I = serve
QUESTIONS: list[tuple[str, list[str]]] = [
    ("A", ["--gpu", "RTX 4090", "--vram", "24", "--max-latency", "800ms"]),
    ("B", ["--gpu", "RTX 4060", "--vram", "8", "--max-latency", "800ms"]),
    ("C", ["--gpu", "RTX 3060 12GB", "--max-latency", "800ms"]),
    ("D", ["--gpu", "Apple M2 Max 30-core GPU 32GB"]),
    ("E", ["--gpu", "A100 80GB SXM4", "--max-latency", "800ms"]),
    ("E'", ["--gpu", "H100 SXM5", "--max-latency", "800ms"]),
    ("F", ["--gpu", "cpu", "--vram", "16", "--max-latency", "5s"]),
    ("G", ["--gpu", "RTX 4090", "--vram", "24", "--max-latency", "800ms", "--workload", "chat-zh"]),
    ("H", ["--gpu", "RTX 4090", "--vram", "24", "--workload", "long-doc"]),
    ("I", ["--gpu", "L40S", "--workload", "serve"]),
]
# llmfit's counterpart of each question (llmfit 1.1.17; its --help): its CLI has no GPU-profile list like ours (three
# bundled profiles), no latency limit and no workload, so each question gets the same memory budget through llmfit's
# --memory override (a synthetic GPU of that VRAM: the question's --vram, else the GPU's memory), and its top 10 as
# JSON. F (a CPU with 16 GB): --ram 16G, llmfit on this GPU-less machine planning CPU inference in 16 GB of RAM.
# H (long-doc, 32K context): --max-context 32768, its cap on the context it sizes the KV cache for. G (chat-zh) and
# I (serve: L40S 48 GB) have no counterpart beyond the memory.
PEER_FIT = ["fit", "-n", "10", "--json"]
# A command that exits non-zero is not timed (questions() checks each once first). LLMFIT=PATH names the llmfit binary
# to time; on Debian 12 (glibc 2.36) the manylinux_2_17 wheel's binary warns "weak version GLIBC_2.39 not found"
# and runs; the musllinux_1_2 wheel's static binary runs without the warning.
PEER_HINT = "pip install llmfit==1.1.17 (the bench extra), or name a working llmfit binary as LLMFIT=PATH"
PEER_ARGS: dict[str, list[str]] = {
    "A": ["--memory", "24G"], "B": ["--memory", "8G"], "C": ["--memory", "12G"], "D": ["--memory", "32G"],
    "E": ["--memory", "80G"], "E'": ["--memory", "80G"], "F": ["--ram", "16G"], "G": ["--memory", "24G"],
    "H": ["--memory", "24G", "--max-context", "32768"], "I": ["--memory", "48G"],
}
TARGET_MEDIAN, TARGET_MAX, TARGET_SERVE = 1.0, 1.3, 1.0
TOOLS: list[tuple[str, list[str], float]] = [  # (label, recommender arguments, target seconds)
    ("sensitivity --vram 24 --max-latency 800ms", ["sensitivity", "--vram", "24", "--max-latency", "800ms", "--json"],
     1.0),
    ("tune --trials 300", ["tune", "--trials", "300", "--json"], 5.0),
]
TOOL_ENTRY = "import sys; from recommender.cli.app import main; main(sys.argv[1:])\n"


def questions(runs: int, tools: bool, tune_runs: int = 1) -> dict:
    """The nine questions (and the serve question) against llmfit, paired and alternating (module docstring)."""
    here = Path(__file__).resolve().parents[1]
    peer = os.environ.get("LLMFIT") or shutil.which("llmfit") or str(Path(sys.executable).parent / "llmfit")
    if not Path(peer).exists():
        raise SystemExit("llmfit is not installed (pip install llmfit): the peer cannot be timed")
    env = child_env(PYTHONPATH=str(here))

    def rec_cmd(args: list[str]) -> list[str]:
        return [sys.executable, "-c", ENTRY, *args, "--json"]

    def run(c, e) -> float:
        t0 = time.perf_counter()
        subprocess.run(c, env=e, cwd=here, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.perf_counter() - t0

    pairs = [(lab, rec_cmd(a), [peer, *PEER_ARGS[lab], *PEER_FIT]) for lab, a in QUESTIONS]
    for lab, rc, pc in pairs:  # warm: file cache, .pyc files, the read cache; a command that fails is not timed
        for c, e in ((rc, env), (pc, child_env())):
            p = subprocess.run(c, env=e, cwd=here, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                raise SystemExit(f"{lab}: {' '.join(c[:1] + c[3:] if c[0] == sys.executable else c)} exited "
                                 f"{p.returncode}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''}"
                                 f"\nhint: {PEER_HINT}")
    rec: dict[str, list[float]] = {lab: [] for lab, _ in QUESTIONS}
    peer_t: dict[str, list[float]] = {lab: [] for lab, _ in QUESTIONS}
    for _ in range(runs):
        for lab, rc, pc in pairs:
            rec[lab].append(run(rc, env))
            peer_t[lab].append(run(pc, child_env()))
    rows = []
    for lab, args in QUESTIONS:
        ratios = [a / b for a, b in zip(rec[lab], peer_t[lab])]
        rows.append({"question": lab, "args": " ".join(args), "recommend_median_s": statistics.median(rec[lab]),
                     "llmfit_median_s": statistics.median(peer_t[lab]), "ratio_median": statistics.median(ratios),
                     "ratio_min": min(ratios), "ratio_max": max(ratios),
                     "llmfit_args": " ".join([*PEER_ARGS[lab], *PEER_FIT])})
    med = statistics.median(r["ratio_median"] for r in rows)
    worst = max(rows, key=lambda r: r["ratio_median"])
    serve = next(r for r in rows if r["question"] == "I")
    res = {"runs": runs, "questions": rows, "ratio_median_of_questions": med, "ratio_max": worst["ratio_median"],
           "ratio_max_question": worst["question"], "serve_ratio": serve["ratio_median"],
           "load_average": os.getloadavg()}
    if tools:
        res["tools"] = []
        for label, args, target in TOOLS:
            n = tune_runs if args[0] == "tune" else runs
            cmd = [sys.executable, "-c", TOOL_ENTRY, *args]
            run(cmd, env)
            ts = [run(cmd, env) for _ in range(n)]
            res["tools"].append({"tool": label, "median_s": statistics.median(ts), "min_s": min(ts),
                                 "max_s": max(ts), "runs": n, "target_s": target})
    return res


def questions_table(res: dict) -> str:
    """The markdown table docs/benchmarks.md shows."""
    out = ["| question | recommend arguments | recommend s | llmfit arguments | llmfit s | ratio (min-max) |",
           "|---|---|---|---|---|---|"]
    for r in res["questions"]:
        out.append(f"| {r['question']} | `{r['args']}` | {r['recommend_median_s']:.3f} | `{r['llmfit_args']}` | "
                   f"{r['llmfit_median_s']:.3f} | {r['ratio_median']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) |")
    out.append(f"\nMedian of the questions' ratios {res['ratio_median_of_questions']:.2f} (target <= {TARGET_MEDIAN}), "
               f"largest {res['ratio_max']:.2f} ({res['ratio_max_question']}; target <= {TARGET_MAX}), serve (I) "
               f"{res['serve_ratio']:.2f} (target <= {TARGET_SERVE}); {res['runs']} rounds, load average "
               + ", ".join(f"{x:.1f}" for x in res["load_average"]) + " at the end.")
    for t in res.get("tools", []):
        out.append(f"- `recommender {t['tool']}`: median {t['median_s']:.2f} s (min {t['min_s']:.2f}, max "
                   f"{t['max_s']:.2f}, {t['runs']} runs; target <= {t['target_s']:g} s)")
    return "\n".join(out)


def paired(baseline: Path, runs: int, extra: list[str] = (), this_extra: list[str] = (),
           this_catalog: Path | None = None) -> dict:
    """This checkout and `baseline` in turn (A B A B ...), as whole processes, each with its own read cache.
    ``extra``: arguments added to both commands; ``this_extra`` and ``this_catalog`` (RECOMMENDER_CATALOG): to this
    checkout's only (to give both trees the same workload: the baseline's models rebuilt into a catalog by this
    tree's `catalog build --sources BASELINE/sources`, with `--include-base` where the baseline ranked base
    checkpoints)."""
    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        def cmd_env(tree: Path, name: str, more: list[str], catalog: Path | None):
            env = child_env(PYTHONPATH=str(tree), RECOMMENDER_CACHE=str(Path(tmp) / name),
                            RECOMMENDER_USER_CATALOG=str(Path(tmp) / name / "none.duckdb"))
            env.pop("RECOMMENDER_CATALOG", None)
            if catalog is not None:
                env["RECOMMENDER_CATALOG"] = str(catalog.resolve())
            return [sys.executable, "-c", ENTRY, *ARGS, *extra, *more], env, str(tree)

        a = cmd_env(here, "this", list(this_extra), this_catalog)
        b = cmd_env(baseline.resolve(), "baseline", [], None)
        for cmd, env, cwd in (a, b):  # the two answers' sizes, so a reader can check the workloads are the same
            out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=True).stdout
            print(f"{cwd}: counts {json.loads(out).get('counts')}", file=sys.stderr)
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
    ap.add_argument("--extra", default="", help="arguments added to both commands of --baseline (one string)")
    ap.add_argument("--this-extra", default="", help="arguments added to this checkout's command of --baseline")
    ap.add_argument("--this-catalog", type=Path, help="the catalog this checkout's command of --baseline reads")
    ap.add_argument("--questions", action="store_true", help="the nine questions and serve against llmfit (issue 26)")
    ap.add_argument("--tools", action="store_true", help="with --questions: also sensitivity and tune --trials 300")
    ap.add_argument("--write", action="store_true", help="with --questions: print the markdown table")
    ap.add_argument("--tune-runs", type=int, default=1, help="with --tools: runs of tune --trials 300 (slow)")
    args = ap.parse_args()
    if args.questions:
        res = questions(args.runs, args.tools, args.tune_runs)
        print(json.dumps(res, indent=2) if args.json else questions_table(res))
        return
    here = Path(__file__).resolve().parents[1]
    # this checkout's code (an editable install may point at another checkout, so not the `recommend` script)
    env = child_env(PYTHONPATH=str(here))
    cmd = [sys.executable, "-c", ENTRY, *ARGS]
    peer = os.environ.get("LLMFIT") or shutil.which("llmfit") or str(Path(sys.executable).parent / "llmfit")
    peer_cmd = [peer, "fit", "-n", "10", "--json"] if Path(peer).exists() else None

    def run(c, e=None):
        t0 = time.perf_counter()
        subprocess.run(c, env=e, cwd=here, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return time.perf_counter() - t0

    run(cmd, env)  # warm the OS file cache, .pyc files and the read cache
    if peer_cmd:
        run(peer_cmd, child_env())
    rec, peer_t = [], []
    for _ in range(args.runs):  # alternating, so machine load affects both alike
        rec.append(run(cmd, env))
        if peer_cmd:
            peer_t.append(run(peer_cmd, child_env()))
    bare = timed([sys.executable, "-c", "pass"], args.runs)
    res = {}
    if args.baseline:
        res = paired(args.baseline, args.runs, args.extra.split(), args.this_extra.split(), args.this_catalog)
    res |= {"recommend_median_s": statistics.median(rec), "recommend_min_s": min(rec), "recommend_max_s": max(rec),
           "python_bare_median_s": statistics.median(bare), "runs": args.runs,
           "ratio_to_bare_python": statistics.median(rec) / statistics.median(bare), "target_s": 0.5}
    if peer_t:
        res |= {"llmfit_median_s": statistics.median(peer_t), "llmfit_min_s": min(peer_t),
                "llmfit_max_s": max(peer_t), "ratio_to_llmfit": statistics.median(rec) / statistics.median(peer_t),
                "target_ratio_to_llmfit": 0.7}
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"recommend --vram 24 --max-latency 800ms --json: median {res['recommend_median_s']:.3f} s "
              f"(min {res['recommend_min_s']:.3f}, max {res['recommend_max_s']:.3f}, {args.runs} runs)")
        print(f"bare python -c pass:                          median {res['python_bare_median_s']:.3f} s")
        print(f"ratio {res['ratio_to_bare_python']:.1f}x bare interpreter; target <= {res['target_s']} s: "
              f"{'met' if res['recommend_median_s'] <= res['target_s'] else 'NOT met'}")
        if peer_t:
            print(f"llmfit fit -n 10 --json:                      median {res['llmfit_median_s']:.3f} s "
                  f"(min {res['llmfit_min_s']:.3f}, max {res['llmfit_max_s']:.3f})")
            print(f"recommend / llmfit: {res['ratio_to_llmfit']:.2f}; target <= 0.7: "
                  f"{'met' if res['ratio_to_llmfit'] <= 0.7 else 'NOT met'}")
        else:
            print("llmfit not installed (pip install llmfit): peer not timed")
        if args.baseline:
            print(f"this checkout / {args.baseline} (alternating, {args.runs} pairs): median ratio "
                  f"{res['paired_ratio_median']:.3f} (min {res['paired_ratio_min']:.3f}, max "
                  f"{res['paired_ratio_max']:.3f}); medians {res['this_median_s']:.3f} s vs {res['baseline_median_s']:.3f} s")
            print(f"  CPU time (user + sys, less sensitive to a busy machine): median ratio "
                  f"{res['paired_cpu_ratio_median']:.3f}; {res['this_cpu_median_s']:.3f} s vs "
                  f"{res['baseline_cpu_median_s']:.3f} s")


if __name__ == "__main__":
    main()
