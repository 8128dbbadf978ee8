"""Host probe (with and without a GPU), hardware profile loading/validation and GPU name resolution."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest


from recommender.core.errors import UserError
from recommender.core.records import HardwareProfile
from recommender.hardware import host as hardware
from recommender.hardware.host import GpuInfo, memory_bandwidth_from_clock, probe_host
from recommender.hardware.profiles import find_profile, load_profiles, override_memory, profile_from_gpu

MIB = 1024**2
GIB = 1024**3


# ---------------------------------------------------------------------------------------------- fake NVML


class FakeNVMLError(Exception):
    pass


def make_fake_pynvml(gpus=None, init_error: str | None = None) -> types.ModuleType:
    """A stand-in for nvidia-ml-py's ``pynvml`` module. ``gpus``: list of dicts of raw NVML readings."""
    gpus = gpus or []
    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.NVML_CLOCK_MEM = 2
    m.calls = []

    def nvmlInit():
        m.calls.append("init")
        if init_error:
            raise FakeNVMLError(init_error)

    def nvmlShutdown():
        m.calls.append("shutdown")

    m.nvmlInit = nvmlInit
    m.nvmlShutdown = nvmlShutdown
    m.nvmlSystemGetDriverVersion = lambda: "580.159.04"
    m.nvmlDeviceGetCount = lambda: len(gpus)
    m.nvmlDeviceGetHandleByIndex = lambda i: gpus[i]
    m.nvmlDeviceGetName = lambda h: h["name"]
    m.nvmlDeviceGetUUID = lambda h: h["uuid"]
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(
        total=h["total"], free=h["total"] - h["used"], used=h["used"])
    m.nvmlDeviceGetCudaComputeCapability = lambda h: h["cc"]

    def max_clock(h, kind):
        assert kind == m.NVML_CLOCK_MEM
        if h.get("mem_clock") is None:
            raise FakeNVMLError("Not Supported")
        return h["mem_clock"]

    def bus_width(h):
        if h.get("bus") is None:
            raise FakeNVMLError("Not Supported")
        return h["bus"]

    m.nvmlDeviceGetMaxClockInfo = max_clock
    m.nvmlDeviceGetMemoryBusWidth = bus_width
    m.nvmlDeviceGetEnforcedPowerLimit = lambda h: h["power_mw"]
    return m


# The real readings of an NVIDIA H200 (measured with NVML on the project's device machine, driver 580.159.04).
H200 = dict(name="NVIDIA H200", uuid="GPU-00000000-1111-2222-3333-444444444444", total=143771 * MIB,
            used=512 * MIB, cc=(9, 0), mem_clock=3201, bus=6016, power_mw=700000)


@pytest.fixture()
def profiles() -> list[HardwareProfile]:
    return load_profiles()


# ---------------------------------------------------------------------------------------------- host probe


def test_probe_without_gpu_never_raises():
    # This machine has no NVIDIA driver; whatever pynvml does here, the probe must report no GPU with a reason.
    host = probe_host()
    if host.gpus:  # pragma: no cover - only on a GPU machine
        pytest.skip("this machine has an NVIDIA GPU")
    assert host.gpus == []
    assert host.gpu_status.startswith("no NVIDIA GPU found (")
    assert host.gpu_status.endswith(")")
    assert host.cpu.physical_cores > 0
    assert host.cpu.logical_cores >= host.cpu.physical_cores
    assert host.cpu.model
    assert set(host.cpu.flags) <= set(hardware.CPU_FLAGS)
    assert host.ram_total_bytes > 0
    assert host.ram_available_bytes is None or 0 < host.ram_available_bytes <= host.ram_total_bytes
    assert host.python and host.os
    assert len(host.fingerprint) == 12
    assert probe_host().fingerprint == host.fingerprint  # stable


def test_probe_driver_not_loaded(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(init_error="Driver Not Loaded"))
    host = probe_host()
    assert host.gpus == []
    assert host.gpu_status.startswith("no NVIDIA GPU found (NVML: driver not loaded); no AMD, Apple or Intel GPU")


