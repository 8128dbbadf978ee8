"""Layer 3, where it runs and what it must do: this machine (host), the GPU profiles one plans for (profiles) and
the workload presets (workloads)."""

from recommender.hardware.host import GpuInfo, HostInfo, probe_host
from recommender.hardware.profiles import (
    find_profile,
    hardware_key,
    load_profiles,
    match_profile,
    planning_hardware,
)
from recommender.hardware.workloads import get_workload, load_workloads

__all__ = ["GpuInfo", "HostInfo", "find_profile", "get_workload", "hardware_key", "load_profiles", "load_workloads",
           "match_profile", "planning_hardware", "probe_host"]
