"""The UART (:mod:`rtl.uart`) and the host link (:mod:`rtl.host_link`) in Amaranth's simulator,
and the host driver's sync path (:mod:`sim.host_driver`) against a Python model of the link."""

import gc
import random

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.sim import Simulator

from dstar_rtl.rtl.host_link import HostLink
from dstar_rtl.rtl.uart import UARTRx, UARTTx
from dstar_rtl.sim.amaranth_streams import stream_get, stream_put
from dstar_rtl.sim.host_driver import (
    QUERY,
    Frame,
    FrameDecoder,
    HostDriver,
    LinkError,
    Status,
    encode_frame,
    encode_query,
)

# ---------------------------------------------------------------------------- helpers
put, get = stream_put, stream_get


def simulate(top, *benches, background=()):
    sim = Simulator(top)
    sim.add_clock(1e-8)
    for b in benches:
        sim.add_testbench(b)
    for b in background:
        sim.add_testbench(b, background=True)
    sim.run()


async def drive_char(ctx, pin, cpb, byte, stop=1):
    """Bit-bang one 8N1 character (``stop``: the stop bit's level) on ``pin``."""
    for level in [0] + [(byte >> i) & 1 for i in range(8)] + [stop]:
        ctx.set(pin, level)
        await ctx.tick().repeat(cpb)


class Loopback(Elaboratable):
    def __init__(self, cpb):
        self.tx = UARTTx(cycles_per_bit=cpb)
        self.rx = UARTRx(cycles_per_bit=cpb)

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx, m.submodules.rx = self.tx, self.rx
        m.d.comb += self.rx.rx.eq(self.tx.tx)
        return m


# ---------------------------------------------------------------------------- UART
@pytest.mark.parametrize("cpb", [4, 5, 7, 16])
def test_loopback_random_bytes(cpb):
    """Random bytes (and 0x00, 0xFF) through tx → rx at the line rate, under back-pressure on the
    receiver's output short of an overrun; one byte per 10·cpb cycles."""
    rng = random.Random(cpb)
    data = [0x00, 0xFF, 0x55, 0xAA] + [rng.randrange(256) for _ in range(40)]
    dut = Loopback(cpb)
    out, taken = [], []

    async def src(ctx):
        await put(ctx, dut.tx.i, data, cycles=taken)

    async def sink(ctx):
        # an extra byte would follow within a character time (10·cpb cycles)
        await get(ctx, dut.rx.o, len(data), out, stall=0.5, rng=rng, window=20 * cpb)
        assert ctx.get(dut.rx.frame_error) == 0 and ctx.get(dut.rx.overrun) == 0

    simulate(dut, src, sink)
    assert out == data
    gaps = {b - a for a, b in zip(taken, taken[1:])}
    assert gaps == {10 * cpb}


