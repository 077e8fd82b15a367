"""One Amaranth simulator per design, reset for each run: a unit's simulator is elaborated and
compiled once (about 1.7 s for the core at ``tiny``, most of a short run) and every later run
of the same design object starts from :meth:`amaranth.sim.Simulator.reset`, which puts every
signal and memory back at its initial value and restarts the clock and the testbenches.

The testbenches of a reused simulator are fixed when it is made, so each one is a trampoline
that runs the function of its name that the current run set (``job[name]``); a run that does
not need one of them sets it to :func:`idle`.
"""

from __future__ import annotations

import weakref

from amaranth.sim import Simulator

__all__ = ["reused_simulator", "idle"]

#: (design, testbench names) → (its simulator, the current run's testbench functions).
_SIMULATORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


async def idle(ctx):
    """A testbench that does nothing (a run that needs fewer testbenches than the simulator
    has)."""


def reused_simulator(dut, names: tuple, background: tuple = ()) -> tuple:
    """``(simulator, job)`` of ``dut`` with a clock of 10 ns and a testbench per name of
    ``names`` (those of ``background`` not critical), at its initial state. Set ``job[name]``
    (``async def f(ctx)``) for every name, then ``simulator.run()``."""
    per_dut = _SIMULATORS.setdefault(dut, {})
    key = (tuple(names), tuple(background))
    got = per_dut.get(key)
    if got is not None:
        got[0].reset()
        got[1].clear()
        return got
    job: dict = {}

    def trampoline(name):
        async def run(ctx):
            await job[name](ctx)
        return run

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for name in names:
        sim.add_testbench(trampoline(name), background=name in background)
    per_dut[key] = (sim, job)
    return sim, job
