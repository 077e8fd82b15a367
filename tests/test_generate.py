"""``dstar generate``: Verilog and manifest for every unit, reproducible byte for byte."""

import json

import pytest

from gen.cli import main
from golden.config import preset
from golden.layouts import (baseline_group_layout, drain_layout, group_layout, layout_width,
                            recon_layout, subchannel_layout, weight_load_layout)


def _generate(tmp_path, unit, preset_name, *extra, name="out.v"):
    out = tmp_path / name
    rc = main(["generate", unit, "--preset", preset_name, *extra, "-o", str(out)])
    return rc, out


@pytest.mark.parametrize("preset_name", ["tiny", "fpga"])
@pytest.mark.parametrize("unit", ["pe", "mpu", "baseline", "qpu"])
def test_generate_writes_verilog_and_manifest(tmp_path, unit, preset_name):
    rc, out = _generate(tmp_path, unit, preset_name)
    assert rc == 0
    text = out.read_text()
    assert f"module dstar_{unit}(" in text
    man = json.loads(out.with_suffix(".json").read_text())
    cfg = preset(preset_name)
    assert man["config_hash"] == cfg.hash() and man["top"] == f"dstar_{unit}"
    assert man["tools"]["amaranth"].startswith("0.5")
    ports = {p["name"]: p for p in man["ports"]}
    assert ports["clk"]["direction"] == "input" and ports["rst"]["direction"] == "input"
    if unit == "qpu":
        assert ports["subch__payload"]["width"] == layout_width(subchannel_layout(cfg))
        assert ports["groups__payload"]["width"] == layout_width(group_layout(cfg))
        assert ports["recon__payload"]["width"] == layout_width(recon_layout(cfg))
        assert set(man["streams"]) == {"subch", "config", "groups", "recon", "counters"}
    elif unit != "pe":
        fields = group_layout(cfg) if unit == "mpu" else baseline_group_layout(cfg)
        assert ports["groups__payload"]["width"] == layout_width(fields)
        assert ports["wload__payload"]["width"] == layout_width(weight_load_layout(cfg))
        assert ports["drain__payload"]["width"] == layout_width(
            drain_layout(cfg, baseline=unit == "baseline"))
        assert ports["drain__ready"]["direction"] == "input"
        assert ports["groups__ready"]["direction"] == "output"


def test_same_configuration_gives_identical_bytes(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _, va = _generate(a, "mpu", "tiny", "--set", "pe_stages=2")
    _, vb = _generate(b, "mpu", "tiny", "--set", "pe_stages=2")
    assert va.read_bytes() == vb.read_bytes()
    assert va.with_suffix(".json").read_bytes() == vb.with_suffix(".json").read_bytes()


def test_paper_pe_generates(tmp_path):
    rc, out = _generate(tmp_path, "pe", "paper")
    assert rc == 0 and out.exists()


@pytest.mark.parametrize("args, message", [
    (["--set", "sort_n=12"], "sort_n must be a power of two >= 2, not 12"),
    (["--set", "nope=1"], "unknown parameter 'nope'"),
    (["--set", "alignment=horner"], "alignment must be 'product-shift' unless"),
    (["--preset", "huge"], "invalid choice: 'huge'"),
])
def test_bad_parameters_fail_with_one_line_and_no_file(tmp_path, capsys, args, message):
    out = tmp_path / "x.v"
    rc = main(["generate", "mpu", *args, "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and message in err
    assert not out.exists() and not out.with_suffix(".json").exists()
