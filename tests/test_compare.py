"""The whole-core comparison's arithmetic (app/reports/compare.py, flows/core_parts.py): modules go
to the right parts, the part-area model reproduces a quadratic exactly and reports its held-out
error, RAMs count per read port, the ratios are throughput per area, the INT8 core's buffers are
what the model needs, and bad input is refused before any work."""

from dataclasses import replace
from types import SimpleNamespace

import pytest

import dstar_rtl.app.cli
from dstar_rtl.app.reports.compare import verdict
from dstar_rtl.bench.compare import fpga_config, ratios
from dstar_rtl.flows.core_parts import (
    CHECK_SIZE,
    FIT_SIZES,
    MPU_PARTS,
    QPU_PARTS,
    SRAM_UM2_PER_BIT,
    core_area,
    fit_parts,
    part_of,
)


def test_modules_map_to_parts():
    top = "dstar_core"
    cases = {"dstar_core.matrix.mpu.array.pe_3_1": "array PEs",
             "dstar_core.matrix.mpu.array": "array skew and drain",
             "dstar_core.matrix.mpu": "array front end",
             "dstar_core.matrix.wb": "M engine",
             "dstar_core.quant.qpu.sorter.stage3": "QPU sorter",
             "dstar_core.quant.qpu.packer": "QPU packer",
             "dstar_core.quant.qpu": "QPU front (max, bins, slices, chunks)",
             "dstar_core.quant.kvshift": "Q engine",
             "dstar_core.vpu.lane3": "VPU", "dstar_core.vector": "V engine",
             "dstar_core.dispatch": "dispatcher", "dstar_core": "top (buffer ports, counters, "
                                                               "SREG)"}
    for mod, part in cases.items():
        assert part_of(mod, top) == part, mod
    assert set(MPU_PARTS) | set(QPU_PARTS) <= {p for p in cases.values()}


def test_core_area_counts_parts_rams_and_the_qpu_share():
    res = dict(top="t", config_hash="h", seconds=1.0,
               resources=dict(area=170.0, ff=7),
               modules={"t": dict(area=10.0), "t.matrix.mpu.array.pe_0_0": dict(area=60.0),
                        "t.matrix.mpu": dict(area=20.0), "t.quant.qpu.sorter": dict(area=80.0)},
               memories=dict(list=[
                   dict(module="t", name="w", width=8, size=100, bits=800, rom=False,
                        read_ports=4, write_ports=1),
                   dict(module="t", name="lut", width=8, size=16, bits=128, rom=True,
                        read_ports=1, write_ports=0)]))
    a = core_area(res)
    assert a["parts"]["array PEs"] == 60.0 and a["parts"]["QPU sorter"] == 80.0
    assert a["qpu_share"] == pytest.approx(80 / (80 + 60 + 20))
    assert a["ram_bits"] == 800 and [m["name"] for m in a["memories"]] == ["w"]
    assert a["sram_um2"] == pytest.approx(800 * 4 * SRAM_UM2_PER_BIT, abs=0.1)


def test_part_model_is_exact_on_a_quadratic_and_reports_its_check():
    def area(T):
        return {"a": 3 + 2 * T + 0.5 * T * T, "b": 100 + 7 * T}
    fit = fit_parts({T: area(T) for T in (*FIT_SIZES, CHECK_SIZE)})
    assert fit["check"]["error"] == pytest.approx(0, abs=1e-9)
    assert fit["predicted"]["total"] == pytest.approx(sum(area(64).values()), abs=0.2)
    off = {T: area(T) for T in (*FIT_SIZES, CHECK_SIZE)}
    off[CHECK_SIZE] = {k: v * 1.1 for k, v in off[CHECK_SIZE].items()}
    assert fit_parts(off)["check"]["error"] == pytest.approx(1 / 1.1 - 1, abs=1e-4)


def test_ratios_are_throughput_per_area():
    d = dict(cycles=100, um2=300, sram_um2=700, lut4=30)
    i = dict(cycles=200, um2=200, sram_um2=300, lut4=10)
    r = ratios(d, i)
    assert r["speedup"] == 2.0
    assert r["per_um2"] == pytest.approx(2 * 200 / 300, abs=1e-4)
    assert r["per_um2_with_sram"] == pytest.approx(2 * 500 / 1000)
    assert r["per_lut"] == pytest.approx(2 * 10 / 30, abs=1e-4)
    side = lambda **kw: SimpleNamespace(**dict(r, **kw))     # noqa: E731
    text = verdict(side(per_um2=0.5, per_um2_with_sram=0.4),
                   side(per_um2=1.25, per_um2_with_sram=1.1))
    assert "`fpga`: the INT8 core wins per µm² of cells by 2.00×" in text
    assert "`paper`: the DSTAR core wins per µm² of cells by 1.25×" in text
    assert "`paper`: not measured" in verdict(side(per_um2=0.5, per_um2_with_sram=0.4), None)


def test_each_core_holds_the_whole_model_and_the_int8_core_no_state():
    from dstar_rtl.models.digits import load_trained

    spec, params = load_trained()
    d, i = fpga_config("dstar", spec, params), fpga_config("int8", spec, params)
    assert (i.xbuf_rows, i.ybuf_rows) == (1, 1) and d.xbuf_rows > 1 and d.ybuf_rows > 1
    for f in ("abuf_rows", "wmem_rows", "rbuf_rows", "vbuf_rows", "mask_rows"):
        assert getattr(d, f) == getattr(i, f), f
    assert d.gmem_rows == 4 * i.gmem_rows    # 4·nch group rows per tile against nch


