"""``dstar measure reference`` (app/reports/reference.py): the reference family's shapes, a
refusal named in one line, a compiled row's counts, and the report's tables."""

import pytest

from dstar_rtl.app.reports.reference import markdown
from dstar_rtl.bench.reference import FAMILY, compile_row, reference_spec
from dstar_rtl.results.base import Provenance, plain


def _ref(rows, runs=(), step_times=None):
    """A typed reference result from plain rows, runs and step times."""
    from dstar_rtl.app.reports.reference import Reference

    return Reference.from_data(dict(
        kind="reference", schema=1, provenance=plain(Provenance.unrecorded("c", "d")),
        rows=list(rows), runs=list(runs), step_times=step_times))


def test_family_shapes():
    s = reference_spec("DiT-XL/2")
    assert (s.tokens, s.hidden, s.depth, s.heads, s.head_dim, s.mlp_hidden, s.channels) == \
        (256, 1152, 28, 16, 72, 4608, 4)
    assert all(reference_spec(m).tokens == 256 for m in FAMILY)
    with pytest.raises(ValueError, match="model must be one of"):
        reference_spec("DiT-G/2")


def test_fpga_raises_ln_row_max_and_deepens_abuf_past_the_128_bit_command(monkeypatch):
    """DiT-S/2's shapes (one block) at ``fpga``: its 384-channel LayerNorm rows raise
    ``ln_row_max`` (named), its activations deepen ABUF past 2**16 rows, so the program's
    commands are 160 bits; the report names both."""
    import dataclasses

    import dstar_rtl.bench.reference as ref
    from dstar_rtl.models.dit import init_params
    from dstar_rtl.program.isa import cmd_bits
    spec = dataclasses.replace(reference_spec("DiT-S/2"), depth=1)
    monkeypatch.setattr(ref, "reference_spec", lambda name: spec)
    rec, prog = compile_row("DiT-S/2", init_params(spec, 0), "fpga")
    assert rec["status"] == "compiled", rec.get("reason")
    assert rec["raised"] == {"ln_row_max": 384} and rec["deepened"]["abuf_rows"] > 1 << 16
    assert cmd_bits(prog.cfg) == 160 and rec["command_bits"] == 160
    text = markdown(_ref([rec]))
    assert "| DiT-S/2 | fpga (ln_row_max 384) | compiled |" in text


def test_a_small_model_compiles_with_its_counts(monkeypatch):
    """A family member shrunk to the tiny preset's scale compiles: its commands, host words and
    fc2 pieces counted from the program."""
    import dstar_rtl.bench.reference as ref
    from dstar_rtl.models.dit import DiTSpec, init_params
    small = DiTSpec(image_size=8, patch=2, channels=4, hidden=16, depth=1, heads=2,
                    mlp_ratio=5.0, classes=4, freq_dim=16)
    monkeypatch.setattr(ref, "reference_spec", lambda name: small)
    rec, prog = compile_row("DiT-S/2", init_params(small, 0), "fpga")
    assert rec["status"] == "compiled", rec.get("reason")
    assert rec["step_commands"] == len(prog.step) and rec["pieces"]["fc2"] == 1
    c = rec["cache_step"]
    assert c["words_in"] > 0 and c["words_out"] > 0 and 0 <= c["streamed_words"] <= c["words_in"]
    text = markdown(_ref([rec]))
    assert "| DiT-S/2 | fpga | compiled |" in text and f"{rec['step_commands']:,}" in text


def test_report_md_lines():
    from dstar_rtl.app.reports.summary import _reference_section
    assert _reference_section(None) == [] and _reference_section(_ref([])) == []
    shape = dict(tokens=256, hidden=384, depth=12, heads=6, mlp=1536)
    rows = [dict(model="DiT-S/2", preset="fpga", status="refused", reason="why", **shape),
            dict(model="DiT-S/2", preset="paper", status="compiled", step_commands=6614,
                 **shape)]
    runs = [dict(model="DiT-S/2", preset="paper", seconds=160.6, commands=6614)]
    text = "\n".join(_reference_section(_ref(rows, runs)))
    assert "| DiT-S/2 | fpga | refused: why |" in text
    assert "| DiT-S/2 | paper | compiled, 6,614 commands per step |" in text
    assert "executor equal to the integer model's (161 s)" in text
    from dstar_rtl.bench.reference import H96
    st = dict(model=dict(H96), preset="fpga", steps=2, pieces={"fc2": 2},
              executor_s_per_step=16.8, rtl_s_per_step=11.7, rtl_cycles_per_step=587604.0,
              rtl_bit_exact=True)
    assert ("the executor 16.8 s, the Verilator core 11.7 s (587,604 cycles, bit-exact)"
            in "\n".join(_reference_section(_ref(rows, runs, st))))


def test_step_times_in_the_report():
    from dstar_rtl.bench.reference import H96
    st = dict(model=dict(H96), preset="fpga", steps=2, pieces={"fc2": 2},
              executor_s_per_step=17.6, rtl_build_s=240.0, rtl_s_per_step=30.2,
              rtl_bit_exact=True, rtl_cycles_per_step=586660.0)
    text = markdown(_ref([], step_times=st))
    assert "the ISA executor **17.6 s** per step" in text
    assert "the Verilator core **30.2 s** per step (586,660 cycles, bit-exact at every step" in text
    st = {k: v for k, v in st.items() if not k.startswith("rtl")}
    assert "the ISA executor **17.6 s** per step (every stored tensor checked)." in markdown(
        _ref([], step_times=st))


@pytest.mark.slow
def test_dit_s_first_step_on_the_paper_executor():
    """Issue 31: DiT-S/2 (random weights, 256 tokens) compiles at paper and its first step on the
    ISA executor equals the integer model's, every stored tensor compared (about 3 minutes)."""
    from dstar_rtl.bench.reference import run_first_step
    from dstar_rtl.models.dit import init_params
    params = init_params(reference_spec("DiT-S/2"), 0)
    rec, prog = compile_row("DiT-S/2", params, "paper")
    assert rec["status"] == "compiled", rec.get("reason")
    assert run_first_step(prog, params)["commands"] == len(prog.step)
