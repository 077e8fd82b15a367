"""The host's side of sampling a whole DiT on the core (:mod:`program.model`): one loop for
the cocotb testbench (:mod:`tb.test_sample`) and for the ISA executor's tests.

:class:`CoreSampler` holds the program, one integer golden model per batch row (each with its own
state, stepped beside the core) and the host's copy of the streamed state. Per sample
:meth:`CoreSampler.start` returns the program that starts a trajectory; per step
:meth:`CoreSampler.step_program` computes every row's inputs (float, on the host) and the golden
step, and returns the step's commands and host words; :meth:`CoreSampler.finish_step` takes the
words the core stored, compares every tensor with the golden step (:func:`assert_equal`: the
first difference raises AssertionError naming it), keeps the streamed state and takes the DDIM
update with the ``eps`` the core returned, so the image is the core's. The start program ends
with a snapshot of the core's counters (:meth:`CoreSampler.started` takes it); every step's
counters are the increments since the snapshot before, and their QPU counters must equal the
golden's count of every QUANT of the step (:meth:`program.model.ModelProgram.
expected_counters`).
"""

from __future__ import annotations

import numpy as np

from dstar_rtl.models.dit import ddim_timesteps, ddim_update, start_noise
from dstar_rtl.models.dit_int_model import average_bits, guided_eps
from dstar_rtl.program.isa import COUNTERS, store_counters
from dstar_rtl.program.model import ModelProgram, zero_state_commands

__all__ = ["CoreSampler", "assert_equal"]


def assert_equal(got: dict, exp: dict, where: str):
    """Every key of ``exp`` equal in ``got`` (arrays exactly, dicts key by key); the message
    names the first difference: ``where``, the key, the index, both values."""
    for k, e in exp.items():
        g = got[k]
        if isinstance(e, dict):
            assert_equal(g, e, f"{where}{k}.")
            continue
        e, g = np.asarray(e), np.asarray(g)
        if e.shape != g.shape or not np.array_equal(e, g):
            if e.shape != g.shape:
                raise AssertionError(f"{where}{k}: shape {g.shape}, expected {e.shape}")
            if e.ndim == 0:
                raise AssertionError(f"{where}{k}: got {int(g)}, expected {int(e)}")
            idx = tuple(int(i) for i in np.argwhere(e != g)[0])
            raise AssertionError(f"{where}{k}: first difference at index {idx}: got "
                                 f"{int(g[idx])}, expected {int(e[idx])}")


