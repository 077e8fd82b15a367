"""The core's activation buffer: ``T`` banks with a diagonal skew, so that a *sub-channel* (one
row, the ``T`` tokens of a tile at one channel) and a *token segment* (one token across ``T``
consecutive rows) are each one access per cycle (docs/core.md §1, program/isa.py).

Element (row ``r``, lane ``t``) sits in bank ``(r + t) mod T`` at address ``r``. A sub-channel
access at row ``r`` uses address ``r`` in every bank and rotates lanes by ``r``; a token-segment
access of token ``t`` at rows ``r0 .. r0+T-1`` uses, in bank ``b``, address
``r0 + ((b - t - r0) mod T)`` and rotates by ``t + r0``. ``T`` is a power of two.
"""

from amaranth.hdl import Array, Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .params import check_int

__all__ = ["ABufPort", "SkewedBuffer"]


def ABufPort(T: int, width: int, depth: int, write: bool) -> wiring.Signature:
    """One port (from the user's side): ``en``, ``row`` (sub-channel row or the segment's first
    row), ``token`` (segment token; ignored for a sub-channel), ``seg`` (1 = token segment), and
    ``data`` (Out for a write port, In for a read port: valid the cycle after ``en``)."""
    lanes = data.ArrayLayout(signed(width), T)
    return wiring.Signature({
        "en": Out(1),
        "row": Out(range(depth)),
        "token": Out(range(T)),
        "seg": Out(1),
        "data": Out(lanes) if write else In(lanes),
    })


class SkewedBuffer(wiring.Component):
    """``depth`` rows of ``T`` signed ``width``-bit lanes in ``T`` skewed banks.

    Parameters: ``T`` (the tile size, a power of two >= 2) and, keyword-only, ``width`` (bits
    per lane, >= 1), ``depth`` (rows, >= 1) and ``read_ports`` (>= 1).

    Members: ``r<i>`` (``read_ports`` read ports) and ``w`` (one write port), each
    ``ABufPort(...).flip()``. Read latency 1 cycle (the rotation is after the bank registers);
    writes land at the clock edge; a read of a row written in the same cycle returns old data.
    """

    def __init__(self, T: int, *, width: int, depth: int, read_ports: int = 2):
        if not isinstance(T, int) or isinstance(T, bool) or T < 2 or T & (T - 1):
            raise ValueError(f"the tile size T must be a power of two >= 2, not {T!r}")
        check_int("width", width, lo=1)
        check_int("depth", depth, lo=1)
        check_int("read_ports", read_ports, lo=1)
        self._T, self._width, self._depth, self._nr = T, width, depth, read_ports
        members = {f"r{i}": In(ABufPort(T, width, depth, False)) for i in range(read_ports)}
        members["w"] = In(ABufPort(T, width, depth, True))
        super().__init__(members)

    @property
    def read_ports(self):
        return [getattr(self, f"r{i}") for i in range(self._nr)]

    def elaborate(self, platform):
        T, W, depth = self._T, self._width, self._depth
        k = (T - 1).bit_length()
        m = Module()
        banks = []
        for b in range(T):
            mem = Memory(shape=signed(W), depth=depth, init=[])
            m.submodules[f"bank{b}"] = mem
            banks.append(mem)

        def bank_addr(port, b):
            """Address of bank ``b`` for the port's access."""
            a = Signal(range(depth), name=f"addr_b{b}")
            off = (b - port.token - port.row)[:k]
            m.d.comb += a.eq(port.row)
            with m.If(port.seg):
                m.d.comb += a.eq(port.row + off)
            return a

        def rotation(port):
            s = Signal(range(T), name="rot")
            m.d.comb += s.eq(port.row[:k])
            with m.If(port.seg):
                m.d.comb += s.eq((port.row + port.token)[:k])
            return s

        for i, port in enumerate(self.read_ports):
            rps = [mem.read_port() for mem in banks]
            rot = rotation(port)
            rot_q = Signal.like(rot, name=f"rot_q{i}")
            with m.If(port.en):
                m.d.sync += rot_q.eq(rot)
            for b, rp in enumerate(rps):
                m.d.comb += [rp.addr.eq(bank_addr(port, b)), rp.en.eq(port.en)]
            outs = Array(rp.data for rp in rps)
            for j in range(T):
                m.d.comb += port.data[j].eq(outs[(j + rot_q)[:k]])

        w = self.w
        rot = rotation(w)
        lanes = Array(w.data[j] for j in range(T))
        for b, mem in enumerate(banks):
            wp = mem.write_port()
            m.d.comb += [wp.addr.eq(bank_addr(w, b)), wp.en.eq(w.en),
                         wp.data.eq(lanes[(b - rot)[:k]])]
        return m