def test_nvml_library_precheck_matches_pynvml():
    # Where libnvidia-ml.so.1 does not load, the ctypes pre-check (no pynvml import) must give the status pynvml's
    # own nvmlInit gives (NVMLError_LibraryNotFound) - measured here by running pynvml itself.
    import ctypes
    import importlib.util

    if not sys.platform.startswith("linux") or importlib.util.find_spec("pynvml") is None:
        pytest.skip("the pre-check is for Linux with nvidia-ml-py installed")
    try:
        ctypes.CDLL(hardware._NVML_LINUX_LIBRARY)
        pytest.skip("NVML loads on this machine")
    except OSError:
        pass
    import pynvml

    try:
        pynvml.nvmlInit()
        pytest.skip("NVML initialised")  # pragma: no cover
    except Exception as exc:  # noqa: BLE001 - whatever pynvml raises, its status text
        reference = f"no NVIDIA GPU found (NVML: {hardware._nvml_reason(exc)})"
    saved = sys.modules.pop("pynvml")
    try:
        assert hardware._nvml_library_missing() == reference
        assert hardware._probe_nvml() == ([], reference)
    finally:
        sys.modules["pynvml"] = saved


def test_probe_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    host = probe_host()
    assert host.gpus == []
    assert "pynvml not importable" in host.gpu_status


def test_probe_zero_devices(monkeypatch):
    fake = make_fake_pynvml(gpus=[])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    host = probe_host()
    assert host.gpus == [] and "0 devices" in host.gpu_status
    assert fake.calls == ["init", "shutdown"]


def test_probe_fake_h200(monkeypatch):
    fake = make_fake_pynvml(gpus=[H200])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    host = probe_host()
    assert host.gpu_status == "1 NVIDIA GPU found (driver 580.159.04)"
    (g,) = host.gpus
    assert g.name == "NVIDIA H200"
    assert g.compute_capability == "9.0"
    assert g.memory_total_bytes == 143771 * MIB
    assert g.memory_used_bytes == 512 * MIB
    assert g.memory_free_bytes == (143771 - 512) * MIB
    assert g.memory_clock_mhz == 3201 and g.memory_bus_width_bits == 6016
    assert g.memory_bandwidth_bytes_per_s == pytest.approx(4.8e12, rel=0.01)
    assert g.power_limit_w == 700
    assert g.driver_version == "580.159.04" and g.uuid.startswith("GPU-")
    assert fake.calls[-1] == "shutdown"
    # the fingerprint follows the GPU, not the CPU
    fp = host.fingerprint
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(gpus=[dict(H200, total=81559 * MIB)]))
    assert probe_host().fingerprint != fp


def test_probe_gpu_without_clock_reading(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(gpus=[dict(H200, mem_clock=None, bus=None)]))
    (g,) = probe_host().gpus
    assert g.memory_bandwidth_bytes_per_s is None and g.memory_clock_mhz is None


def test_bandwidth_formula_against_published_figures():
    assert memory_bandwidth_from_clock(3201, 6016) == pytest.approx(4.8e12, rel=0.01)  # H200
    assert memory_bandwidth_from_clock(10501, 384) == pytest.approx(1008e9, rel=0.001)  # RTX 4090
    assert memory_bandwidth_from_clock(1215, 5120) == pytest.approx(1555e9, rel=0.001)  # A100 40GB
    assert memory_bandwidth_from_clock(6251, 192) == pytest.approx(300e9, rel=0.001)  # L4


def test_cpuinfo_parsing_x86_and_arm():
    x86 = ("processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu avx avx2 fma f16c avx512f avx512_vnni amx_tile\n"
           "physical id\t: 0\ncore id\t\t: 0\n\nprocessor\t: 1\nmodel name\t: Test CPU\nflags\t\t: fpu avx\n"
           "physical id\t: 0\ncore id\t\t: 0\n\n")
    model, flags, cores, n = hardware._parse_cpuinfo(x86)
    assert model == "Test CPU" and n == 2 and cores == {("0", "0")}
    assert hardware._interesting_flags(flags, "x86_64") == ["avx", "avx2", "fma", "f16c", "avx512f",
                                                            "avx512_vnni", "amx"]
    arm = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sve i8mm bf16\nCPU part\t: 0xd40\n\n"
    model, flags, _, n = hardware._parse_cpuinfo(arm)
    assert n == 1
    assert hardware._interesting_flags(flags, "aarch64") == ["neon", "sve", "i8mm", "bf16"]
    assert hardware._interesting_flags(set(), "arm64") == ["neon"]  # macOS: no cpuinfo, NEON is mandatory


