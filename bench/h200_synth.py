"""Write synthetic (random-weight) GGUFs with the project's writer, for the llama.cpp C++ tool runs on the H200.

    python3 bench/h200_synth.py OUT_DIR MODEL_ID:QUANT [MODEL_ID:QUANT ...]

Each file is ``recommender.probes.synthetic.build_synthetic_gguf(spec, quant, path)`` with its defaults (seed 0, synthetic
vocab) -- the same call ``bench/gpu_matrix.py`` makes, so the files are byte-identical to the ones behind the shipped
h200-llamacpp-synthetic*.jsonl rows. Prints one JSON line per file (model, quant, path, bytes, seconds).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from recommender.probes.synthetic import build_synthetic_gguf  # noqa: E402
from recommender.catalog.build import load_models  # noqa: E402
from recommender.core.paths import SOURCES_DIR  # noqa: E402


def main() -> None:
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    for item in sys.argv[2:]:
        model_id, quant = item.rsplit(":", 1)
        spec = specs[model_id]
        path = out_dir / f"{spec.name}-{quant}.gguf"
        t0 = time.perf_counter()
        build_synthetic_gguf(spec, quant, path)
        print(json.dumps({"model_id": model_id, "quant": quant, "path": str(path), "file_bytes": path.stat().st_size,
                          "seconds": round(time.perf_counter() - t0, 1), "writer": "evaluators.synthetic",
                          "seed": 0}), flush=True)


if __name__ == "__main__":
    main()
