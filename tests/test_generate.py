"""``dstar generate``: Verilog and manifest for every unit, reproducible byte for byte."""

import json

import pytest

from dstar_rtl.app.cli import main
from dstar_rtl.gen.units import (
    UNITS,
    inspect_unit,
    layout_doc,
    record_ports,
    stream_layouts,
    top_name,
)
from dstar_rtl.golden import layouts as gl
from dstar_rtl.golden.config import preset
from dstar_rtl.golden.layouts import (
    baseline_group_layout,
    drain_layout,
    group_layout,
    layout_width,
    recon_layout,
    subchannel_layout,
    weight_load_layout,
)


def _generate(tmp_path, unit, preset_name, *extra, name="out.v"):
    out = tmp_path / name
    rc = main(["generate", unit, "--preset", preset_name, *extra, "-o", str(out)])
    return rc, out


# fpga: the PEs here, the arrays and the QPU (seconds of elaboration each) in make regress; every
# unit is elaborated at fpga in make test by tests/test_lint.py.
@pytest.mark.parametrize("unit, preset_name", [
    (u, p) if p == "tiny" or u in ("pe", "baseline_pe")
    else pytest.param(u, p, marks=pytest.mark.slow)
    for p in ("tiny", "fpga") for u in ("pe", "baseline_pe", "mpu", "baseline", "qpu")])
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
    elif unit not in ("pe", "baseline_pe"):
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


def test_both_pes_have_the_same_ports(tmp_path):
    """``pe`` (SlicePE) and ``baseline_pe`` (Int8PE) share the skeleton's port names, so one
    testbench drives both; only the widths differ."""
    ports = {}
    for unit in ("pe", "baseline_pe"):
        rc, out = _generate(tmp_path, unit, "tiny", name=f"{unit}.v")
        assert rc == 0
        man = json.loads(out.with_suffix(".json").read_text())
        ports[unit] = {p["name"]: p["direction"] for p in man["ports"]}
    assert ports["pe"] == ports["baseline_pe"] == {
        "a_in": "input", "w_in": "input", "shadow_in": "input", "drain_shift": "input",
        "clk": "input", "rst": "input", "a_out": "output", "w_out": "output",
        "shadow_out": "output", "captured": "output"}


def test_manifest_layouts_are_the_signatures_and_golden_agrees():
    """The manifest's layouts come from each unit's signature (gen.units): they equal golden's
    field lists wherever golden has one, and the units whose ports golden does not describe
    (the PEs, the units behind the host link) get theirs too."""
    cfg = preset("tiny")
    qpu = dict(subch=gl.subchannel_layout(cfg), config=gl.qpu_config_layout(cfg),
               recon=gl.recon_layout(cfg), counters=gl.counters_layout())
    arrays = dict(wload=gl.weight_load_layout(cfg), drain=gl.drain_layout(cfg))
    vpu = dict(cmd=gl.vpu_cmd_layout(cfg), i=gl.vpu_in_layout(cfg), o=gl.vpu_out_layout(cfg))
    golden = {
        "qpu": dict(qpu, groups=gl.group_layout(cfg)),
        "qpu_mpu": dict(qpu, **arrays),
        "mpu": dict(arrays, groups=gl.group_layout(cfg)),
        "baseline": dict(groups=gl.baseline_group_layout(cfg), wload=gl.weight_load_layout(cfg),
                         drain=gl.drain_layout(cfg, baseline=True)),
        "vpu": vpu,
        "uart_vpu": {"link_in0": vpu["cmd"], "link_in1": vpu["i"], "link_out0": vpu["o"]},
    }
    for unit, ports in golden.items():
        got = stream_layouts(unit, cfg)
        assert set(got) == set(ports), unit
        for name, fields in ports.items():
            assert got[name] == layout_doc(fields), (unit, name)
    from dstar_rtl.program import isa
    for unit, cmd in (("core", "cmd"), ("uart_core", "link_in0")):
        got = stream_layouts(unit, cfg)
        assert got[cmd] == {op: layout_doc(isa.header_layout() + isa.cmd_layout(cfg, op))
                            for op in isa.OPCODES}
        assert got["rows"] == {b: layout_doc(isa.row_layout(cfg, b)) for b in isa.BUFFERS}
    word = [dict(name="word", offset=0, element_width=isa.HOST_WORD, dims=[], signed=False)]
    assert stream_layouts("core", cfg)["host_in"] == stream_layouts("uart_core", cfg)["link_in1"] \
        == stream_layouts("uart_core", cfg)["link_out0"] == word
    pe = stream_layouts("pe", cfg)
    assert set(pe) == {"a_in", "a_out", "w_in", "w_out"}
    assert [f["name"] for f in pe["w_in"]][-4:] == ["ctrl.valid", "ctrl.first", "ctrl.last",
                                                    "ctrl.exp"]
    assert set(stream_layouts("baseline_pe", cfg)) == set(pe)