class CoreSampler:
    """Sampling with DDIM on the core (module docstring).

    Parameters
    ----------
    prog : the compiled model (:func:`program.model.compile_model`, ``rows`` batch rows).
    models : one :class:`models.dit_int_model.IntDiT` per batch row (same weights as ``prog``'s).
    steps : DDIM steps; guidance : the scale (two rows: conditional, then unconditional).
    dram : with a core whose program keeps objects in DRAM (``prog.dram_map``), the DRAM
        behind its port: anything with ``write(byte address, bytes)`` and ``read(byte
        address, count)`` (a :class:`program.dram.Dram`, cocotbext-axi's AXI RAM). The sampler
        writes the weights into it (:meth:`load_dram`, before the init program), zeroes the
        state at each :meth:`start` and compares the state it holds after every step with the
        golden's.
    """

    def __init__(self, prog: ModelProgram, models: list, steps: int, guidance: float = 1.0,
                 dram=None):
        if prog.dram_map and dram is None:
            raise ValueError("the program keeps objects in DRAM: give the sampler the DRAM "
                             "(dram=)")
        if len(models) != prog.rows:
            raise ValueError(f"the program runs {prog.rows} batch row(s), not {len(models)}")
        self.prog, self.models, self.guidance = prog, list(models), guidance
        self.ts = ddim_timesteps(steps)
        self.steps_done = 0         # steps the core ran since its init (for the STEP phase)
        self.x = self.label = None
        self.i = 0
        self.totals = None          # the core's counters at the last snapshot
        self.dram = dram

    def load_dram(self):
        """Write the weights the program keeps in DRAM (before its init program runs)."""
        for addr, data in self.prog.dram_image().items():
            self.dram.write(addr, data)

    def start(self, seed: int, label: int) -> list:
        """Begin a trajectory from the noise of ``seed``; returns the commands to run first (zero
        state, phase back to a cache step, a snapshot of the counters); give the words they
        store to :meth:`started`."""
        for m in self.models:
            m.reset()
        self.state = self.prog.initial_state()
        self.x, self.label, self.i = start_noise(self.models[0].spec, seed)[0], label, 0
        self.totals = None
        if self.dram is not None:
            for addr, data in self.prog.zero_state_image().items():
                self.dram.write(addr, data)
        cmds = zero_state_commands(self.prog, self.steps_done)
        return cmds[:-1] + [store_counters(), cmds[-1]]

    def started(self, words, where: str = ""):
        """The words the start program stored: its one STORE, the counters (the zeroing and the
        STEPs store nothing); AssertionError naming the count otherwise."""
        words = [int(w) for w in words]
        if len(words) != len(COUNTERS):
            raise AssertionError(f"{where}start: {len(words)} words stored, expected the "
                                 f"{len(COUNTERS)} counters alone")
        self.totals = dict(zip(COUNTERS, words))

    @property
    def cache(self) -> bool:
        """Whether the next step is a SAR cache step."""
        return self.prog.is_cache_step(self.i)

    def step_program(self) -> tuple:
        """``(commands, host words)`` of the next step; the golden rows take the step too."""
        t = int(self.ts[self.i])
        labels = (self.label, self.models[0].spec.classes)
        self.inputs = [m.host_inputs(self.x, t, labels[r]) for r, m in enumerate(self.models)]
        self.ref = [m.step(v) for m, v in zip(self.models, self.inputs)]
        return self.prog.step, self.prog.host_words(self.inputs, self.state, self.cache)

    def finish_step(self, words, where: str = "") -> dict:
        """The core's stored ``words`` of the step: every row compared with its golden step
        (AssertionError at the first difference), the state kept, the DDIM update taken.
        The step's QPU counter increments are compared with the golden's count too
        (:meth:`program.model.ModelProgram.expected_counters`).
        Returns the step's record: ``step``, ``t``, ``cache_step``, ``counters`` (the core's
        increments over the step), ``values_checked`` (tensor elements and counters compared),
        ``average_bits`` (from the core's QPU counters: every QUANT), ``layer_average_bits``
        (the golden's differential layers, conditional row) and ``saturated`` (golden)."""
        prog, cache = self.prog, self.cache
        if self.totals is None:
            raise RuntimeError("started() must take the start program's words first")
        outs, totals = prog.parse_output(words, cache)
        checked = 0
        for r in range(prog.rows):
            exp = prog.expected(self.ref[r], cache, r)
            assert_equal(outs[r], exp, f"{where}row {r}: ")
            checked += sum(v.size for v in exp.values())
            self.state[r].update(prog.next_state(outs[r]))
            if self.dram is not None:
                exp = prog.expected_dram_state(self.ref[r], r, cache)
                assert_equal(prog.dram_state(self.dram.read, r, cache), exp,
                             f"{where}row {r} DRAM: ")
                checked += sum(v.size for v in exp.values())
        counters = {n: totals[n] - self.totals[n] for n in COUNTERS}
        self.totals = totals
        expect = prog.expected_counters(self.ref)
        assert_equal({k: counters[k] for k in expect}, expect, f"{where}counters: ")
        checked += len(expect)
        eps = self.models[0].eps_to_image(prog.eps(outs[0]))
        if prog.rows == 2:
            eps = guided_eps(eps, self.models[1].eps_to_image(prog.eps(outs[1])), self.guidance)
        self.x = ddim_update(self.x, eps, self.i, self.ts)
        rec = dict(step=self.i, t=int(self.ts[self.i]), cache_step=cache, counters=counters,
                   values_checked=checked,
                   average_bits=round(average_bits([counters], prefix="qpu_"), 4),
                   layer_average_bits=round(self.ref[0].average_bits(), 4),
                   saturated=sum(m.saturated for m in self.ref))
        self.i += 1
        self.steps_done += 1
        return rec

    @property
    def done(self) -> bool:
        """Whether the trajectory has taken every step."""
        return self.i == len(self.ts)
