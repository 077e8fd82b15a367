"""Processing elements of the output-stationary arrays (numerics §2.4).

Both PEs share one skeleton (:class:`OutputStationaryPE`): the row operand enters at ``a_in`` and
leaves at ``a_out`` (to the right neighbour), the column operand with its control enters at
``w_in`` and leaves at ``w_out`` (to the PE below), each registered or, where the array
broadcasts it (``register_a``, ``register_w``), as a wire. Each cycle the PE forms a
partial product of ``a_in`` and ``w_in``, runs it through ``pe_stages`` pipeline registers,
aligns it and accumulates. On a group marked ``last`` the final value is copied into a shadow
register, so the next tile can start at once; the shadows of a column form a shift chain
(``shadow_in`` from the PE below, ``shadow_out`` to the PE above) that the array drains.

- :class:`SlicePE`: DSTAR's PE. ``lanes`` products of a digit by a signed weight, an adder tree,
  and the alignment by the group's absolute exponent: ``acc += (Σ d·w) << exp``
  ("product-shift"), or ``acc = (acc << dexp) + Σ d·w`` with a final ``<< exp`` ("horner"). A
  digit is a raw 2-bit slice (unsigned {0..3}, or signed {-2..1} when the lane's ``signed`` flag
  is set; ``cfg.digits == "slice"``) or a 3-bit two's-complement radix-4 Booth digit {-2..2}
  (``"booth"``; the row operand then has no ``signed`` flags). ``cfg.digit_product`` forms each
  product either as a select of the weight's multiples with the negations folded into the adder
  tree as carry-ins (``"select"``: no multiplier, so no DSP block) or as ``digit * w``
  (``"multiply"``).
- :class:`Int8PE`: the baseline's PE, ``acc += a · w`` with 8-bit operands.

Latency: operands pass one register per hop (none where passed on as a wire); an accumulation
lands ``pe_stages + 1`` cycles after its operands are at the PE's inputs. Throughput: one
operand pair per cycle.
"""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config

from .params import check_bool, check_config, check_int, check_shape

__all__ = ["ctrl_layout", "slice_row_layout", "slice_col_layout", "int8_row_layout",
           "int8_col_layout", "OutputStationaryPE", "SlicePE", "Int8PE"]


def ctrl_layout(cfg: Config, with_exp: bool = True) -> data.StructLayout:
    """Control that travels down a column with the weights: a bubble flag, tile markers, and for
    the slice PE the group's exponent (and for Horner alignment the exponent step ``dexp``)."""
    fields = {"valid": 1, "first": 1, "last": 1}
    if with_exp:
        fields["exp"] = cfg.exp_width
        if cfg.alignment == "horner":
            fields["dexp"] = cfg.exp_width
    return data.StructLayout(fields)


def slice_row_layout(cfg: Config) -> data.StructLayout:
    """Row operand of a slice PE: the token's ``lanes`` raw digits (``cfg.digit_width`` bits) and,
    for 2-bit slices, their signed flags (a Booth digit carries its own sign: no flag)."""
    fields = {"d": data.ArrayLayout(cfg.digit_width, cfg.lanes)}
    if cfg.digits == "slice":
        fields["s"] = data.ArrayLayout(1, cfg.lanes)
    return data.StructLayout(fields)


def slice_col_layout(cfg: Config) -> data.StructLayout:
    """Column operand of a slice PE: ``lanes`` weights (0 on padded lanes) and the control."""
    return data.StructLayout({"w": data.ArrayLayout(signed(cfg.weight_width), cfg.lanes),
                              "ctrl": ctrl_layout(cfg)})


def int8_row_layout(cfg: Config) -> data.StructLayout:
    return data.StructLayout({"a": signed(cfg.weight_width)})


def int8_col_layout(cfg: Config) -> data.StructLayout:
    return data.StructLayout({"w": signed(cfg.weight_width), "ctrl": ctrl_layout(cfg, False)})


