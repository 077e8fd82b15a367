"""A linear layer in passes (program.compiler.emit_layer ``blocks`` and ``chans``; program.model
"Passes"): run as passes over output column blocks, each quantizing the whole input again from
the same x̂, or as reduction pieces over every token tile, with each pass's weights loaded
before it and the state by token tiles through DRAM, the layer's output at every step is the
golden layer's (in the same pieces), and the programs have no hazard."""

import numpy as np
import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.layouts import unpack
from dstar_rtl.program.dram import Dram
from dstar_rtl.program.executor import CoreExecutor
from dstar_rtl.program.hazards import check_program
from dstar_rtl.program.isa import (
    DRAM_ADDR_BITS,
    beat_bytes,
    core_for,
    host_words_per_row,
    row_layout,
    rows_tensor,
)
from dstar_rtl.sim.dram_programs import layer_passes_program


def _outputs(cfg, prog, words):
    """Each step's output tensor from the host words (the counters after them dropped)."""
    k, T = host_words_per_row(cfg, "ABUF"), cfg.tile
    rows = prog.extra["out"].rows
    lay = row_layout(cfg, "ABUF")
    out = []
    for s, x in enumerate(prog.extra["xs"]):
        w = words[s * rows * k:(s + 1) * rows * k]
        vals = [unpack(lay, sum(int(v) << (32 * i) for i, v in enumerate(w[r * k:(r + 1) * k])))
                ["v"] for r in range(rows)]
        out.append(rows_tensor(vals, len(x), T))
    return out


@pytest.mark.parametrize("name,width", [("tiny", 32), ("fpga", 64)])
@pytest.mark.parametrize("split,passes", [("blocks", 2), ("blocks", 3), ("chans", 2)])
def test_a_layer_in_passes_is_the_golden_layer(name, width, split, passes):
    cfg = preset(name, dram_width=width)
    prog = layer_passes_program(cfg, 5, split, passes)
    core = core_for(cfg)
    assert check_program(cfg, core, [(prog.cmds, prog.extra["host_words"])]) == 0
    dram = Dram(beat_bytes(cfg) << DRAM_ADDR_BITS)
    for a, data in prog.image.items():
        dram.write(a, data)
    ex = CoreExecutor(cfg, core, dram=dram)
    got = _outputs(cfg, prog, ex.run(prog.cmds, prog.extra["host_words"]))
    lay = prog.extra["layer"]
    for s, x in enumerate(prog.extra["xs"]):
        np.testing.assert_array_equal(got[s], lay.step(x).y, err_msg=f"step {s}")
    # Every pass quantized the whole input (blocks) or its piece (chans): the QPU saw each
    # input channel of each token tile once a pass, or once.
    tiles = len(prog.extra["xs"][0]) // cfg.tile
    cin = lay.W.shape[0]
    again = passes if split == "blocks" else 1
    assert ex.counters["qpu_subchannels"] == again * cin * tiles * len(prog.extra["xs"])


def test_the_int8_core_cannot_split_a_reduction():
    cfg = preset("tiny", dram_width=32, datapath="int8")
    with pytest.raises(ValueError, match="cannot split a reduction"):
        layer_passes_program(cfg, 5, "chans", 2)
