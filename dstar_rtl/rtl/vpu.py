"""The VPU: every function of numerics §2.7 on ``vpu_lanes`` elements per cycle, bit for bit the
integer golden model (:mod:`golden.vpu`).

A *command* (:func:`golden.layouts.vpu_cmd_layout`) names an operation and a row length ``n``;
the row's elements then arrive as ``ceil(n / vpu_lanes)`` input beats and leave as as many output
beats (one for ``kv_amax``). The operands of each operation (which of a beat's ``a``, ``b``, ``c``,
``m``, ``sh``, ``mask`` it reads) are in :mod:`golden.vpu_stream`.

Structure: an input register (I) or a row-buffer read (R) feeds an operand stage (A) that maps
the operation onto the lanes' multiply-add-round-saturate datapath
(:class:`rtl.vpu_lane.VPULane`, 6 stages); a row buffer (``amaranth.lib.memory``, a ring of
``2·ceil(max_reduction / vpu_lanes)`` words, one write and one read port) holds softmax and
LayerNorm rows between their passes; the row reductions (max, Σx, max |v|) are a registered tree
per beat and an accumulator; per-row scalars come from :mod:`rtl.vpu_scalar`; softmax's output
pass runs on its own datapath (:class:`rtl.vpu_pout.SoftmaxOut`, 3 stages), whose beats go out
before the lanes'. Every lane register advances together unless the lanes' last stage holds an
output beat that is not taken (or the output unit's goes first).

Softmax rows are pipelined: up to ``ROWS = 4`` rows in flight, each with a record (its length,
then its reciprocal) and its words in the ring. A row's exponentials and their sum run on the
lanes; its last sum closes it (the *tail*: the reciprocal, 6 cycles, on a free-running chain);
its output pass then reads its words into the output unit while the lanes already compute the
next rows' exponentials. A softmax row's beat waits for a free word (one the output pass has
read), a ``softmax_mx`` command for a free record; every other command waits until no softmax
row is in flight (the output pass owns the buffer's read port until then).

Passes and cycles per row (``nb = ceil(n / vpu_lanes)``, no stalls, commands queued ahead as the
core's vector engine queues them; ``s``: the registers in the per-beat trees, 0 at 4 lanes, 1 at
8, 2 at 64; measured figures in ``reports/vpu.md``)
-----------------------------------------------------------------------------------------------
* element-wise (``modulate``, ``gelu``, ``gated_residual``, ``acc_requant``, ``diff_delta``,
  ``xhat_update``, ``kv_quant``): one beat per cycle in and out, ``nb`` cycles per row in steady
  state, also for one-beat rows (the next command starts on the edge the row's last beat is
  taken; one more waits in a register); 9 cycles from an input beat to its output beat.
* ``softmax_mx`` (the row max given in ``param``, found by whoever produced the logits): the
  exponentials and their sum straight from the input beats into the ring (``nb``), the next row
  right behind; ``k = min(4, floor(2·depth / nb))`` rows in flight (``depth =
  ceil(max_reduction / vpu_lanes)``, the words of the longest row), so ``k`` consecutive rows
  take ``max(k·nb, nb + 17 + s)`` cycles: one row per ``nb`` cycles from ``nb = 6`` at 8 lanes.
  A kept logit above the given max sets ``error``.
* ``softmax``: load ``nb`` (row max), drain, exponentials and their sum (written back to the
  ring) ``nb``, the tail, output ``nb``, one row at a time: ``3·nb + 20 + 2·s``.
* ``layernorm``: load ``nb`` (``Σx``; ``x²`` through the lanes for ``Σx²``), drain, the
  reciprocal square root (10), output ``nb``: ``2·nb + 21 + s``.
  A row longer than ``max_reduction`` (up to ``ln_row_max``, :attr:`Config.ln_max`) is not
  held in the row buffer: its ``nb`` beats come twice, the first copy loads (the sums), the
  second is normalized beat by beat as it arrives (the same lane operation on the input beat
  instead of a row-buffer word), so the row buffer stays ``max_reduction`` long: the same
  ``2·nb + 21 + s`` cycles, ``2·nb`` input beats.
* ``kv_amax``: load ``nb`` (the running max |v|; ``param`` bit 0 continues the previous command's
  max, so a head longer than ``max_reduction`` takes several commands), the drain and the shift
  (6 cycles), then one output beat with the shift ``e`` in lane 0.

Errors: a command with an unknown operation, ``n`` outside ``1 .. max_reduction`` (LayerNorm:
``1 .. ln_max``) or a ``kv_quant`` shift above ``act_width`` is consumed without effect and sets
the sticky ``error`` (reset clears it); no input beat is consumed for it. An ``acc_requant`` beat
with a shift above ``sh_max`` also sets ``error`` (its outputs are then not meaningful).
"""

import enum
from math import ceil

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config, ConfigError
from dstar_rtl.golden.layouts import VPU_OPS, vpu_cmd_layout, vpu_in_layout, vpu_out_layout
from dstar_rtl.golden.vpu import VPUTables, vpu_tables

from .arith import rom, saturate, tree_reduce
from .layouts import to_layout
from .params import check_config, check_tables
from .vpu_lane import LaneMode, VPULane, lane_widths
from .vpu_pout import SoftmaxOut
from .vpu_scalar import KVShift, LayerNormRsqrt, SoftmaxRecip

__all__ = ["VPU", "VPUOp", "ROWS"]

#: Softmax rows in flight at once (the records of :class:`VPU`'s row pipeline).
ROWS = 4

VPUOp = enum.IntEnum("VPUOp", {name.upper(): i for i, name in enumerate(VPU_OPS)})


class _MicroOp(enum.IntEnum):
    """What the operand stage maps onto the lanes for one beat."""
    NONE = 0
    MODULATE = 1
    GELU = 2
    GATED_RESIDUAL = 3
    ACC_REQUANT = 4
    DIFF_DELTA = 5
    XHAT_UPDATE = 6
    KV_QUANT = 7
    LAYERNORM_LOAD = 8    # LayerNorm load: x² into Σx²
    SOFTMAX_EXP = 9       # softmax exponentials (from the row buffer), written back
    LAYERNORM_OUT_IN = 10  # LayerNorm output of a long row (from its second copy's input beat)
    LAYERNORM_OUT = 11    # LayerNorm output (from the row buffer)
    KV_SHIFT = 12         # the K/V shift, one beat
    SOFTMAX_LOAD = 13     # softmax load: row buffer and max (no lane work)
    KV_LOAD = 14          # K/V load: max |v| (no lane work)
    SOFTMAX_EXP_IN = 15   # softmax_mx: exponentials from the input beat, written to the buffer


