"""The matrix engine's requantizer (rtl/requant.py) in Amaranth's simulator: every row bit-exact
against :func:`golden.vpu.acc_requant` (``Y``, ``y`` and both per-lane saturation flags) on
random rows and on the extremes of every operand, in order, ``Y`` ``y_latency`` and ``y``
``LATENCY`` cycles after it enters, with gaps between rows; the side and ytag payloads travel
with their row; ``bad`` marks exactly the rows with a shift outside ``[0, sh_max]``."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from dstar_rtl.golden.config import bitlen, preset
from dstar_rtl.golden.vpu import acc_requant
from dstar_rtl.rtl.requant import Requant

SH_W = 8


def _logu(rng, bits, n, signed=True):
    """``n`` values of log-uniform magnitude below ``2**bits`` (so that every size of product
    and every shift meets values that neither vanish nor saturate)."""
    mag = np.array([int(rng.integers(0, 1 << int(b), endpoint=True))
                    for b in rng.integers(0, bits, n, endpoint=True)])
    mag = np.minimum(mag, (1 << bits) - 1)
    return mag * rng.choice([-1, 1], n) if signed else mag


def _rows(cfg, T, rng, n):
    A, W, M, Z = cfg.acc_bits, cfg.act_width, cfg.mult_width, cfg.ystate_width
    lo, hi = -(1 << (A - 1)), (1 << (A - 1)) - 1
    rows = []
    for i in range(n):
        if i % 4 == 0:            # the extremes of every operand
            rows.append(dict(Y=rng.choice([-(1 << (Z - 1)), (1 << (Z - 1)) - 1, 0, -1, 1], T),
                             acc=rng.choice([lo, hi, 0, -1], T),
                             m=rng.choice([0, 1, (1 << M) - 1], T),
                             sh=rng.choice([0, 1, cfg.sh_max], T),
                             bias=rng.choice([-(1 << (W - 1)), (1 << (W - 1)) - 1, 0], T)))
        else:
            rows.append(dict(Y=_logu(rng, Z - 1, T), acc=_logu(rng, A - 1, T),
                             m=_logu(rng, M, T, signed=False),
                             sh=rng.integers(0, cfg.sh_max, T, endpoint=True),
                             bias=_logu(rng, W - 1, T)))
    return rows


@pytest.mark.parametrize("name, ystate_frac", [("tiny", None), ("fpga", None), ("tiny", 0),
                                               ("fpga", 3)])
def test_rows_bit_exact_in_order(name, ystate_frac):
    """``ystate_frac``: a stored Y (numerics §2.5), shifted back and rounded out per lane."""
    cfg = preset(name, ystate_frac=ystate_frac)
    T = cfg.tile
    rng = np.random.default_rng(7)
    rows = _rows(cfg, T, rng, 60)
    bad_rows = {5, 17}                      # a shift out of range on one lane
    rows[5]["sh"][0] = cfg.sh_max + 1
    rows[17]["sh"][T - 1] = -1
    dut = Requant(cfg, lanes=T, sh_width=SH_W, side=16, ytag=16)
    got, ys, bad_seen = [], [], []

    async def bench(ctx):
        sent = 0
        cycle = 0
        while len(got) < len(rows):
            drive = sent < len(rows) and rng.random() > 0.25
            ctx.set(dut.i_valid, drive)
            if drive:
                r = rows[sent]
                for t in range(T):
                    ctx.set(dut.i_Y[t], int(r["Y"][t]))
                    ctx.set(dut.i_acc[t], int(r["acc"][t]))
                    ctx.set(dut.i_m[t], int(r["m"][t]))
                    ctx.set(dut.i_sh[t], int(r["sh"][t]))
                    ctx.set(dut.i_bias[t], int(r["bias"][t]))
                ctx.set(dut.i_side, sent)
                ctx.set(dut.i_ytag, sent)
                if ctx.get(dut.bad):
                    bad_seen.append(sent)
                sent += 1
            elif ctx.get(dut.bad):
                bad_seen.append(None)
            if ctx.get(dut.o_valid):
                got.append(dict(side=ctx.get(dut.o_side), sat=ctx.get(dut.o_sat),
                                y=[ctx.get(dut.o_y[t]) for t in range(T)]))
            if ctx.get(dut.y_valid):
                ys.append(dict(tag=ctx.get(dut.o_ytag), Y=[ctx.get(dut.o_Y[t]) for t in range(T)],
                               Ysat=ctx.get(dut.o_Ysat)))
            await ctx.tick()
            cycle += 1
            assert cycle < 40 * len(rows)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert set(bad_seen) == bad_rows
    assert [g["side"] for g in got] == list(range(len(rows)))
    assert [g["tag"] for g in ys] == list(range(len(rows)))
    plain = 0
    for i, (r, g, gy) in enumerate(zip(rows, got, ys)):
        if i in bad_rows:
            continue
        ref = acc_requant(r["Y"], r["acc"], r["m"], r["sh"], r["bias"], cfg, stored=True)
        assert g["y"] == ref.y.tolist(), f"y, row {i}"
        assert gy["Y"] == ref.Y.tolist(), f"Y, row {i}"
        flags = lambda f: sum(int(b) << t for t, b in enumerate(f))   # noqa: E731
        assert g["sat"] == flags(ref.y_saturated.flags), f"y flags, row {i}"
        assert gy["Ysat"] == flags(ref.Y_saturated.flags), f"Y flags, row {i}"
        plain += int(np.count_nonzero(~ref.y_saturated.flags & (ref.y != 0)))
    assert plain >= len(rows) * T // 4     # most lanes neither saturate nor vanish


@pytest.mark.parametrize("ystate_frac, y_latency", [(None, 1), (2, 2)])
def test_latency_is_the_documented_one(ystate_frac, y_latency):
    """A lone row's ``Y`` leaves exactly ``y_latency`` (one more with a stored Y) and its ``y``
    ``LATENCY`` cycles after it enters."""
    cfg = preset("tiny", ystate_frac=ystate_frac)
    dut = Requant(cfg, lanes=cfg.tile, sh_width=bitlen(cfg.sh_max) + 2, side=1)
    seen, seen_y = [], []

    async def bench(ctx):
        ctx.set(dut.i_valid, 1)
        ctx.set(dut.i_side, 1)
        await ctx.tick()
        ctx.set(dut.i_valid, 0)
        for c in range(1, 12):
            if ctx.get(dut.o_valid):
                seen.append(c)
            if ctx.get(dut.y_valid):
                seen_y.append(c)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [Requant.LATENCY] and seen_y == [dut.y_latency] == [y_latency]
