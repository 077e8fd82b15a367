"""Configuration: presets, derived values and every refused combination (numerics §2.1-2.4, 4)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dstar_rtl.golden.config import PRESETS, Config, ConfigError, preset

ROOT = Path(__file__).resolve().parents[1]


def acc_width_from_design(max_reduction, act_width, act_frac, B_max=None, booth=False):
    """numerics §2.1, recomputed from its definition with Python integers:
    ``acc_width = bitlen(max_reduction · 127 · 2**(act_width + 1 - r0_min)) + 1`` with
    ``r0_min = act_frac - B_max`` and ``B_max = act_frac`` unless lowered; Booth digits add
    ``⌈127 · 2**(act_width + 1 - r0_min) / 16⌉`` to the bound (one straddling sub-channel)."""
    B_max = act_frac if B_max is None else B_max
    r0_min = act_frac - B_max
    unit = 127 * 2 ** (act_width + 1 - r0_min)
    bound = max_reduction * unit + (-(-unit // 16) if booth else 0)
    # bitlen by repeated halving (independent of int.bit_length).
    n, bits = bound, 0
    while n:
        n //= 2
        bits += 1
    return bits + 1


# ----------------------------------------------------------------------------- presets
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_build(name):
    cfg = preset(name)
    assert cfg.name == name
    assert cfg.tile == cfg.rows == cfg.cols
    assert cfg.acc_width is None  # derived
    assert cfg.acc_bits == cfg.safe_acc_width == acc_width_from_design(
        cfg.max_reduction, cfg.act_width, cfg.act_frac, booth=True)
    assert cfg.digits == "booth" and cfg.digit_product == "select" and cfg.open_groups == 0
    assert cfg.packer == "bins" and cfg.pack_bins == (8 if name == "paper" else 4)
    sort = preset(name, variant="sort")       # issue 27's default: the sorting packer
    assert (sort.packer, sort.open_groups) == ("sort", 4)
    assert sort.replace(packer="bins", open_groups=0, pack_bins=cfg.pack_bins) == cfg
    assert cfg.thresholds == {2: 2, 4: 7, 6: 31, 8: 127} and cfg.base_offset == -2
    initial = preset(name, variant="initial")
    assert initial.thresholds == {2: 1, 4: 7, 6: 31, 8: 127} and initial.base_offset is None
    assert initial.acc_bits == acc_width_from_design(cfg.max_reduction, cfg.act_width,
                                                     cfg.act_frac)
    assert cfg.r0 == cfg.act_frac - cfg.base_log2
    assert cfg.r0_min == 0 and cfg.B_max == cfg.act_frac
    assert cfg.xhat_width == cfg.act_width + 1
    assert cfg.dx_width == cfg.act_width + 2
    assert cfg.recon_width == cfg.act_width + 3
    assert cfg.max_exp == cfg.e_max + 6 <= 2 ** cfg.exp_width - 1
    assert cfg.peak_macs_per_cycle == cfg.rows * cfg.cols * cfg.lanes
    assert (1 << cfg.chan_width) >= cfg.max_reduction


def test_preset_sizes_of_design_section_4():
    tiny, fpga, paper = preset("tiny"), preset("fpga"), preset("paper")
    assert (tiny.rows, tiny.cols, tiny.tile, tiny.sort_n) == (4, 4, 4, 8)
    assert (fpga.rows, fpga.sort_n) == (8, 32)
    assert (paper.rows, paper.cols, paper.lanes, paper.sort_n, paper.cores) == (64, 64, 4, 64, 32)


def test_acc_width_known_values():
    # tiny: 64 · 127 · 2**17 = 1_065_353_216 < 2**30 → 30 bits + sign.
    assert preset("tiny").acc_bits == 31
    assert preset("fpga").acc_bits == 33
    assert preset("paper").acc_bits == 38


@pytest.mark.parametrize("digits", ["slice", "booth"])
@pytest.mark.parametrize("max_reduction", [1, 2, 3, 7, 64, 65, 100, 1000, 4608])
@pytest.mark.parametrize("act_width,act_frac,bmax", [(16, 8, None), (16, 8, 4), (12, 6, None),
                                                      (20, 10, 10), (8, 4, 0)])
def test_acc_width_formula(max_reduction, act_width, act_frac, bmax, digits):
    cfg = preset("tiny", max_reduction=max_reduction, act_width=act_width, act_frac=act_frac,
                 base_log2=min(6, act_frac if bmax is None else bmax), base_log2_max=bmax,
                 digits=digits)
    assert cfg.r0_min == act_frac - (act_frac if bmax is None else bmax)
    assert cfg.acc_bits == acc_width_from_design(max_reduction, act_width, act_frac, bmax,
                                                 booth=digits == "booth")


def test_explicit_acc_width():
    safe = preset("tiny").safe_acc_width
    assert preset("tiny", acc_width=safe + 5).acc_bits == safe + 5
    assert preset("tiny", acc_width=safe).acc_bits == safe
    narrow = preset("tiny", acc_width=12, overflow_detect=True)
    assert narrow.acc_bits == 12


def test_thresholds_derived():
    cfg = preset("tiny", thr=(3, 20, 60))
    assert cfg.thresholds == {2: 3, 4: 20, 6: 60, 8: 127}


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32, 64, 128, 256])
def test_sorter_compare_exchanges(n):
    lg = {2: 1, 4: 2, 8: 3, 16: 4, 32: 5, 64: 6, 128: 7, 256: 8}[n]
    # numerics §2.3: sort_n/4 · log2(sort_n) · (log2(sort_n) + 1), e.g. 80 at 16, 672 at 64.
    assert preset("tiny", sort_n=n, lanes=2).sorter_compare_exchanges * 4 == n * lg * (lg + 1)
    assert preset("tiny", sort_n=16).sorter_compare_exchanges == 80
    assert preset("paper").sorter_compare_exchanges == 672


# ----------------------------------------------------------------------------- refusals
def refused(param, value, allowed, **kw):
    """Build must raise ConfigError whose message names ``param``, ``value`` and ``allowed``."""
    with pytest.raises(ConfigError) as ei:
        preset("tiny", **kw)
    msg = str(ei.value)
    assert re.search(rf"\b{re.escape(param)}\b", msg), msg
    assert str(value) in msg, msg
    assert re.search(allowed, msg), msg
    return msg


@pytest.mark.parametrize("n", [0, 1, 3, 6, 12, 24, 100])
def test_sort_n_not_power_of_two(n):
    refused("sort_n", n, "power of two", sort_n=n, lanes=1)


@pytest.mark.parametrize("lanes,sort_n", [(16, 8), (8, 4), (3, 8), (6, 8), (0, 8)])
def test_lanes_illegal(lanes, sort_n):
    refused("lanes", lanes, r"power of two <= sort_n \(%d\)" % sort_n, lanes=lanes, sort_n=sort_n)


@pytest.mark.parametrize("cols", [2, 8, 5])
def test_cols_not_rows(cols):
    refused("cols", cols, r"equal to rows \(4\)", cols=cols)


def test_base_above_act_frac():
    refused("base_log2", 9, r"\[0, 8\]", base_log2=9)
    refused("base_log2", 6, r"\[0, 5\]", base_log2=6, act_frac=5)
    refused("base_log2_max", 9, r"\[0, 8\]", base_log2_max=9)


def test_base_above_base_max():
    refused("base_log2", 5, r"\[0, 4\]", base_log2=5, base_log2_max=4)
    cfg = preset("tiny", base_log2=4, base_log2_max=4)
    assert cfg.r0_min == 4


@pytest.mark.parametrize("thr", [(1, 7, 7), (7, 7, 31), (8, 7, 31), (1, 31, 7), (1, 7, 127),
                                 (1, 7, 200), (-1, 7, 31), (1, 1, 1)])
def test_thresholds_not_increasing_or_too_big(thr):
    refused("thr", str(thr), r"strictly increasing.*127", thr=thr)


def test_thresholds_wrong_type():
    refused("thr", "[1, 7, 31]", "tuple of three integers", thr=[1, 7, 31])
    refused("thr", "(1, 7)", "tuple of three integers", thr=(1, 7))


@pytest.mark.parametrize("e_max", [26, 27, 31, 40])
def test_e_max_too_large_for_5_bit_field(e_max):
    # FPoT = e + b - 2 <= e_max + 6 must fit the 5-bit exponent field: e_max <= 25.
    refused("e_max", e_max, r"\[0, 25\]", e_max=e_max)
    assert preset("tiny", e_max=25).max_exp == 31


def test_narrow_acc_width_needs_overflow_detect():
    safe = preset("tiny").safe_acc_width
    refused("acc_width", safe - 1, rf">= {safe}.*overflow_detect", acc_width=safe - 1)
    refused("acc_width", 12, rf">= {safe}.*overflow_detect", acc_width=12)


def test_horner_needs_whole_tile_in_one_chunk():
    refused("alignment", "horner", r"sort_n >= 4 \* max_reduction = 256", alignment="horner")
    refused("alignment", "horner", r"sort_n >= 4 \* max_reduction = 12", alignment="horner",
            max_reduction=3, sort_n=8)
    for red, n in ((2, 8), (16, 64)):
        cfg = preset("tiny", packer="sort", alignment="horner", max_reduction=red, sort_n=n)
        assert cfg.alignment == "horner"
    refused("alignment", "horner", "packer is 'bins'", alignment="horner", max_reduction=2,
            sort_n=8)


def test_unknown_alignment():
    refused("alignment", "shift", "one of", alignment="shift")


def test_unknown_preset():
    with pytest.raises(ConfigError, match=r"preset must be one of \['fpga', 'paper', 'tiny'\], "
                                          r"not 'huge'"):
        preset("huge")


def test_unknown_override():
    with pytest.raises(ConfigError, match=r"unknown parameter 'bogus'.*parameters are \[.*sort_n"):
        preset("tiny", bogus=3)


@pytest.mark.parametrize("kw,param", [
    (dict(rows=0, cols=0), "rows"), (dict(weight_width=1), "weight_width"),
    (dict(act_frac=16), "act_frac"), (dict(pe_stages=3), "pe_stages"),
    (dict(sar_interval=0), "sar_interval"), (dict(sar_thr=1.5), "sar_thr"),
    (dict(drop_zero_columns=1), "drop_zero_columns"),
    (dict(overflow_detect="yes"), "overflow_detect"),
    (dict(closed_loop=None), "closed_loop"), (dict(p_base_log2=9), "p_base_log2"),
    (dict(weight_hop=0), "weight_hop"), (dict(weight_hop=5), "weight_hop"),
    (dict(act_hop=0), "act_hop"), (dict(act_hop=5), "act_hop"),
    (dict(open_groups=-1), "open_groups"), (dict(open_groups=5), "open_groups"),
    (dict(pack_windows=3), "pack_windows"), (dict(pack_windows=2, open_groups=0), "pack_windows"),
    (dict(pack_windows=True, open_groups=2), "pack_windows"),
])
def test_other_refusals_name_the_parameter(kw, param):
    with pytest.raises(ConfigError, match=rf"^{param} must be .*, not "):
        preset("tiny", **kw)


def test_p_base_keeps_probabilities_within_int8():
    # numerics §2.6: P is 0..127 (saturating at 127) so that the quantizer keeps e = 0.
    assert preset("tiny", p_base_log2=7).p_base_log2 == 7
    with pytest.raises(ConfigError, match=r"p_base_log2 .*\[0, 7\].*not 8"):
        preset("tiny", p_base_log2=8)


def test_config_error_is_value_error():
    assert issubclass(ConfigError, ValueError)


# ----------------------------------------------------------------------------- identity
def test_frozen():
    cfg = preset("tiny")
    with pytest.raises(Exception):
        cfg.rows = 8  # type: ignore[misc]


def test_hashable_and_equal():
    a, b = preset("tiny"), preset("tiny")
    assert a == b and hash(a) == hash(b)
    assert len({a, b, preset("fpga")}) == 2
    assert {a: 1}[b] == 1
    # The name is not a parameter.
    c = Config(**{k: getattr(a, k) for k in Config.fields() if k != "name"})
    assert c.name == "custom" and c == a and c.hash() == a.hash()


def test_stable_hash_is_deterministic_across_processes():
    h = preset("fpga", thr=(2, 9, 40)).hash()
    assert re.fullmatch(r"[0-9a-f]{16}", h)
    out = subprocess.run(
        [sys.executable, "-c",
         "from dstar_rtl.golden.config import preset; "
         "print(preset('fpga', thr=(2, 9, 40)).hash())"],
        cwd=ROOT, capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "123"})
    assert out.stdout.strip() == h


@pytest.mark.parametrize("change", [
    dict(thr=(1, 7, 30)), dict(sort_n=16), dict(lanes=2), dict(base_log2=5), dict(e_max=10),
    dict(drop_zero_columns=False), dict(acc_width=40), dict(closed_loop=False),
    dict(sar_thr=2e-3), dict(max_reduction=63), dict(overflow_detect=True),
])
def test_hash_differs_when_a_parameter_differs(change):
    a = preset("tiny")
    b = a.replace(**change)
    assert a != b
    assert a.hash() != b.hash()


def test_to_dict_is_json_and_round_trips():
    cfg = preset("paper", thr=(2, 8, 33))
    d = cfg.to_dict()
    json.dumps(d)
    d["thr"] = tuple(d["thr"])
    assert Config(**d) == cfg


def test_parameters_added_later_enter_the_hash_only_when_changed():
    """A configuration that builds the same hardware as before keeps its hash; the new
    parameters at another value give another hash."""
    from dstar_rtl.golden.config import HASH_IF_CHANGED

    def tiny(**kw):
        return preset("tiny", variant="initial", **kw)
    base = tiny()
    explicit = tiny(**{k: base.fields()[k].default for k in HASH_IF_CHANGED})
    assert explicit.hash() == base.hash()
    others = {tiny(digit_product="select").hash(), tiny(digits="booth").hash(),
              tiny(digit_product="select", digits="booth").hash(),
              tiny(weight_hop=4).hash(), tiny(act_hop=4).hash(), tiny(open_groups=2).hash(),
              tiny(open_groups=2, pack_windows=2).hash(), tiny(base_offset=-2).hash()}
    assert len(others) == 8 and base.hash() not in others
    # the initial variant keeps the hash the stored reports of the earlier default name
    assert base.hash() == "b9ae36267cee72c7" and preset("tiny").hash() not in others


@pytest.mark.parametrize("text, value", [("true", True), ("False", False), ("TRUE", True),
                                         ("26", 26), ("horner", "horner"), ("(1, 7, 31)",
                                                                            (1, 7, 31))])
def test_set_values_parse_as_typed(text, value):
    """``--set overflow_detect=true`` used to be refused (only Python's ``True`` parsed)."""
    from dstar_rtl.app.options import parse_overrides

    assert parse_overrides([f"x={text}".replace("x", "acc_width", 1)]) == {"acc_width": value}


def test_core_buffer_depths_are_parameters():
    """``--set abuf_rows=...`` like any parameter: a depth the configuration sets replaces the
    core preset's, the others stay the preset's; unset depths leave the hash alone."""
    from dstar_rtl.golden.config import CORE_BUFFER_ROWS
    from dstar_rtl.program.isa import CORE_PRESETS, CoreConfig, core_for

    assert core_for(preset("fpga")) == CORE_PRESETS["fpga"]
    assert core_for(Config()) == CoreConfig()
    cfg = preset("tiny", abuf_rows=1024, mask_rows=16)
    want = CORE_PRESETS["tiny"].to_dict() | {"abuf_rows": 1024, "mask_rows": 16}
    assert core_for(cfg).to_dict() == want
    assert cfg.hash() != preset("tiny").hash()
    assert len({preset("tiny", **{b: 8}).hash() for b in CORE_BUFFER_ROWS}) == len(CORE_BUFFER_ROWS)


@pytest.mark.parametrize("value", [0, (1 << 14) + 1, 2.0, True, "64"])
def test_core_buffer_depth_refused(value):
    with pytest.raises(ConfigError, match=r"^mask_rows must be an integer in \[1, 16384\]"):
        preset("tiny", mask_rows=value)


def test_preset_hops_follow_an_overridden_array_size_and_variants_are_named():
    """The presets broadcast operands over up to 8 PEs: a smaller array caps the hops, an
    explicit hop is taken as given (and refused beyond the array), an unknown variant is
    refused naming the allowed ones."""
    assert (preset("fpga").weight_hop, preset("fpga").act_hop) == (8, 8)
    small = preset("fpga", rows=2, cols=2)
    assert (small.weight_hop, small.act_hop) == (2, 2)
    assert preset("paper", rows=16, cols=16).weight_hop == 8
    assert preset("fpga", rows=2, cols=2, weight_hop=1).weight_hop == 1
    with pytest.raises(ConfigError, match="weight_hop must be an integer in \\[1, 2\\]"):
        preset("fpga", rows=2, cols=2, weight_hop=8)
    with pytest.raises(ConfigError, match="variant must be one of \\['initial', 'sort'\\]"):
        preset("fpga", variant="old")
    init = preset("fpga", variant="initial")
    assert (init.digit_product, init.digits, init.weight_hop, init.open_groups) == \
        ("multiply", "slice", 1, 0)
    with pytest.raises(ConfigError, match="base_offset must be None or an integer in"):
        preset("fpga", base_offset=9)