#: The micro-operation of each element-wise operation's input beats.
_ELEMENTWISE_MICRO_OP = {
    VPUOp.MODULATE: _MicroOp.MODULATE, VPUOp.GELU: _MicroOp.GELU,
    VPUOp.GATED_RESIDUAL: _MicroOp.GATED_RESIDUAL, VPUOp.ACC_REQUANT: _MicroOp.ACC_REQUANT,
    VPUOp.DIFF_DELTA: _MicroOp.DIFF_DELTA, VPUOp.XHAT_UPDATE: _MicroOp.XHAT_UPDATE,
    VPUOp.KV_QUANT: _MicroOp.KV_QUANT}


class _State(enum.IntEnum):
    """The row sequencer (see the module docstring for the passes)."""
    IDLE = 0
    ELEMENTWISE = 1     # input beats straight through the lanes
    LOAD = 2            # input beats into the row buffer and the reductions
    DRAIN = 3           # waiting for the pipeline to empty between passes
    SCALAR = 4          # the per-row scalar unit's latency
    EXP = 5             # softmax: exponentials from the row buffer, written back
    OUT = 6             # LayerNorm's output pass from the row buffer
    EMIT = 7            # kv_amax: its one output beat
    OUT_IN = 8          # LayerNorm's output pass of a long row, on its second copy's beats


class _Dest(enum.IntEnum):
    """Where a lane result goes."""
    OUT = 0
    SUM = 1      # softmax: write back and add to Σex
    SQ = 2       # LayerNorm: add to Σx²


class _Ctl:
    """The control travelling with a beat through the operand stage and the lanes: ``valid``,
    ``dest`` (:class:`_Dest`), ``last`` (the row's last beat) and ``addr`` (its row-buffer
    word)."""

    def __init__(self, prefix: str, depth: int):
        self.valid = Signal(name=f"{prefix}_valid")
        self.dest = Signal(_Dest, name=f"{prefix}_dest")
        self.last = Signal(name=f"{prefix}_last")
        self.addr = Signal(range(2 * depth), name=f"{prefix}_addr")

    def fields(self):
        return (self.valid, self.dest, self.last, self.addr)


class VPU(wiring.Component):
    """Vector processing unit.

    Parameters
    ----------
    cfg : Config (vpu_lanes, act format, p_base_log2, max_reduction, acc_bits, mult_width, sh_max).
    tables : VPUTables, keyword-only, default :func:`golden.vpu.vpu_tables` of ``cfg`` (the RTL's
        ROMs hold exactly these).
    requant : bool, keyword-only, default True. False: a VPU without ``acc_requant`` (the core's,
        whose matrix engine requantizes on its own lanes): the command is refused like an
        unknown one, the lanes are only as wide as the other operations need and carry no
        ``Y``; the output's ``Y`` and ``Ysat`` are 0.

    Members
    -------
    cmd : In(stream of :func:`golden.layouts.vpu_cmd_layout`): one command waits in a register
        while a row runs.
    i : In(stream of :func:`golden.layouts.vpu_in_layout`).
    o : Out(stream of :func:`golden.layouts.vpu_out_layout`).
    error : Out(1), sticky: a refused command. busy : Out(1): a row in progress or in flight.
    """

    def __init__(self, cfg: Config, *, tables: VPUTables | None = None, requant: bool = True):
        check_config(cfg)
        self._rq = bool(requant)
        t = vpu_tables(cfg) if tables is None else check_tables(tables)
        if t.rsqrt_frac < cfg.act_frac + t.ln_eps_frac // 2:
            raise ConfigError(f"VPU: act_frac ({cfg.act_frac}) + ln_eps_frac/2 "
                              f"({t.ln_eps_frac // 2}) must not exceed rsqrt_frac "
                              f"({t.rsqrt_frac}): LayerNorm's output shift would be negative")
        self._cfg, self._t = cfg, t
        super().__init__({
            "cmd": In(stream.Signature(to_layout(vpu_cmd_layout(cfg)))),
            "i": In(stream.Signature(to_layout(vpu_in_layout(cfg)))),
            "o": Out(stream.Signature(to_layout(vpu_out_layout(cfg)))),
            "error": Out(1),
            "busy": Out(1),
        })

    @property
    def cfg(self):
        return self._cfg

    @property
    def requant(self) -> bool:
        """Whether the VPU runs ``acc_requant``."""
        return self._rq

    @property
    def depth(self) -> int:
        """The words of the longest row (the row buffer is a ring of twice as many)."""
        return ceil(self._cfg.max_reduction / self._cfg.vpu_lanes)

    @property
    def beats_max(self) -> int:
        """The beats of the longest row of any operation (a LayerNorm row of ``cfg.ln_max``)."""
        return ceil(self._cfg.ln_max / self._cfg.vpu_lanes)

    @property
    def tables(self) -> VPUTables:
        """The tables the ROMs hold."""
        return self._t

    def elaborate(self, platform):
        return _Elaboration(self).m


