"""Generated files are current: each generator has a --check mode that writes nothing and exits 1 when its output is
not what a run would write (the speed terms were found stale that way: the MoE decode term had been fitted before the
H200 kernel factors it reads existed). A changed input (a measured row, a GPU profile, a config, a quant) means
rerunning the generator named in the failure, in the order below (the MoE fit of gpu_loo reads quant_kernels'
factors)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHECKS = {
    "profiles/hardware, sources/gpus (make_profiles.py)": ["sources/gpus/make_profiles.py", "--check"],
    "recommender/predict/quant_speeds.py (quant_kernels.py)": ["bench/quant_kernels.py", "--check"],
    "recommender/predict/family_speeds.py (gpu_loo.py)": ["bench/gpu_loo.py", "--check"],
    "sources/quality/quant_quality.csv (build_quality.py)": ["sources/quality/build_quality.py", "--check",
                                                             "--quant-only"],
}


def _check(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("output", sorted(CHECKS))
def test_generated_file_is_current(output):
    r = _check(CHECKS[output])
    assert r.returncode == 0, f"{output} is stale (rerun without --check):\n{r.stdout[-2000:]}{r.stderr[-2000:]}"


@pytest.mark.slow
def test_quality_tables_are_current():
    """Every output of the quality build (model_quality.csv, quant_quality.csv, fit_report.md / .json): a model added
    to sources/configs gets its row there. About 8 s of CPU (the estimators' leave-one-out fits)."""
    r = _check(["sources/quality/build_quality.py", "--check"])
    assert r.returncode == 0, r.stderr[-2000:]
