"""The report generators import and render Markdown tables from a small fake result (no tools
run; the figures themselves come from ``dstar measure arrays`` / ``app.reports.qpu``)."""

from dstar_rtl.app.reports import arrays as report_arrays
from dstar_rtl.app.reports import qpu as report_qpu
from dstar_rtl.flows.qpu_area import shares


def test_markdown_writers_render_tables():
    cfg = dict(rows=8, cols=8, lanes=4, sort_n=32, max_reduction=256, weight_width=8,
               act_width=16, pe_stages=1, alignment="product-shift")
    steps = [dict(step="synth qpu fpga generic", seconds=1.0, load_avg_1min=0.5, status="ok")]
    common = dict(date="today", host=dict(cpus=2, load_avg_start=0.5), tools={"yosys": "0"},
                  steps=steps, total_seconds=1.0)
    ecp5 = dict(resources=dict(lut_total=120, lut4=100, carry=10, widemux=3, ff=50, dsp=0,
                               bram=0, lutram=0), num_cells=170, seconds=2.0)
    generic = dict(resources=dict(ff=60, memory_bits=0, transistors=900), num_cells=300,
                   cells={"$_NAND_": 200, "$_DFF_P_": 60}, transistors=900,
                   transistors_complete=True, seconds=1.0)

    from dstar_rtl.results.base import Provenance
    from dstar_rtl.results.quantities import StepTime

    runs = {"ecp5-nodsp": ecp5, "ecp5": ecp5, "generic": generic}
    arrays = report_arrays.Arrays(
        Provenance.unrecorded(date="today"), preset="fpga", config_hash="abc", config=cfg,
        host=common["host"], tools=common["tools"], steps=(StepTime(**steps[0]),),
        total_seconds=1.0,
        synthesis={"pe": {k: report_arrays.UnitSynth.from_flow(v) for k, v in runs.items()}})
    md = report_arrays.markdown(report_arrays.Arrays.from_data(arrays.to_data()))
    assert "| one PE | no DSP | 120 | 100 | 10 |" in md
    assert "| one PE | 300 | 60 | 0 | 900 | NAND 200, DFF_P 60 |" in md

    hier = {"generic": dict(modules={
                "sorter": dict(resources=dict(ff=40, transistors=600, memory_bits=0), num_cells=90),
                "top": dict(resources=dict(ff=20, transistors=300, memory_bits=0,
                                           digit_store_ff=16, counter_ff=4), num_cells=30)}),
            "ecp5-nodsp": dict(modules={
                "sorter": dict(resources=dict(lut_total=80, ff=40, lutram=0), num_cells=120),
                "top": dict(resources=dict(lut_total=40, ff=10, lutram=0, digit_store_ff=8,
                                           counter_ff=2), num_cells=50)})}
    p = dict(preset="fpga", config_hash="abc", config=cfg,
             qpu={"ecp5-nodsp": ecp5, "ecp5": ecp5, "generic": generic},
             mpu={"ecp5-nodsp": ecp5, "ecp5": ecp5, "generic": generic}, breakdown=hier)
    p["share"] = shares(p["qpu"], p["mpu"])
    assert p["share"]["generic"]["transistors"] == 0.5
    rate = {"fpga/4/2/steady state": dict(preset="fpga", open_groups=4, pack_windows=2,
                                          phase="steady state", groups_per_cycle=0.841,
                                          subchannels_per_cycle=0.931, mpu_wait_cycles=1509,
                                          groups=7974)}   # qpu_rate.json's rows
    qpu = report_qpu._markdown(dict(common, presets={"fpga": p}, rate=rate))
    assert ("| fpga | sort, open 4, windows 2 | steady state | 0.841 | 0.931 | 1,509 | 7,974 |"
            in qpu)
    assert "| QPU | no DSP | 120 | 100 | 10 | 50 |" in qpu
    assert "| bitonic sorter | 80 (67 %) | 40 (80 %) | 0 | 90 | 40 | 600 (67 %) |" in qpu
    assert "Largest in transistors: bitonic sorter (67%)" in qpu
    assert "1.8 %" in qpu