# ---------------------------------------------------------------------------------------------- shipped profiles


def test_every_shipped_profile_loads_and_is_sourced(profiles):
    assert len(profiles) >= 20
    names = [p.name for p in profiles]
    assert len(set(names)) == len(names)
    figures = ["memory_bytes", "memory_bandwidth_bytes_per_s", "fp16_flops_per_s", "int8_ops_per_s",
               "fp32_flops_per_s", "tdp_w", "compute_capability"]
    for p in profiles:
        # the smallest shipped cards: GTX 1060 3GB; Apple M1 7-core (68 GB/s, 2.3 TFLOPS); the largest: B200 (8 TB/s)
        assert 2 * GIB <= p.memory_bytes <= 1024 * GIB, p.name
        assert 50e9 <= p.memory_bandwidth_bytes_per_s <= 20e12, p.name
        if p.fp16_flops_per_s is not None:
            assert 1e12 <= p.fp16_flops_per_s <= 5e15, p.name
        for f in figures:
            if getattr(p, f) is not None:
                assert p.sources.get(f, "").strip(), f"{p.name}: {f} has no source"
        assert set(p.sources) <= set(figures), p.name


def test_required_gpus_are_shipped(profiles):
    for name in ["GeForce RTX 3060 12GB", "GeForce RTX 4060 Ti 16GB", "GeForce RTX 4070", "A10",
                 "Apple M2 Max 96GB", "GeForce RTX 4090", "GeForce RTX 3090", "H200 SXM", "H100 SXM5", "H100 PCIe"]:
        find_profile(name, profiles)


def test_profiles_hold_base_units(profiles):
    rtx4090 = find_profile("rtx 4090", profiles)
    assert rtx4090.memory_bytes == 24 * GIB
    assert rtx4090.memory_bandwidth_bytes_per_s == pytest.approx(1.008e12)
    assert rtx4090.fp16_flops_per_s == pytest.approx(165.2e12)  # FP32 accumulate, dense
    assert rtx4090.compute_capability == "8.9"
    h200 = find_profile("h200", profiles)
    assert h200.memory_bytes == 143771 * MIB  # the NVML-measured total
    assert h200.memory_bandwidth_bytes_per_s == pytest.approx(4.8e12)
    assert h200.sources["memory_bytes"].startswith("measured:")


# ---------------------------------------------------------------------------------------------- validation

GOOD = """\
name: Test GPU 1
vendor: NVIDIA
aliases: [TG1]
memory_gib: 8
memory_bandwidth_gb_s: 256
tdp_w: 100
sources:
  memory_gib: https://example.com/tg1 - spec table
  memory_bandwidth_gb_s: https://example.com/tg1 - spec table
  tdp_w: https://example.com/tg1 - spec table
"""


def _write(tmp_path: Path, text: str, name: str = "test-gpu.yaml") -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path


def test_good_profile_converts_units(tmp_path):
    (p,) = load_profiles(_write(tmp_path, GOOD))
    assert p.memory_bytes == 8 * GIB
    assert p.memory_bandwidth_bytes_per_s == 256e9
    assert p.tdp_w == 100
    assert p.sources == {"memory_bytes": "https://example.com/tg1 - spec table",
                         "memory_bandwidth_bytes_per_s": "https://example.com/tg1 - spec table",
                         "tdp_w": "https://example.com/tg1 - spec table"}


def test_unknown_key_rejected(tmp_path):
    with pytest.raises(UserError) as e:
        load_profiles(_write(tmp_path, GOOD + "memory_gb: 8\n"))
    assert "test-gpu.yaml" in e.value.message and "memory_gb" in e.value.message
    assert "did you mean" in e.value.hint