class _Elaboration:
    """One elaboration of a :class:`VPU`: the module ``m``, its units and the signals its parts
    share. The parts are built in the order of :meth:`__init__`; the order matters where two
    parts assign the same signal (the later assignment wins: the command intake comes last)."""

    def __init__(self, vpu: VPU):
        self.vpu, self.cfg, self.t = vpu, vpu.cfg, vpu.tables
        self.m = Module()
        self._units()
        self._registers()
        self._pipeline()
        self._row_scalars()
        self._input_beats()
        self._row_reductions()
        self._row_passes()
        self._operand_stage()
        self._results()
        self._output_pass()
        self._command_intake()

    # ---------------------------------------------------------------- units
    def _units(self):
        """The lanes, the per-row scalar units and the row buffer with its two ports."""
        cfg, t, m = self.cfg, self.t, self.m
        self.lanes = []
        for k in range(cfg.vpu_lanes):
            lane = VPULane(cfg, tables=t, requant=self.vpu.requant)
            m.submodules[f"lane{k}"] = lane
            self.lanes.append(lane)
        m.submodules.recip = self.recip = SoftmaxRecip(cfg, tables=t)
        self.eps_width = len(self.vpu.cmd.p.param)
        lw = lane_widths(cfg, t, self.vpu.requant)
        m.submodules.rsqrt = self.rsqrt = LayerNormRsqrt(
            cfg, tables=t, ny1_width=lw["ny1"], s1y1_width=lw["s1y1"], eps_width=self.eps_width)
        m.submodules.kvshift = self.kvshift = KVShift(cfg)
        m.submodules.pout = self.pout = SoftmaxOut(cfg, tables=t)

        # A word holds a beat's values (wide enough for an exponential) and mask bits.
        self.word_bits = max(cfg.act_width, t.exp_frac + 1)
        word = data.ArrayLayout(data.StructLayout({"v": self.word_bits, "m": 1}), cfg.vpu_lanes)
        m.submodules.buf = buf = Memory(shape=word, depth=2 * self.vpu.depth, init=[])
        self.buf_wr = buf.write_port()
        self.buf_rd = buf.read_port()

    # ---------------------------------------------------------------- state
    def _registers(self):
        """The running command and the sequencer state."""
        cfg, depth = self.cfg, self.vpu.depth
        self.state = Signal(_State, name="state")
        self.op = Signal(range(len(VPU_OPS)), name="op")
        self.n = Signal(range(cfg.ln_max + 1), name="n")
        self.param = Signal(self.eps_width, name="param")
        nbm = self.vpu.beats_max
        self.nb = Signal(range(nbm + 1), name="nb")          # beats per row
        self.cnt = Signal(range(nbm + 1), name="cnt")        # beats done in the current pass
        self.rem = Signal(range(cfg.ln_max + 1), name="rem")  # elements left from the beat
        # A LayerNorm row longer than max_reduction: not held in the row buffer, it comes twice.
        self.long_row = Signal(name="long_row")
        self.long_rows = cfg.ln_max > cfg.max_reduction    # the configuration has such rows
        self.wait = Signal(range(16), name="wait")
        # Softmax rows in flight (up to ROWS): each has a record (its length, then its
        # reciprocal) and its words in the row buffer, a ring of ``2·depth`` words that the
        # rows fill one after the other; a row's exponentials and their sum run on the lanes,
        # then its reciprocal (the tail), then its output pass on :attr:`pout`.
        R, D = ROWS, 2 * depth
        self.base = Signal(range(D), name="base")   # the first word of the row on the lanes
        self.wp = Signal(range(D), name="wp")       # the first word of the next softmax row
        self.ring_used = Signal(range(D + 1), name="ring_used")  # words taken, not yet read
        self.recs = Signal(range(R + 1), name="recs")   # records whose output pass has not begun
        self.ready = [Signal(name=f"rec{r}_ready") for r in range(R)]   # its reciprocal is there
        self.rec_ptr = Signal(range(R), name="rec_ptr")     # the next record to fill
        self.tail_ptr = Signal(range(R), name="tail_ptr")   # the next row to finish its sum
        self.rec_n = [Signal(range(cfg.max_reduction + 1), name=f"rec{r}_n") for r in range(R)]

    def _pipeline(self):
        """The pipeline registers and their advance.

        An input register (``in_*``: an input beat) or a row-buffer read (``rd_*``) feeds the
        operand stage (control ``a_*``), then the lanes' stages (control ``p<k>_*``). The input
        register and the read load on the same advance from states that exclude each other, so at
        most one of them is valid. Everything advances together unless the last stage holds an
        output beat that is not taken."""
        cfg, m, depth = self.cfg, self.m, self.vpu.depth
        L, W = cfg.vpu_lanes, cfg.act_width
        self.adv = adv = Signal(name="adv")
        # The input register.
        self.in_valid, self.in_last = Signal(name="in_valid"), Signal(name="in_last")
        self.in_uop = Signal(_MicroOp, name="in_uop")
        self.in_len = Signal(L, name="in_len")                 # lanes holding an element
        self.in_beat = Signal(self.vpu.i.p.shape(), name="in_beat")
        self.in_addr = Signal(range(2 * depth), name="in_addr")
        # The command's parameter with its beat (kv_quant's shift, softmax_mx's row max; both
        # fit its low act_width bits).
        self.in_param = Signal(W, name="in_param")
        # The row-buffer read.
        self.rd_valid, self.rd_last = Signal(name="rd_valid"), Signal(name="rd_last")
        self.rd_uop = Signal(_MicroOp, name="rd_uop")
        self.rd_addr = Signal(range(2 * depth), name="rd_addr")
        self.rd_len = Signal(L, name="rd_len")
        # The operand stage and the lanes' stages.
        self.a = _Ctl("a", depth)
        self.stages = [_Ctl(f"p{s}", depth) for s in range(VPULane.LATENCY)]
        self.final = self.stages[-1]
        # Reduction pipelines between a beat and its row accumulator: valid flags, delayed as
        # many cycles as the trees' registers (filled in by _row_reductions and _results).
        self.red_valids, self.sum_valids, self.sq_valids = [], [], []
        self.in_flight = Signal(name="in_flight")
        self.p_busy = Signal(name="p_busy")         # the output unit holds a beat
        self.empty = ~(self.in_valid | self.rd_valid | self.a.valid |
                       Cat(*(c.valid for c in self.stages)).any() | self.in_flight |
                       self.p_busy)
        f = self.final
        m.d.comb += [
            adv.eq(~(f.valid & (f.dest == _Dest.OUT) & (~self.vpu.o.ready |
                                                         self.pout.o_valid))),
        ]
        with m.If(adv):
            prev = self.a
            for c in self.stages:
                m.d.sync += [dst.eq(src) for dst, src in zip(c.fields(), prev.fields())]
                prev = c
        for lane in self.lanes:
            m.d.comb += lane.en.eq(adv)

    def _row_scalars(self):
        """Per-row accumulators and the scalars latched from the scalar units."""
        t, m, W = self.t, self.m, self.cfg.act_width
        recip, rsqrt, kvshift = self.recip, self.rsqrt, self.kvshift
        self.smax = Signal(signed(W), name="smax")
        self.total = Signal(unsigned(t.widths["softmax.sum"][0]), name="total")
        self.s1 = Signal(signed(t.widths["layernorm.S1"][0]), name="s1")
        self.s2 = Signal(unsigned(t.widths["layernorm.S2"][0]), name="s2")
        self.amax = Signal(unsigned(W), name="amax")
        self.rec_y1 = [Signal.like(recip.y1, name=f"rec{r}_y1") for r in range(ROWS)]
        self.rec_shift = [Signal.like(recip.shift, name=f"rec{r}_shift") for r in range(ROWS)]
        self.ny1_row = Signal.like(rsqrt.ny1, name="ny1_row")
        self.s1y1_row = Signal.like(rsqrt.s1y1, name="s1y1_row")
        self.lnshift_row = Signal.like(rsqrt.shift, name="lnshift_row")
        self.zero_row = Signal(name="zero_row")
        self.e_row = Signal.like(kvshift.e, name="e_row")
        self.tail_total = Signal.like(self.total, name="tail_total")
        m.d.comb += [recip.total.eq(self.tail_total), rsqrt.n.eq(self.n), rsqrt.s1.eq(self.s1),
                     rsqrt.s2.eq(self.s2), rsqrt.eps_q.eq(self.param),
                     kvshift.amax.eq(self.amax)]

    # ---------------------------------------------------------------- input beats
    def _input_beats(self):
        """Input beats (ELEMENTWISE and LOAD) and kv_amax's one injected beat (EMIT) into the
        input register."""
        cfg, m, i = self.cfg, self.m, self.vpu.i
        L, W, depth = cfg.vpu_lanes, cfg.act_width, self.vpu.depth
        state = self.state
        self.lane_ok = lane_ok = Signal(L, name="lane_ok")
        m.d.comb += lane_ok.eq(Cat(*(self.rem > k for k in range(L))))
        # A softmax row's beat takes a word of the ring, which the output pass must have read.
        self.sm_row = (self.op == VPUOp.SOFTMAX) | (self.op == VPUOp.SOFTMAX_MX)
        full = self.sm_row & (self.ring_used == 2 * depth)
        # States whose input beats go straight through the lanes.
        self.passing = passing = state == _State.ELEMENTWISE
        if self.long_rows:
            self.passing = passing = passing | (state == _State.OUT_IN)
        m.d.comb += i.ready.eq(self.adv & (passing | ((state == _State.LOAD) & ~full)))
        self.take = take = i.valid & i.ready
        self.last_beat = last_beat = self.cnt + 1 == self.nb
        with m.If(take):
            m.d.sync += [self.cnt.eq(self.cnt + 1), self.rem.eq(self.rem - L)]
            with m.If(last_beat):
                m.d.sync += [self.cnt.eq(0), self.rem.eq(self.n)]
                m.d.sync += state.eq(Mux(passing | (self.op == VPUOp.SOFTMAX_MX), _State.IDLE,
                                         _State.DRAIN))
        self.inject = inject = (state == _State.EMIT) & self.adv
        with m.If(inject):
            m.d.sync += state.eq(_State.IDLE)
        beat_uop = Signal(_MicroOp, name="beat_uop")
        with m.Switch(self.op):
            for op, uop in _ELEMENTWISE_MICRO_OP.items():
                with m.Case(op):
                    m.d.comb += beat_uop.eq(uop)
            with m.Case(VPUOp.SOFTMAX):
                m.d.comb += beat_uop.eq(_MicroOp.SOFTMAX_LOAD)
            with m.Case(VPUOp.SOFTMAX_MX):
                m.d.comb += beat_uop.eq(_MicroOp.SOFTMAX_EXP_IN)
            with m.Case(VPUOp.LAYERNORM):
                m.d.comb += beat_uop.eq(_MicroOp.LAYERNORM_LOAD)
                if self.long_rows:
                    with m.If(state == _State.OUT_IN):
                        m.d.comb += beat_uop.eq(_MicroOp.LAYERNORM_OUT_IN)
            with m.Case(VPUOp.KV_AMAX):
                m.d.comb += beat_uop.eq(Mux(inject, _MicroOp.KV_SHIFT, _MicroOp.KV_LOAD))
        with m.If(self.adv):
            m.d.sync += [self.in_valid.eq(take | inject), self.in_uop.eq(beat_uop),
                         self.in_last.eq(last_beat | inject), self.in_len.eq(lane_ok),
                         self.in_addr.eq(_ring(self.base + self.cnt, 2 * depth)),
                         self.in_beat.eq(i.payload),
                         self.in_param.eq(self.param[:W])]
        self.used = self.in_valid & self.adv     # the input register moves on: used once

    def _row_reductions(self):
        """The row's reductions while it loads: a registered tree per beat (the beat's max, max
        |x| and Σx), then the row accumulators; and the check of acc_requant's shifts."""
        cfg, m = self.cfg, self.m
        L, W = cfg.vpu_lanes, cfg.act_width
        beat, lanes_on, uop = self.in_beat, self.in_len, self.in_uop
        self.xs = xs = [beat.a[k][:W].as_signed() for k in range(L)]
        low = -(1 << (W - 1))
        kept, mags, xsum = [], [], []
        for k in range(L):
            kv = Signal(signed(W), name=f"kept{k}")
            mv = Signal(unsigned(W), name=f"mag{k}")
            xv = Signal(signed(W), name=f"xin{k}")
            m.d.comb += [
                kv.eq(Mux(lanes_on[k] & ((uop != _MicroOp.SOFTMAX_LOAD) | beat.mask[k]), xs[k],
                          low)),
                mv.eq(Mux(lanes_on[k], Mux(xs[k] < 0, -xs[k], xs[k])[:W], 0)),
                xv.eq(Mux(lanes_on[k], xs[k], 0)),
            ]
            kept.append(kv)
            mags.append(mv)
            xsum.append(xv)
        t_max, stages = tree_reduce(m, kept, "max", "beat_max", every=2)
        t_amax, _ = tree_reduce(m, mags, "max", "beat_amax", every=2)
        t_s1, _ = tree_reduce(m, xsum, "sum", "beat_s1", every=2)
        red_max, red_amax, red_s1 = (Signal.like(t_max, name="red_max"),
                                     Signal.like(t_amax, name="red_amax"),
                                     Signal.like(t_s1, name="red_s1"))
        m.d.sync += [red_max.eq(t_max), red_amax.eq(t_amax), red_s1.eq(t_s1)]
        red_in = self.used & ((uop == _MicroOp.SOFTMAX_LOAD) | (uop == _MicroOp.LAYERNORM_LOAD) |
                              (uop == _MicroOp.KV_LOAD))
        red_valid = _delay(m, red_in, stages + 1, "red_valid", self.red_valids)
        smax, amax = self.smax, self.amax
        with m.If(red_valid):
            m.d.sync += [smax.eq(Mux(red_max > smax, red_max, smax)),
                         amax.eq(Mux(red_amax > amax, red_amax, amax)),
                         self.s1.eq(self.s1 + red_s1)]
        above = Cat(*(lanes_on[k] & beat.mask[k] & (xs[k] > self.in_param.as_signed())
                      for k in range(L))).any()
        with m.If(self.used & (uop == _MicroOp.SOFTMAX_EXP_IN) & above):
            m.d.sync += self.vpu.error.eq(1)
        if self.vpu.requant and (1 << len(beat.sh[0])) - 1 > cfg.sh_max:
            bad_sh = Cat(*(lanes_on[k] & (beat.sh[k] > cfg.sh_max) for k in range(L))).any()
            with m.If(self.used & (uop == _MicroOp.ACC_REQUANT) & bad_sh):
                m.d.sync += self.vpu.error.eq(1)

    # ---------------------------------------------------------------- row passes
    def _row_passes(self):
        """The sequencer between passes (DRAIN, SCALAR) and the passes that read the row buffer
        on the lanes (softmax's EXP, LayerNorm's OUT) into the read stage."""
        m, L = self.m, self.cfg.vpu_lanes
        state, op, cnt, wait = self.state, self.op, self.cnt, self.wait
        scalar_wait = Mux(op == VPUOp.LAYERNORM, LayerNormRsqrt.LATENCY, KVShift.LATENCY)
        with m.Switch(state):
            with m.Case(_State.DRAIN):
                with m.If(self.empty):
                    with m.If(op == VPUOp.SOFTMAX):
                        m.d.sync += state.eq(_State.EXP)
                    with m.Else():
                        m.d.sync += [state.eq(_State.SCALAR), wait.eq(scalar_wait)]
            with m.Case(_State.SCALAR):
                m.d.sync += wait.eq(wait - 1)
                with m.If(wait == 0):
                    m.d.sync += [self.ny1_row.eq(self.rsqrt.ny1),
                                 self.s1y1_row.eq(self.rsqrt.s1y1),
                                 self.lnshift_row.eq(self.rsqrt.shift),
                                 self.zero_row.eq(self.rsqrt.zero), self.e_row.eq(self.kvshift.e)]
                    out = Mux(self.long_row, _State.OUT_IN, _State.OUT) if self.long_rows \
                        else _State.OUT
                    m.d.sync += state.eq(Mux(op == VPUOp.KV_AMAX, _State.EMIT, out))
        self.issue = issue = ((state == _State.EXP) | (state == _State.OUT)) & self.adv
        with m.If(self.adv):
            m.d.sync += [self.rd_valid.eq(issue), self.rd_last.eq(self.last_beat),
                         self.rd_addr.eq(_ring(self.base + cnt, 2 * self.vpu.depth)),
                         self.rd_len.eq(self.lane_ok),
                         self.rd_uop.eq(Mux(state == _State.EXP, _MicroOp.SOFTMAX_EXP,
                                            _MicroOp.LAYERNORM_OUT))]
        with m.If(issue):
            m.d.sync += [cnt.eq(cnt + 1), self.rem.eq(self.rem - L)]
            with m.If(self.last_beat):
                m.d.sync += [cnt.eq(0), self.rem.eq(self.n), state.eq(_State.IDLE)]

    # ---------------------------------------------------------------- operand stage (A)
    def _operand_stage(self):
        """The operand stage: the micro-operation of the read or input beat, its control, and
        each lane's operands (:func:`_lane_operands`)."""
        m, a = self.m, self.a
        uop = Signal(_MicroOp, name="uop")
        with m.If(self.rd_valid):
            m.d.comb += uop.eq(self.rd_uop)
        with m.Elif(self.in_valid):
            m.d.comb += uop.eq(self.in_uop)
        # Loads that only reduce (softmax's max, kv_amax's max |v|) do no lane work.
        lane_op = ((uop != _MicroOp.NONE) & (uop != _MicroOp.SOFTMAX_LOAD) &
                   (uop != _MicroOp.KV_LOAD))
        with m.If(self.adv):
            m.d.sync += [
                a.valid.eq(lane_op),
                a.dest.eq(Mux((uop == _MicroOp.SOFTMAX_EXP) | (uop == _MicroOp.SOFTMAX_EXP_IN),
                              _Dest.SUM,
                              Mux(uop == _MicroOp.LAYERNORM_LOAD, _Dest.SQ, _Dest.OUT))),
                a.last.eq(Mux(self.rd_valid, self.rd_last, self.in_last)),
                a.addr.eq(Mux(self.rd_valid, self.rd_addr, self.in_addr)),
            ]
        row = dict(smax=self.smax, in_smax=self.in_param.as_signed(), ny1=self.ny1_row,
                   s1y1=self.s1y1_row, lnshift=self.lnshift_row, zero=self.zero_row,
                   e=self.e_row, kv_shift=self.in_param[:self.cfg.act_width.bit_length()])
        for k, lane in enumerate(self.lanes):
            _lane_operands(self, k, lane, uop, row)

    # ---------------------------------------------------------------- results
    def _results(self):
        """Lane results: softmax exponentials written back to the row buffer and summed,
        LayerNorm's x² summed, a loaded beat written to the row buffer, output beats."""
        cfg, m, f = self.cfg, self.m, self.final
        W, E = cfg.act_width, self.t.exp_frac
        wr = self.buf_wr
        # The row buffer's one write port: exponentials written back, or a loaded beat.
        write_back = f.valid & (f.dest == _Dest.SUM)
        exs = []
        sqs = []
        for k, lane in enumerate(self.lanes):
            e_k = Signal(unsigned(E + 1), name=f"ex{k}")
            q_k = Signal(unsigned(2 * W), name=f"sq{k}")
            m.d.comb += [e_k.eq(lane.r[:E + 1]), q_k.eq(lane.r[:2 * W])]
            exs.append(e_k)
            sqs.append(q_k)
        t_sum, stages = tree_reduce(m, exs, "sum", "beat_sum", every=2)
        t_sq, _ = tree_reduce(m, sqs, "sum", "beat_sq", every=2)
        sum_val, sq_val = Signal.like(t_sum, name="sum_val"), Signal.like(t_sq, name="sq_val")
        m.d.sync += [sum_val.eq(t_sum), sq_val.eq(t_sq)]
        sum_valid = _delay(m, write_back, stages + 1, "sum_valid", self.sum_valids)
        sum_last = _delay(m, write_back & f.last, stages + 1, "sum_last", [])
        sq_valid = _delay(m, f.valid & (f.dest == _Dest.SQ), stages + 1, "sq_valid",
                          self.sq_valids)
        m.d.comb += self.in_flight.eq(Cat(*self.red_valids, *self.sum_valids,
                                          *self.sq_valids).any())
        # A row's last sum closes it: its total goes to the reciprocal (the tail), the next
        # row's sums start from 0 on the next cycle.
        with m.If(sum_valid & sum_last):
            m.d.sync += [self.tail_total.eq(self.total + sum_val), self.total.eq(0)]
        with m.Elif(sum_valid):
            m.d.sync += self.total.eq(self.total + sum_val)
        self.tail_done = _delay(m, sum_valid & sum_last, 1 + SoftmaxRecip.LATENCY, "tail", [])
        with m.If(self.tail_done):
            for r in range(ROWS):
                with m.If(self.tail_ptr == r):
                    m.d.sync += [self.rec_y1[r].eq(self.recip.y1),
                                 self.rec_shift[r].eq(self.recip.shift)]
            m.d.sync += self.tail_ptr.eq(_next(self.tail_ptr, ROWS))
        with m.If(sq_valid):
            m.d.sync += self.s2.eq(self.s2 + sq_val)
        uop, beat = self.in_uop, self.in_beat
        ln_held = uop == _MicroOp.LAYERNORM_LOAD       # a LayerNorm row held in the buffer
        if self.long_rows:
            ln_held = ln_held & ~self.long_row
        with m.If(write_back):
            m.d.comb += [wr.en.eq(1), wr.addr.eq(f.addr)]
            for k, lane in enumerate(self.lanes):
                m.d.comb += wr.data[k].v.eq(lane.r[:self.word_bits])
        with m.Elif(self.used & ((uop == _MicroOp.SOFTMAX_LOAD) | ln_held)):
            m.d.comb += [wr.en.eq(1), wr.addr.eq(self.in_addr)]
            for k in range(cfg.vpu_lanes):
                m.d.comb += [wr.data[k].v.eq(self.xs[k]),
                             wr.data[k].m.eq(self.in_len[k] & ((uop != _MicroOp.SOFTMAX_LOAD) |
                                                               beat.mask[k]))]
        # The output: a softmax row's P from the output unit first (its rows are older than
        # any result on the lanes), else the lanes' result.
        out, pu = self.vpu.o, self.pout
        o = out.p
        m.d.comb += out.valid.eq(pu.o_valid | (f.valid & (f.dest == _Dest.OUT)))
        with m.If(pu.o_valid):
            m.d.comb += o.last.eq(pu.o_last)
            for k in range(cfg.vpu_lanes):
                m.d.comb += [o.y[k].eq(pu.o_p[k]), o.sat[k].eq(pu.o_sat[k])]
        with m.Else():
            m.d.comb += o.last.eq(f.last)
            for k, lane in enumerate(self.lanes):
                m.d.comb += [o.y[k].eq(lane.r), o.sat[k].eq(lane.sat)]
                if self.vpu.requant:
                    m.d.comb += [o.Y[k].eq(lane.side_o), o.Ysat[k].eq(lane.side_flag_o)]

    # ---------------------------------------------------------------- softmax output pass
    def _output_pass(self):
        """Softmax's output pass (B) on the output unit: once a row's reciprocal is there and
        the previous row's pass is done, its words are read (one a cycle, the row buffer's read
        port is B's while it runs: the passes on the lanes that read it start only when no
        softmax row is in flight) into :attr:`pout`, whose stages advance unless its output
        beat is not taken."""
        cfg, m, depth, L = self.cfg, self.m, self.vpu.depth, self.cfg.vpu_lanes
        pu, rd = self.pout, self.buf_rd
        p_adv = ~(pu.o_valid & ~self.vpu.o.ready)
        D = 2 * depth
        b_active = self.b_active = Signal(name="b_active")
        b_cnt = Signal(range(depth + 1), name="b_cnt")
        b_ptr = Signal(range(ROWS), name="b_ptr")               # the next record to read out
        b_base = Signal(range(D), name="b_base")                # the row's first word
        b_nb = Signal(range(depth + 1), name="b_nb")
        b_rem = Signal(range(cfg.max_reduction + 1), name="b_rem")
        b_y1 = Signal.like(self.rec_y1[0], name="b_y1")
        b_shift = Signal.like(self.rec_shift[0], name="b_shift")
        b_last = b_cnt + 1 == b_nb
        self.b_issue = b_issue = b_active & p_adv
        self.b_end = b_end = b_issue & b_last
        with m.If(b_issue):
            m.d.sync += [b_cnt.eq(b_cnt + 1), b_rem.eq(b_rem - L)]
            with m.If(b_last):
                m.d.sync += [b_active.eq(0), b_base.eq(_ring(b_base + b_nb, D))]
        # The next row's pass may begin on the edge of the last read of the one before.
        self.b_start = b_start = (~b_active | b_end) & Array(self.ready)[b_ptr]
        with m.If(b_start):
            m.d.sync += [b_active.eq(1), b_cnt.eq(0), b_ptr.eq(_next(b_ptr, ROWS))]
            for r in range(ROWS):
                with m.If(b_ptr == r):
                    n = self.rec_n[r]
                    m.d.sync += [b_rem.eq(n), b_nb.eq(_beats(n, L)),
                                 b_y1.eq(self.rec_y1[r]), b_shift.eq(self.rec_shift[r])]
        self.b_ptr = b_ptr
        # The read stage: the word (the read port's data) and its control.
        pv, plast = Signal(name="pv"), Signal(name="plast")
        plen = Signal(L, name="plen")
        py1, pshift = Signal.like(b_y1, name="py1"), Signal.like(b_shift, name="pshift")
        with m.If(p_adv):
            m.d.sync += [pv.eq(b_issue), plast.eq(b_last), plen.eq(Cat(*(b_rem > k
                                                                         for k in range(L)))),
                         py1.eq(b_y1), pshift.eq(b_shift)]
        with m.If(b_active | pv):      # (the read stage's word stays until it moves on)
            m.d.comb += [rd.en.eq(p_adv), rd.addr.eq(_ring(b_base + b_cnt, D))]
        with m.Else():
            m.d.comb += [rd.en.eq(self.adv), rd.addr.eq(_ring(self.base + self.cnt, D))]
        m.d.comb += [pu.en.eq(p_adv), pu.i_valid.eq(pv), pu.i_last.eq(plast), pu.i_len.eq(plen),
                     pu.i_y1.eq(py1), pu.i_shift.eq(pshift)]
        for k in range(L):
            m.d.comb += pu.i_ex[k].eq(rd.data[k].v[:self.t.exp_frac + 1])
        m.d.comb += self.p_busy.eq(pv | pu.busy)

    # ---------------------------------------------------------------- command intake
    def _command_intake(self):
        """A command starts when the VPU is idle or, so that rows follow each other without a
        gap, on the very edge the current row's last beat is taken or issued; one more waits in
        a register meanwhile. Built last: its assignments win."""
        cfg, m, vpu = self.cfg, self.m, self.vpu
        L, W, n_max = cfg.vpu_lanes, cfg.act_width, cfg.max_reduction
        state, cmd = self.state, vpu.cmd
        pend = Signal(cmd.p.shape(), name="pend")
        pend_valid = Signal(name="pend_valid")
        finishing = (((self.passing |
                       ((state == _State.LOAD) & (self.op == VPUOp.SOFTMAX_MX))) &
                      self.take & self.last_beat) |
                     (((state == _State.OUT) | (state == _State.EXP)) & self.issue &
                      self.last_beat) | self.inject)
        # The command to start: the waiting one, else the one on the port (taken directly).
        c = Signal(cmd.p.shape(), name="c")
        m.d.comb += [cmd.ready.eq(~pend_valid),
                     c.eq(Mux(pend_valid, pend, cmd.payload))]
        # softmax_mx starts while a record is free; every other command waits until no
        # softmax row is in flight (the row buffer's read port is the output pass's until then).
        is_mx = c.op == VPUOp.SOFTMAX_MX
        is_sm = is_mx | (c.op == VPUOp.SOFTMAX)
        idle_rows = (self.recs == 0) & ~self.b_active
        room = Mux(is_mx, self.recs < ROWS, idle_rows)
        start = (pend_valid | cmd.valid) & ((state == _State.IDLE) | finishing) & room
        with m.If(start):
            m.d.sync += pend_valid.eq(0)
        with m.Elif(cmd.valid & cmd.ready):
            m.d.sync += [pend.eq(cmd.payload), pend_valid.eq(1)]
        n_ok = c.n <= n_max
        if cfg.ln_max > n_max:
            n_ok = n_ok | ((c.op == VPUOp.LAYERNORM) & (c.n <= cfg.ln_max))
        legal = ((c.op < len(VPU_OPS)) & (c.n >= 1) & n_ok &
                 ~((c.op == VPUOp.KV_QUANT) & (c.param > W)))
        if not vpu.requant:
            legal = legal & (c.op != VPUOp.ACC_REQUANT)
        beats = _beats(c.n, L)
        row_in = Signal(name="row_in")              # a softmax row starts
        with m.If(start):
            with m.If(~legal):
                m.d.sync += vpu.error.eq(1)
            with m.Else():
                m.d.sync += [self.op.eq(c.op), self.n.eq(c.n), self.param.eq(c.param),
                             self.nb.eq(beats), self.cnt.eq(0), self.rem.eq(c.n),
                             self.s1.eq(0), self.s2.eq(0)]
                if self.long_rows:
                    m.d.sync += self.long_row.eq((c.op == VPUOp.LAYERNORM) & (c.n > n_max))
                with m.If((c.op != VPUOp.KV_AMAX) | ~c.param[0]):
                    m.d.sync += self.amax.eq(0)
                with m.If(c.op == VPUOp.SOFTMAX):
                    m.d.sync += self.smax.eq(-(1 << (W - 1)))
                with m.If(is_sm):
                    m.d.comb += row_in.eq(1)
                    m.d.sync += [self.base.eq(self.wp),
                                 self.wp.eq(_ring(self.wp + beats, 2 * self.vpu.depth)),
                                 self.rec_ptr.eq(_next(self.rec_ptr, ROWS))]
                    for r in range(ROWS):
                        with m.If(self.rec_ptr == r):
                            m.d.sync += self.rec_n[r].eq(c.n)
                with m.If((c.op == VPUOp.SOFTMAX) | (c.op == VPUOp.LAYERNORM) |
                          (c.op == VPUOp.KV_AMAX) | (c.op == VPUOp.SOFTMAX_MX)):
                    m.d.sync += state.eq(_State.LOAD)
                with m.Else():
                    m.d.sync += state.eq(_State.ELEMENTWISE)
        # A record is taken when its row starts and freed when its output pass begins; its
        # reciprocal is there (``ready``) from its tail until then. A word of the ring is taken
        # with a softmax row's beat and freed when the output pass reads it.
        m.d.sync += [self.recs.eq(self.recs + row_in - self.b_start),
                     self.ring_used.eq(self.ring_used + (self.take & self.sm_row) - self.b_issue)]
        with m.If(self.tail_done):
            m.d.sync += Array(self.ready)[self.tail_ptr].eq(1)
        with m.If(self.b_start):
            m.d.sync += Array(self.ready)[self.b_ptr].eq(0)
        m.d.comb += vpu.busy.eq((state != _State.IDLE) | ~self.empty | pend_valid |
                                ~idle_rows)


