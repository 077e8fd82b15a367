"""An AXI4 manager interface (AMBA AXI4: the five channels AW, W, B, AR, R) for the core's DRAM
port, and the burst rule the D engine's read and write sides share.

Port names are the AXI signal names under the member that holds the interface (the core's
``dram``: ``dram__awaddr``, ``dram__wdata``, ... in Verilog), so cocotbext-axi finds them with
the prefix ``dram_``. One ID (``awid``/``arid`` 0, ``id_width`` bits): responses come back in
order. Bursts are INCR of full beats (``awsize = log2(beat bytes)``); a burst never crosses a
4 KiB boundary (AXI4 A3.4.1).
"""

from amaranth.hdl import Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .params import check_int

__all__ = ["AXI4Signature", "BURST_BEATS", "burst_beats", "INCR", "OKAY"]

#: The longest burst the D engine issues (AXI4 allows 256; 16 keeps the read buffer small).
BURST_BEATS = 16
INCR = 0b01       # AxBURST: incrementing
OKAY = 0b00       # xRESP: the only response that is not an error (EXOKAY is never asked for)
BOUNDARY = 4096   # bytes a burst may not cross


class AXI4Signature(wiring.Signature):
    """An AXI4 manager port from the manager's side: ``addr_width``-bit byte addresses,
    ``data_width``-bit beats (a power of two >= 8), ``id_width``-bit IDs."""

    def __init__(self, *, addr_width: int, data_width: int, id_width: int = 1):
        self._aw = check_int("addr_width", addr_width, lo=12, hi=64)
        self._dw = check_int("data_width", data_width, lo=8, hi=1024)
        if data_width & (data_width - 1):
            raise ValueError(f"data_width must be a power of two, not {data_width}")
        self._iw = check_int("id_width", id_width, lo=1, hi=32)
        super().__init__({
            "awid": Out(id_width), "awaddr": Out(addr_width), "awlen": Out(8),
            "awsize": Out(3), "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
            "wvalid": Out(1), "wready": In(1),
            "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "arid": Out(id_width), "araddr": Out(addr_width), "arlen": Out(8),
            "arsize": Out(3), "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
            "rid": In(id_width), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
        })

    @property
    def addr_width(self) -> int:
        return self._aw

    @property
    def data_width(self) -> int:
        return self._dw

    def __eq__(self, other):
        return (type(other) is type(self) and
                (other._aw, other._dw, other._iw) == (self._aw, self._dw, self._iw))

    def __hash__(self):
        return hash((type(self), self._aw, self._dw, self._iw))

    def __repr__(self):
        return f"AXI4Signature(addr_width={self._aw}, data_width={self._dw}, id_width={self._iw})"


def burst_beats(m, beat, left, beat_bytes: int, name: str) -> Signal:
    """The beats of the burst that starts at beat ``beat`` with ``left`` beats still to move:
    at most :data:`BURST_BEATS`, ``left``, and the beats to the next 4 KiB boundary (a
    combinational signal of ``m``)."""
    per_page = BOUNDARY // beat_bytes
    to_page = Signal(range(per_page + 1), name=f"{name}_to_page")
    m.d.comb += to_page.eq(per_page - beat[:(per_page - 1).bit_length()])   # per_page: 2**k
    n = Signal(range(BURST_BEATS + 1), name=name)
    cap = Mux(to_page < BURST_BEATS, to_page, BURST_BEATS)
    m.d.comb += n.eq(Mux(left < cap, left, cap))
    return n
