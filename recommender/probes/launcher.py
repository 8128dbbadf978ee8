"""`recommender run`: start a planned candidate on an engine installed here, wait until it answers, stop it.

The plan is a row of the last `recommend` answer (stored in the cache folder by recommend, core.paths.LAST_ANSWER_FILE); its launch
recipe (recommender.rank.launch) gives the command, with the local weights file in place of a download where there is
one. The server runs in its own process group, so stopping it (Ctrl-C included) stops every process it started.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from recommender.core.errors import UserError
from recommender.core.paths import cache_root, LAST_ANSWER_FILE
from recommender.core.records import Figure
from recommender.predict.split import DeviceShare, SplitPlan

READY_POLL_S = 0.25
STOP_WAIT_S = 10.0


def last_answer_path() -> Path:
    return cache_root() / LAST_ANSWER_FILE


@dataclass
class Plan:
    """A shown row of a recommend answer, as `run` needs it (the fields a launch recipe and a comparison read)."""

    rank: Optional[int]
    model: str
    quant: str
    engine: str
    context_tokens: int
    batch: int
    prompt_tokens: int
    output_tokens: int
    kv_dtype: str
    gpu_layers: Optional[int]
    split: Optional[SplitPlan]
    devices: Optional[list[DeviceShare]]
    figures: dict[str, Figure] = field(default_factory=dict)

    @classmethod
    def from_json(cls, c: dict) -> "Plan":
        figs = {k: Figure(v["value"], v["unit"], v["provenance"], v.get("basis", ""),
                          tuple(v["interval"]) if v.get("interval") else None) for k, v in c["figures"].items()}
        return cls(c.get("rank"), c["model"], c["quant"], c["engine"], c["context_tokens"], c["batch"],
                   c["prompt_tokens"], c["output_tokens"], c["kv_dtype"], c.get("gpu_layers"),
                   SplitPlan.model_validate(c["split"]) if c.get("split") else None,
                   [DeviceShare.model_validate(d) for d in c["devices"]] if c.get("devices") else None, figs)


def load_last_answer() -> dict:
    p = last_answer_path()
    if not p.is_file():
        raise UserError("no recommend answer to run from",
                        hint="run `recommend ...` first (its answer is kept for `recommender run RANK`)")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"the stored recommend answer {p} cannot be read ({e})", hint="run `recommend ...` again")


def pick(answer: dict, rank: Optional[int], model: Optional[str], quant: Optional[str]) -> Plan:
    """The row of the answer: by rank, or the first shown row (ranked, then excluded) of a model and quant."""
    ranked = answer.get("candidates", [])
    if rank is not None:
        for c in ranked:
            if c.get("rank") == rank:
                return Plan.from_json(c)
        raise UserError(f"the last recommend answer has no rank {rank} (it ranked {len(ranked)})",
                        hint=f"give a rank from 1 to {len(ranked)}, or rerun `recommend`")
    for c in ranked + answer.get("excluded", []):
        if (model is None or c["model"] == model) and (quant is None or c["quant"] == quant):
            return Plan.from_json(c)
    raise UserError(f"the last recommend answer shows no row of {model or 'any model'} at {quant or 'any quant'}",
                    hint=f"run `recommend --model {model or 'MODEL'}{' --quant ' + quant if quant else ''}` first")


def _llama_cpp_tool() -> Optional[str]:
    if shutil.which("llama-server"):
        return "llama-server"
    if all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "uvicorn", "fastapi")) \
            and importlib.util.find_spec("llama_cpp.server") is not None:
        return "llama_cpp.server"
    return None


# the tool that serves each engine here, by its record's name (core.engines); an engine without one is not run
_ENGINE_TOOLS = {"llama.cpp": _llama_cpp_tool, "vllm": lambda: "vllm" if shutil.which("vllm") else None}


def engine_tool(engine: str) -> Optional[str]:
    """The tool that runs a planned engine here: llama-server or llama-cpp-python's server for llama.cpp, vllm."""
    find = _ENGINE_TOOLS.get(engine)
    return find() if find is not None else None


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def with_port(cmd, port: int) -> list[str]:
    """A launch command's (recommender.rank.launch.LaunchCommand) argv with its port replaced; python -m ... runs on this interpreter."""
    argv = list(cmd.argv)
    i = argv.index("--port")
    argv[i + 1] = str(port)
    if argv[0] == "python":
        argv[0] = sys.executable
    return argv


# llama-cpp-python's server with llama.cpp's extra CPU buffer types off (evaluators/llama_cpp_server.py: the AMX
# weight repacking that crashes the first decode on CPUs that list AMX here); the same arguments as llama_cpp.server
NO_EXTRA_BUFTS_SERVER = "evaluators.llama_cpp_server"


def without_extra_bufts(argv: list[str], cpu_flags: list[str]) -> tuple[list[str], Optional[str]]:
    """``python -m llama_cpp.server ...`` run through NO_EXTRA_BUFTS_SERVER where the CPU advertises AMX, with the line
    that says so; any other command, or another CPU, unchanged (None)."""
    if "amx" not in cpu_flags or argv[1:3] != ["-m", "llama_cpp.server"]:
        return argv, None
    return [argv[0], "-m", NO_EXTRA_BUFTS_SERVER, *argv[3:]], (
        "this CPU advertises AMX: llama_cpp.server runs with llama.cpp's extra CPU buffer types (AMX weight "
        f"repacking) off, as the probes do ({NO_EXTRA_BUFTS_SERVER}: the repacked weights crash its first decode on "
        "such machines)")


class Server:
    """A server process in its own session (process group), its output in a log file."""

    def __init__(self, argv: list[str], log: Path, env: Optional[dict] = None) -> None:
        self.argv, self.log = argv, log
        self._fh = log.open("wb")
        self.proc = subprocess.Popen(argv, stdout=self._fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})}, start_new_session=True)

    def tail(self, n: int = 5) -> str:
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def wait_ready(self, base_url: str, timeout_s: float) -> None:
        """Until GET {base_url}/models answers 200; the process dying or the time running out is a UserError."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise UserError(f"the server exited with {self.proc.returncode} before answering: {self.tail()}"[:600],
                                hint=f"its log: {self.log}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(READY_POLL_S)
        raise UserError(f"the server did not answer within {timeout_s:.0f} s", hint=f"raise --timeout; its log: "
                                                                                     f"{self.log}")

    def stop(self) -> Optional[int]:
        """SIGTERM to the whole group, SIGKILL after STOP_WAIT_S; the exit code."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(STOP_WAIT_S)
        self._fh.close()
        return self.proc.returncode
