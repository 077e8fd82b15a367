"""The report generators import and render Markdown tables from a small fake result (no tools
run; the figures themselves come from ``python -m fpga.report_arrays`` / ``fpga.report_qpu``)."""

from fpga import report_arrays, report_qpu


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

    arrays = report_arrays.markdown(dict(
        common, preset="fpga", config_hash="abc", config=cfg,
        synthesis={"pe": {"ecp5-nodsp": ecp5, "ecp5": ecp5, "generic": generic}}))
    assert "| one PE | no DSP | 120 | 100 | 10 |" in arrays

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
    p["share"] = report_qpu.shares(p["qpu"], p["mpu"])
    assert p["share"]["generic"]["transistors"] == 0.5
    qpu = report_qpu.markdown(dict(common, presets={"fpga": p}))
    assert "| QPU | no DSP | 120 | 100 | 10 | 50 |" in qpu
    assert "| bitonic sorter | 80 (67 %) | 40 (80 %) | 0 | 90 | 40 | 600 (67 %) |" in qpu
    assert "Largest in transistors: bitonic sorter (67%)" in qpu
    assert "1.8 %" in qpu