class OutputStationaryPE(wiring.Component):
    """Skeleton of an output-stationary PE. A subclass defines ``partial(m)``, the unaligned
    partial product of ``a_in`` and ``w_in`` (combinational), and may override the alignment hooks.

    Parameters
    ----------
    cfg : Config. The other parameters are keyword-only (a bad one raises ValueError).
    row_shape, col_shape : layouts of the operands (the column one has a ``ctrl`` member).
    acc_width : int >= 2, the accumulator width.
    overflow_detect : bool, saturate and keep a sticky flag instead of wrapping.
    register_w : register the column operand into ``w_out`` (systolic forwarding, one cycle per
        PE); ``False`` passes it on as a wire (the array broadcasts it down the column,
        ``cfg.weight_hop``).
    register_a : the same for the row operand and ``a_out`` (``cfg.act_hop``).

    Members
    -------
    a_in, a_out, w_in, w_out : operands in, and registered to the neighbours.
    shadow_in, shadow_out : the drain chain (``shadow_out`` is this PE's shadow register).
    drain_shift : In(1): load the shadow from ``shadow_in``.
    captured : Out(1): pulses the cycle after this PE copied a final value into its shadow.
    ovf_in, ovf_out : the sticky overflow flag's drain chain (only with ``overflow_detect``).
    """

    def __init__(self, cfg: Config, *, row_shape, col_shape, acc_width: int,
                 overflow_detect: bool, register_w: bool = True, register_a: bool = True):
        check_config(cfg)
        check_shape("row_shape", row_shape)
        check_shape("col_shape", col_shape)
        check_int("acc_width", acc_width, lo=2)
        self._register_w = check_bool("register_w", register_w)
        self._register_a = check_bool("register_a", register_a)
        self._cfg = cfg
        self._acc_width = acc_width
        self._ovf = check_bool("overflow_detect", overflow_detect)
        members = {
            "a_in": In(row_shape), "a_out": Out(row_shape),
            "w_in": In(col_shape), "w_out": Out(col_shape),
            "shadow_in": In(signed(acc_width)), "shadow_out": Out(signed(acc_width)),
            "drain_shift": In(1),
            "captured": Out(1),
        }
        if overflow_detect:
            members.update(ovf_in=In(1), ovf_out=Out(1))
        super().__init__(members)

    @property
    def cfg(self):
        return self._cfg

    @property
    def acc_width(self):
        return self._acc_width

    @property
    def latency(self):
        """Cycles from operands at the inputs to the accumulator register holding their sum."""
        return self._cfg.pe_stages + 1

    # Alignment hooks (product-shift needs none of them) ------------------------------------
    #: Control fields still needed after the term is aligned (the rest stop at stage 1).
    late_ctrl_fields = ("valid", "first", "last")

    def align_term(self, value, ctrl):
        """The term added to the (aligned) accumulator."""
        return value

    def align_acc(self, acc, ctrl):
        """The accumulator before the addition (Horner shifts it)."""
        return acc

    def finish(self, value, ctrl):
        """The value copied into the shadow at the tile's last group."""
        return value

    # ---------------------------------------------------------------------------------------
    def _fit(self, m, wide, name):
        """Wrap (modular) or saturate ``wide`` to the accumulator width; returns (value, ovf)."""
        w = self._acc_width
        if not self._ovf:
            return wide[:w].as_signed(), Const(0)
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        val = Signal(signed(w), name=f"{name}_sat")
        over = Signal(name=f"{name}_ovf")
        m.d.comb += over.eq((wide < lo) | (wide > hi))
        with m.If(wide < lo):
            m.d.comb += val.eq(lo)
        with m.Elif(wide > hi):
            m.d.comb += val.eq(hi)
        with m.Else():
            m.d.comb += val.eq(wide)
        return val, over

    def elaborate(self, platform):
        m = Module()
        if self._register_a:
            m.d.sync += self.a_out.eq(self.a_in)
        else:
            m.d.comb += self.a_out.eq(self.a_in)
        if self._register_w:
            m.d.sync += self.w_out.eq(self.w_in)
        else:
            m.d.comb += self.w_out.eq(self.w_in)

        value = self.partial(m)
        ctrl = self.w_in.ctrl
        stages = self._cfg.pe_stages
        if stages >= 1:
            v1 = Signal.like(value, name="p1_value")
            c1 = Signal.like(ctrl, name="p1_ctrl")
            m.d.sync += [v1.eq(value), c1.eq(ctrl)]
            value, ctrl = v1, c1
        term = self.align_term(value, ctrl)
        if stages >= 2:
            t2 = Signal.like(term, name="p2_term")
            members = ctrl.shape().members
            late = [n for n in members if n in self.late_ctrl_fields]
            c2 = Signal(data.StructLayout({n: members[n] for n in late}), name="p2_ctrl")
            m.d.sync += [t2.eq(term), *(getattr(c2, n).eq(getattr(ctrl, n)) for n in late)]
            term, ctrl = t2, c2

        acc = Signal(signed(self._acc_width))
        base = Mux(ctrl.first, 0, self.align_acc(acc, ctrl))
        new, over = self._fit(m, base + term, "acc")
        final, fover = self._fit(m, self.finish(new, ctrl), "final")
        shadow = self.shadow_out

        if self._ovf:
            sticky = Signal()
            sticky_new = (sticky & ~ctrl.first) | over
            shadow_ovf = self.ovf_out

        m.d.sync += self.captured.eq(0)
        with m.If(self.drain_shift):
            m.d.sync += shadow.eq(self.shadow_in)
            if self._ovf:
                m.d.sync += shadow_ovf.eq(self.ovf_in)
        with m.If(ctrl.valid):
            m.d.sync += acc.eq(new)
            if self._ovf:
                m.d.sync += sticky.eq(sticky_new)
            with m.If(ctrl.last):
                m.d.sync += [shadow.eq(final), self.captured.eq(1)]
                if self._ovf:
                    m.d.sync += shadow_ovf.eq(sticky_new | fover)
        return m


