"""Formal properties of the QPU's sorter and packer, as wrappers for :func:`sim.formal.run_formal`.

Each wrapper instantiates the real unit from ``rtl/`` unchanged, drives it from free top-level
inputs (every input is free in every cycle unless an ``Assume`` says otherwise) and checks it with
``Assert`` against a small shadow model kept in the wrapper. ``ports()`` lists the free inputs.
Each also holds ``Cover`` statements for the traffic its assertions are about; run in sby
``cover`` mode they must all be reached, so assumptions that rule the traffic out (a vacuous
proof) show. After elaboration ``covers`` lists them as ``("file:line", description)``, and
:func:`cover_names` turns the locations sby reports back into descriptions.

:class:`SorterProps`
    :class:`rtl.sorter.BitonicSorter` with free keys, ``payload = entry index``, free side data,
    free ``i.valid`` and ``o.ready`` (``stall=False`` assumes both high). A shadow delay line models
    the specified global-stall pipeline (advance when the output register is empty or read). Every
    cycle: ``o.valid`` matches the shadow; ``i.ready == ~o.valid | o.ready``; a stalled output
    holds; side data unchanged; and when ``o.valid``, the selected ``checks``: ``"sorted"`` keys
    descending; ``"keys"`` ``key_out[k] == key_in[payload_out[k]]``; ``"perm"`` payloads a
    permutation of ``0..n-1``; ``"golden"`` keys and payloads exactly those of
    :func:`golden.bitonic.network` applied with the golden model's swap rule (ties included), from a
    reference network built in the wrapper. With ``stages_per_register = None`` every stage sits
    before the one register (latency 1) and ``prove`` gives an unbounded proof; keep it to n = 4:
    the RTL's expression tree grows exponentially with the stages per register (about 22k RTLIL
    cells for n = 8 in one register against 110 with a register per stage). With a register per
    stage and ``stall=False``, BMC of depth ``latency + 1`` is complete (the state is the last
    ``latency`` inputs). ``network=`` / ``swap_outputs=`` / ``sorter_cls=`` inject bugs.
    Covers: the largest key moves from the last entry to the first, the smallest from the first
    to the last, equal keys leave out of input order, chunks on consecutive cycles; with
    ``stall``, a stalled output held and a bubble.

    Solver reach here: full key width (6 bits) up to n = 8; n = 16 at 6 bits does not finish in 10
    minutes. 1-bit keys (the 0-1 principle: a comparator network that sorts every 0/1 input sorts
    every input) reach n = 32.

:class:`PackerProps`
    :class:`rtl.packer.Packer` (``open_groups = 0``) fed any stream of chunks whose keys are
    sorted descending (what the sorter guarantees), with free ``pos`` fields and a column store
    whose column ``k`` names channel ``k`` (so a lane's channel says which column it was given)
    and has free signed flags and digits; free side data and ``o.ready``. Checked on every group:
    valid lanes a prefix; they are consecutive entries starting where the previous group of the
    chunk stopped (0 for a chunk's first group), each with the column its ``pos`` names, all valid
    with exponent == group exponent; the group is maximal (fewer
    than ``lanes`` only where the run of its exponent ends); padded lanes all zero; ``signed``
    and the digits are the entry's column's (looked up by ``pos``); ``first`` and ``last`` as
    specified; ``done`` exactly with a chunk's last group; no lane emitted twice and, at
    ``done``, the emitted lanes are exactly the chunk's valid entries (none dropped); no chunk
    skipped; an empty chunk is one all-invalid group with exponent 0. Stream and timing: a
    stalled output holds; one group per cycle while a chunk is pending and the output can take
    it; no group without a pending chunk; the next chunk is taken only with the last group (and
    then always). Bounded (``bmc``): the depth must cover a chunk's groups plus the hand-off.
    ``reset=True`` leaves the reset free in every cycle (mid-chunk too): the shadow registers
    reset with the unit, so the same properties must hold across it. Covers: a group of every
    lane count 0..lanes, a full and a short group with more of the chunk to come, a chunk of
    several groups completing, the hand-off and the next chunk's first group right after it, a
    group held under back-pressure, back-pressure reaching the input; with ``reset``, a reset
    with a chunk part-packed and a chunk of several groups packed after it. ``packer_cls=``
    (a modified unit), ``assume_sorted=False`` and ``assume=`` inject bugs or vacuity. The open
    slots (``open_groups > 0``) are checked against the golden packer in simulation only
    (``tests/test_qpu_amaranth.py``, ``tests/test_cocotb_qpu.py``).
"""