def test_figure_without_source_rejected(tmp_path):
    text = GOOD.replace("tdp_w: 100\n", "tdp_w: 100\nfp16_tflops: 50\n")
    with pytest.raises(UserError) as e:
        load_profiles(_write(tmp_path, text))
    assert "test-gpu.yaml" in e.value.message and "fp16_tflops" in e.value.message
    assert "no source" in e.value.message
    assert e.value.hint


def test_unquoted_compute_capability_rejected(tmp_path):
    text = GOOD.replace("tdp_w: 100\n", "compute_capability: 8.9\n") \
               .replace("  tdp_w:", "  compute_capability:")
    with pytest.raises(UserError) as e:
        load_profiles(_write(tmp_path, text))
    assert "compute_capability" in e.value.message and "quote" in e.value.hint


def test_source_for_missing_figure_rejected(tmp_path):
    text = GOOD + "  int8_tops: https://example.com - nothing\n"
    with pytest.raises(UserError) as e:
        load_profiles(_write(tmp_path, text))
    assert "int8_tops" in e.value.message


def test_missing_memory_and_duplicate_alias_rejected(tmp_path):
    no_mem = GOOD.replace("memory_gib: 8\n", "").replace("  memory_gib: https://example.com/tg1 - spec table\n", "")
    with pytest.raises(UserError) as e:
        load_profiles(_write(tmp_path, no_mem))
    assert "memory" in e.value.message
    d = tmp_path / "dup"
    d.mkdir()
    _write(d, GOOD, "a.yaml")
    _write(d, GOOD.replace("Test GPU 1", "Test GPU 2"), "b.yaml")  # alias TG1 again
    with pytest.raises(UserError) as e:
        load_profiles(d)
    assert "b.yaml" in e.value.message and "TG1" in e.value.message


def test_bad_yaml_and_missing_dir(tmp_path):
    with pytest.raises(UserError) as e:
        load_profiles(_write(tmp_path, "name: [unclosed\n"))
    assert "test-gpu.yaml" in e.value.message
    with pytest.raises(UserError):
        load_profiles(tmp_path / "nope")


# ---------------------------------------------------------------------------------------------- name resolution


@pytest.mark.parametrize("query", ["rtx 4090", "4090", "RTX4090", "RTX 4090", "rtx-4090", "GeForce RTX 4090",
                                   "NVIDIA GeForce RTX 4090"])
def test_find_profile_4090(profiles, query):
    assert find_profile(query, profiles).name == "GeForce RTX 4090"


def test_find_profile_typo_suggests(profiles):
    with pytest.raises(UserError) as e:
        find_profile("RTX 4900", profiles)
    assert "did you mean" in e.value.message and "GeForce RTX 4090" in e.value.message


def test_find_profile_ambiguous_h100(profiles):
    with pytest.raises(UserError) as e:
        find_profile("H100", profiles)
    msg = e.value.message
    assert "ambiguous" in msg and "H100 SXM5" in msg and "H100 PCIe" in msg
    assert find_profile("h100 pcie", profiles).name == "H100 PCIe"
    assert find_profile("H200", profiles).name == "H200 SXM"


# ---------------------------------------------------------------------------------------------- probed GPU -> profile


def _gpu(**kw) -> GpuInfo:
    base = dict(index=0, name="NVIDIA H200", memory_total_bytes=143771 * MIB, memory_free_bytes=143000 * MIB,
                memory_used_bytes=771 * MIB, compute_capability="9.0", memory_clock_mhz=3201,
                memory_bus_width_bits=6016, memory_bandwidth_bytes_per_s=memory_bandwidth_from_clock(3201, 6016),
                power_limit_w=700.0, driver_version="580.159.04")
    base.update(kw)
    return GpuInfo(**base)


def test_profile_from_known_gpu(profiles):
    p = profile_from_gpu(_gpu(), profiles)
    assert p.memory_bytes == 143771 * MIB
    assert p.memory_bandwidth_bytes_per_s == pytest.approx(4.81e12, rel=0.01)
    assert p.sources["memory_bytes"].startswith("measured: NVML on this machine")
    assert p.sources["memory_bandwidth_bytes_per_s"].startswith("measured: NVML on this machine")
    assert p.fp16_flops_per_s == pytest.approx(989.5e12)  # from the shipped H200 profile
    assert "H200 SXM" in p.sources["fp16_flops_per_s"]
    assert p.compute_capability == "9.0"


