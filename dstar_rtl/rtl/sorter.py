"""Pipelined bitonic sorting network, built from the golden comparator list.

The network is :func:`golden.bitonic.network` itself: the same stages, the same compare-exchange
pairs and directions, a swap only when a pair is strictly out of order. So the permutation the
hardware applies is exactly the golden model's, which matters because the sort is not stable and
the order of equal keys decides which descriptors share a lane group.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.bitonic import network

from .params import check_int, check_shape

__all__ = ["BitonicSorter", "entry_layout"]


def entry_layout(key_width: int, payload_shape) -> data.StructLayout:
    return data.StructLayout({"key": unsigned(key_width), "payload": payload_shape})


class BitonicSorter(wiring.Component):
    """Sorts ``n`` entries by ``key``, descending, carrying each entry's payload.

    Parameters
    ----------
    n : int
        Width, a power of two >= 2.
    key_width : int >= 1, keyword-only (as every parameter after ``n``)
    payload_shape : shape of the payload travelling with each key.
    side_shape : shape of per-chunk side data that travels unchanged (tile markers, slot).
    stages_per_register : int >= 1
        Network stages between pipeline registers (1 = a register after every stage).

    Members
    -------
    i : In(stream of ``{entries: n × entry, side}``)
    o : Out(stream of the same layout), entries sorted descending by key.

    Latency ``ceil(S / stages_per_register)`` cycles, ``S = log2(n)·(log2(n)+1)/2``; one chunk per
    cycle. The pipeline advances whenever its output register is empty or being read, so
    back-pressure stalls it as a whole.
    """

    def __init__(self, n: int, *, key_width: int, payload_shape, side_shape=unsigned(1),
                 stages_per_register: int = 1):
        if not isinstance(n, int) or isinstance(n, bool) or n < 2 or n & (n - 1):
            raise ValueError(f"n must be a power of two >= 2, not {n!r}")
        check_int("stages_per_register", stages_per_register, lo=1)
        check_int("key_width", key_width, lo=1)
        check_shape("payload_shape", payload_shape)
        check_shape("side_shape", side_shape)
        self._n = n
        self._network = network(n)
        self._spr = stages_per_register
        self._entry = entry_layout(key_width, payload_shape)
        self._chunk = data.StructLayout({"entries": data.ArrayLayout(self._entry, n),
                                         "side": side_shape})
        super().__init__({
            "i": In(stream.Signature(self._chunk)),
            "o": Out(stream.Signature(self._chunk)),
        })

    @property
    def n(self):
        return self._n

    @property
    def latency(self):
        return -(-len(self._network) // self._spr)

    @property
    def chunk_layout(self):
        return self._chunk

    def elaborate(self, platform):
        m = Module()
        stages = self._network
        nreg = self.latency
        regs = [Signal(self._chunk, name=f"chunk{r}") for r in range(nreg)]
        valid = [Signal(name=f"valid{r}") for r in range(nreg)]
        advance = Signal()
        m.d.comb += [
            advance.eq(~valid[-1] | self.o.ready),
            self.i.ready.eq(advance),
            self.o.valid.eq(valid[-1]),
            self.o.payload.eq(regs[-1]),
        ]
        cur = self.i.payload
        cur_valid = self.i.valid
        for r in range(nreg):
            entries = [cur.entries[k] for k in range(self._n)]
            for s, stage in enumerate(stages[r * self._spr:(r + 1) * self._spr]):
                nxt = list(entries)
                for a, b, descending in stage:
                    ka, kb = entries[a].key, entries[b].key
                    swap = Signal(name=f"swap_r{r}_s{s}_{a}_{b}")
                    m.d.comb += swap.eq((ka < kb) if descending else (ka > kb))
                    # Named signals between stages keep the netlist linear in the stage count.
                    na = Signal(self._entry, name=f"e_r{r}_s{s}_{a}")
                    nb = Signal(self._entry, name=f"e_r{r}_s{s}_{b}")
                    m.d.comb += [na.eq(Mux(swap, entries[b].as_value(), entries[a].as_value())),
                                 nb.eq(Mux(swap, entries[a].as_value(), entries[b].as_value()))]
                    nxt[a], nxt[b] = na, nb
                entries = nxt
            with m.If(advance):
                m.d.sync += [regs[r].entries[k].eq(entries[k]) for k in range(self._n)]
                m.d.sync += [regs[r].side.eq(cur.side), valid[r].eq(cur_valid)]
            cur, cur_valid = regs[r], valid[r]
        return m
