"""`recommender mcp`: the MCP server on stdio, asked through the SDK's own client (mcp.client.stdio); its results are
the CLI's --json records."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

mcp = pytest.importorskip("mcp", reason="pip install 'llm-recommender[mcp]'")
anyio = pytest.importorskip("anyio")

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402


def _is_error(result) -> bool:  # mcp 2: is_error; mcp 1: isError
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


def _payload(result) -> dict:
    assert not _is_error(result), result.content
    sc = getattr(result, "structuredContent", None) or getattr(result, "structured_content", None)
    if sc:
        return sc.get("result", sc) if "schema_version" not in sc else sc
    return json.loads(result.content[0].text)


async def _ask(calls: list[tuple[str, dict]]) -> tuple[list[str], list]:
    env = {k: v for k, v in os.environ.items() if k != "RECOMMENDER_CATALOG"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "recommender", "mcp"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = [t.name for t in (await session.list_tools()).tools]
            results = [await session.call_tool(name, args) for name, args in calls]
    return tools, results


def test_mcp_answers_recommend_as_the_cli_does(tmp_path):
    args = {"vram": "24", "max_latency": "800ms", "workload": "chat", "top": 3}
    tools, (rec, bad, models) = anyio.run(_ask, [("recommend", args), ("recommend", {"vram": "lots"}),
                                                 ("list_models", {})])
    assert {"recommend", "estimate", "list_models", "hardware"} <= set(tools)
    got = _payload(rec)
    env = {k: v for k, v in os.environ.items() if k != "RECOMMENDER_CATALOG"}
    p = subprocess.run([sys.executable, "-m", "recommender", "recommend", "--vram", "24", "--max-latency", "800ms",
                        "--workload", "chat", "--top", "3", "--json"], capture_output=True, text=True, env=env,
                       timeout=120)
    cli = json.loads(p.stdout)
    assert got["schema_version"] == cli["schema_version"]
    assert [(c["model"], c["quant"], c["engine"], c["score"]) for c in got["candidates"]] == \
        [(c["model"], c["quant"], c["engine"], c["score"]) for c in cli["candidates"]]
    assert got["candidates"][0]["launch"]["commands"]
    assert _is_error(bad) and "error: " in bad.content[0].text and "hint: " in bad.content[0].text
    assert len(_payload(models)["items"]) > 100