def test_profile_from_unknown_gpu(profiles):
    p = profile_from_gpu(_gpu(name="NVIDIA Mystery 9000"), profiles)
    assert p.fp16_flops_per_s is None and p.int8_ops_per_s is None
    assert p.memory_bytes == 143771 * MIB
    with pytest.raises(UserError):
        profile_from_gpu(_gpu(name="NVIDIA Mystery 9000", memory_clock_mhz=None, memory_bus_width_bits=None,
                              memory_bandwidth_bytes_per_s=None), profiles)


def test_profile_from_gpu_without_clock_falls_back_to_profile(profiles):
    p = profile_from_gpu(_gpu(name="NVIDIA GeForce RTX 4090", memory_total_bytes=24564 * MIB,
                              memory_clock_mhz=None, memory_bus_width_bits=None,
                              memory_bandwidth_bytes_per_s=None), profiles)
    assert p.memory_bandwidth_bytes_per_s == pytest.approx(1.008e12)
    assert "GeForce RTX 4090" in p.sources["memory_bandwidth_bytes_per_s"]
    assert p.fp16_flops_per_s == pytest.approx(165.2e12)


def test_override_memory(profiles):
    base = find_profile("4090", profiles)
    p = override_memory(base, 20 * GIB)
    assert p.memory_bytes == 20 * GIB and "user override" in p.sources["memory_bytes"]
    assert p.memory_bandwidth_bytes_per_s == base.memory_bandwidth_bytes_per_s
    assert base.memory_bytes == 24 * GIB  # original untouched
    with pytest.raises(UserError):
        override_memory(base, 0)


