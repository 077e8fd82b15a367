"""An AXI4 subordinate RAM for Amaranth-simulator testbenches: serves a manager port
(:class:`rtl.axi.AXI4Signature`) from a :class:`program.dram.Dram`, with a random latency and
random back-pressure on every channel, and checks the manager keeps the protocol.

Checks (AssertionError naming the channel): INCR bursts of full beats (``AxSIZE`` the beat),
no burst across a 4 KiB boundary, ``wlast`` exactly on a burst's last beat, ``arvalid`` and
``awvalid`` never withdrawn before their handshake and their payload held meanwhile. Write
data is taken only once its burst's address has been (as a memory controller may), so a
manager that needs its data accepted before it offers the address would hang (a TimeoutError
in the caller).

The cocotb testbenches use cocotbext-axi's ``AxiRam`` for the same role (tb/core_tb.py).
"""

from __future__ import annotations

from collections import deque

from dstar_rtl.program.dram import Dram
from dstar_rtl.rtl.axi import BOUNDARY

__all__ = ["AxiRamModel"]


class AxiRamModel:
    """Serve ``port`` from ``dram``. ``latency``: cycles from an address handshake to its first
    data beat (reads) or from the last data beat to the response (writes), drawn from
    ``rng.randint(*latency)``; ``stall``: the probability that a ready or valid the model drives
    is held low in a cycle; ``error_at``: byte addresses whose read or write is answered with
    SLVERR. ``reads``/``writes``: the bursts served, as ``(byte address, beats)``."""

    def __init__(self, port, dram: Dram, *, rng, latency=(1, 1), stall=0.0, error_at=()):
        self.port, self.dram, self.rng = port, dram, rng
        self.latency, self.stall = latency, stall
        self.error_at = set(error_at)
        self.bytes = len(port.wdata) // 8
        self.reads, self.writes = [], []

    def _go(self) -> bool:
        return not (self.stall and self.rng.random() < self.stall)

    def _check_burst(self, kind, addr, length, size, burst):
        B = self.bytes
        assert burst == 1, f"{kind}: AxBURST {burst}, not INCR"
        assert 1 << size == B, f"{kind}: AxSIZE {size} is not the {B}-byte beat"
        assert addr % B == 0, f"{kind}: address {addr:#x} not on a beat"
        assert addr // BOUNDARY == (addr + (length + 1) * B - 1) // BOUNDARY, \
            f"{kind}: burst of {length + 1} beats from {addr:#x} crosses 4 KiB"

    def _address(self, kind: str, valid, payload: tuple, ready, held):
        """One cycle of an address channel (``kind`` "AR" or "AW"): the payload held while
        ``valid`` waits for ``ready``; returns ``(held, accepted)`` (the burst checked when
        accepted)."""
        if not valid:
            assert held is None, f"{kind}: {kind.lower()}valid withdrawn before {kind.lower()}ready"
            return None, False
        assert held is None or held == payload, \
            f"{kind}: payload changed before {kind.lower()}ready"
        if ready:
            self._check_burst(kind, *payload)
            return None, True
        return payload, False

    async def read_side(self, ctx):
        """The AR and R channels (run as a background testbench)."""
        p, B = self.port, self.bytes
        bursts = deque()             # (ready cycle, address, beats)
        beat, cycle = 0, 0
        held = None                  # the AR payload seen with valid and no ready
        while True:
            ar_ready = self._go()
            ctx.set(p.arready, int(ar_ready))
            r_valid = bool(bursts) and bursts[0][0] <= cycle and self._go()
            if r_valid:
                _t, addr, n = bursts[0]
                a = addr + beat * B
                ctx.set(p.rdata, int.from_bytes(self.dram.read(a, B), "little"))
                ctx.set(p.rresp, 2 if addr in self.error_at else 0)
                ctx.set(p.rlast, int(beat == n - 1))
                ctx.set(p.rid, 0)
            ctx.set(p.rvalid, int(r_valid))
            _, _, arv, araddr, arlen, arsize, arburst, rready = await ctx.tick().sample(
                p.arvalid, p.araddr, p.arlen, p.arsize, p.arburst, p.rready)
            cycle += 1
            held, took = self._address("AR", arv, (araddr, arlen, arsize, arburst), ar_ready,
                                       held)
            if took:
                bursts.append((cycle + self.rng.randint(*self.latency), araddr, arlen + 1))
                self.reads.append((araddr, arlen + 1))
            if r_valid and rready:
                beat += 1
                if beat == bursts[0][2]:
                    bursts.popleft()
                    beat = 0

    async def write_side(self, ctx):
        """The AW, W and B channels (run as a background testbench)."""
        p, B = self.port, self.bytes
        addrs = deque()              # accepted AW: [address, beats, beats taken, error]
        resps = deque()              # (ready cycle, error)
        cycle = 0
        held = None
        while True:
            aw_ready = self._go()
            w_ready = bool(addrs) and self._go()
            b_valid = bool(resps) and resps[0][0] <= cycle and self._go()
            ctx.set(p.awready, int(aw_ready))
            ctx.set(p.wready, int(w_ready))
            ctx.set(p.bvalid, int(b_valid))
            if b_valid:
                ctx.set(p.bresp, 2 if resps[0][1] else 0)
                ctx.set(p.bid, 0)
            (_, _, awv, awaddr, awlen, awsize, awburst, wv, wdata, wstrb, wlast,
             bready) = await ctx.tick().sample(p.awvalid, p.awaddr, p.awlen, p.awsize,
                                               p.awburst, p.wvalid, p.wdata, p.wstrb, p.wlast,
                                               p.bready)
            cycle += 1
            if w_ready and wv:
                burst = addrs[0]
                a = burst[0] + burst[2] * B
                data = int(wdata).to_bytes(B, "little")
                for i in range(B):
                    if wstrb >> i & 1:
                        self.dram.write(a + i, data[i:i + 1])
                burst[2] += 1
                last = burst[2] == burst[1]
                assert bool(wlast) == last, \
                    f"W: wlast {int(wlast)} on beat {burst[2]} of a {burst[1]}-beat burst"
                if last:
                    addrs.popleft()
                    resps.append((cycle + self.rng.randint(*self.latency), burst[3]))
            held, took = self._address("AW", awv, (awaddr, awlen, awsize, awburst), aw_ready,
                                       held)
            if took:
                addrs.append([awaddr, awlen + 1, 0, awaddr in self.error_at])
                self.writes.append((awaddr, awlen + 1))
            if b_valid and bready:
                resps.popleft()