@pytest.mark.parametrize("cpb", [4, 16])
def test_receiver_latency(cpb):
    """``o.valid`` rises 9·cpb + cpb//2 + 2 cycles after the first edge that samples the start
    bit (the figure in UARTRx's docstring)."""
    dut = UARTRx(cycles_per_bit=cpb)
    seen = []

    async def bench(ctx):
        await ctx.tick().repeat(3)
        ctx.set(dut.rx, 0)              # the start edge; the next clock edge (1) samples it
        for edge in range(1, 11 * cpb):
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            if valid:                   # high before this edge: set by the previous one
                seen.append(edge - 1 - 1)
                break
            if edge == 9 * cpb:
                ctx.set(dut.rx, 1)      # the stop bit
    simulate(dut, bench)
    assert seen == [9 * cpb + cpb // 2 + 2]


@pytest.mark.parametrize("cpb", [4, 16])
def test_framing_error(cpb):
    """A low stop bit: the byte is dropped, ``frame_error`` sticks, the next character is good."""
    dut = UARTRx(cycles_per_bit=cpb)
    out = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        await ctx.tick().repeat(2)
        await drive_char(ctx, dut.rx, cpb, 0x5A, stop=0)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(2 * cpb)
        assert ctx.get(dut.frame_error) == 1
        await drive_char(ctx, dut.rx, cpb, 0x3C)
        await drive_char(ctx, dut.rx, cpb, 0xC3)
        await ctx.tick().repeat(cpb)
        assert ctx.get(dut.frame_error) == 1 and ctx.get(dut.brk) == 0

    async def sink(ctx):
        async for _, _, valid, payload, brk in ctx.tick().sample(dut.o.valid, dut.o.payload,
                                                                 dut.brk):
            assert not brk
            if valid:
                out.append(payload)

    simulate(dut, bench, background=[sink])
    assert out == [0x3C, 0xC3]


def test_break_strobes_once_and_is_not_a_framing_error():
    cpb = 8
    dut = UARTRx(cycles_per_bit=cpb)
    out, brks = [], []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        await ctx.tick().repeat(2)
        ctx.set(dut.rx, 0)
        await ctx.tick().repeat(25 * cpb)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(cpb)
        await drive_char(ctx, dut.rx, cpb, 0x81)
        await ctx.tick().repeat(cpb)
        assert ctx.get(dut.frame_error) == 0

    async def sink(ctx):
        async for _, _, valid, payload, brk in ctx.tick().sample(dut.o.valid, dut.o.payload,
                                                                 dut.brk):
            if brk:
                brks.append(1)
            if valid:
                out.append(payload)

    simulate(dut, bench, background=[sink])
    assert brks == [1] and out == [0x81]


@pytest.mark.parametrize("cpb, glitch", [(4, 1), (16, 1), (16, 7)])
def test_false_start_bit_is_rejected(cpb, glitch):
    """A low pulse shorter than half a bit is not a character; the next one is received."""
    dut = UARTRx(cycles_per_bit=cpb)
    out = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        await ctx.tick().repeat(2)
        ctx.set(dut.rx, 0)
        await ctx.tick().repeat(glitch)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(12 * cpb)        # longer than a character: nothing arrives
        assert out == []
        await drive_char(ctx, dut.rx, cpb, 0xE7)
        await ctx.tick().repeat(cpb)
        assert ctx.get(dut.frame_error) == 0 and ctx.get(dut.overrun) == 0

    async def sink(ctx):
        async for _, _, valid, payload in ctx.tick().sample(dut.o.valid, dut.o.payload):
            if valid:
                out.append(payload)

    simulate(dut, bench, background=[sink])
    assert out == [0xE7]


def test_overrun_keeps_the_first_byte():
    cpb = 4
    dut = UARTRx(cycles_per_bit=cpb)

    async def bench(ctx):
        await ctx.tick().repeat(2)
        await drive_char(ctx, dut.rx, cpb, 0x11)
        await drive_char(ctx, dut.rx, cpb, 0x22)
        await ctx.tick().repeat(cpb)
        assert ctx.get(dut.overrun) == 1
        assert ctx.get(dut.o.valid) == 1 and ctx.get(dut.o.payload) == 0x11

    simulate(dut, bench)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("bad", [3, 0, -1, 4.0, 16.5, True, "16", None])
def test_cycles_per_bit_is_checked(bad):
    for cls in (UARTRx, UARTTx):
        with pytest.raises(ValueError, match=r"cycles_per_bit must be an integer >= 4 .*, not"):
            cls(cycles_per_bit=bad)
    with pytest.raises(ValueError, match=r"cycles_per_bit must be an integer >= 4"):
        HostLink([8], [8], cycles_per_bit=bad)
    gc.collect()      # the refused objects warn UnusedElaboratable now, under this test's filter


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_host_link_parameters_are_checked():
    with pytest.raises(ValueError, match=r"in_ports must be a sequence"):
        HostLink(8, [8], cycles_per_bit=4)
    with pytest.raises(ValueError, match=r"out_ports\[1\] must be a shape of width >= 1"):
        HostLink([8], [8, 0], cycles_per_bit=4)
    with pytest.raises(ValueError, match=r"in_ports\[0\] must be a shape of width"):
        HostLink(["x"], [], cycles_per_bit=4)
    with pytest.raises(ValueError, match=r"in_ports must have at most 255 ports"):
        HostLink([8] * 256, [], cycles_per_bit=4)
    with pytest.raises(ValueError, match=r"rx_depth must be an integer in 21 \.\. 65535"):
        HostLink([100], [8], cycles_per_bit=4, rx_depth=20)
    assert HostLink([100], [8], cycles_per_bit=4, rx_depth=21).in_bytes == [13]
    gc.collect()


# ---------------------------------------------------------------------------- host link
IN_W, OUT_W = [5, 16, 37], [12, 1]


class LinkBench(Elaboratable):
    """A host-side UART pair around a :class:`HostLink`: bytes in on ``host_tx.i``, bytes out on
    ``host_rx.o``; ``line_low`` forces the link's ``rx`` low (a break)."""

    def __init__(self, cpb=4, rx_depth=32):
        self.link = HostLink(IN_W, OUT_W, cycles_per_bit=cpb, rx_depth=rx_depth)
        self.host_tx = UARTTx(cycles_per_bit=cpb)
        self.host_rx = UARTRx(cycles_per_bit=cpb)
        self.line_low = Signal()
        self.cpb = cpb

    def elaborate(self, platform):
        m = Module()
        m.submodules.link, m.submodules.host_tx = self.link, self.host_tx
        m.submodules.host_rx = self.host_rx
        m.d.comb += [self.link.rx.eq(self.host_tx.tx & ~self.line_low),
                     self.host_rx.rx.eq(self.link.tx)]
        return m


def run_link(bench, host_bytes, expect, *, outputs=None, out_frames=0, stall=0.3, after=None,
             user=0):
    """Send ``host_bytes`` (a list of byte strings, or ``"break"``), collect ``expect[k]`` words
    on each input port (random stalls), send ``outputs[k]`` words on each output port, decode
    ``out_frames`` frames coming back. ``after(ctx)`` runs when every sink is done."""
    link = bench.link
    rng = random.Random(7)
    got = {k: [] for k in range(len(IN_W))}
    back = bytearray()
    outputs = outputs or {}
    done = {"sinks": 0, "host": False}

    async def host(ctx):
        ctx.set(link.user_status, user)
        for item in host_bytes:
            if item == "break":
                await ctx.tick().repeat(2 * 10 * bench.cpb)      # let the queued bytes go out
                ctx.set(bench.line_low, 1)
                await ctx.tick().repeat(15 * bench.cpb)
                ctx.set(bench.line_low, 0)
                await ctx.tick().repeat(2 * bench.cpb)
            else:
                await put(ctx, bench.host_tx.i, item)
        done["host"] = True

    def sink(k):
        async def run(ctx):
            # an extra word would follow within a character time of its last byte
            await get(ctx, link.in_streams[k], expect[k], got[k], stall=stall, rng=rng,
                      window=20 * bench.cpb)
            done["sinks"] += 1
        return run

    def source(k):
        async def run(ctx):
            await put(ctx, link.out_streams[k], outputs[k])
        return run

    async def host_rx(ctx):
        dec = FrameDecoder({k: w for k, w in enumerate(OUT_W)})
        frames = []
        ctx.set(bench.host_rx.o.ready, 1)
        for _ in range(200_000):
            if len(frames) >= out_frames and done["sinks"] == len(IN_W) and done["host"]:
                break
            _, _, valid, payload = await ctx.tick().sample(bench.host_rx.o.valid,
                                                           bench.host_rx.o.payload)
            if valid:
                back.append(payload)
                frames += dec.feed(bytes([payload]))
        else:
            raise TimeoutError(f"{len(frames)}/{out_frames} frames")
        await ctx.tick().repeat(4 * 10 * bench.cpb)              # anything unexpected?
        if after is not None:
            await after(ctx)

    benches = [host, host_rx] + [sink(k) for k in range(len(IN_W))] + [
        source(k) for k in outputs]
    simulate(bench, *benches)
    dec = FrameDecoder({k: w for k, w in enumerate(OUT_W)})
    return got, dec.feed(bytes(back)), dec


def _words(rng, width, n):
    return [rng.randrange(1 << width) for _ in range(n)]


def test_link_frames_to_every_port_and_back():
    """Frames to each input port (one of count 0), words of 1, 2 and 5 bytes, under stalls; words
    from both output ports come back one per frame."""
    rng = random.Random(1)
    w0, w1, w2 = _words(rng, 5, 3), _words(rng, 16, 4), _words(rng, 37, 3)
    o0, o1 = _words(rng, 12, 5), _words(rng, 1, 3)
    frames = [encode_frame(2, w2[:2], 37), encode_frame(0, w0, 5), encode_frame(1, [], 16),
              encode_frame(1, w1, 16), encode_frame(2, w2[2:], 37)]
    bench = LinkBench()
    st = {}

    async def after(ctx):
        st.update(error=ctx.get(bench.link.error), overrun=ctx.get(bench.link.overrun))

    got, back, _ = run_link(bench, frames, {0: 3, 1: 4, 2: 3}, outputs={0: o0, 1: o1},
                            out_frames=8, after=after)
    assert got == {0: w0, 1: w1, 2: w2}
    assert all(len(f.words) == 1 for f in back)
    assert [f.words[0] for f in back if f.port == 0] == o0
    assert [f.words[0] for f in back if f.port == 1] == o1
    assert st == dict(error=0, overrun=0)


def test_link_unknown_port_sets_error_then_recovers():
    """Rule 2: an unknown port's header and payload are dropped up to the next 0xA5; rule 1: a
    bad sync byte likewise. The frames after each are delivered."""
    rng = random.Random(2)
    good = _words(rng, 16, 3)
    bad_frame = bytes([0xA5, 7, 0xA5, 0x00, 0x10, 0x20, 0x30])   # port 7; count has an 0xA5
    frames = [bad_frame, encode_frame(1, good[:1], 16), b"\x00\x13",
              encode_frame(1, good[1:], 16), encode_query()]
    bench = LinkBench()
    got, back, _ = run_link(bench, frames, {0: 0, 1: 3, 2: 0}, out_frames=1)
    assert got[1] == good
    st = Status.from_words(back[-1].words)
    assert (st.error, st.overrun, st.frame_error) == (True, False, False)


def test_link_status_query_reports_flags_user_and_depth():
    bench = LinkBench(rx_depth=40)
    got, back, _ = run_link(bench, [QUERY], {0: 0, 1: 0, 2: 0}, out_frames=1, user=0x5A)
    assert [f.port for f in back] == [0xFF]
    assert Status.from_words(back[0].words) == Status(False, False, False, 0x5A, 40)


def test_link_break_aborts_a_partial_frame():
    """Rule 3: a break drops the half-received word and the frame; no error; next frame good."""
    rng = random.Random(3)
    good, lost = _words(rng, 37, 2), _words(rng, 37, 2)
    partial = encode_frame(2, lost, 37)[:4 + 5 + 3]     # one word and 3 bytes of the next
    first = encode_frame(2, good[:1], 37)
    bench = LinkBench()
    st = {}

    async def after(ctx):
        st.update(error=ctx.get(bench.link.error), fe=ctx.get(bench.link.frame_error))

    frames = [first, partial, "break", encode_frame(2, good[1:], 37)]
    # The partial frame's complete first word is delivered before the break (rule 3).
    got, _, _ = run_link(bench, frames, {0: 0, 1: 0, 2: 3}, after=after)
    assert got[2] == [good[0], lost[0], good[1]]
    assert st == dict(error=0, fe=0)


def test_link_stalled_port_buffers_bytes_in_the_fifo():
    """A port that takes nothing for a while: the words wait, bytes queue in the FIFO, nothing is
    lost while the host stays within rx_depth."""
    rng = random.Random(4)
    w2 = _words(rng, 37, 3)        # 4 + 15 bytes, within the 32-byte FIFO
    bench = LinkBench(rx_depth=32)
    got, _, _ = run_link(bench, [encode_frame(2, w2, 37)], {0: 0, 1: 0, 2: 3}, stall=0.995)
    assert got[2] == w2


def test_link_overrun_when_the_host_ignores_the_window():
    """More bytes than rx_depth for a port that takes nothing: ``overrun`` sticks."""
    rng = random.Random(5)
    bench = LinkBench(rx_depth=16)
    st = {}

    async def after(ctx):
        st.update(overrun=ctx.get(bench.link.overrun), error=ctx.get(bench.link.error))

    run_link(bench, [encode_frame(2, _words(rng, 37, 6), 37)], {0: 0, 1: 0, 2: 0}, after=after)
    assert st == dict(overrun=1, error=0)


# ---------------------------------------------------------------------------- host driver (sync)
class FakeLink:
    """A sync transport that models the link in Python: input port 0 (12-bit words) echoes each
    word + 1 on output port 0; queries get a status reply; bytes wait in a ``depth``-byte
    "FIFO" until the host reads, which must never overflow."""

    def __init__(self, depth=64):
        self.depth = depth
        self.pending = bytearray()
        self.reply = bytearray()
        self.max_pending = 0
        self.breaks = 0

    def write(self, data):
        self.pending += data
        self.max_pending = max(self.max_pending, len(self.pending))
        assert len(self.pending) <= self.depth, "the driver overran the link's FIFO"

    def send_break(self):
        self.breaks += 1
        self.pending.clear()

    def read(self, max_bytes):
        buf = self.pending
        while len(buf) >= 4:
            assert buf[0] == 0xA5
            port, count = buf[1], buf[2] | buf[3] << 8
            if port == 0xFF:
                self.reply += bytes([0xA5, 0xFF, 4, 0, 0, 0, self.depth & 0xFF, self.depth >> 8])
                del buf[:4]
                continue
            assert port == 0
            if len(buf) < 4 + 2 * count:
                break
            for k in range(count):
                w = int.from_bytes(buf[4 + 2 * k:6 + 2 * k], "little") + 1
                self.reply += encode_frame(0, [w], 12)
            del buf[:4 + 2 * count]
        out = bytes(self.reply[:max_bytes])
        del self.reply[:max_bytes]
        return out


def test_driver_sync_path_keeps_within_the_window():
    fake = FakeLink(depth=64)
    drv = HostDriver(fake, out_widths={0: 12})
    st = drv.sync()
    assert st.rx_depth == 64 and drv.window == 64 and fake.breaks == 1
    words = list(range(100, 400, 3))
    drv.send_words(0, words, 12)
    assert drv.recv_words(0, len(words), 12) == [w + 1 for w in words]
    assert fake.max_pending <= 64
    assert drv.status().link_ok


def test_driver_framing_checks():
    assert encode_frame(3, [0x1234, 0x1], 13) == bytes([0xA5, 3, 2, 0, 0x34, 0x12, 0x01, 0x00])
    with pytest.raises(ValueError, match="does not fit 13 bits"):
        encode_frame(0, [1 << 13], 13)
    with pytest.raises(ValueError, match=r"port must be an integer in 0 \.\. 254"):
        encode_frame(255, [0], 8)
    dec = FrameDecoder({0: 12})
    assert dec.feed(b"\x00\xa5\x00\x01") == [] and dec.skipped == 1
    assert dec.feed(b"\x00\x0f") == []
    assert dec.feed(b"\x80\xa5") == [Frame(0, (0x00F,))]
    with pytest.raises(LinkError, match="output port 9"):
        FrameDecoder().feed(b"\xa5\x09\x01\x00\x00")
