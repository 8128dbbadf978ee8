"""The command-line flags of llama.cpp's tools, read from its own argument definitions (common/arg.cpp).

llama-server is not installed here, so the flags of the recipes `recommend` prints for it are checked against the
table this script writes from arg.cpp (tests/data/llama_cpp_args.csv): each flag name, whether it takes a value, and
which tools (llama.cpp's `LLAMA_EXAMPLE_*`) accept it. The arg.cpp read is the one vendored in llama-cpp-python
0.3.36's sdist (vendor/llama.cpp/common/arg.cpp; its sha256 is in the table's header line).

    python tests/llama_cpp_args.py path/to/common/arg.cpp > tests/data/llama_cpp_args.csv
"""

from __future__ import annotations

import csv
import hashlib
import re
import sys
from pathlib import Path

TABLE = Path(__file__).parent / "data" / "llama_cpp_args.csv"
_START = re.compile(r"add_opt\(common_arg\(")
_NAMES = re.compile(r"\{\s*(\"[^\"]+\"(?:\s*,\s*\"[^\"]+\")*)\s*\}")
_HANDLER = re.compile(r"\[\]\s*\(\s*common_params\s*&\s*\w+\s*(?:,\s*([^)]*?)\s*\w+\s*)?\)")
_EXAMPLES = re.compile(r"\.set_examples\(\{([^}]*)\}\)")
_EXCLUDES = re.compile(r"\.set_excludes\(\{([^}]*)\}\)")


def extract(text: str) -> list[dict]:
    """One row per flag name: {flag, takes_value, examples ('' = every tool), excludes}."""
    starts = [m.end() for m in _START.finditer(text)] + [len(text)]
    rows = []
    for a, b in zip(starts, starts[1:]):
        chunk = text[a:b]
        head = chunk[:chunk.find("[]")] if "[]" in chunk else chunk
        name_lists = [re.findall(r"\"([^\"]+)\"", m.group(1)) for m in _NAMES.finditer(head)]
        h = _HANDLER.search(chunk)
        if not name_lists or h is None:
            continue
        kind = (h.group(1) or "").strip()
        takes_value = bool(kind) and kind != "bool"
        names = [n for lst in (name_lists[:2] if kind == "bool" else name_lists[:1]) for n in lst if n.startswith("-")]
        ex = _EXAMPLES.search(chunk)
        exc = _EXCLUDES.search(chunk)
        examples = " ".join(x.strip().removeprefix("LLAMA_EXAMPLE_") for x in ex.group(1).split(",")) if ex else ""
        excludes = " ".join(x.strip().removeprefix("LLAMA_EXAMPLE_") for x in exc.group(1).split(",")) if exc else ""
        for n in names:
            rows.append({"flag": n, "takes_value": int(takes_value), "examples": examples, "excludes": excludes})
    return rows


def load() -> tuple[str, dict[str, list[dict]]]:
    """(the header line naming the source, flag -> its definitions: a flag can be defined once per tool)."""
    lines = TABLE.read_text(encoding="utf-8").splitlines()
    out: dict[str, list[dict]] = {}
    for r in csv.DictReader(lines[1:]):
        out.setdefault(r["flag"], []).append(r)
    return lines[0], out


def applies(d: dict, tool: str) -> bool:
    """arg.cpp common_params_parser_init: every tool inherits the options of LLAMA_EXAMPLE_COMMON (the default set)."""
    ex = d["examples"].split()
    return (not ex or tool in ex or "COMMON" in ex) and tool not in d["excludes"].split()


def accepts(table: dict[str, list[dict]], tool: str, argv: list[str]) -> list[str]:
    """What llama.cpp's `tool` (SERVER, CLI, ...) would refuse in argv: unknown flags, flags of other tools, a flag
    that needs a value without one. Empty = every flag accepted."""
    problems, i = [], 0
    while i < len(argv):
        flag = argv[i]
        defs = [d for d in table.get(flag, []) if applies(d, tool)]
        if not flag.startswith("-"):
            problems.append(f"stray argument {flag!r}")
        elif not defs:
            problems.append(f"{flag} is not a {tool} flag" if flag in table else f"unknown flag {flag}")
        elif defs[0]["takes_value"] == "1":
            if i + 1 >= len(argv):
                problems.append(f"{flag} needs a value")
            i += 1
        i += 1
    return problems


if __name__ == "__main__":
    src = Path(sys.argv[1])
    data = src.read_bytes()
    w = csv.DictWriter(sys.stdout, ["flag", "takes_value", "examples", "excludes"], lineterminator="\n")
    sys.stdout.write(f"# llama.cpp common/arg.cpp as vendored in llama-cpp-python 0.3.36's sdist "
                     f"(vendor/llama.cpp/common/arg.cpp, sha256 {hashlib.sha256(data).hexdigest()}); "
                     f"written by tests/llama_cpp_args.py\n")
    w.writeheader()
    w.writerows(extract(data.decode("utf-8")))
