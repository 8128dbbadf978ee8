"""sources/weights/repos.csv, the public copies launch recipes name (recommender.rank.launch): every row is a catalog
model at a catalog quantization, cites where it was seen (a URL or github:OWNER/REPO@PATH) and what that source shows,
and a GGUF file carries its quantization's own tag -- unsloth's dynamic mixes (UD-Q4_K_M, UD-Q4_K_XL) are other
tensor-type mixes than llama-quantize's Q4_K_M, so a row must not file them under the standard name."""

from __future__ import annotations

import csv
import re

from recommender.core.paths import SOURCES_DIR
from recommender.model.quant import QUANTS
from recommender.rank.launch import WEIGHTS_CSV, _llama_model_args, weights_for

SOURCE = re.compile(r"^(https?://\S+|github:[A-Za-z0-9][\w.-]*/[\w.-]+@\S+)$")
FORMATS = {"gguf": {"gguf", "float"}, "awq": {"awq"}, "gptq": {"gptq"}, "hf": {"fp8", "int8", "float"}}


def _rows() -> list[dict]:
    with WEIGHTS_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _catalog_models() -> set[str]:
    with (SOURCES_DIR / "configs" / "sources.csv").open(newline="", encoding="utf-8") as f:
        return {r["model"] for r in csv.DictReader(f)}


def test_every_row_is_a_catalog_variant_with_its_source():
    models, seen = _catalog_models(), set()
    for r in _rows():
        where = (r["model_id"], r["quant"], r["repo"], r["file"])
        assert r["model_id"] in models, where
        assert r["quant"] in QUANTS, where
        assert QUANTS[r["quant"]].family in FORMATS[r["format"]], where
        assert r["kind"] in ("publisher", "community"), where
        if r["kind"] == "publisher":  # the model's own organization
            assert r["repo"].split("/")[0] == r["model_id"].split("/")[0], where
        assert SOURCE.match(r["source"]), where
        assert r["basis"].strip(), where
        assert not r["file_bytes"] or r["file_bytes"].isdigit(), where
        assert where not in seen, f"duplicate row {where}"
        seen.add(where)


def test_a_gguf_file_carries_its_own_quant_tag_and_no_dynamic_mix():
    for r in _rows():
        if r["format"] != "gguf" or not r["file"]:
            assert r["format"] == "gguf" or not r["file"], r  # HF layouts are whole repositories
            continue
        name = r["file"]
        assert name.endswith(".gguf"), name
        assert re.search(rf"(^|[-._]){re.escape(r['quant'])}([-.]|$)", name, re.I), (r["quant"], name)
        assert not re.search(r"(^|[-._])UD-", name), f"unsloth dynamic mix filed as {r['quant']}: {name}"


def test_the_rtx_4090_default_pick_names_its_file_and_the_recipe_downloads_that_file():
    """The default pick for a 24 GB RTX 4090 (Qwen3.6-27B at Q6_K) had no known public file; the recipe now names
    the file, and llama-server is given it (-hff) rather than only the tag, which llama.cpp matches as `Q6_K[.-]`
    against every file of the repository."""
    ws = weights_for("Qwen/Qwen3.6-27B", "Q6_K", "llama.cpp")
    assert ws and ws[0].repo == "unsloth/Qwen3.6-27B-GGUF" and ws[0].file == "Qwen3.6-27B-Q6_K.gguf"
    assert ws[0].source.startswith("github:")
    assert _llama_model_args(ws[0], "Qwen/Qwen3.6-27B", "Q6_K", None) == [
        "-hf", "unsloth/Qwen3.6-27B-GGUF", "-hff", "Qwen3.6-27B-Q6_K.gguf"]
    tag_only = weights_for("google/gemma-4-26B-A4B-it", "Q4_K_M", "llama.cpp")[0]  # only the page's -hf snippet seen
    assert tag_only.file is None
    assert _llama_model_args(tag_only, "google/gemma-4-26B-A4B-it", "Q4_K_M", None) == [
        "-hf", "bartowski/google_gemma-4-26B-A4B-it-GGUF:Q4_K_M"]


def test_a_publisher_fp8_checkpoint_comes_before_quantizing_at_load():
    ws = weights_for("Qwen/Qwen3.6-27B", "FP8", "vllm")
    assert [w.kind for w in ws][:2] == ["publisher", "on-load"]
    assert ws[0].repo == "Qwen/Qwen3.6-27B-FP8" and ws[0].file is None


def test_a_named_file_comes_before_a_quant_tag_within_a_kind():
    """gemma-4-31B-it at Q4_K_M has a tag-only community copy listed first in the data and a named unsloth file: the
    recipe downloads the named file."""
    ws = weights_for("google/gemma-4-31B-it", "Q4_K_M", "llama.cpp")
    assert ws[0].repo == "unsloth/gemma-4-31B-it-GGUF" and ws[0].file == "gemma-4-31B-it-Q4_K_M.gguf"
    assert any(w.file is None for w in ws[1:])
