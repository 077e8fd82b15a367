"""dstar_rtl.rtl.stream_queue.StreamQueue: the same cycle behaviour as the SyncFIFOBuffered it
wraps, the
latency and credit rules of its docstring, and its parameter checks."""

import gc
import random

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import data
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.sim import Simulator

from dstar_rtl.rtl.stream_queue import StreamQueue

# The refused (and the never elaborated) queues below warn "created but never used" when
# collected; gc.collect() in those tests makes that happen under their filter.
_quiet = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

WIDTH = 7


class _Pair(Elaboratable):
    """A StreamQueue and a bare SyncFIFOBuffered driven by the same inputs."""

    def __init__(self, depth):
        self.q = StreamQueue(WIDTH, depth=depth)
        self.f = SyncFIFOBuffered(width=WIDTH, depth=depth)
        self.valid, self.payload, self.ready = Signal(), Signal(WIDTH), Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.q, m.submodules.f = self.q, self.f
        m.d.comb += [self.q.i.valid.eq(self.valid), self.q.i.payload.eq(self.payload),
                     self.q.o.ready.eq(self.ready),
                     self.f.w_en.eq(self.valid), self.f.w_data.eq(self.payload),
                     self.f.r_en.eq(self.ready)]
        return m


def _run(top, bench):
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("depth", [2, 3, 4, 16])
def test_same_as_fifo_every_cycle(depth):
    """Random traffic: every output of the queue equals the FIFO's, every cycle; the credit
    rule (depth >= 3) holds; beats leave in order."""
    top = _Pair(depth)
    q, f = top.q, top.f
    rng = random.Random(depth)

    async def bench(ctx):
        sent, got = [], []
        for cycle in range(1500):
            p_in = rng.choice([0.2, 0.6, 0.95])
            p_out = rng.choice([0.2, 0.6, 0.95]) if cycle % 300 < 250 else 0.0
            v, r, d = rng.random() < p_in, rng.random() < p_out, rng.randrange(1 << WIDTH)
            ctx.set(top.valid, v)
            ctx.set(top.payload, d)
            ctx.set(top.ready, r)
            assert ctx.get(q.i.ready) == ctx.get(f.w_rdy)
            assert ctx.get(q.o.valid) == ctx.get(f.r_rdy)
            assert ctx.get(q.level) == ctx.get(f.level)
            if ctx.get(q.o.valid):
                assert ctx.get(q.o.payload) == ctx.get(f.r_data)
            if depth >= 3:
                assert ctx.get(q.i.ready) == (ctx.get(q.level) < depth)
            if v and ctx.get(q.i.ready):
                sent.append(d)
            if r and ctx.get(q.o.valid):
                got.append(ctx.get(q.o.payload))
            await ctx.tick()
        assert got == sent[:len(got)] and len(got) > 100

    _run(top, bench)


def test_latency_throughput_capacity():
    depth = 4
    q = StreamQueue(data.StructLayout({"a": 3, "b": 4}), depth=depth)

    async def bench(ctx):
        # Empty queue: a beat taken on an edge is offered two cycles later.
        ctx.set(q.i.valid, 1)
        ctx.set(q.i.payload, {"a": 5, "b": 9})
        await ctx.tick()
        ctx.set(q.i.valid, 0)
        assert not ctx.get(q.o.valid)
        await ctx.tick()
        assert ctx.get(q.o.valid) and ctx.get(q.o.payload.a) == 5 and ctx.get(q.o.payload.b) == 9
        # Stalled output: it fills to depth beats.
        taken = 0
        ctx.set(q.i.valid, 1)
        for _ in range(10):
            taken += ctx.get(q.i.ready)
            await ctx.tick()
        assert taken == depth - 1 and ctx.get(q.level) == depth and not ctx.get(q.i.ready)
        # One beat per cycle in and out at once.
        ctx.set(q.o.ready, 1)
        ctx.set(q.i.valid, 1)
        await ctx.tick()
        for _ in range(20):
            assert ctx.get(q.o.valid) and ctx.get(q.i.ready)
            await ctx.tick()

    sim = Simulator(q)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@_quiet
def test_room_for():
    q = StreamQueue(8, depth=4)
    assert q.depth == 4 and q.payload_shape == 8
    assert repr(q.room_for(Signal())).startswith("(<")
    del q
    gc.collect()


@_quiet
@pytest.mark.parametrize("shape", [0, -1, True, "8", None, range(1)])
def test_bad_payload_shape(shape):
    with pytest.raises(ValueError, match="payload_shape must be a shape of width >= 1"):
        StreamQueue(shape, depth=4)
    gc.collect()


@_quiet
@pytest.mark.parametrize("depth", [0, 1, -3, 2.0, True, "4", None])
def test_bad_depth(depth):
    with pytest.raises(ValueError, match="depth must be an integer >= 2"):
        StreamQueue(8, depth=depth)
    gc.collect()


@_quiet
def test_depth_keyword_only():
    with pytest.raises(TypeError):
        StreamQueue(8, 4)
    gc.collect()