def _ring(v, size: int):
    """``v mod size`` of a signal ``v < 2·size``."""
    return Mux(v >= size, v - size, v)


def _next(ptr, size: int):
    """The pointer after ``ptr`` in a ring of ``size``."""
    return Mux(ptr == size - 1, 0, ptr + 1)


def _beats(n, lanes: int):
    """``ceil(n / lanes)`` of a signal ``n``."""
    if lanes & (lanes - 1):
        return (n + (lanes - 1)) // lanes
    return (n + (lanes - 1)) >> (lanes.bit_length() - 1)


def _delay(m, value, cycles: int, name: str, regs: list):
    """``value`` delayed ``cycles`` cycles by free-running registers (appended to ``regs``)."""
    for k in range(cycles):
        r = Signal(name=f"{name}{k}")
        m.d.sync += r.eq(value)
        regs.append(r)
        value = r
    return value


def _gelu_tables(m, t: VPUTables, k: int, x_w, W: int, F: int):
    """GELU's two tables for lane ``k``, indexed by the clamped magnitude of ``x_w``: returns the
    read data ``(base, delta)`` and the fraction of the magnitude below the table's step."""
    Sg, Ra = t.gelu_seg_log2, t.gelu_range_log2
    mag = Mux(x_w < 0, -x_w, x_w)[:W]
    clamped = Mux(mag > (1 << (F + Ra)) - 1, (1 << (F + Ra)) - 1, mag)
    base = rom(m, f"gelu_base{k}", t.gelu_base, signed(t.widths["gelu.base"][0]))
    delta = rom(m, f"gelu_delta{k}", t.gelu_delta, signed(t.widths["gelu.delta"][0]))
    m.d.comb += [base.addr.eq(clamped >> (F - Sg)), delta.addr.eq(clamped >> (F - Sg))]
    frac = clamped[:F - Sg] if F > Sg else Const(0, 1)
    return base.data, delta.data, frac


