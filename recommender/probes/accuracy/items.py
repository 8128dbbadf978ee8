"""Versioned item files of the quick subsets: which questions, built how, checked by sha256.

Every task ships (under ``sources/benchmarks/<task>/``, license beside the files):

- ``<task>-<split>-v1-50.jsonl`` and ``-150.jsonl``: subject-stratified subsets. ``--items N`` is a TOTAL per task.
  Allocation is proportional to the subject's share of the full split (Hamilton / largest remainder); the seats left
  after the integer parts go to the largest remainders, ties broken by a seeded shuffle. Within a subject the items
  are a seeded ``random.sample`` of its rows. Seed ``SEED`` and the task name fix every choice: the same files come
  out on every build, and a run always scores the same questions.
- ``<task>-dev-v1.jsonl``: the dev split (the 5-shot examples, the first five of the item's subject, as lm-eval's
  ``first_n`` sampler takes them).
- C-Eval only: ``ceval-val-v1-full.jsonl`` (1,346 items, the set the bench compares the subsets against).
  CMMLU test (11,582) and MMLU test (14,042) are too large to ship: ``--items full`` builds them from the local raw
  CSVs (``--data-dir`` / ``RECOMMENDER_BENCHMARK_DATA``) into the cache, and their sha256 must equal the manifest's.

``sources/benchmarks/manifest.json`` records each file's sha256, item count and how it was made; a probe refuses a
file whose checksum differs, and every stored score carries the checksum of the file it was computed on.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import random
from pathlib import Path
from typing import Optional


from recommender.core.errors import UserError
from recommender.core.paths import cache_root, ROOT, SOURCES_DIR

VERSION = "v1"
SEED = 20261129
SIZES = (50, 150)
BENCH_DIR = SOURCES_DIR / "benchmarks"
MANIFEST = BENCH_DIR / "manifest.json"
TASKS = {
    # task: (split scored, raw folder, language, number of options)
    "ceval": ("val", "ceval", "zh"),
    "cmmlu": ("test", "cmmlu", "zh"),
    "mmlu": ("test", "mmlu", "en"),
}
CHOICES = ("A", "B", "C", "D")
CHANCE = 1 / len(CHOICES)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def default_data_dir() -> Optional[Path]:
    env = os.environ.get("RECOMMENDER_BENCHMARK_DATA")
    if env:
        return Path(env).expanduser()
    cand = ROOT.parent / "shared" / "data" / "benchmarks"
    return cand if cand.is_dir() else None


# ---------------------------------------------------------------------------------------------------------------
# raw CSVs -> item records
# ---------------------------------------------------------------------------------------------------------------
def _ceval_names(raw: Path) -> dict[str, tuple[str, str]]:
    m = json.loads((raw / "ceval" / "subject_mapping.json").read_text(encoding="utf-8"))
    return {k: (v[1], v[2]) for k, v in m.items()}  # subject -> (Chinese name, category)


def _cmmlu_names() -> dict[str, tuple[str, str]]:
    # the Chinese subject names lm-eval's CMMLU task descriptions use (lm_eval/tasks/cmmlu/_generate_configs.py)
    from lm_eval.tasks.cmmlu._generate_configs import SUBJECTS  # noqa: PLC0415

    return {k: (v, "") for k, v in SUBJECTS.items()}


def _mmlu_names() -> dict[str, tuple[str, str]]:
    # category = the tag of lm-eval's per-subject MMLU task (stem / humanities / social_sciences / other)
    import lm_eval  # noqa: PLC0415
    import yaml  # noqa: PLC0415

    out = {}
    for p in sorted((Path(lm_eval.__file__).parent / "tasks" / "mmlu" / "default").glob("mmlu_*.yaml")):
        d = yaml.safe_load(p.read_text())
        if isinstance(d, dict) and "dataset_name" in d:
            tag = d.get("tag", "")
            out[d["dataset_name"]] = (d["dataset_name"].replace("_", " "),
                                      tag.removeprefix("mmlu_").removesuffix("_tasks"))
    return out


def _ceval_row(i: int, row: dict) -> tuple:
    return row["id"], row["question"], [row[c] for c in CHOICES], CHOICES.index(row["answer"].strip())


def _cmmlu_row(i: int, row: dict) -> tuple:
    return row[""], row["Question"], [row[c] for c in CHOICES], CHOICES.index(row["Answer"].strip())


def _mmlu_row(i: int, row: dict) -> tuple:
    return str(i), row["question"], [row[f"choice{k}"] for k in range(4)], int(row["answer"])


# task -> (subject -> (name, category), file name after the subject, CSV row -> (id, question, choices, answer index))
_LAYOUTS = {
    "ceval": (_ceval_names, "_{split}.csv", _ceval_row),
    "cmmlu": (lambda raw: _cmmlu_names(), ".csv", _cmmlu_row),
    "mmlu": (lambda raw: _mmlu_names(), "_{split}.csv", _mmlu_row),
}


def read_raw(task: str, split: str, raw: Path) -> list[dict]:
    """All items of one split, in file order (subjects sorted by name), as uniform records."""
    if task not in _LAYOUTS:
        raise ValueError(task)
    names_of, suffix, parse = _LAYOUTS[task]
    suffix = suffix.format(split=split)
    names = names_of(raw)
    items = []
    for p in sorted((raw / task / split).glob(f"*{suffix}")):
        subj = p.name[: -len(suffix)]
        with open(p, encoding="utf-8", newline="") as f:
            for i, row in enumerate(csv.DictReader(f)):
                items.append(_item(task, split, subj, names[subj], *parse(i, row)))
    if not items:
        raise UserError(f"no {task} {split} files under {raw}",
                        hint="point --data-dir (or RECOMMENDER_BENCHMARK_DATA) at a folder with ceval/, cmmlu/, mmlu/")
    return items


def _item(task, split, subj, name_cat, rid, question, choices, answer) -> dict:
    return {"id": f"{task}-{split}/{subj}/{rid}", "task": task, "subject": subj, "subject_name": name_cat[0],
            "category": name_cat[1], "question": question, "choices": choices, "answer": answer}


# ---------------------------------------------------------------------------------------------------------------
# stratified selection
# ---------------------------------------------------------------------------------------------------------------
def allocate(counts: dict[str, int], total: int, rng: random.Random) -> dict[str, int]:
    """Proportional allocation of ``total`` seats over subjects (Hamilton's largest-remainder method)."""
    N = sum(counts.values())
    quotas = {s: total * c / N for s, c in counts.items()}
    seats = {s: min(int(math.floor(q)), counts[s]) for s, q in quotas.items()}
    order = list(counts)
    rng.shuffle(order)  # seeded tie-break
    order.sort(key=lambda s: -(quotas[s] - seats[s]))
    i = 0
    while sum(seats.values()) < total:
        s = order[i % len(order)]
        if seats[s] < counts[s]:
            seats[s] += 1
        i += 1
    return seats


def select(items: list[dict], total: int, task: str, seed: int = SEED) -> list[dict]:
    by_subj: dict[str, list[dict]] = {}
    for it in items:
        by_subj.setdefault(it["subject"], []).append(it)
    seats = allocate({s: len(v) for s, v in by_subj.items()}, total, random.Random(f"{task}-{seed}-alloc"))
    out = []
    for subj in sorted(by_subj):
        if seats[subj]:
            picked = random.Random(f"{task}-{seed}-{subj}").sample(range(len(by_subj[subj])), seats[subj])
            out += [by_subj[subj][i] for i in sorted(picked)]
    return out


def write_jsonl(items: list[dict], path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for it in items:
            f.write(json.dumps(it, ensure_ascii=False, sort_keys=True) + "\n")
    tmp.replace(path)
    return sha256_file(path)


def file_name(task: str, size: str) -> str:
    return f"{task}-{TASKS[task][0]}-{VERSION}-{size}.jsonl"


def dev_path(task: str) -> Path:
    """The shipped dev split of a task (the few-shot examples)."""
    return BENCH_DIR / task / dev_file_name(task)


def dev_file_name(task: str) -> str:
    return f"{task}-dev-{VERSION}.jsonl"


def build_all(raw: Path, out: Path = BENCH_DIR) -> dict:
    """Write every shipped item file and the manifest (maintainers: `python -m recommender.probes.accuracy.items RAW`)."""
    manifest: dict = {"version": VERSION, "seed": SEED, "files": {}}
    for task, (split, _folder, lang) in TASKS.items():
        full = read_raw(task, split, raw)
        dev = read_raw(task, "dev", raw)
        entries = {}
        for size in SIZES:
            sub = select(full, size, task)
            name = file_name(task, str(size))
            entries[name] = {"sha256": write_jsonl(sub, out / task / name), "n": len(sub), "shipped": True,
                             "subjects": len({i["subject"] for i in sub}),
                             "selection": f"stratified by subject, total {size}, seed {SEED}"}
        name = file_name(task, "full")
        path = out / task / name
        if task == "ceval":
            entries[name] = {"sha256": write_jsonl(full, path), "n": len(full), "shipped": True,
                             "subjects": len({i["subject"] for i in full}), "selection": "all"}
        else:  # not shipped: built on demand from the local raw CSVs, checked against this checksum
            tmp = out / task / (name + ".check")
            entries[name] = {"sha256": write_jsonl(full, tmp), "n": len(full), "shipped": False,
                             "subjects": len({i["subject"] for i in full}), "selection": "all"}
            tmp.unlink()
        dname = dev_file_name(task)
        entries[dname] = {"sha256": write_jsonl(dev, out / task / dname), "n": len(dev), "shipped": True,
                          "subjects": len({i["subject"] for i in dev}), "selection": "all (few-shot examples)"}
        for name, e in entries.items():
            manifest["files"][name] = {"task": task, "language": lang, **e}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


# ---------------------------------------------------------------------------------------------------------------
# runtime
# ---------------------------------------------------------------------------------------------------------------
def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def cache_dir() -> Path:
    return cache_root() / "benchmarks"


def parse_items(value: str) -> str:
    v = str(value).strip().lower()
    if v in ("full", "all"):
        return "full"
    if v.isdigit() and int(v) in SIZES:
        return v
    raise UserError(f"--items {value!r} is not one of {', '.join(map(str, SIZES))}, full",
                    hint="the quick subsets are fixed files (the same questions every run): --items 50, 150 or full")


def items_path(task: str, size: str, data_dir: Optional[Path] = None) -> tuple[Path, dict]:
    """The item file for a task and size, verified against the manifest. Returns (path, manifest entry)."""
    if task not in TASKS:
        raise UserError(f"unknown task {task!r}", hint=f"tasks: {', '.join(TASKS)}")
    name = file_name(task, size)
    entry = manifest()["files"][name]
    path = BENCH_DIR / task / name
    if not entry["shipped"]:
        path = cache_dir() / name
        if not path.is_file() or sha256_file(path) != entry["sha256"]:
            raw = data_dir or default_data_dir()
            if raw is None or not Path(raw).is_dir():
                raise UserError(f"--items full for {task} needs the raw {task} CSVs (not shipped: too large)",
                                hint="pass --data-dir PATH (a folder holding ceval/, cmmlu/, mmlu/) or set "
                                     "RECOMMENDER_BENCHMARK_DATA")
            write_jsonl(read_raw(task, TASKS[task][0], Path(raw)), path)
    got = sha256_file(path)
    if got != entry["sha256"]:
        raise UserError(f"{path} has sha256 {got[:12]}…, the manifest says {entry['sha256'][:12]}…",
                        hint="the item file changed: scores on it would not be comparable with earlier ones; "
                             "restore the shipped file (or the raw data it is built from)")
    return path, {"file": name, **entry}


def load_items(path: Path) -> list[dict]:
    # split on "\n" only: str.splitlines() would also split inside strings holding U+2028, U+0085, ...
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").split("\n") if line.strip()]


if __name__ == "__main__":  # maintainers: rebuild the shipped files from the raw CSVs
    import sys

    m = build_all(Path(sys.argv[1]))
    for name, e in sorted(m["files"].items()):
        print(f"{name:32s} n={e['n']:6d} subjects={e['subjects']:3d} {e['sha256'][:16]} "
              f"{'shipped' if e['shipped'] else 'built on demand'}")
