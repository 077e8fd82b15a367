"""Port-level vectors of one PE (:class:`rtl.pe.SlicePE` or :class:`rtl.pe.Int8PE`), shared by the
Amaranth-simulator test (``tests/test_pe_amaranth.py``) and the cocotb testbench
(``tb/test_pe.py``).

A :class:`PECase` is a list of input values per cycle (packed with the PE's own port layouts), the
golden result of every tile (:func:`golden.schedule.slice_pe_execute`,
:func:`golden.schedule.int8_pe_execute`) and the expected value of every output after every clock
edge. The expected outputs follow the PE's documented register transfers: ``a_out``/``w_out`` are
the inputs one edge later (``w_out`` is ``w_in`` itself, a wire, when ``cfg.weight_hop > 1``, and
``a_out`` is ``a_in`` when ``cfg.act_hop > 1``: the PE as the unit registry builds it, that of an
array row or column that does not register that operand); a tile's result is in the shadow
(``shadow_out``, ``ovf_out``) with ``captured`` high exactly :func:`perf.timing.pe_latency` edges
after its last group was at the inputs; otherwise ``drain_shift`` loads the shadow from
``shadow_in``/``ovf_in`` and else it holds. Stimuli never assert ``drain_shift`` at the edge a
capture lands on (the array never does). A harness samples the outputs of cycle ``k`` once the
inputs of cycle ``k + 1`` (after the last cycle: ``probe``) are applied, so an output that is not
registered shows up as a difference.

Sections (``SECTIONS[kind]``), each a few hundred cycles at most:

- slice PE: ``digits`` (every raw digit with both signed flags in every lane, first as one-product
  tiles; with ``cfg.digits == "booth"`` every 3-bit Booth digit {-2..2} with both (ignored) flags
  tiles, then with every exponent), ``exponents`` (every exponent 0..max_exp inside multi-group
  tiles; Horner: non-increasing, with repeats), ``stream`` (random tiles back to back, bubbles
  carrying garbage, random drain shifts), ``overflow`` (with ``overflow_detect``: tiles that
  saturate up, down, come back into range, overflow only in Horner's final shift, and tiles that
  fit; without it: tiles whose sum wraps the register, and wrapping partial sums that cancel,
  when that takes at most ``MAX_TILE`` groups);
- INT8 PE: ``products`` (the extremes of both operands), ``stream``, ``overflow`` (wrapping, as
  above);
- both: ``dense`` (the energy workload of ``dstar power``: ``tiles`` tiles of
  :data:`DENSE_TILE` beats back to back, random operands over their whole range every cycle,
  no bubbles, the shadow chain still; ``tiles · DENSE_TILE`` valid beats).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.schedule import Accumulator, exp_steps, int8_pe_execute, slice_pe_execute
from dstar_rtl.perf.timing import pe_latency
from dstar_rtl.rtl.pe import int8_col_layout, int8_row_layout, slice_col_layout, slice_row_layout

__all__ = ["SECTIONS", "DENSE_TILE", "PECase", "pe_case", "input_ports", "output_ports",
           "check_run"]

#: The input an output follows when the PE passes it on as a wire.
_WIRE_INPUT = {"w_out": "w_in", "a_out": "a_in"}
SECTIONS = {"slice": ("digits", "exponents", "stream", "overflow", "dense"),
            "int8": ("products", "stream", "overflow", "dense")}

#: Beats of every tile of the ``dense`` section.
DENSE_TILE = 64


def input_ports(cfg: Config, kind: str) -> tuple:
    ovf = kind == "slice" and cfg.overflow_detect
    return ("a_in", "w_in", "drain_shift", "shadow_in") + (("ovf_in",) if ovf else ())


def output_ports(cfg: Config, kind: str) -> tuple:
    ovf = kind == "slice" and cfg.overflow_detect
    return ("a_out", "w_out", "shadow_out", "captured") + (("ovf_out",) if ovf else ())


@dataclass
class PECase:
    kind: str                 # "slice" or "int8"
    section: str
    inputs: list              # per cycle: {input port: int} (a_in/w_in packed, shadow_in signed)
    expected: list            # per cycle: {output port: int} after that cycle's clock edge
    probe: dict               # inputs applied after the last cycle (a bubble, other bits)
    results: list             # golden (value, ovf) per tile, in order
    capture_cycles: list      # per tile: the cycle whose edge makes its result visible
    tags: list                # per tile: what the tile is meant to exercise
    coverage: dict = field(default_factory=dict)
    wires: tuple = ()         # outputs that are wires: "w_out" (weight_hop > 1), "a_out"

    @property
    def initial(self) -> dict:
        """Outputs out of reset (every register of the PE resets to 0; a wire ``w_out`` or
        ``a_out`` shows the first cycle's input)."""
        out = dict.fromkeys(self.expected[0], 0)
        for port in self.wires:
            out[port] = self.inputs[0][_WIRE_INPUT[port]]
        return out


# ------------------------------------------------------------------------------ stimulus
class _Builder:
    """Collects cycles: valid beats (with the tile they belong to), bubbles and drain pulses."""

    def __init__(self, cfg: Config, kind: str, rng):
        self.cfg, self.kind, self.rng = cfg, kind, rng
        self.cycles = []          # [operand dict or None (bubble)]
        self.tags = []
        L, ww = cfg.lanes, cfg.weight_width
        self.L = L
        self.wlo, self.whi = -(1 << (ww - 1)), (1 << (ww - 1)) - 1
        self.booth = cfg.digits == "booth"
        # Raw patterns of the digit code, and the one of its largest positive digit.
        self.raws = (0, 1, 2, 6, 7) if self.booth else (0, 1, 2, 3)
        self.dmax = 2 if self.booth else 3

    def random_digits(self, n=None):
        return self.rng.choice(self.raws, size=self.L if n is None else n)

    # one valid beat; slice: d, s, w (lanes,), exp; int8: a, w
    def beat(self, first, last, **ops):
        self.cycles.append(dict(ops, first=int(first), last=int(last)))

    def tile(self, beats, tag, gap=0.0):
        """``beats``: list of operand dicts; marks first/last and records the tile's tag.
        ``gap``: probability of a bubble before each beat (repeated), inside the tile too."""
        for k, ops in enumerate(beats):
            while gap and self.rng.random() < gap:
                self.bubbles(1)
            self.beat(k == 0, k == len(beats) - 1, **ops)
        self.tags.append(tag)

    def bubbles(self, n):
        self.cycles += [None] * n

    def weights(self, n=None, zero=0.15):
        """Random weights over the whole signed port range, extremes and zeros (padded lanes)."""
        n = self.L if n is None else n
        w = self.rng.integers(self.wlo, self.whi + 1, size=n)
        pick = self.rng.random(n)
        w = np.where(pick < 0.15, self.whi, np.where(pick < 0.3, self.wlo, w))
        return np.where(self.rng.random(n) < zero, 0, w)

    def slice_ops(self, exp, d=None, s=None, w=None):
        r = self.rng
        return dict(d=self.random_digits() if d is None else np.asarray(d),
                    s=r.integers(0, 2, self.L) if s is None else np.asarray(s),
                    w=self.weights() if w is None else np.asarray(w), exp=int(exp))

    def exps(self, n):
        """``n`` group exponents for one tile: any order, or non-increasing for Horner."""
        e = self.rng.integers(0, self.cfg.max_exp + 1, size=n)
        return sorted(e, reverse=True) if self.cfg.alignment == "horner" else list(e)


def _digits(b: _Builder):
    cfg, L, r = b.cfg, b.L, b.rng
    combos = [(raw, s) for s in (0, 1) for raw in b.raws]
    # One product per tile: lane `lane` alone has a weight, the other lanes carry random digits
    # and weight 0 (padded lanes). First at exponent 0, then with every exponent in turn.
    for sweep in range(2):
        n = 0
        for lane in range(L):
            for raw, s in combos:
                d, sg = b.random_digits(), r.integers(0, 2, L)
                d[lane], sg[lane] = raw, s
                w = np.zeros(L, np.int64)
                w[lane] = [b.whi, b.wlo, -1, 1][n % 4] if n < 4 * L else r.choice(
                    [v for v in range(b.wlo, b.whi + 1) if v])
                exp = 0 if sweep == 0 else n % (cfg.max_exp + 1)
                b.tile([b.slice_ops(exp, d, sg, w)], "digit")
                n += 1
    # Every lane at once: each combo in each lane (rotated), every exponent, full weights.
    for n in range(max(len(combos), cfg.max_exp + 1)):
        d = np.array([combos[(n + lane) % len(combos)][0] for lane in range(L)])
        sg = np.array([combos[(n + lane) % len(combos)][1] for lane in range(L)])
        b.tile([b.slice_ops(n % (cfg.max_exp + 1), d, sg, b.weights(zero=0))], "lanes")


def _exponents(b: _Builder):
    cfg, r = b.cfg, b.rng
    every = list(range(cfg.max_exp + 1))
    for k in range(3):
        if cfg.alignment == "horner":
            exps = sorted(every + list(r.choice(every, size=3)), reverse=True)
        else:
            exps = list(r.permutation(every)) + list(r.choice(every, size=3))
        b.tile([b.slice_ops(e) for e in exps], "exponents", gap=0.15 * k)
        b.bubbles(int(r.integers(0, 3)))


def _stream(b: _Builder, tiles: int):
    r = b.rng
    for _ in range(tiles):
        n = int(r.choice([1, 1, 2, 3, int(r.integers(4, 13))]))
        if b.kind == "slice":
            beats = [b.slice_ops(e) for e in b.exps(n)]
        else:
            beats = [dict(a=int(a), w=int(w)) for a, w in
                     zip(r.integers(b.wlo, b.whi + 1, size=n), b.weights(n))]
        b.tile(beats, "random", gap=0.3)      # bubbles inside and between tiles
        if r.random() < 0.4:
            b.bubbles(int(r.integers(1, 4)))


def _dense(b: _Builder, tiles: int):
    r = b.rng
    for _ in range(tiles):
        if b.kind == "slice":
            beats = [b.slice_ops(e, d=r.choice(b.raws, size=b.L),
                                 w=r.integers(b.wlo, b.whi + 1, size=b.L))
                     for e in b.exps(DENSE_TILE)]
        else:
            beats = [dict(a=int(a), w=int(w)) for a, w in
                     zip(r.integers(b.wlo, b.whi + 1, size=DENSE_TILE),
                         r.integers(b.wlo, b.whi + 1, size=DENSE_TILE))]
        b.tile(beats, "random")


#: Longest tile the overflow sections build; a register that cannot wrap within it is only
#: checked on sums that large (tag ``big``).
MAX_TILE = 40


def _slice_overflow(b: _Builder):
    cfg, L = b.cfg, b.L
    D = b.dmax                                               # 3 (slice) or 2 (Booth)
    P = D * b.whi * L                                        # the largest positive beat
    big = dict(d=[D] * L, s=[0] * L, w=[b.whi] * L)          # +P
    neg = dict(d=[D] * L, s=[0] * L, w=[b.wlo] * L)          # D·wlo per lane
    small = dict(d=[1] + [0] * (L - 1), s=[0] * L, w=[1] + [0] * (L - 1))
    mid = dict(d=[1] * L, s=[0] * L, w=[b.whi] * L)
    dent = dict(d=[D] + [0] * (L - 1), s=[0] * L, w=[b.wlo] + [0] * (L - 1))
    hi = (1 << (cfg.acc_bits - 1)) - 1
    if cfg.overflow_detect:
        # Exponents m, m-1, .., 0: the sum P·(2**(m+1) - 1) passes the bound in the accumulator
        # itself, for both alignments (Horner doubles the sum on each step down).
        m = 0
        while P * ((2 << m) - 1) <= hi and m < cfg.max_exp:
            m += 1
        down = list(range(m, -1, -1)) + [0]
        b.tile([b.slice_ops(0, **small)], "fit")
        b.tile([b.slice_ops(e, **big) for e in down], "over+")
        b.tile([b.slice_ops(0, **small)], "fit")              # the flag restarts with a tile
        b.tile([b.slice_ops(e, **neg) for e in down], "over-")
        b.tile([b.slice_ops(e, **big) for e in down] + [b.slice_ops(0, **dent)], "recover")
        b.bubbles(2)
        b.tile([b.slice_ops(0, **mid)], "fit")
        # Horner: in range until the final shift by the tile's exponent.
        b.tile([b.slice_ops(cfg.max_exp, **small), b.slice_ops(cfg.max_exp, **big)],
               "final-shift" if cfg.alignment == "horner" else "over+")
        b.tile([b.slice_ops(0, **small), b.slice_ops(0, **small)], "fit")
    else:
        e = cfg.max_exp
        need = -(-(hi + 1) // (P << e)) + 1
        n = min(need, MAX_TILE // 2)
        wrap = need == n
        b.tile([b.slice_ops(e, **big)] * n, "wrap" if wrap else "big")
        # Then every exponent down to 0: the accumulator itself wraps (Horner: as it shifts).
        b.tile([b.slice_ops(e, **big)] * n + [b.slice_ops(x, **big) for x in range(e - 1, -1, -1)],
               "wrap" if wrap else "big")
        b.tile([b.slice_ops(e, **big)] * n + [b.slice_ops(e, **neg)] * n,
               "wrap-cancel" if wrap else "big")
        b.tile([b.slice_ops(e, **neg)] * (n + 1), "wrap" if wrap else "big")


def _products(b: _Builder):
    ext = sorted({b.wlo, b.wlo + 1, -1, 0, 1, b.whi})
    for a in ext:
        for w in ext:
            b.tile([dict(a=a, w=w)], "product")
    r = b.rng
    for _ in range(8):
        b.tile([dict(a=int(r.integers(b.wlo, b.whi + 1)), w=int(r.integers(b.wlo, b.whi + 1)))],
               "product")


def _int8_overflow(b: _Builder):
    hi = (1 << (b.cfg.baseline_acc_width - 1)) - 1
    need = -(-(hi + 1) // (b.wlo * b.wlo)) + 1
    n = min(need, MAX_TILE)
    wrap = need == n
    b.tile([dict(a=b.wlo, w=b.wlo)] * n, "wrap" if wrap else "big")
    b.tile([dict(a=b.wlo, w=b.wlo)] * n + [dict(a=b.wlo, w=-b.wlo - 1)] * n,
           "wrap-cancel" if wrap else "big")
    b.tile([dict(a=b.whi, w=b.whi)] * 3, "random")


# ------------------------------------------------------------------------------ the case
def pe_case(cfg: Config, kind: str, section: str, seed: int = 0, tiles: int = 20) -> PECase:
    """The vectors of one section for a PE of ``kind`` ("slice" or "int8") under ``cfg``.
    ``tiles``: number of random tiles of the ``stream`` section."""

    if section not in SECTIONS[kind]:
        raise ValueError(f"section must be one of {SECTIONS[kind]}, not {section!r}")
    rng = np.random.default_rng([seed, SECTIONS[kind].index(section)])
    b = _Builder(cfg, kind, rng)
    b.bubbles(1)
    {"digits": _digits, "exponents": _exponents, "products": _products,
     "stream": lambda b: _stream(b, tiles), "dense": lambda b: _dense(b, tiles),
     "overflow": _slice_overflow if kind == "slice" else _int8_overflow}[section](b)

    beats = [c for c in b.cycles if c is not None]
    first = [c["first"] for c in beats]
    last = [c["last"] for c in beats]
    if kind == "slice":
        digits = np.array([c["d"] for c in beats])
        signed = np.array([c["s"] for c in beats])
        w = np.array([c["w"] for c in beats])
        exp = [c["exp"] for c in beats]
        results = slice_pe_execute(digits, signed, w, exp, first, last, cfg)
        wide = slice_pe_execute(digits, signed, w, exp, first, last,
                                cfg.replace(acc_width=62, overflow_detect=False))
        for c, dexp in zip(beats, exp_steps(exp, first)):
            c["dexp"] = dexp
        coverage = dict(
            combos={(lane, int(raw), int(s)) for lane in range(cfg.lanes)
                    for raw, s, ww in zip(digits[:, lane], signed[:, lane], w[:, lane]) if ww},
            exps=set(exp))
    else:
        a = [c["a"] for c in beats]
        w = [c["w"] for c in beats]
        results = [(v, 0) for v in int8_pe_execute(a, w, first, last, cfg)]
        acc, wide = Accumulator(62), []
        for p, f, l in zip(np.multiply(a, w), first, last):
            out = acc.step(p, 0, bool(f), bool(l))
            if out is not None:
                wide.append((int(out[0]), 0))
        coverage = dict(products={(int(x), int(y)) for x, y in zip(a, w)})
    _check_intent(b.tags, results, wide, cfg, kind)
    inside, open_, adjacent, single = 0, False, 0, 0
    for prev, c in zip([None] + b.cycles, b.cycles):
        if c is None:
            inside += open_
            continue
        open_ = not c["last"]
        adjacent += bool(c["first"] and prev is not None and prev["last"])
        single += bool(c["first"] and c["last"])
    coverage.update(bubbles_in_tiles=inside, back_to_back=adjacent, single_beat_tiles=single)

    S = pe_latency(cfg) - 1
    # Tail: enough bubbles for the last result to land, then to be shifted out of the shadow.
    b.bubbles(S + 4)
    lands, k = {}, 0
    for n, c in enumerate(b.cycles):
        if c is not None and c["last"]:
            lands[n + S] = k
            k += 1

    if kind == "slice":
        row, col = slice_row_layout(cfg), slice_col_layout(cfg)
    else:
        row, col = int8_row_layout(cfg), int8_col_layout(cfg)
    ovf_port = kind == "slice" and cfg.overflow_detect
    width = cfg.acc_bits if kind == "slice" else cfg.baseline_acc_width
    slo, shi = -(1 << (width - 1)), (1 << (width - 1)) - 1

    def operands(c):
        if c is None:   # a bubble: valid = 0 and garbage everywhere else
            ctrl = {n: int(rng.integers(0, 1 << _bits(col, n))) for n in _ctrl_fields(col)}
            ctrl["valid"] = 0
            if kind == "slice":
                a = dict(d=rng.integers(0, 4, cfg.lanes), s=rng.integers(0, 2, cfg.lanes))
                return a, dict(w=b.weights(zero=0), ctrl=ctrl)
            return dict(a=int(rng.integers(b.wlo, b.whi + 1))), dict(
                w=int(rng.integers(b.wlo, b.whi + 1)), ctrl=ctrl)
        ctrl = dict(valid=1, first=c["first"], last=c["last"])
        if kind == "slice":
            ctrl["exp"] = c["exp"]
            if cfg.alignment == "horner":
                ctrl["dexp"] = c["dexp"]
            return dict(d=c["d"], s=c["s"]), dict(w=c["w"], ctrl=ctrl)
        return dict(a=c["a"]), dict(w=c["w"], ctrl=ctrl)

    inputs, expected, captures = [], [], []
    shadow, sovf = 0, 0
    still = section == "dense"      # no drain shifts, shadow inputs held
    for n, c in enumerate(b.cycles):
        a, wv = operands(c)
        shift = int(n not in lands and not still and rng.random() < 0.3)
        inp = dict(a_in=_pack(row, a), w_in=_pack(col, wv), drain_shift=shift,
                   shadow_in=int(rng.choice([slo, shi, 0, int(rng.integers(slo, shi + 1))]))
                   if shift or (not still and rng.random() < 0.5) else 0)
        if ovf_port:
            inp["ovf_in"] = 0 if still else int(rng.integers(0, 2))
        inputs.append(inp)
        if n in lands:
            shadow, sovf = results[lands[n]]
            captures.append(n)
        elif shift:
            shadow, sovf = inp["shadow_in"], inp.get("ovf_in", 0)
        out = dict(a_out=inp["a_in"], w_out=inp["w_in"], shadow_out=shadow,
                   captured=int(n in lands))
        if ovf_port:
            out["ovf_out"] = sovf
        expected.append(out)
    assert len(captures) == len(results) == len(b.tags)
    a, wv = operands(None)
    probe = dict(inputs[-1], a_in=_pack(row, a), w_in=_pack(col, wv), drain_shift=1,
                 shadow_in=~inputs[-1]["shadow_in"])
    if ovf_port:
        probe["ovf_in"] = 1 - inputs[-1]["ovf_in"]
    wires = tuple(p for p, hop in (("w_out", cfg.weight_hop), ("a_out", cfg.act_hop)) if hop > 1)
    for port in wires:       # a wire: each sample sees the next cycle's input
        for out, nxt in zip(expected, [*inputs[1:], probe]):
            out[port] = nxt[_WIRE_INPUT[port]]
    return PECase(kind, section, inputs, expected, probe, results, captures, b.tags, coverage,
                  wires=wires)


def _ctrl_fields(col):
    return list(col.members["ctrl"].members)


def _bits(col, name):
    from amaranth.hdl import Shape
    return Shape.cast(col.members["ctrl"].members[name]).width


def _pack(layout, values) -> int:
    """The integer a port of shape ``layout`` holds for ``values`` (the RTL's own layout)."""
    layout_fields = _field_names(layout)
    def plain(v):
        if isinstance(v, dict):   # fields the layout lacks (a Booth digit's flag) are dropped
            return {k: plain(x) for k, x in v.items() if k in layout_fields}
        if isinstance(v, np.ndarray):
            return [int(x) for x in v]
        return int(v)
    return layout.const(plain(values)).as_value().value


def _field_names(layout) -> set:
    """Every member name in a (nested) struct layout."""
    names = set()
    for name, shape in getattr(layout, "members", {}).items():
        names.add(name)
        if hasattr(shape, "members"):
            names |= _field_names(shape)
    return names


def _check_intent(tags, results, wide, cfg, kind):
    """The stimulus exercises what its tags say, according to the golden results: ``wide`` is
    the golden result on an accumulator too wide to wrap or saturate."""
    width = cfg.acc_bits if kind == "slice" else cfg.baseline_acc_width
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    for n, (tag, (v, f), (x, _)) in enumerate(zip(tags, results, wide)):
        ok = {"over+": lambda: f and v == hi, "over-": lambda: f and v == lo,
              "recover": lambda: f and lo < v < hi, "final-shift": lambda: f and v == hi,
              "fit": lambda: not f and v == x, "wrap": lambda: v != x,
              "wrap-cancel": lambda: v == x}.get(tag, lambda: True)()
        if not ok:
            raise AssertionError(f"stimulus tile {n} ({tag}) does not do what it claims: golden "
                                 f"{v} (ovf {f}), unbounded {x}")


# ------------------------------------------------------------------------------ the check
def check_run(case: PECase, initial: dict, got: list):
    """Compare a run with the case: the outputs out of reset, every output after every edge,
    one result per tile at its cycle (no missing or extra ``captured``), and the overflow
    flags the tags call for. Raises AssertionError naming the first difference."""
    assert initial == case.initial, f"out of reset: got {initial}, expected {case.initial}"
    assert len(got) == len(case.expected), f"{len(got)} cycles run, {len(case.expected)} expected"
    seen = [(n, g["shadow_out"], g.get("ovf_out", 0)) for n, g in enumerate(got) if g["captured"]]
    want = [(n, v, f) for n, (v, f) in zip(case.capture_cycles, case.results)]
    if [s[0] for s in seen] != [w[0] for w in want]:
        raise AssertionError(f"{case.section}: captured pulsed {len(seen)} times at cycles "
                             f"{[s[0] for s in seen]}, expected once per tile ({len(want)}) at "
                             f"{[w[0] for w in want]}")
    for k, (s, w) in enumerate(zip(seen, want)):
        if s != w:
            raise AssertionError(f"{case.section}: tile {k} ({case.tags[k]}): result "
                                 f"{s[1]} (ovf {s[2]}), golden {w[1]} (ovf {w[2]})")
    for n, (g, e) in enumerate(zip(got, case.expected)):
        if g != e:
            bad = {p: (g[p], e[p]) for p in e if g.get(p) != e[p]}
            raise AssertionError(f"{case.section}: cycle {n}: (got, expected) {bad}; inputs "
                                 f"{case.inputs[n]}")
    for k, (tag, (n, _, f)) in enumerate(zip(case.tags, seen)):
        if tag in ("over+", "over-", "recover", "final-shift"):
            assert f == 1, f"tile {k} ({tag}) overflows: its sticky flag must be set"
        elif tag == "fit":
            assert f == 0, f"tile {k} fits: its flag must be clear"
