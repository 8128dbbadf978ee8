"""lm-eval task definitions over the local item files (no hub), and per-item results out of lm-eval.

The task configs are lm-eval's own C-Eval / CMMLU / MMLU templates (lm_eval/tasks/{ceval,cmmlu,mmlu}, v0.4.13)
with ``dataset_path: json`` and ``data_files`` pointing at the shipped JSON-lines file:

- prompt: the task's description (per subject, as lm-eval's per-subject tasks have it), then the question and
  ``A. … / B. … / C. … / D. …``, then ``答案：`` (C-Eval, CMMLU) or ``Answer:`` (MMLU); the choices scored are the
  letters ``A``–``D`` after lm-eval's target delimiter (a space); metric ``acc``.
- one lm-eval task per benchmark holds every subject (the subject is a field of each item), so a 50-item subset is
  one task of 50 documents rather than 52 tasks of 0–2. lm-eval's few-shot samplers draw from one split for the whole
  task, so the k-shot examples of the item's own subject (the first k of its dev rows, as lm-eval's ``first_n``
  sampler takes them for a per-subject task) are put in front of the question by ``process_docs``, formatted as
  lm-eval formats few-shot examples (question + target delimiter + letter, joined by the few-shot delimiter
  ``\\n\\n``). The prompt a model sees is the one lm-eval's per-subject task would build.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional



LETTERS = ["A", "B", "C", "D"]
QUESTION = {
    "ceval": "{{question.strip()}}\nA. {{choices[0]}}\nB. {{choices[1]}}\nC. {{choices[2]}}\nD. {{choices[3]}}\n答案：",
    "cmmlu": "{{question.strip()}}\nA. {{choices[0]}}\nB. {{choices[1]}}\nC. {{choices[2]}}\nD. {{choices[3]}}\n答案：",
    "mmlu": "{{question.strip()}}\nA. {{choices[0]}}\nB. {{choices[1]}}\nC. {{choices[2]}}\nD. {{choices[3]}}\nAnswer:",
}
DESCRIPTION = {
    "ceval": "以下是中国关于{{subject_name}}考试的单项选择题，请选出其中的正确答案。\n\n",
    "cmmlu": "以下是关于{{subject_name}}的单项选择题，请直接给出正确答案的选项。\n\n",
    "mmlu": "The following are multiple choice questions (with answers) about {{subject_name}}.\n\n",
}
TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"


def offline_env() -> None:
    """No hub: every dataset comes from a local file."""
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"


def _render_question(task: str, doc: dict) -> str:
    q, c = doc["question"].strip(), doc["choices"]
    tail = "Answer:" if task == "mmlu" else "答案："
    return f"{q}\nA. {c[0]}\nB. {c[1]}\nC. {c[2]}\nD. {c[3]}\n{tail}"


def read_jsonl(path: Path) -> list[dict]:
    # split on "\n" only: str.splitlines() would also split inside strings holding U+2028, U+0085, ...
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").split("\n") if line.strip()]


def fewshot_prefixes(task: str, shots: int, dev_file: Optional[Path]) -> dict[str, str]:
    """subject -> the k labeled dev examples (of ``dev_file``, the task's shipped dev split), in lm-eval's few-shot
    layout."""
    if shots <= 0:
        return {}
    if dev_file is None:
        raise ValueError(f"{shots}-shot {task} needs its dev file")
    by_subj: dict[str, list[dict]] = {}
    for d in read_jsonl(dev_file):
        by_subj.setdefault(d["subject"], []).append(d)
    return {s: "".join(_render_question(task, d) + TARGET_DELIMITER + LETTERS[d["answer"]] + FEWSHOT_DELIMITER
                       for d in docs[:shots]) for s, docs in by_subj.items()}


def task_config(task: str, items_file: Path, shots: int, dev_file: Optional[Path] = None) -> dict[str, Any]:
    prefixes = fewshot_prefixes(task, shots, dev_file)

    def process_docs(ds):
        return ds.map(lambda d: {"fewshot": prefixes.get(d["subject"], "")})

    return {
        "task": f"recommender_{task}",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(items_file)}},
        "test_split": "test",
        "process_docs": process_docs,
        "output_type": "multiple_choice",
        "description": DESCRIPTION[task],
        "doc_to_text": "{{fewshot}}" + QUESTION[task],
        "doc_to_choice": LETTERS,
        "doc_to_target": "answer",
        "target_delimiter": TARGET_DELIMITER,
        "fewshot_delimiter": FEWSHOT_DELIMITER,
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1.0},
    }


def evaluate(lm, configs: dict[str, dict]) -> dict[str, list[dict]]:
    """Run lm-eval on the given task configs; per task, one record per item: id, subject, answer, the model's
    log-likelihood of each option, its pick and whether it is right."""
    offline_env()
    from lm_eval import evaluator  # noqa: PLC0415
    from lm_eval.tasks import TaskManager, get_task_dict  # noqa: PLC0415

    # the configs are whole inline dicts (no lm-eval task name, no `include`): the default TaskManager would first
    # index every task YAML lm-eval ships, which nothing here looks up (lm-eval 0.4.13: 14,683 names, 37.5 s per
    # probe on the shared 2-core machine at load 7.6; 0.00 s without them)
    tm = TaskManager(include_defaults=False)
    task_dict = get_task_dict(list(configs.values()), tm)
    res = evaluator.evaluate(lm=lm, task_dict=task_dict, log_samples=True, verbosity="ERROR")
    out: dict[str, list[dict]] = {}
    for task, cfg in configs.items():
        recs = []
        for s in sorted(res["samples"][cfg["task"]], key=lambda s: s["doc_id"]):
            doc = s["doc"]
            lls = [float(r[0]) for r in s["filtered_resps"]]
            pick = max(range(len(lls)), key=lambda i: lls[i])  # lm-eval's argmax (first on ties)
            recs.append({"id": doc["id"], "subject": doc["subject"], "category": doc.get("category", ""),
                         "answer": int(doc["answer"]), "loglikelihoods": lls, "pick": pick,
                         "correct": bool(s["acc"])})
            if recs[-1]["correct"] != (pick == recs[-1]["answer"]):
                raise RuntimeError("lm-eval's acc disagrees with the argmax of its own log-likelihoods")
        out[task] = recs
    return out