def test_module_import_is_lazy():
    # importing recommender.hardware must not pull in NVML or YAML (startup speed)
    import subprocess

    code = ("import sys, recommender.hardware; "
            "print('pynvml' in sys.modules, 'yaml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_hardware_lists_every_gpu_and_the_machine(monkeypatch, capsys):
    """Two GPUs behind NVML: `recommender hardware` lists both and the multi-GPU machine they make."""
    from recommender.cli.hardware_cmd import hardware_command

    fake = make_fake_pynvml(gpus=[dict(H200, uuid=f"GPU-{i}") for i in range(2)])
    fake.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 5
    fake.nvmlDeviceGetMaxPcieLinkWidth = lambda h: 16
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    hardware_command(as_json=False, profiles=False, as_csv=False)
    out = capsys.readouterr().out
    assert "[0] NVIDIA H200" in out and "[1] NVIDIA H200" in out and "PCIe 5.0 x16" in out
    assert "multi-GPU" in out and "2x NVIDIA H200" in out
# ---------------------------------------------------------------------------------------------- name resolution


@pytest.mark.parametrize("typed, profile, gib", [
    ("RTX 4060", "GeForce RTX 4060", 8),  # not the 16 GB RTX 4060 Ti (it was, by a unique substring)
    ("RTX 4060 Ti 8GB", "GeForce RTX 4060 Ti 8GB", 8),
    ("RTX 3060 12GB", "GeForce RTX 3060 12GB", 12),
    ("rtx 3060 12 gb", "GeForce RTX 3060 12GB", 12),
    ("M3 Max 48GB", "Apple M3 Max 48GB", 48),
    ("Apple M2 Max 38-core GPU 64GB", "Apple M2 Max 38-core GPU 64GB", 64),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", 24),  # NVML's name
    ("NVIDIA H100 80GB HBM3", "H100 SXM5", 80),  # NVML's name of the SXM5 card
    ("NVIDIA H100 PCIe", "H100 PCIe", 80),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM4", 80),
    ("AMD Radeon RX 7900 XTX", "Radeon RX 7900 XTX", 24),  # rocm-smi / amdsmi market name
    ("Intel(R) Arc(TM) A770 Graphics", "Intel Arc A770 16GB", 16),  # the Level Zero / Vulkan device name
    ("RTX 4090 24GB", "GeForce RTX 4090", 24),
    ("T4", "Tesla T4", 16),
    ("RTX 3070", "GeForce RTX 3070", 8),
    ("RTX 4080 SUPER", "GeForce RTX 4080 SUPER", 16),
])
def test_names_a_user_or_a_driver_gives_resolve_to_the_right_variant(profiles, typed, profile, gib):
    p = find_profile(typed, profiles)
    assert p.name == profile and round(p.memory_bytes / GIB) == gib


@pytest.mark.parametrize("typed, choices", [
    ("H100 80GB", {"H100 PCIe", "H100 SXM5"}),  # was silently the SXM5
    ("H100", {"H100 PCIe", "H100 SXM5", "H100 NVL"}),
    ("M2 Max", {"Apple M2 Max 96GB", "Apple M2 Max 30-core GPU 32GB"}),  # was silently the 96 GB
    ("Apple M3", {"Apple M3 8GB", "Apple M3 16GB", "Apple M3 24GB"}),  # was silently the M3 Max
    ("RTX 3060", {"GeForce RTX 3060 12GB", "GeForce RTX 3060 8GB"}),
    ("V100 32GB", {"Tesla V100 PCIe 32GB", "Tesla V100 SXM2 32GB"}),
])
def test_an_ambiguous_name_is_refused_with_the_choices(profiles, typed, choices):
    with pytest.raises(UserError) as e:
        find_profile(typed, profiles)
    assert "ambiguous" in e.value.message and e.value.hint
    for c in choices:
        assert repr(c) in e.value.message


@pytest.mark.parametrize("typed", ["RTX 4090 16GB", "rtx 490", "RTX 4060 Super", "M3 Max 40GB"])
def test_a_name_no_profile_has_is_refused_never_the_nearest(profiles, typed):
    with pytest.raises(UserError) as e:
        find_profile(typed, profiles)
    assert "unknown GPU" in e.value.message and e.value.hint


def test_every_name_the_profile_generator_lists_resolves_as_it_says(profiles):
    """sources/gpus/names.json (written by make_profiles.py from its own table, not by this resolver) lists the names
    several variants share: each must be refused (or, for the few that are a profile's own alias, name one of its
    candidates); every profile's own names resolve to it."""
    import json

    from recommender.core.paths import SOURCES_DIR

    data = json.loads((SOURCES_DIR / "gpus" / "names.json").read_text())
    refused = 0
    for entry in data["ambiguous"]:
        try:
            got = find_profile(entry["name"], profiles)
        except UserError as e:
            refused += 1
            assert "ambiguous" in e.message or "unknown" in e.message, entry
            if "ambiguous" in e.message:
                assert sum(repr(c) in e.message for c in entry["candidates"]) >= 2, entry
            continue
        # let through only as a profile's exact alias ("NVIDIA GeForce RTX 4070": the GDDR6X card, whose alias it is)
        # or where the other candidates are other products ("Jetson Orin Nano" is not the "Orin Nano Super")
        assert got.name in entry["candidates"], entry
    assert refused >= 115
    for p in profiles:
        for n in [p.name, *p.aliases]:
            assert find_profile(n, profiles).name == p.name


def test_a_probed_device_name_several_variants_share_is_settled_by_its_memory(profiles):
    from recommender.hardware.profiles import match_profile

    assert match_profile("NVIDIA GeForce RTX 3060", profiles) is None  # 8 or 12 GB: no guess
    p = match_profile("NVIDIA GeForce RTX 3060", profiles, 12288 * MIB)
    assert p is not None and p.name == "GeForce RTX 3060 12GB"
    assert match_profile("NVIDIA H200", profiles, 143771 * MIB).name == "H200 SXM"


def test_intel_arc_loads_on_a_vulkan_backend(profiles):
    p = find_profile("Arc B580", profiles)
    assert p.backend == "vulkan" and p.vendor == "Intel"


# ---------------------------------------------------------------------------------------------- beyond NVML

DETECT = Path(__file__).resolve().parents[1] / "data" / "detect"  # recorded tool outputs; README.md says where each format is from


def _fake_tools(outputs: dict[str, str]):
    def run(cmd):
        return outputs.get(cmd[0])
    return run


@pytest.mark.parametrize("system, outputs, profile, gib", [
    ("Linux", {"amd-smi": "amd-smi-static-rx7900xtx.json"}, "Radeon RX 7900 XTX", 24),
    ("Linux", {"amd-smi": "amd-smi-static-list-mi300x.txt"}, "Instinct MI300X", 192),
    ("Linux", {"rocm-smi": "rocm-smi-navi31.json"}, "Radeon RX 7900 XTX", 24),
    ("Darwin", {"system_profiler": "system_profiler-m3max.json", "sysctl": "sysctl-hw.memsize-48gib.txt"},
     "Apple M3 Max 48GB", 48),
    ("Linux", {"xpu-smi": "xpu-smi-discovery-a770.json"}, "Intel Arc A770 16GB", 16),
])
def test_gpus_other_tools_report_are_planned_with_the_right_profile(profiles, system, outputs, profile, gib):
    texts = {tool: (DETECT / f).read_text() for tool, f in outputs.items()}
    gpus, status = hardware.other_gpus(run=_fake_tools(texts), system=system)
    assert len(gpus) == 1, status  # xpu-smi's virtual function is not a second card
    prof = profile_from_gpu(gpus[0], profiles)
    assert prof.name == profile and round(prof.memory_bytes / GIB) == gib
    assert prof.sources["memory_bytes"].startswith("measured:")
    assert prof.memory_bandwidth_bytes_per_s > 0 and "from profile" in prof.sources["memory_bandwidth_bytes_per_s"]


def test_a_device_no_profile_fits_is_refused_not_guessed(profiles):
    """An MI250 reports each of its two dies as a 64 GiB card; the shipped MI250 profile is the 128 GB package."""
    texts = {"rocm-smi": (DETECT / "rocm-smi-mi250.json").read_text()}
    gpus, _ = hardware.other_gpus(run=_fake_tools(texts), system="Linux")
    assert len(gpus) == 2 and gpus[0].memory_total_bytes == 68702699520
    with pytest.raises(UserError) as e:
        profile_from_gpu(gpus[0], profiles)
    assert "no hardware profile" in e.value.message and e.value.hint


def test_no_tool_present_is_a_status_not_an_error():
    gpus, status = hardware.other_gpus(run=_fake_tools({}), system="Linux")
    assert gpus == [] and "amd-smi" in status and "xpu-smi" in status
    gpus, _ = hardware.other_gpus(run=_fake_tools({"amd-smi": "not json at all"}), system="Linux")
    assert gpus == []


def test_has_hardware_key_agrees_with_hardware_key():
    """The predictor files measured rows under the planned GPU by has_hardware_key, the cheap form of
    hardware_key(name) == key: the same answer for every shipped profile planned and every name a row can carry
    (the shipped rows' hardware, NVML / rocm-smi / macOS spellings, a CPU, a variant stated by its memory)."""
    from recommender.catalog.store import Catalog
    from recommender.core.paths import base_catalog_path
    from recommender.hardware.profiles import has_hardware_key, hardware_key

    profiles = load_profiles()
    names = set(Catalog(base_catalog_path()).measured_hardware()) | {
        "NVIDIA H200", "NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 3060 12GB", "NVIDIA A100-SXM4-80GB",
        "AMD Radeon RX 7900 XTX", "Apple M3 Max", "Apple M2 Max 38-core GPU", "Intel(R) Xeon(R) Platinum 8480+",
        "Tesla T4", "NVIDIA RTX 6000 Ada Generation", "NVIDIA H100 80GB HBM3", "unknown accelerator"}
    assert len(names) >= 12
    hits = 0
    for p in profiles:
        key = hardware_key(p.name, profiles)
        for n in names:
            want = hardware_key(n, profiles) == key
            assert has_hardware_key(n, key, profiles) == want, (p.name, n)
            hits += want
    assert hits >= 5  # some names do belong to a planned profile: both answers were exercised
