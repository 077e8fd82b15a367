"""Performance of the generated core on a DiT block: per step and per program section (layer),
the cycles from the first command to ``done`` and the deltas of every counter, with the host
streams never stalling. Results are checked against the golden block (so the figures belong to a
correct run) and written as JSON to ``DSTAR_PERF_JSON`` when set.

Knobs: ``DSTAR_STEPS`` (default 4: cache, reuse, cache, reuse; the first step quantizes the
whole input, later ones only its change); ``DSTAR_MODEL_SPEED`` (default 1; 0 skips the
simulator-speed run after the checked steps, and ``sim.model`` is None).
"""

import os
import time

import cocotb

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.program import isa
from dstar_rtl.program.compiler import compile_block
from dstar_rtl.program.workloads import SPECS, block_workload

from .array_tb import env_int
from .core_tb import CoreTB, assert_equal

END = isa.Cmd("END", {})
CNT = isa.store_counters()


@cocotb.test()
async def block_performance(dut):
    tb = CoreTB(dut)
    await tb.reset()
    cfg = tb.cfg
    steps = env_int("DSTAR_STEPS", 4)
    make_block, inputs = block_workload(cfg, steps)
    golden, prog = make_block(), compile_block(make_block(), tb.core)
    await tb.run(prog.init_commands() if prog.init_commands()[-1].op == "END"
                 else prog.init_commands() + [END], prog.init_host_words())
    step_cmds = prog.step_commands()
    records, sim_cycles, wall, compute = [], 0, 0.0, [0, 0.0]
    # The counters are read between sections; the cost of one read (its own tail after the
    # snapshot) is measured from two reads back to back and subtracted from every delta.
    first = await tb.run([CNT, END])
    before = await tb.run([CNT, END])
    overhead = [b - a for a, b in zip(first, before)]
    for s, (x, mod) in enumerate(inputs):
        ref = golden.step(x, mod)
        host = prog.step_host_words(x, mod)
        words, sections = [], []
        for name, a, b in prog.sections:
            t0 = time.perf_counter()
            out = await tb.run(step_cmds[a:b] + [END], host if a == 0 else ())
            dt = time.perf_counter() - t0
            wall += dt
            sim_cycles += tb.cycles
            if name not in ("load", "store"):    # no host word per cycle in Python
                compute[0] += tb.cycles
                compute[1] += dt
            cycles = tb.cycles
            words += out
            after = await tb.run([CNT, END])
            delta = {n: after[i] - before[i] - overhead[i] for i, n in enumerate(isa.COUNTERS)}
            before = after
            sections.append(dict(name=name, cycles=cycles, commands=b - a,
                                 counters={k: v for k, v in delta.items() if v}))
        assert_equal(prog.parse_step_output(words), prog.expected(ref), f"step {s}: ")
        records.append(dict(step=s, cache=bool(ref.cache_step), sections=sections,
                            cycles=sum(x["cycles"] for x in sections)))
        dut._log.info(f"step {s} ({'cache' if ref.cache_step else 'reuse'}): "
                      f"{records[-1]['cycles']} cycles")
    # Model speed: the compute sections of one step as one program (no host words, one wake-up
    # of the testbench per status change), after the checked steps (it advances the state).
    model = None
    if env_int("DSTAR_MODEL_SPEED", 1):
        body = [c for name, a, b in prog.sections if name not in ("load", "store")
                for c in step_cmds[a:b]]
        t0 = time.perf_counter()
        await tb.run(body + [END])
        model = dict(cycles=tb.cycles, wall_s=time.perf_counter() - t0)
        model["cycles_per_s"] = model["cycles"] / model["wall_s"]
    spec = SPECS.get(cfg.name)
    result = dict(preset=cfg.name, config_hash=cfg.hash(), core=tb.core.to_dict(),
                  spec=dict(tokens=spec.tokens, hidden=spec.hidden, heads=spec.heads,
                            head_dim=spec.head_dim, mlp=spec.mlp_hidden),
                  mask_kept=int(golden.mask.sum()), mask_blocks=int(golden.mask.size),
                  interval=golden.interval, steps=records,
                  sim=dict(cycles=sim_cycles, wall_s=wall,
                           cycles_per_s=sim_cycles / wall if wall else None,
                           compute_cycles=compute[0], compute_wall_s=compute[1],
                           compute_cycles_per_s=compute[0] / compute[1] if compute[1] else None,
                           model=model))
    path = os.environ.get("DSTAR_PERF_JSON")
    if path:
        with open(path, "w") as fh:
            fh.write(data_json(result, indent=1))