def _lane_operands(e: _Elaboration, k: int, lane: VPULane, uop, row: dict):
    """Register lane ``k``'s ``x, y, add, rs, mode, lane_en, side, side_flag`` for the
    micro-operation ``uop`` of the beat in the input register (``a``, ``b``, ``c``, ``m``,
    ``sh``) or the row-buffer word read (``v``, ``m``); ``row`` holds the row's scalars."""
    cfg, t, m = e.cfg, e.t, e.m
    W, F, A = cfg.act_width, cfg.act_frac, cfg.acc_bits
    G, Sg = t.gelu_frac, t.gelu_seg_log2
    rq = e.vpu.requant
    lw = lane_widths(cfg, t, rq)
    beat, word = e.in_beat, e.buf_rd.data[k]
    a, b, c = beat.a[k], beat.b[k], beat.c[k]
    x_w = a[:W].as_signed()
    x = Signal(signed(lw["x"]), name=f"op{k}_x")
    y = Signal(signed(lw["y"]), name=f"op{k}_y")
    add = Signal(signed(lw["add"]), name=f"op{k}_add")
    rs = Signal(unsigned(lw["rs"]), name=f"op{k}_rs")
    mode = Signal(LaneMode, name=f"op{k}_mode")
    en = Signal(name=f"op{k}_en")
    side = Signal(signed(A), name=f"op{k}_side")
    flag = Signal(name=f"op{k}_flag")
    m.d.comb += [en.eq(e.in_len[k]), mode.eq(LaneMode.RAW)]
    gelu_base, gelu_delta, gelu_frac = _gelu_tables(m, t, k, x_w, W, F)
    if rq:   # acc_requant's Y = a + b, saturated to the accumulator width (the side output)
        ysum = a[:A].as_signed() + b[:A].as_signed()
        ys, ysat = saturate(m, ysum, -(1 << (A - 1)), (1 << (A - 1)) - 1, A, f"op{k}_Ysum")
    rd_on = e.rd_len[k]
    with m.Switch(uop):
        with m.Case(_MicroOp.MODULATE):
            m.d.comb += [x.eq(x_w), y.eq(c + (1 << F)), add.eq(b[:W].as_signed() << F),
                         rs.eq(F), mode.eq(LaneMode.SAT_W)]
        with m.Case(_MicroOp.GELU):
            m.d.comb += [x.eq(gelu_delta), y.eq(gelu_frac), rs.eq(G - Sg),
                         add.eq((gelu_base << (F - Sg)) + Mux(x_w >= 0, x_w << (G - Sg), 0)),
                         mode.eq(LaneMode.SAT_W)]
        with m.Case(_MicroOp.GATED_RESIDUAL):
            m.d.comb += [x.eq(b[:W].as_signed()), y.eq(c), add.eq(x_w << F), rs.eq(F),
                         mode.eq(LaneMode.SAT_W)]
        if rq:
            with m.Case(_MicroOp.ACC_REQUANT):
                m.d.comb += [x.eq(ys), y.eq(beat.m[k]), add.eq(c << beat.sh[k]),
                             rs.eq(beat.sh[k]), mode.eq(LaneMode.SAT_W), side.eq(ys),
                             flag.eq(ysat)]
        with m.Case(_MicroOp.DIFF_DELTA):
            m.d.comb += [x.eq(b[:cfg.xhat_width].as_signed()), y.eq(-1), add.eq(x_w)]
        with m.Case(_MicroOp.XHAT_UPDATE):
            m.d.comb += [x.eq(b[:cfg.recon_width].as_signed()), y.eq(1),
                         add.eq(a[:cfg.xhat_width].as_signed()), mode.eq(LaneMode.SAT_XHAT)]
        with m.Case(_MicroOp.KV_QUANT):
            m.d.comb += [x.eq(x_w), y.eq(1), rs.eq(row["kv_shift"]), mode.eq(LaneMode.SAT_8)]
        with m.Case(_MicroOp.LAYERNORM_LOAD):
            m.d.comb += [x.eq(x_w), y.eq(x_w)]
        with m.Case(_MicroOp.SOFTMAX_EXP):
            v = word.v[:W].as_signed()
            m.d.comb += [x.eq(Mux(word.m, row["smax"] - v, 0)), y.eq(t.log2e_q),
                         rs.eq(F + t.log2e_frac - t.exp_lut_bits),
                         mode.eq(LaneMode.EXP), en.eq(word.m & rd_on)]
        with m.Case(_MicroOp.SOFTMAX_EXP_IN):
            m.d.comb += [x.eq(Mux(beat.mask[k], row["in_smax"] - x_w, 0)), y.eq(t.log2e_q),
                         rs.eq(F + t.log2e_frac - t.exp_lut_bits),
                         mode.eq(LaneMode.EXP), en.eq(beat.mask[k] & e.in_len[k])]
        # LayerNorm's output: the element from the row buffer, or (a long row) from its second
        # copy's input beat.
        ln_out = [_MicroOp.LAYERNORM_OUT] + ([_MicroOp.LAYERNORM_OUT_IN] if e.long_rows else [])
        with m.Case(*ln_out):
            x_ln, on = word.v[:W].as_signed(), rd_on
            if e.long_rows:
                from_in = uop == _MicroOp.LAYERNORM_OUT_IN
                x_ln, on = Mux(from_in, x_w, x_ln), Mux(from_in, e.in_len[k], on)
            m.d.comb += [x.eq(x_ln), y.eq(row["ny1"]), add.eq(-row["s1y1"]),
                         rs.eq(row["lnshift"]), mode.eq(LaneMode.SAT_W),
                         en.eq(on & ~row["zero"])]
        with m.Case(_MicroOp.KV_SHIFT):
            m.d.comb += [x.eq(row["e"]), y.eq(1), en.eq(k == 0)]
    with m.If(e.adv):
        m.d.sync += [lane.x.eq(x), lane.y.eq(y), lane.add.eq(add), lane.rs.eq(rs),
                     lane.mode.eq(mode), lane.lane_en.eq(en)]
        if rq:
            m.d.sync += [lane.side.eq(side), lane.side_flag.eq(flag)]