def test_vpu_report_renders_every_section():
    from dstar_rtl.app.reports import vpu as rv
    from dstar_rtl.results.base import Provenance
    from dstar_rtl.results.quantities import PnrRun, Resources, StepTime, SynthRun
    from dstar_rtl.results.vpu import FunctionError, Vpu, VpuCycles, VpuFpga

    cyc = VpuCycles.from_bench(dict(
        preset="tiny", config_hash="abc", vpu_lanes=4, max_reduction=8, rows=3, lengths=[4, 8],
        ops=["gelu"], simulator="verilator", sim_cycles_per_second=1000,
        table={"gelu": {"4": dict(latency=10, interval=1.0),
                        "8": dict(latency=11, interval=2.0)}}))
    acc = {"gelu": FunctionError(max_abs=0.5, mean_abs=0.1, max_bound=0.6, mean_bound=0.2,
                                    worst="x=3")}
    run = SynthRun(Resources(lut_total=100, ff=50, dsp=2, bram=1, carry=9), seconds=3.0)
    pnr = PnrRun.from_flow(dict(fmax_mhz=55.5, constraint_mhz=100, timing_pass=False,
                                critical_path=dict(delay_ns=18.0, logic_ns=9.0, routing_ns=9.0,
                                                   logic_levels=7, start="a", end="b")))
    res = Vpu(Provenance.unrecorded(), cycles={"tiny": cyc}, accuracy={"tiny": acc},
                 fpga=VpuFpga("abc", run, run, pnr),
                 steps=(StepTime(step="s", seconds=1.0, status="ok"),), host={})
    md = rv.render(Vpu.from_data(res.to_data()))
    assert "| gelu | 10 / 1 | 11 / 2 |" in md
    assert "**Fmax 55.5 MHz** (NOT met)" in md and "from `a` to `b`" in md
    assert "| gelu | 0.5 | 0.6 | 0.1 | 0.2 | x=3 |" in md
    assert "| ecp5 | 100 | 50 | 2 | 1 | 9 | 3 |" in md


def test_packing_report_renders_and_refuses_bad_paths(tmp_path):
    import dataclasses

    import pytest

    from dstar_rtl.app.reports import packing as report_packing
    from dstar_rtl.gen.errors import UserError
    from dstar_rtl.results.base import Provenance
    from dstar_rtl.results.quantities import AsicArea, Library, Resources

    row = report_packing.PackingRow(
        label="sort, open 0, windows 1", packer="sort", open_groups=0, pack_windows=1,
        groups=1000, lanes_valid=3600, lane_util=0.9, config_hash="abc",
        ecp5=Resources(lut4=100, carry=10, lut_total=120, ff=50), ecp5_flow="abc",
        asic=AsicArea(area=1234.5, combinational_area=1000.0, sequential_area=234.5, ff=50))
    res = report_packing.Packing(
        Provenance.unrecorded(date="today"), yosys="0", library=Library("lib", sha256="0" * 64),
        steps=20, operating_point="op", bench={},
        rows=(row, dataclasses.replace(row, label="bins 4", packer="bins", asic=None)))
    md = report_packing.markdown(report_packing.Packing.from_data(res.to_data()))
    assert ("| sort, open 0, windows 1 | 1,000 | 90.0 % | 100 | 10 | 120 | 50 | 1,234.5 | "
            "1,000.0 | 234.5 |") in md
    assert "| bins 4 | 1,000 | 90.0 % | 100 | 10 | 120 | 50 | – | – | – |" in md
    for args, what in (([f"--liberty={tmp_path / 'no.lib'}"], "no.lib: file not found"),
                       ([f"--operating-point={tmp_path / 'no.json'}"], "operating point file")):
        with pytest.raises(UserError, match=what):
            report_packing.MEASUREMENT.main([*args, f"--out={tmp_path / 'out'}"])
    assert not (tmp_path / "out").exists()


def test_the_qpu_rate_file_is_read_as_its_type(tmp_path):
    """qpu_rate.json is a typed result (app.benches.qpu.QpuRate) that the QPU area report loads
    as its type; a file of the earlier layout (rows by key, no kind or schema) is refused with
    one line, not read as rows."""
    import json

    import pytest

    from dstar_rtl.gen.errors import UserError
    from dstar_rtl.results.base import Provenance
    from dstar_rtl.results.qpu_rate import QpuRate, QpuRateRow

    row = QpuRateRow(preset="fpga", packing="bins 4", packer="bins", open_groups=0,
                     pack_windows=1, phase="steady state", config_hash="abc", subchannels=10,
                     groups=20, subchannels_per_cycle=0.5, groups_per_cycle=0.9,
                     groups_per_subchannel=2.0, mpu_wait_cycles=3, first_group_latency=7,
                     lane_fill=0.5, sim_cycles_per_second=1e4, tiles=2, pack_bins=4)
    path = tmp_path / "qpu_rate.json"
    path.write_text(QpuRate(Provenance.unrecorded("dstar measure qpu-rate"), (row,)).to_json())
    got = report_qpu.rate_rows(path)
    assert list(got) == ["fpga/bins 4/steady state"]
    assert got["fpga/bins 4/steady state"]["groups_per_cycle"] == 0.9
    path.write_text(json.dumps({"rows": {"fpga/bins 4/steady state": {"preset": "fpga"}},
                                "command": "dstar measure qpu-rate"}))
    with pytest.raises(UserError, match="a result of kind None, not 'qpu-rate'"):
        report_qpu.rate_rows(path)
