"""A Hugging Face model folder (config, tokenizer, safetensors) from a GGUF file, with transformers' GGUF loader.

The weights are dequantized (e.g. Q4_1 -> float) and saved as safetensors, so transformers and vLLM can run the same
real model llama.cpp runs from the GGUF (recipe from this project's engine notes: drop the GGUF quantizer state
before saving).
"""

from __future__ import annotations

from pathlib import Path


def hf_folder_from_gguf(gguf_path: Path, out_dir: Path, dtype: str = "bfloat16") -> Path:
    out_dir = Path(out_dir)
    if (out_dir / ".complete").exists():
        return out_dir
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    gguf_path = Path(gguf_path)
    folder, name = str(gguf_path.parent), gguf_path.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=getattr(torch, dtype))
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out_dir.with_name(out_dir.name + ".partial")
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    (tmp / ".complete").write_text(f"from {gguf_path.name}, dequantized to {dtype}\n")
    tmp.rename(out_dir)
    return out_dir