class SlicePE(OutputStationaryPE):
    """DSTAR's PE: SIMD-``lanes`` 2-bit-digit × weight dot product, aligned by the exponent.

    Parameters
    ----------
    cfg : Config. Uses ``lanes``, ``weight_width``, ``acc_bits``, ``overflow_detect``,
        ``alignment``, ``pe_stages``, ``e_max``.

    Latency ``pe_stages + 1`` cycles from operands to accumulator; one group per cycle.
    """

    def __init__(self, cfg: Config, *, register_w: bool = True, register_a: bool = True):
        super().__init__(check_config(cfg), row_shape=slice_row_layout(cfg),
            col_shape=slice_col_layout(cfg), acc_width=cfg.acc_bits, register_w=register_w,
            overflow_detect=cfg.overflow_detect, register_a=register_a)
        if cfg.alignment == "horner":
            self.late_ctrl_fields = ("valid", "first", "last", "exp", "dexp")

    def partial(self, m):
        if self._cfg.digit_product == "select":
            return self._partial_select(m)
        terms = []
        for lane in range(self._cfg.lanes):
            d = self.a_in.d[lane]
            if self._cfg.digits == "booth":
                digit = d.as_signed()                            # {-2..2}
            else:
                digit = Mux(self.a_in.s[lane], d.as_signed(), d)  # {-2..1} or {0..3}
            prod = Signal(signed(self._cfg.weight_width + 3), name=f"prod{lane}")
            m.d.comb += prod.eq(digit * self.w_in.w[lane])
            terms.append(prod)
        return self._tree(m, terms)

    def _partial_select(self, m):
        """Σ d·w without a multiplier. Each lane contributes addends that are a weight multiple
        picked by the digit's bits, or its one's complement; every complemented addend brings a
        1-bit carry-in, and all carry-ins enter the adder tree as one small addend.

        - slice: ``d·w = d[0]·w + d[1]·(±2w)`` with ``-2w`` only for a signed lane's top bit, i.e.
          ``(d[0] ? w : 0) + (d[1] ? ((w << 1) ^ -neg) : 0) + neg`` with ``neg = d[1] & s``;
        - booth (3-bit two's complement {-2..2}): ``one = d[0]``, ``two = d[1] & ~d[0]``,
          ``neg = d[2]``: ``((one ? w : two ? w << 1 : 0) ^ -neg) + neg``.
        """
        cfg = self._cfg
        W = cfg.weight_width
        pw = W + 2                       # |d·w| <= 3·2**(W-1) (slice) or 2**W (booth)
        terms, carries = [], []
        for lane in range(cfg.lanes):
            d, w = self.a_in.d[lane], self.w_in.w[lane]
            w2 = Signal(signed(pw), name=f"w2_{lane}")
            m.d.comb += w2.eq(w << 1)
            if cfg.digits == "booth":
                neg = Signal(name=f"neg{lane}")
                mag = Signal(signed(pw), name=f"mag{lane}")
                m.d.comb += [neg.eq(d[2]),
                             mag.eq(Mux(d[0], w, Mux(d[1], w2, 0)))]
                t = Signal(signed(pw), name=f"sel{lane}")
                m.d.comb += t.eq(mag ^ neg.replicate(pw).as_signed())
                terms.append(t)
            else:
                neg = Signal(name=f"neg{lane}")
                lo = Signal(signed(pw), name=f"sel{lane}_0")
                hi = Signal(signed(pw), name=f"sel{lane}_1")
                m.d.comb += [neg.eq(d[1] & self.a_in.s[lane]),
                             lo.eq(Mux(d[0], w, 0)),
                             hi.eq(Mux(d[1], w2 ^ neg.replicate(pw).as_signed(), 0))]
                terms += [lo, hi]
            carries.append(neg)
        cin = Signal(range(cfg.lanes + 1), name="cin")
        m.d.comb += cin.eq(sum(carries))
        return self._tree(m, terms + [cin])

    def _tree(self, m, terms):
        """Balanced adder tree of ``terms`` into the ``dot`` signal (``|Σ d·w| <= lanes · 2**(W+1)``
        needs ``W + 3 + log2(lanes)`` bits, whichever code and product)."""
        while len(terms) > 1:
            nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
            if len(terms) % 2:
                nxt.append(terms[-1])
            terms = nxt
        value = Signal(signed(self._cfg.weight_width + 3 + (self._cfg.lanes - 1).bit_length()),
                       name="dot")
        m.d.comb += value.eq(terms[0])
        return value

    def _shift(self, value, amount):
        width = len(value) + self._cfg.max_exp
        return (value << amount)[:width].as_signed()

    def align_term(self, value, ctrl):
        if self._cfg.alignment == "horner":
            return value
        return self._shift(value, ctrl.exp)

    def align_acc(self, acc, ctrl):
        if self._cfg.alignment == "horner":
            return self._shift(acc, ctrl.dexp)
        return acc

    def finish(self, value, ctrl):
        if self._cfg.alignment == "horner":
            return self._shift(value, ctrl.exp)
        return value


class Int8PE(OutputStationaryPE):
    """The baseline's PE: ``acc += a · w`` with signed ``weight_width``-bit operands.

    Latency ``pe_stages + 1`` cycles from operands to accumulator; one pair per cycle.
    """

    def __init__(self, cfg: Config, *, register_w: bool = True, register_a: bool = True):
        super().__init__(check_config(cfg), row_shape=int8_row_layout(cfg),
            col_shape=int8_col_layout(cfg), acc_width=cfg.baseline_acc_width,
            overflow_detect=False, register_w=register_w, register_a=register_a)

    def partial(self, m):
        value = Signal(signed(2 * self._cfg.weight_width), name="prod")
        m.d.comb += value.eq(self.a_in.a * self.w_in.w)
        return value