from __future__ import annotations

import gc
import warnings

from amaranth.hdl import (
    Array,
    Assert,
    Assume,
    Cat,
    Cover,
    Elaboratable,
    Module,
    Mux,
    ResetSignal,
    Signal,
    UnusedElaboratable,
    unsigned,
)
from amaranth.lib import data

from dstar_rtl.golden import bitonic
from dstar_rtl.golden.config import Config
from dstar_rtl.rtl.chunker import SLOTS, chunk_side_layout, column_layout, descriptor_layout
from dstar_rtl.rtl.packer import Packer
from dstar_rtl.rtl.sorter import BitonicSorter

from .formal import no_reset

__all__ = ["SorterProps", "PackerProps", "reverse_comparator", "cover_names", "SORTER_CHECKS"]

SORTER_CHECKS = ("sorted", "keys", "perm", "golden")


def reverse_comparator(network, stage: int, index: int = 0):
    """A copy of a comparator network with one compare-exchange's direction flipped (a bug)."""
    stages = [list(s) for s in network]
    a, b, desc = stages[stage][index]
    stages[stage][index] = (a, b, not desc)
    return tuple(tuple(s) for s in stages)


def _popcount(bits):
    return sum(b.as_unsigned() if hasattr(b, "as_unsigned") else b for b in bits)


def _cover(m, covers: list, test, what: str):
    """Add ``Cover(test)`` to ``m`` and record ``("file:line", what)`` of it in ``covers``
    (sby names a cover by its source location: the caller's line)."""
    stmt = Cover(test, what, src_loc_at=1)
    covers.append((f"{stmt.src_loc[0]}:{stmt.src_loc[1]}", what))
    m.d.comb += stmt


def cover_names(wrapper, locations) -> list:
    """The descriptions of a wrapper's covers at the given source locations.

    Parameters
    ----------
    wrapper : SorterProps or PackerProps
        An elaborated wrapper (``wrapper.covers`` is filled by ``elaborate``).
    locations : iterable of str
        ``"file:line"`` as sby prints them, e.g. :attr:`sim.formal.FormalResult.unreached`.

    Returns
    -------
    list of str
        The descriptions, in the wrapper's order. Covers made in a loop share a line, so one
        location can name several.
    """
    def key(loc):
        path, _, line = loc.rpartition(":")
        return path.replace("\\", "/").rsplit("/", 1)[-1], line
    wanted = {key(loc) for loc in locations}
    return [what for loc, what in wrapper.covers if key(loc) in wanted]


