"""cocotb sampling loop on the generated core: a whole DiT sampled with DDIM, every step checked
against the integer golden bit for bit.

The job (:mod:`sim.sample_job`, named by ``DSTAR_SAMPLE_JOB``) gives the model, its SAR masks and
the run. The program is :func:`program.model.compile_model` (one batch row, or two for
classifier-free guidance). Per sample the core's state is zeroed and its phase brought back to a
cache step (its only stored words are a snapshot of the counters: the init and the start
programs are checked to store nothing else); per step the host (this loop, in float) computes
every row's inputs
(:meth:`models.dit_int_model.IntDiT.host_inputs`; the host side is
:class:`program.sampling.CoreSampler`), sends them and the streamed layers, the core
runs every layer, the host reads ``h0``, every block's output, ``f``, ``eps``, the streamed state
and the counters (with a DRAM port, the objects that do not fit the core live in cocotbext-axi's
AXI RAM behind it, paused at random, or the job's deterministic DRAM, tb.dram_model: the
weights written there before the init program, the
state zeroed there before each sample and read back after every step). Each of those is
compared with the integer golden's step: the first difference
stops the run naming the sample (by its seed), step, row, tensor and index. The ``eps`` read from
the core drives the DDIM update (:func:`models.dit.ddim_update`). The result file holds the
images and, per step, the core's cycles (first command offered to ``done``) and its counters'
increments.
"""

import os

import cocotb
import numpy as np

from dstar_rtl.models.dit_int_model import IntDiT
from dstar_rtl.program.model import compile_model
from dstar_rtl.program.sampling import CoreSampler
from dstar_rtl.sim.sample_job import DRAM_PAUSE, JOB_ENV, read_job, write_result

from .core_tb import CoreTB


@cocotb.test()
async def sample_on_core(dut):
    """The job's samples, every step bit-exact against the integer golden."""
    job = read_job(os.environ[JOB_ENV])
    timing = None
    if job.dram is not None:
        from dstar_rtl.sim.dram_timing import DramTiming

        timing = DramTiming(*job.dram)
    tb = CoreTB(dut, dram_pause=DRAM_PAUSE, dram_timing=timing)
    await tb.reset()
    try:
        images, record = await _sample(dut, tb, job)
    except AssertionError as why:
        write_result(job.result, error=str(why).splitlines()[0])
        raise
    write_result(job.result, images=images, record=record)


async def _sample(dut, tb, job):
    cfg, spec = tb.cfg, job.spec
    rows = 1 if job.guidance == 1.0 else 2

    def model():
        return IntDiT(spec, job.params, cfg, job.masks, base_log2=job.bases)
    prog = compile_model(model(), tb.core, rows=rows, stream=job.stream)
    host = CoreSampler(prog, [model() for _ in range(rows)], job.steps, job.guidance,
                       dram=tb.ram if prog.dram_map else None)
    if prog.dram_map:
        host.load_dram()
    stored = await tb.run(prog.init, prog.init_words)
    assert not stored, f"the init program stored {len(stored)} words; it stores none"
    init_cycles = tb.cycles
    images, samples = [], []
    for k, label in enumerate(job.labels):
        name = f"sample of seed {job.seeds[k]} (label {label})"
        host.started(await tb.run(host.start(job.seeds[k], label)), f"{name} ")
        per_step = []
        while not host.done:
            cmds, words = host.step_program()
            name = f"sample of seed {job.seeds[k]} (label {label}) step {host.i}"
            rec = host.finish_step(await tb.run(cmds, words), f"{name} ")
            rec["cycles"] = tb.cycles
            per_step.append(rec)
            line = (f"{name}: {tb.cycles} cycles, {'cache' if rec['cache_step'] else 'reuse'} "
                    f"step, bit-exact")
            dut._log.info(line)
            with open(job.progress, "a") as f:
                f.write(line + "\n")
        images.append(host.x)
        samples.append(dict(index=k, label=int(label), per_step=per_step))
    record = dict(rows=rows, init_cycles=init_cycles, streamed=prog.streamed,
                  memory_map=prog.memory_map(), commands_per_step=len(prog.step),
                  samples=samples, dram_traffic={k: prog.dram_traffic(c) for k, c in
                                                 (("cache", True), ("reuse", False))})
    return np.stack(images), record
