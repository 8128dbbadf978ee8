"""A more aggressive quantization of a GGUF, with llama.cpp's own quantizer (llama_model_quantize through
llama-cpp-python; allow_requantize, since the input is already quantized). Output goes to the cache, never the repo."""

from __future__ import annotations

from pathlib import Path

# llama.h enum llama_ftype (LLAMA_FTYPE_MOSTLY_*)
FTYPES = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12,
          "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17, "Q6_K": 18}


def requantize(src: Path, quant: str, out: Path, threads: int = 0) -> Path:
    out = Path(out)
    if out.is_file():
        return out
    import llama_cpp as L  # noqa: PLC0415

    p = L.llama_model_quantize_default_params()
    p.ftype = FTYPES[quant]
    p.allow_requantize = True
    p.nthread = threads
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    rc = L.llama_model_quantize(str(src).encode(), str(tmp).encode(), p)
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"llama_model_quantize returned {rc}")
    tmp.replace(out)
    return out
