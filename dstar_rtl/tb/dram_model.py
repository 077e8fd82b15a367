"""A deterministic DRAM behind the core's AXI4 manager port ``dram`` (docs/core.md §9): a fixed
latency and a bandwidth, so that the cycles a program takes through DRAM are a figure of the
design at a stated DRAM, not of random pauses.

* **Latency.** A read burst's first beat is offered ``latency`` cycles after its address is
  taken; a write burst's response ``latency`` cycles after its last data beat.
* **Bandwidth.** Read and write beats share ``bytes_per_cycle``: a beat moves only when the
  credit (growing by ``bytes_per_cycle`` each cycle, at most one beat's more than a beat)
  holds a whole beat, so a port wider than the DRAM is throttled to it, and a DRAM wider
  than the port runs at the port's one beat a cycle.
* **Order.** Bursts are served in the order of their addresses (one ID), up to
  :data:`OUTSTANDING` of each direction waiting; reads go first when both have a beat ready.

Memory: sparse, zero until written; :meth:`DramModel.read` and :meth:`DramModel.write` are the
host's (the same calls as cocotbext-axi's ``AxiRam``, so :class:`program.sampling.CoreSampler`
takes either). Responses are OKAY.
"""

from __future__ import annotations

from collections import deque

import cocotb
from cocotb.triggers import RisingEdge

from dstar_rtl.sim.dram_timing import DramTiming

__all__ = ["DramModel", "OUTSTANDING"]

#: Bursts of each direction the model holds waiting (their addresses taken).
OUTSTANDING = 8


class DramModel:
    """The model on ``dut``'s ``dram__*`` signals, clocked by ``dut.clk`` (started at once; the
    core holds its port idle in reset). ``beat_bytes``: the port's beat."""

    def __init__(self, dut, beat_bytes: int, timing: DramTiming):
        self.dut, self.bb, self.timing = dut, beat_bytes, timing
        self.mem: dict = {}                     # page (4 KiB) -> bytearray
        self.reads: deque = deque()             # [ready cycle, address, beats left]
        self.writes: deque = deque()            # [address, beats left]
        self.responses: deque = deque()         # ready cycle of each write response
        self.cycle = 0
        self.credit = 0.0
        self.beats = 0                          # beats moved, both ways
        for name in ("arready", "awready", "wready", "rvalid", "bvalid", "rlast"):
            getattr(dut, f"dram__{name}").value = 0
        for name in ("rresp", "bresp", "rid", "bid"):
            if hasattr(dut, f"dram__{name}"):
                getattr(dut, f"dram__{name}").value = 0
        cocotb.start_soon(self._run())

    # ---------------------------------------------------------------- host access
    def _page(self, addr: int) -> bytearray:
        return self.mem.setdefault(addr >> 12, bytearray(4096))

    def write(self, addr: int, data: bytes):
        """Write ``data`` from byte ``addr``."""
        for i, b in enumerate(bytes(data)):
            self._page(addr + i)[(addr + i) & 4095] = b

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes from byte ``addr``."""
        out = bytearray(n)
        for i in range(n):
            page = self.mem.get((addr + i) >> 12)
            if page is not None:
                out[i] = page[(addr + i) & 4095]
        return bytes(out)

    # ---------------------------------------------------------------- the port
    def _take(self) -> bool:
        """Whether the credit holds a beat (and spend it)."""
        if self.credit >= self.bb:
            self.credit -= self.bb
            self.beats += 1
            return True
        return False

    async def _run(self):
        dut, bb = self.dut, self.bb
        r_busy = False                  # a read beat is on R, waiting for rready
        while True:
            await RisingEdge(dut.clk)
            self.cycle += 1
            if int(dut.rst.value):
                self.reads.clear()
                self.writes.clear()
                self.responses.clear()
                r_busy = False
                dut.dram__rvalid.value = dut.dram__bvalid.value = 0
                dut.dram__arready.value = dut.dram__awready.value = dut.dram__wready.value = 0
                continue
            # What the edge took.
            if int(dut.dram__arvalid.value) and int(dut.dram__arready.value):
                self.reads.append([self.cycle + self.timing.latency,
                                   int(dut.dram__araddr.value), int(dut.dram__arlen.value) + 1])
            if int(dut.dram__awvalid.value) and int(dut.dram__awready.value):
                self.writes.append([int(dut.dram__awaddr.value), int(dut.dram__awlen.value) + 1])
            w_took = int(dut.dram__wvalid.value) and int(dut.dram__wready.value)
            if int(dut.dram__wready.value) and not w_took:       # offered, not taken: refund
                self.credit += bb
                self.beats -= 1
            if w_took:
                w = self.writes[0]
                data = int(dut.dram__wdata.value).to_bytes(bb, "little")
                strb = int(dut.dram__wstrb.value)
                for i in range(bb):
                    if strb >> i & 1:
                        self._page(w[0] + i)[(w[0] + i) & 4095] = data[i]
                w[0] += bb
                w[1] -= 1
                if w[1] == 0:
                    self.writes.popleft()
                    self.responses.append(self.cycle + self.timing.latency)
            if r_busy and int(dut.dram__rready.value):
                r_busy = False
                r = self.reads[0]
                r[1] += bb
                r[2] -= 1
                if r[2] == 0:
                    self.reads.popleft()
            if int(dut.dram__bvalid.value) and int(dut.dram__bready.value):
                self.responses.popleft()
            # The next cycle's offers.
            self.credit = min(self.credit + self.timing.bytes_per_cycle, 2 * bb)
            if not r_busy and self.reads and self.reads[0][0] <= self.cycle and self._take():
                r = self.reads[0]
                dut.dram__rdata.value = int.from_bytes(self.read(r[1], bb), "little")
                dut.dram__rlast.value = int(r[2] == 1)
                r_busy = True
            dut.dram__rvalid.value = int(r_busy)
            wr = bool(self.writes) and self.credit >= bb
            if wr:                          # (spent when the beat is taken: reserved now)
                self.credit -= bb
                self.beats += 1
            dut.dram__wready.value = int(wr)
            dut.dram__bvalid.value = int(bool(self.responses) and
                                         self.responses[0] <= self.cycle)
            dut.dram__arready.value = int(len(self.reads) < OUTSTANDING)
            dut.dram__awready.value = int(len(self.writes) < OUTSTANDING)