class SorterProps(Elaboratable):
    """Sorting properties of ``BitonicSorter(n, key_width, unsigned(log2 n), unsigned(2), spr)``.

    Parameters
    ----------
    n, key_width : sorter width and key width (``key_width = 1`` is the 0-1-principle check).
    stages_per_register : ``None`` for all stages in one register (latency 1), else as the RTL.
    checks : a subset of :data:`SORTER_CHECKS` (the stream and side checks always run).
    stall : free ``i.valid`` / ``o.ready`` (``True``) or both assumed high.
    network : replaces the sorter's comparator list after construction (negative tests only).
    swap_outputs : ``(a, b)`` swaps two output entries before the checks (negative tests only).
    sorter_cls : the unit's class, called as ``BitonicSorter`` is (negative tests only).
    """

    def __init__(self, n: int, key_width: int = 6, stages_per_register=None, *, network=None,
                 swap_outputs=None, checks=("sorted", "keys", "perm"), stall=True,
                 sorter_cls=BitonicSorter):
        unknown = set(checks) - set(SORTER_CHECKS)
        if unknown:
            raise ValueError(f"checks must be among {SORTER_CHECKS}, not {sorted(unknown)}")
        self.checks = tuple(checks)
        self.stall = stall
        self.sorter_cls = sorter_cls
        self.n = n
        self.key_width = key_width
        self.idx_width = max(1, (n - 1).bit_length())
        self.stages = len(bitonic.network(n))     # what BitonicSorter builds from
        self.spr = self.stages if stages_per_register is None else stages_per_register
        self.network = network
        self.swap_outputs = swap_outputs
        self.keys = [Signal(key_width, name=f"key{k}") for k in range(n)]
        self.side = Signal(2)
        self.i_valid = Signal()
        self.o_ready = Signal()
        self.covers = []          # ("file:line", description) of each Cover, set by elaborate()

    def ports(self):
        return [*self.keys, self.side, self.i_valid, self.o_ready]

    def make_sorter(self):
        s = self.sorter_cls(self.n, key_width=self.key_width,
                            payload_shape=unsigned(self.idx_width), side_shape=unsigned(2),
                            stages_per_register=self.spr)
        if self.network is not None:
            if len(self.network) != len(s._network):
                raise ValueError("a replacement network must keep the stage count")
            s._network = self.network      # bug injection: the network elaborate() builds from
        return s

    @property
    def latency(self):
        return -(-self.stages // self.spr)

    def _golden(self, m, keys):
        """The golden model's network (:func:`golden.bitonic.apply_network` semantics: swap only
        when strictly out of order) applied to ``keys``, one named signal per stage and entry."""
        n = self.n
        cur_k = list(keys)
        cur_i = list(range(n))
        for s, stage in enumerate(bitonic.network(n)):
            nk, ni = list(cur_k), list(cur_i)
            for a, b, desc in stage:
                swap = Signal(name=f"ref{s}_swap{a}_{b}")
                m.d.comb += swap.eq((cur_k[a] < cur_k[b]) if desc else (cur_k[a] > cur_k[b]))
                for lst, src in ((nk, cur_k), (ni, cur_i)):
                    width = self.key_width if lst is nk else self.idx_width
                    hi = Signal(width, name=f"ref{s}_{'k' if lst is nk else 'i'}{a}")
                    lo = Signal(width, name=f"ref{s}_{'k' if lst is nk else 'i'}{b}")
                    m.d.comb += [hi.eq(Mux(swap, src[b], src[a])), lo.eq(Mux(swap, src[a], src[b]))]
                    lst[a], lst[b] = hi, lo
            cur_k, cur_i = nk, ni
        return cur_k, cur_i

    def elaborate(self, platform):
        m = Module()
        no_reset(m)
        n = self.n
        m.submodules.dut = dut = self.make_sorter()
        assert dut.latency == self.latency
        m.d.comb += [dut.i.valid.eq(self.i_valid), dut.o.ready.eq(self.o_ready),
                     dut.i.p.side.eq(self.side)]
        if not self.stall:
            m.d.comb += [Assume(self.i_valid), Assume(self.o_ready)]
        for k in range(n):
            m.d.comb += [dut.i.p.entries[k].key.eq(self.keys[k]),
                         dut.i.p.entries[k].payload.eq(k)]

        # Shadow of the specified pipeline: the inputs delayed by `latency` advancing cycles.
        advance = ~dut.o.valid | self.o_ready
        prev_keys, prev_side, prev_valid = self.keys, self.side, self.i_valid
        for r in range(self.latency):
            keys = [Signal(self.key_width, name=f"shadow{r}_key{k}") for k in range(n)]
            side = Signal(2, name=f"shadow{r}_side")
            valid = Signal(name=f"shadow{r}_valid")
            with m.If(advance):
                m.d.sync += [a.eq(b) for a, b in zip(keys, prev_keys)]
                m.d.sync += [side.eq(prev_side), valid.eq(prev_valid)]
            prev_keys, prev_side, prev_valid = keys, side, valid
        shadow_keys = Array(prev_keys)

        out = [dut.o.p.entries[k] for k in range(n)]
        if self.swap_outputs is not None:
            a, b = self.swap_outputs
            out[a], out[b] = out[b], out[a]

        m.d.comb += [Assert(dut.o.valid == prev_valid, "output valid follows the pipeline"),
                     Assert(dut.i.ready == advance, "input ready is the global advance")]
        stalled = Signal()
        held = Signal(dut.o.p.shape())
        m.d.sync += [stalled.eq(dut.o.valid & ~self.o_ready), held.eq(dut.o.p)]
        with m.If(stalled):
            m.d.comb += Assert(dut.o.valid & (dut.o.p.as_value() == held.as_value()),
                               "a stalled output holds")
        if "golden" in self.checks:
            ref_keys, ref_idx = self._golden(m, prev_keys)
        with m.If(dut.o.valid):
            m.d.comb += Assert(dut.o.p.side == prev_side, "side data unchanged")
            if "sorted" in self.checks:
                for k in range(n - 1):
                    m.d.comb += Assert(out[k].key >= out[k + 1].key, f"keys descending at {k}")
            if "keys" in self.checks:
                for k in range(n):
                    m.d.comb += Assert(out[k].key == shadow_keys[out[k].payload],
                                       f"output {k} carries its own key")
            if "perm" in self.checks:
                for j in range(n):
                    m.d.comb += Assert(_popcount([o.payload == j for o in out]) == 1,
                                       f"index {j} appears exactly once")
            if "golden" in self.checks:
                for k in range(n):
                    m.d.comb += Assert((out[k].key == ref_keys[k]) & (out[k].payload == ref_idx[k]),
                                       f"output {k} is the golden network's")

        # Covers: the traffic the assertions are about does happen (a vacuous run shows).
        self.covers = covers = []
        ov = dut.o.valid
        read = Signal()
        was_valid = Signal()
        m.d.sync += [read.eq(ov & self.o_ready), was_valid.eq(ov)]
        _cover(m, covers, ov & (out[0].payload == n - 1) & (out[0].key > out[1].key),
               "the largest key moves from the last entry to the first")
        _cover(m, covers, ov & (out[n - 1].payload == 0) & (out[n - 2].key > out[n - 1].key),
               "the smallest key moves from the first entry to the last")
        ties = [(out[k].key == out[k + 1].key) & (out[k].payload > out[k + 1].payload)
                for k in range(n - 1)]
        _cover(m, covers, ov & Cat(*ties).any(),
               "equal keys leave out of input order (the network is not stable)")
        _cover(m, covers, ov & read, "chunks on consecutive cycles (full throughput)")
        if self.stall:
            _cover(m, covers, stalled, "a stalled output held")
            _cover(m, covers, was_valid & ~ov, "a bubble after a chunk")
        return m


class PackerProps(Elaboratable):
    """Packing properties of ``Packer(cfg, chunk_layout, range(SLOTS))`` (the QPU's instance).

    Parameters
    ----------
    cfg : Config
        The configuration (``sort_n``, ``lanes``, ``rows``, ``exp_width``, ``chan_width``).
    assume_sorted : bool
        Assume the keys of a chunk descending (what the sorter guarantees); ``False`` drops the
        assumption (negative test).
    packer_cls : type
        The unit's class, called as ``Packer`` is; a modified copy or wrapper checks the
        properties themselves (mutation tests).
    reset : bool
        Leave the ``sync`` reset free in every cycle instead of assuming it low.
    assume : callable or None
        ``assume(wrapper)`` returns a condition assumed in every cycle (tests of the covers,
        e.g. ``lambda w: ~w.i_valid`` makes every proof vacuous).
    """

    def __init__(self, cfg: Config, *, assume_sorted: bool = True, packer_cls=Packer,
                 reset: bool = False, assume=None):
        self.cfg = cfg
        self.packer_cls = packer_cls      # a modified copy, for checking the checker
        self.assume_sorted = assume_sorted
        self.reset = reset
        self.assume = assume
        self.covers = []          # ("file:line", description) of each Cover, set by elaborate()
        n, X = cfg.sort_n, cfg.exp_width
        if cfg.chan_width < (n - 1).bit_length():
            raise ValueError("channel must hold an entry index for the lanes to be traceable")
        with warnings.catch_warnings():   # built only to be asked its chunk layout, as rtl.qpu
            warnings.simplefilter("ignore", UnusedElaboratable)
            layout_source = BitonicSorter(n, key_width=X + 1,
                                          payload_shape=descriptor_layout(cfg),
                                          side_shape=chunk_side_layout(cfg))
            self.chunk = layout_source.chunk_layout
            del layout_source
            gc.collect()
        self.i_valid = Signal()
        self.keys = [Signal(X + 1, name=f"key{k}") for k in range(n)]
        self.signed = [Signal(name=f"signed{k}") for k in range(n)]
        self.pos = [Signal(range(n), name=f"pos{k}") for k in range(n)]
        self.side = Signal(chunk_side_layout(cfg))
        self.digits = Signal(data.ArrayLayout(data.ArrayLayout(cfg.digit_width, cfg.rows), n))
        self.o_ready = Signal()
        if cfg.open_groups:
            raise ValueError("PackerProps checks the packer without open slots (open_groups = 0)")

    def ports(self):
        return [self.i_valid, *self.keys, *self.signed, *self.pos, self.side.as_value(),
                self.digits.as_value(), self.o_ready]

    def elaborate(self, platform):
        cfg = self.cfg
        n, L, X, T = cfg.sort_n, cfg.lanes, cfg.exp_width, cfg.rows
        m = Module()
        if not self.reset:
            no_reset(m)
        if self.assume is not None:
            m.d.comb += Assume(self.assume(self))
        m.submodules.dut = dut = self.packer_cls(cfg, chunk_layout=self.chunk,
                                                 slot_shape=range(SLOTS))

        chunk_in = Signal(self.chunk)
        for k in range(n):
            e = chunk_in.entries[k]
            m.d.comb += [e.key.eq(self.keys[k]), e.payload.pos.eq(self.pos[k])]
        # The column store: column k names channel k, so a lane's channel is its entry's pos.
        store = Signal(data.ArrayLayout(column_layout(cfg), n))
        for k in range(n):
            m.d.comb += [store[k].channel.eq(k), store[k].digits.eq(self.digits[k])]
            if cfg.digits == "slice":
                m.d.comb += store[k].signed.eq(self.signed[k])
        m.d.comb += [chunk_in.side.eq(self.side), dut.i.p.eq(chunk_in),
                     dut.i.valid.eq(self.i_valid), dut.o.ready.eq(self.o_ready),
                     dut.columns.eq(store)]
        # What the sorter guarantees: keys descending, so the valid descriptors come first.
        with m.If(self.i_valid & self.assume_sorted):
            for k in range(n - 1):
                m.d.comb += Assume(self.keys[k] >= self.keys[k + 1])

        # Shadow of the chunk being packed, a tag counting accepted chunks, the pending flag.
        accept = self.i_valid & dut.i.ready
        writable = ~dut.o.valid | self.o_ready
        cur = Signal(self.chunk)
        tag = Signal(4)
        pending = Signal()
        with m.If(accept):
            m.d.sync += [cur.eq(chunk_in), tag.eq(tag + 1)]
        m.d.sync += pending.eq(accept | (pending & ~dut.done))
        m.d.comb += Assert(dut.current_slot == cur.side.slot, "current_slot names the chunk's slot")

        # What the group in the output register was produced from (captured when it may change).
        g_chunk = Signal(self.chunk)
        g_tag = Signal(4)
        g_done = Signal()
        g_store = Signal(store.shape())
        with m.If(writable):
            m.d.sync += [g_chunk.eq(cur), g_tag.eq(tag), g_done.eq(dut.done),
                         g_store.eq(store)]

        # Stream and timing.
        stalled = Signal()
        pend_wr = Signal()
        idle_wr = Signal()
        held = Signal(dut.o.p.shape())
        m.d.sync += [stalled.eq(dut.o.valid & ~self.o_ready), held.eq(dut.o.p),
                     pend_wr.eq(pending & writable), idle_wr.eq(~pending & writable)]
        with m.If(stalled):
            m.d.comb += Assert(dut.o.valid & (dut.o.p.as_value() == held.as_value()),
                               "a stalled output holds")
        with m.If(pend_wr):
            m.d.comb += Assert(dut.o.valid, "one group per cycle while a chunk is pending")
        with m.If(idle_wr):
            m.d.comb += Assert(~dut.o.valid, "no group without a pending chunk")
        with m.If(~pending):
            m.d.comb += [Assert(~dut.done, "no done while idle"),
                         Assert(dut.i.ready, "an idle packer takes a chunk")]
        with m.If(dut.done):
            m.d.comb += Assert(pending & writable, "done only as a group is produced")
        with m.If(pending & dut.i.ready):
            m.d.comb += Assert(dut.done, "the next chunk is taken only with the last group")
        with m.If(pending & dut.done):
            m.d.comb += Assert(dut.i.ready, "the next chunk is taken with the last group")

        # Per-group checks against the chunk it was produced from.
        g = dut.o.p
        new = dut.o.valid & ~stalled
        entries = Array([g_chunk.entries[k] for k in range(n)])
        cols = Array([g_store[k] for k in range(n)])
        vmask = [g_chunk.entries[k].key[X] for k in range(n)]

        started = Signal()          # a group has been seen
        prev_done = Signal()        # the last seen group ended its chunk
        prev_tag = Signal(4)
        nxt_ptr = Signal(range(n + 1))   # where the chunk's next group must start
        seen = Signal(n)

        count = Signal(range(L + 1))
        m.d.comb += count.eq(_popcount([g.valid[l] for l in range(L)]))
        start = nxt_ptr
        end = Signal(range(n + L + 1))
        m.d.comb += end.eq(start + count)
        end_entry = entries[end]
        run_ends = (end >= n) | ~end_entry.key[X] | (end_entry.key[:X] != g.exp)
        finished = (end >= n) | ~end_entry.key[X]
        emitted = Signal(n)          # the entries (by index) of this group's valid lanes
        for k in range(n):
            m.d.comb += emitted[k].eq(_popcount([(start + l == k) & g.valid[l]
                                                 for l in range(L)]) != 0)

        with m.If(new):
            # Chunk bookkeeping: every accepted chunk shows up, in order.
            expect_tag = Signal(4)
            m.d.comb += expect_tag.eq(prev_tag + (prev_done | ~started))
            m.d.comb += Assert(g_tag == expect_tag, "groups belong to the expected chunk")
            for l in range(L - 1):
                m.d.comb += Assert(g.valid[l] | ~g.valid[l + 1], f"valid lanes a prefix ({l})")
            for l in range(L):
                ent = entries[start + l]
                with m.If(g.valid[l]):
                    m.d.comb += [
                        Assert(start + l < n, f"lane {l} names an entry"),
                        Assert(g.channel[l] == ent.payload.pos, f"lane {l} is the next entry"),
                        Assert(ent.key[X], f"lane {l} carries a valid descriptor"),
                        Assert(ent.key[:X] == g.exp, f"lane {l} exponent == group exponent"),
                        Assert(~(seen >> (start + l))[0], f"lane {l} not emitted before"),
                    ]
                    col = cols[ent.payload.pos]
                    if cfg.digits == "slice":
                        m.d.comb += Assert(g.signed[l] == col.signed, f"lane {l} signed")
                    for t in range(T):
                        m.d.comb += Assert(g.digits[t][l] == col.digits[t],
                                           f"lane {l} digit row {t}")
                with m.Else():
                    m.d.comb += [Assert(g.channel[l] == 0, f"padded lane {l} channel 0"),
                                 Assert(~g.signed[l], f"padded lane {l} unsigned")]
                    for t in range(T):
                        m.d.comb += Assert(g.digits[t][l] == 0, f"padded lane {l} digit {t} 0")
            with m.If(count == 0):
                m.d.comb += [Assert(start == 0, "an empty group starts a chunk"),
                             Assert(~vmask[0], "an empty group only for an empty chunk"),
                             Assert(g.exp == 0, "an empty group has exponent 0")]
            with m.Elif(count < L):
                m.d.comb += Assert(run_ends, "a short group ends its exponent's run")
            m.d.comb += [
                Assert(g_done == finished, "done exactly with the chunk's last group"),
                Assert(g.first == (g_chunk.side.first & (start == 0)), "first marker"),
                Assert(g.last == (g_chunk.side.last & finished), "last marker"),
            ]
            with m.If(g_done):
                m.d.comb += Assert((seen | emitted) == Cat(*vmask),
                                   "the chunk's valid entries, each emitted exactly once")
            m.d.sync += [started.eq(1), prev_done.eq(g_done), prev_tag.eq(g_tag)]
            with m.If(g_done):
                m.d.sync += [seen.eq(0), nxt_ptr.eq(0)]
            with m.Else():
                m.d.sync += [seen.eq(seen | emitted), nxt_ptr.eq(end)]

        # Covers: the states the assertions are about are reached (a vacuous run shows).
        self.covers = covers = []
        for c in range(L + 1):
            what = {0: "an empty chunk's all-invalid group", L: f"a full group of {L} lanes"}
            _cover(m, covers, new & (count == c), what.get(c, f"a group of {c} of {L} lanes"))
        _cover(m, covers, new & (count == L) & ~g_done,
               "a full group with more of its chunk to come")
        _cover(m, covers, new & (count != 0) & (count < L) & ~g_done,
               "a short group ends its exponent's run mid-chunk")
        _cover(m, covers, new & g_done & (start != 0), "a chunk of two or more groups completes")
        _cover(m, covers, pending & dut.done & accept,
               "hand-off: the next chunk is taken with the last group")
        last_was_done = Signal()
        m.d.sync += last_was_done.eq(new & g_done)
        _cover(m, covers, new & last_was_done & (start == 0) & (count != 0),
               "the next chunk's first group right after the last one (no bubble)")
        _cover(m, covers, stalled & pending, "a group held under back-pressure, its chunk pending")
        _cover(m, covers, stalled & self.i_valid & ~dut.i.ready,
               "back-pressure reaches the input: a chunk waits while a group is held")
        if self.reset:
            rst = ResetSignal()
            part_packed = dut.o.valid & ~g_done
            after_reset = Signal(reset_less=True)     # survives the reset it records
            with m.If(rst & part_packed):
                m.d.sync += after_reset.eq(1)
            _cover(m, covers, rst & part_packed, "a reset with a chunk part-packed")
            _cover(m, covers, after_reset & new & g_done & (start != 0),
                   "a chunk of two or more groups packed after that reset")
        return m
