"""cocotb tests of the generated core: a DiT block over denoising steps bit-exact against the
integer golden (every output and every x̂ / Y state at every step, cache and reuse steps, SAR
blocks dropped; commands with random idle cycles between them; the layers' reductions split into
pieces with ``DSTAR_PIECES``; the MLP's width with ``DSTAR_MLP_RATIO`` and the hidden size and
heads with ``DSTAR_HIDDEN`` / ``DSTAR_HEADS``, for reductions and LayerNorm rows longer than
``max_reduction``; the activations from ABUF row ``DSTAR_ABUF_BASE``), the host words equal to the
ISA executor's, the event counters equal to the executor's, errors that stop the core cleanly
(no host word from the first command to the end of the trailing window), and the host words of
a program counted as they come, not assumed (a STORE a SKIP discards, a word after the expected
ones)."""

import os

import cocotb

from dstar_rtl.program import isa
from dstar_rtl.program.compiler import compile_block
from dstar_rtl.program.executor import CoreExecutor
from dstar_rtl.program.workloads import block_workload

from .array_tb import env_int
from .core_tb import CoreTB, assert_equal
from .streams import expect_trailing_beat

END = isa.Cmd("END", {})


def pieces_from_env() -> dict:
    """``DSTAR_PIECES`` (``layer=count,...``, e.g. ``fc2=3,qk=2``): the reduction pieces the
    block is compiled with (compile_block's ``pieces``); empty: none split."""
    text = os.environ.get("DSTAR_PIECES", "")
    return {k: int(v) for k, v in (item.split("=") for item in text.split(",") if item)}


def _ended(cmds):
    return cmds if cmds and cmds[-1].op == "END" else list(cmds) + [END]


@cocotb.test()
async def dit_block_over_steps(dut):
    """The block over DSTAR_STEPS steps (interval 2: cache, reuse, cache, reuse, ...), with
    random gaps on every host-side stream, commands included."""
    tb = CoreTB(dut, gap=0.1, stall=0.2, cmd_gap=0.2)
    await tb.reset()
    cfg = tb.cfg
    steps = env_int("DSTAR_STEPS", 4)
    ratio = os.environ.get("DSTAR_MLP_RATIO")
    shape = {k: env_int(f"DSTAR_{k.upper()}", 0) or None for k in ("hidden", "heads")}
    make_block, inputs = block_workload(cfg, steps, seed=env_int("DSTAR_WORKLOAD_SEED", 3),
                                        mlp_ratio=float(ratio) if ratio else None,
                                        pieces=pieces_from_env(), **shape)
    golden, prog = make_block(), compile_block(make_block(), tb.core, pieces_from_env(),
                                               abuf_base=env_int("DSTAR_ABUF_BASE", 0))
    ex = CoreExecutor(cfg, tb.core)
    init = _ended(prog.init_commands())
    await tb.run(init, prog.init_host_words())
    ex.run(init, prog.init_host_words())
    step_cmds = _ended(prog.step_commands())
    for s, (x, mod) in enumerate(inputs):
        ref = golden.step(x, mod)
        host = prog.step_host_words(x, mod)
        words = await tb.run(step_cmds, host)
        assert words == ex.run(step_cmds, host), f"step {s}: host words differ from the executor"
        assert_equal(prog.parse_step_output(words), prog.expected(ref), f"step {s}: ")
        dut._log.info(f"step {s} ({'cache' if ref.cache_step else 'reuse'}): {tb.cycles} cycles, "
                      f"{len(step_cmds)} commands")
    counters = [isa.store_counters(), END]
    got = await tb.run(counters)
    want = ex.run(counters)
    for i, name in enumerate(isa.COUNTERS):
        if name not in isa.CYCLE_COUNTERS:
            assert got[i] == want[i], f"counter {name}: core {got[i]}, executor {want[i]}"
    dut._log.info("counters: " + ", ".join(f"{n}={v}" for n, v in zip(isa.COUNTERS, got)))
    assert tb.cmd_idle > 0, "no idle cycle between commands"
    dut._log.info(f"{tb.cmd_idle} idle cycles between commands")


@cocotb.test()
async def errors_stop_cleanly(dut):
    """An unknown opcode, a LOAD past the end of ABUF and a VROW with an operation it does not
    run each set their code; the commands after them are drained without effect: ``host_out``,
    ready and watched from the first command to the end of the trailing window after the error,
    carries no word."""
    tb = None
    for kind, code in (("opcode", "opcode"), ("address", "address"), ("operand", "operand")):
        tb = CoreTB(dut) if tb is None else tb
        await tb.reset()
        if kind == "opcode":
            bad = [len(isa.OPCODES)]
        elif kind == "address":
            bad = [isa.Cmd("LOAD", dict(buf=0, addr=tb.core.abuf_rows - 1, count=2))]
        else:
            bad = [isa.Cmd("VROW", dict(vop=5, R=1, n=1, C=1))]     # acc_requant
        tail = [isa.Cmd("STORE", dict(buf=0, addr=0, count=1)), END]
        st = await tb.run_until_error(bad + tail)
        assert isa.ERRORS[st["error"]] == code, (kind, st)
        assert st["error_index"] == 0 and not st["done"]
        assert tb.out.words == [], f"{kind}: host words after the error: {tb.out.words}"


@cocotb.test()
async def stored_words_are_counted_not_assumed(dut):
    """The sink takes what the core stores, not a count derived from the program: a STORE that
    a SKIP discards returns nothing (the words equal the executor's), and a sink told to expect
    one word fewer than a STORE returns fails on the last one in its trailing window."""
    tb = CoreTB(dut)
    await tb.reset()
    cfg = tb.cfg
    abuf = isa.BUFFERS.index("ABUF")
    rows = [dict(v=[3 * r + k for k in range(cfg.tile)]) for r in range(3)]
    host = [w for r in rows for w in isa.row_to_words(cfg, "ABUF", r)]
    prog = [isa.Cmd("LOAD", dict(buf=abuf, addr=0, count=3)),
            isa.Cmd("STEP", dict(interval=2)),                   # phase 1: a reuse step
            isa.Cmd("SKIP", dict(count=1)),
            isa.Cmd("STORE", dict(buf=abuf, addr=0, count=3)),   # discarded
            isa.Cmd("STORE", dict(buf=abuf, addr=1, count=1)), END]
    got = await tb.run(prog, host)
    want = CoreExecutor(cfg, tb.core).run(prog, host)
    assert got == want and len(got) == isa.host_words_per_row(cfg, "ABUF"), (got, want)

    store = [isa.Cmd("STORE", dict(buf=abuf, addr=0, count=2)), END]
    n = 2 * isa.host_words_per_row(cfg, "ABUF")
    tb.out.words.clear()
    tx = cocotb.start_soon(tb.send_commands([isa.encode(cfg, c) for c in store]))
    await expect_trailing_beat(tb.out, n - 1, timeout=1000, pending=tx)
    assert (await tb.wait_status(1000))["done"]