def test_the_catalogue_names_every_unit_once():
    assert all(u.name == name and u.top == top_name(name) == f"dstar_{name}"
               for name, u in UNITS.items())
    assert {n for n, u in UNITS.items() if u.has_vpu} == {"vpu", "uart_vpu"}
    assert {n for n, u in UNITS.items() if u.has_core} == {"core", "uart_core"}
    with pytest.raises(ValueError, match="unit must be one of"):
        top_name("nope")


@pytest.mark.filterwarnings("error")
def test_inspecting_a_unit_leaves_no_unused_elaboratable_behind():
    """A unit built only to read its signature is dropped inside :func:`inspect_unit`, so no
    "created but never used" warning escapes it (without Amaranth's private API)."""
    import gc
    ports = inspect_unit("qpu_mpu", preset("tiny"), record_ports)
    gc.collect()
    assert [p["name"] for p in ports][:2] == ["subch", "config"]


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


# ------------------------------------------------------------------ bad input, tool failure
def _no_yosys(monkeypatch):
    """Make any Yosys run fail the test: bad input must be refused before elaboration."""
    import dstar_rtl.gen.generate
    def never(*a, **k):
        raise AssertionError("Yosys ran on bad input")
    monkeypatch.setattr(dstar_rtl.gen.generate, "run_yosys", never)


@pytest.mark.parametrize("name, args, message", [
    ("x.json", [], "would be overwritten by the manifest"),
    ("x.h", ["--header"], "would be overwritten by the C header"),
    ("x.core", ["--fusesoc"], "would be overwritten by the FuseSoC core"),
])
def test_output_named_like_an_artefact_is_refused(tmp_path, capsys, monkeypatch, name, args,
                                                  message):
    """``-o x.json`` used to exit 0 with the manifest written over the Verilog."""
    _no_yosys(monkeypatch)
    rc = main(["generate", "pe", *args, "-o", str(tmp_path / name)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and message in err
    assert list(tmp_path.iterdir()) == []


def test_output_that_is_a_folder_is_refused(tmp_path, capsys, monkeypatch):
    """``-o DIR`` used to print a traceback and leave ``.tmp`` files behind."""
    _no_yosys(monkeypatch)
    (tmp_path / "d").mkdir()
    rc = main(["generate", "pe", "-o", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert rc == 2 and err == f"dstar: error: cannot write {tmp_path / 'd'}: it is a directory\n"
    assert [p.name for p in tmp_path.rglob("*")] == ["d"]


def test_output_under_a_file_is_refused(tmp_path, capsys, monkeypatch):
    _no_yosys(monkeypatch)
    (tmp_path / "f").write_text("keep")
    rc = main(["generate", "pe", "-o", str(tmp_path / "f" / "pe.v")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "is a file, not a directory" in err
    assert [p.name for p in tmp_path.iterdir()] == ["f"] and (tmp_path / "f").read_text() == "keep"


def test_missing_output_folder_is_created(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "pe.v"
    assert main(["generate", "pe", "-o", str(out)]) == 0
    assert "module dstar_pe(" in out.read_text() and out.with_suffix(".json").is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == ["pe.json", "pe.v"]


def test_yosys_failure_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """A Yosys failure used to print a traceback. Now: one line naming the error, exit status 1
    (the input was fine, the tool failed), and the files that were there are untouched."""
    import dstar_rtl.gen.generate
    from dstar_rtl.gen.yosys import YosysError

    def fail(*a, **k):
        raise YosysError("yosys failed (exit 1): ERROR: Module `dstar_pe' not found!\n"
                         "-- log tail --\nEnd of script.")
    monkeypatch.setattr(dstar_rtl.gen.generate, "run_yosys", fail)
    out = tmp_path / "pe.v"
    out.write_text("old")
    rc = main(["generate", "pe", "--header", "-o", str(out)])
    cap = capsys.readouterr()
    assert rc == 1 and cap.out == ""
    assert cap.err == "dstar: error: yosys failed (exit 1): ERROR: Module `dstar_pe' not found!\n"
    assert [p.name for p in tmp_path.iterdir()] == ["pe.v"] and out.read_text() == "old"


def test_yosys_error_names_the_first_error_on_its_first_line():
    from dstar_rtl.gen.yosys import YosysError, run_yosys

    with pytest.raises(YosysError) as e:
        run_yosys("read_rtlil missing.il", {})
    first = str(e.value).splitlines()[0]
    assert first.startswith("yosys failed (exit 1): ERROR:") and "missing.il" in first
