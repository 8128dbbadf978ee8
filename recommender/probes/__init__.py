"""Layer 5, real runs, the parent side: what to run (perf: files, catalog models, synthetic models of the exact
architecture written by synthetic), the child process that runs it (evaluators/), and the rows it becomes;
accuracy/ for lm-eval quick subsets."""

from recommender.probes.perf import ProbeTarget, resolve_target, run_perf_probe

__all__ = ["ProbeTarget", "resolve_target", "run_perf_probe"]
