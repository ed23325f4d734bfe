"""The GPU catalog against the datasheets (numbers typed from the whitepapers and datasheets of
docs/sources.md, not read from the code)."""

import pytest

from gpu_lessons import hardware
from gpu_lessons.hardware import compute_peak, gpu, memory_bandwidth

# (catalog name, CC, SMs, GB/s, FP32 TFLOP/s, FP16 tensor TFLOP/s dense) from NVIDIA's whitepapers
# and datasheets (docs/sources.md).
DATASHEET = [
    ("V100 SXM2", "7.0", 80, 900, 15.7, 125),
    ("A100 SXM4 80GB", "8.0", 108, 2039, 19.5, 312),
    ("H100 SXM5", "9.0", 132, 3350, 66.9, 989.4),
    ("H100 PCIe", "9.0", 114, 2000, 51.2, 756),
    ("H200 SXM", "9.0", 132, 4800, 66.9, 989),
    ("B200", "10.0", 148, 8000, 80, 2250),
    ("RTX 4090", "8.9", 128, 1008, 82.6, 165.2),
    ("RTX 3090", "8.6", 82, 936, 35.6, 71),
    ("T4", "7.5", 40, 320, 8.1, 65),
    ("L4", "8.9", 58, 300, 30.3, 121),
    ("L40S", "8.9", 142, 864, 91.6, 362),
    ("Quadro RTX 5000", "7.5", 48, 448, 11.2, 89.2),
]


def test_catalog_holds_every_gpu_of_the_reference_table():
    assert set(hardware.names()) == {row[0] for row in DATASHEET}


@pytest.mark.parametrize("name,cc,sms,gbs,fp32,fp16", DATASHEET)
def test_datasheet_figures(name, cc, sms, gbs, fp32, fp16):
    g = gpu(name)
    assert (g.cc, g.sms, g.bandwidth_gbs) == (cc, sms, gbs)
    assert g.peak_flops("fp32") == pytest.approx(fp32 * 1e12)
    assert g.peak_flops("fp16") == pytest.approx(fp16 * 1e12)
    assert g.bandwidth == pytest.approx(gbs * 1e9)


@pytest.mark.parametrize("g", hardware.catalog().values(), ids=lambda g: g.name)
def test_every_number_has_a_source(g):
    numeric = {k: v for k, v in vars(g).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None}
    for key in numeric:
        assert g.sources.get(key), f"{g.name}.{key} has no source"
    for table in ("peak_tflops", "tensor_flops_per_clk_per_sm"):
        for k in getattr(g, table):
            assert g.sources.get(f"{table}.{k}"), f"{g.name}.{table}.{k} has no source"


@pytest.mark.parametrize("g", hardware.catalog().values(), ids=lambda g: g.name)
def test_peak_formulas_reproduce_the_datasheet_within_2_percent(g):
    """pi = N_cores x f x 2 and beta = bus width x data rate, wherever the inputs are known."""
    checked = 0
    if (pi := g.pi_from_cores()) is not None:
        assert pi == pytest.approx(g.peak_flops("fp32"), rel=0.02)
        checked += 1
    if (pi_tc := g.pi_tensor_from_clock("fp16")) is not None:
        assert pi_tc == pytest.approx(g.peak_flops("fp16"), rel=0.02)
        checked += 1
    if (beta := g.beta_from_bus()) is not None:
        assert beta == pytest.approx(g.bandwidth, rel=0.02)
        checked += 1
    assert checked >= 2 or g.name == "B200"  # B200's clocks and bus are not published


def test_h200_bandwidth_from_the_device_reported_bus():
    # the H200's CUDA runtime (docs/measured/h200.md): 3201 MHz DDR x 2 x 6016-bit bus / 8 = 4.81 TB/s
    assert memory_bandwidth(6016, 2 * 3201e6) == pytest.approx(4.814e12, rel=1e-3)
    assert gpu("h200").beta_from_bus() == pytest.approx(4.814e12, rel=1e-3)


def test_h100_fp32_peak_from_first_principles():
    # 132 SMs x 128 cores x 1.98 GHz x 2 FLOPs per FMA = 66.9 TFLOP/s
    assert compute_peak(132 * 128, 1.98e9, 2) == pytest.approx(66.9e12, rel=1e-3)


def test_ridge_points():
    assert gpu("h100").ridge_point("fp16") == pytest.approx(989.4e12 / 3350e9)  # ≈ 295 FLOP/B
    assert gpu("a100").ridge_point("fp32") == pytest.approx(19.5e12 / 2039e9)   # ≈ 9.6 FLOP/B


@pytest.mark.parametrize("alias,name", [
    ("h100", "H100 SXM5"), ("H100 SXM", "H100 SXM5"), ("h100-sxm5", "H100 SXM5"),
    ("4090", "RTX 4090"), ("GeForce RTX 4090", "RTX 4090"), ("a100", "A100 SXM4 80GB"),
    ("H200", "H200 SXM"), ("v100", "V100 SXM2"), ("h100 pcie", "H100 PCIe"), ("t4", "T4"),
])
def test_lookup_forgives_case_and_aliases(alias, name):
    assert gpu(alias).name == name


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="Known GPUs: V100 SXM2") as e:
        gpu("H300")
    assert "name='H300'" in str(e.value)
    with pytest.raises(TypeError, match="name must be"):
        gpu(100)


def test_geforce_fp16_accumulate_doubles_the_peak_and_sparse_is_refused():
    g = gpu("4090")
    assert g.peak_flops("fp16", accumulate="fp16") == pytest.approx(330.3e12)
    assert g.peak_flops("fp16", accumulate="fp32") == pytest.approx(165.2e12)
    # data-centre parts run FP16 accumulate at the same rate
    assert gpu("h100").peak_flops("fp16", accumulate="fp16") == gpu("h100").peak_flops("fp16")
    with pytest.raises(ValueError, match="sparse"):
        g.peak_flops("fp16", sparse=True)


def test_missing_precision_says_what_exists():
    with pytest.raises(ValueError, match="V100 SXM2 has no such peak"):
        gpu("v100").peak_flops("fp8")
    with pytest.raises(ValueError, match="precision must be one of"):
        gpu("v100").peak_flops("fp4")


def test_bad_formula_inputs():
    with pytest.raises(ValueError, match="clock_hz"):
        compute_peak(10, -1.0, 2)
    with pytest.raises(TypeError, match="units must be an integer"):
        compute_peak("many", 1e9, 2)


def test_v100_memory_comes_from_the_datasheet():
    # The V100 whitepaper's Table 1 lists 16 GB; the 32 GB model came later (V100 datasheet).
    v100 = gpu("v100")
    assert v100.memory_gb == 32
    assert "datasheet" in v100.sources["memory_gb"]
    assert "16 GB" in v100.sources["memory_gb"]          # the record says why not Table 1


def test_h100_pcie_keeps_the_published_bandwidth_and_no_unpublished_clock():
    # Whitepaper v1.04 Table 3: 2,000 GB/s over a 5120-bit bus.  A 1,593 MHz memory clock would
    # give 5120 / 8 * 2 * 1593e6 = 2.039e12 B/s, which no NVIDIA document gives, so the catalog
    # holds no clock for this card rather than one that contradicts its bandwidth.
    pcie = gpu("h100 pcie")
    assert pcie.bandwidth == pytest.approx(2000e9)
    assert pcie.bus_width_bits == 5120
    assert pcie.memory_clock_mhz is None and pcie.memory_data_rate_gbps is None
    assert pcie.beta_from_bus() is None
    assert memory_bandwidth(5120, 2 * 1593e6) == pytest.approx(2.039e12, rel=1e-3)
