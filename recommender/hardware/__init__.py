"""Layer 2, where it runs: this machine (host) and the GPU profiles one plans for (profiles)."""

from recommender.hardware.host import GpuInfo, HostInfo, probe_host
from recommender.hardware.profiles import (
    find_profile,
    hardware_key,
    load_profiles,
    match_profile,
    planning_hardware,
)

__all__ = ["GpuInfo", "HostInfo", "find_profile", "hardware_key", "load_profiles", "match_profile", "planning_hardware",
           "probe_host"]