@pytest.mark.parametrize("argv, msg", [
    (["--steps", "1"], "--steps must be >= 2"),
    (["--presets", "paper"], "has none; run with --presets fpga paper"),
    (["--labels", "12"], "--labels must be digits"),
    (["--liberty", "/nonexistent.lib"], "--liberty /nonexistent.lib: file not found"),
    (["--perf-model", "/nonexistent.json"], "dstar measure perf"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, msg):
    rc = dstar_rtl.app.cli.main(["measure", "compare", *argv, "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1 and msg in err
    assert not (tmp_path / "o").exists()


def test_without_a_library_the_default_one_is_missed_last(tmp_path, capsys):
    """A user's clone has no library beside it (the fast tier's fixture makes that so here):
    with every other input right, the one line says to pass --liberty."""
    rc = dstar_rtl.app.cli.main(["measure", "compare", "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "no standard-cell library: pass --liberty FILE" in err
    assert not (tmp_path / "o").exists()


def test_resolve_liberty(tmp_path, monkeypatch):
    import dstar_rtl.flows.liberty
    from dstar_rtl.app.options import resolve_liberty
    from dstar_rtl.gen.errors import UserError

    given = tmp_path / "cells.lib"
    given.write_text("library (x) { }\n")
    assert resolve_liberty(given) == given
    with pytest.raises(UserError, match="--liberty .*nope.lib: file not found"):
        resolve_liberty(tmp_path / "nope.lib", needed=False)
    assert resolve_liberty(None, needed=False) is None
    with pytest.raises(UserError, match="no standard-cell library"):
        resolve_liberty(None)
    monkeypatch.setattr(dstar_rtl.flows.liberty, "NANGATE", given)
    assert resolve_liberty(None) == given


def _stored(**fpga):
    """The committed comparison, its ``fpga`` fields replaced by ``fpga``."""
    from dstar_rtl.gen.paths import REPORTS
    from dstar_rtl.results.compare import Compare

    rec = Compare.load(REPORTS / "compare.json")
    return replace(rec, fpga=replace(rec.fpga, **fpga))


def test_paper_alone_keeps_only_an_fpga_object_of_todays_configurations(tmp_path, capsys):
    from dstar_rtl.app.reports.compare import kept_fpga
    from dstar_rtl.models.digits import load_trained
    from dstar_rtl.results.compare import Compare

    spec, params = load_trained()
    rec = _stored()
    today = {dp: replace(c, config_hash=fpga_config(dp, spec, params).hash())
             for dp, c in rec.fpga.cores.items()}
    out = tmp_path / "o"
    out.mkdir()
    old = dict(today, int8=replace(today["int8"], config_hash="0" * 16))
    (out / "compare.json").write_text(_stored(cores=old, measured=None).to_json())
    before = (out / "compare.json").read_text()
    rc = dstar_rtl.app.cli.main(["measure", "compare", "--presets", "paper", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "the int8 fpga core of" in err and "0000000000000000" in err
    assert (out / "compare.json").read_text() == before and len(list(out.iterdir())) == 1
    (out / "compare.json").write_text(_stored(cores=today, measured=None).to_json())
    kept = kept_fpga(lambda: Compare.load(out / "compare.json"))
    assert kept.measured == rec.provenance.date


def test_report_md_opens_with_the_whole_core_comparison():
    from dstar_rtl.app.reports.summary import _compare_section

    rec = _stored(dstar_cycles_per_image=100, int8_cycles_per_image=150, dstar_um2=3,
                  int8_um2=2, per_um2=1.0, per_um2_with_sram=0.9, per_lut=1.1, qpu_share=0.25,
                  rtl_sources=None)
    rec = replace(rec, paper=None, verdict="`fpga`: the DSTAR core wins per µm² of cells by 1.00×")
    text = "\n".join(_compare_section(rec))
    assert "**`fpga`: the DSTAR core wins" in text and "not measured in this run" in text
    assert "| `fpga` (RTL) | 100 / 150 | 3 / 2 | **1.00** | 0.90 | 1.10 | 25.0 % |" in text
    assert "Not measured yet" in "\n".join(_compare_section(None))
    # Measured before the comparison recorded its RTL: stale; on today's sources: not.
    assert "**Stale**: the `fpga` figures were measured on RTL sources" in text
    from dstar_rtl.sim.sources import digest, elaboration_sources
    rec = replace(rec, fpga=replace(rec.fpga, rtl_sources=digest(elaboration_sources())))
    assert "Stale" not in "\n".join(_compare_section(rec))
    rec = replace(rec, fpga=replace(rec.fpga, rtl_sources="0" * 64))
    assert "**Stale**: the `fpga` figures" in "\n".join(_compare_section(rec))


def test_compare_md_without_a_paper_comparison_says_so():
    from dstar_rtl.app.reports.compare import markdown

    md = markdown(replace(_stored(measured=None), paper=None))
    assert "## `paper`: not measured in this run" in md and "projected cycles" not in md
    assert "kept by this run" not in md and md.endswith("![area by part](compare.png)\n")
