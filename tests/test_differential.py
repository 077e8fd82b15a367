"""Differential linear layers with error feedback (numerics §2.5)."""

import numpy as np
import pytest
from _initial import preset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _ref import ref_rnd
from dstar_rtl.golden.differential import DiffLinear, quantize_weights
from dstar_rtl.golden.fmdq import requant_params

ACT_LO, ACT_HI = -(2 ** 15), 2 ** 15 - 1   # act_width = 16


def random_walk(rng, steps, N, C, start_scale=2 ** 14, step_scale=200):
    x = rng.integers(-start_scale, start_scale, size=(N, C))
    out = [x]
    for _ in range(steps - 1):
        x = np.clip(x + rng.integers(-step_scale, step_scale + 1, size=(N, C)), ACT_LO, ACT_HI)
        out.append(x)
    return out


def steps_of(res, layer):
    """Per element of x: the step 2**(e + r0) of its sub-channel (tile, channel)."""
    cfg = layer.cfg
    N, C = res.dx.shape
    T = cfg.tile
    nt = len(res.tiles)
    e = res.qz.e.reshape(nt, C)
    return np.repeat(2 ** (e + layer.r0), T, axis=0)[:N]


def layer(cfg, cin, cout, seed=0, bias=None, **kw):
    rng = np.random.default_rng(seed)
    W, s_w = quantize_weights(rng.normal(size=(cin, cout)) * 0.1, cfg.weight_width)
    return DiffLinear(W, s_w, cfg, bias=bias, **kw)


# ----------------------------------------------------------------------------- closed loop
@pytest.mark.parametrize("name,base", [("tiny", 6), ("tiny", 8), ("tiny", 3), ("fpga", 6)])
def test_closed_loop_exact_and_bounded(name, base):
    cfg = preset(name)
    rng = np.random.default_rng(base)
    N, C, O = 10, 6, 2 * cfg.cols + 1          # padded tokens, three blocks of output columns
    lin = layer(cfg, C, O, seed=1, base_log2=base)
    assert lin.r0 == cfg.act_frac - base
    xs = random_walk(rng, 12, N, C)
    Y_ref = np.zeros((N, O), dtype=object)
    for t, x in enumerate(xs):
        res = lin.step(x)
        xh = lin.state
        # Y_t == W · x̂_t exactly, in units of s0 (x̂ is a multiple of 2**r0)
        assert (xh % (2 ** lin.r0) == 0).all()
        assert res.Y.tolist() == ((xh >> lin.r0) @ lin.W).tolist()
        # the running sum is the sum of the step contributions
        Y_ref = Y_ref + res.acc.astype(object)
        assert res.Y.tolist() == Y_ref.tolist()
        # Δx against the reconstruction; x̂ within half a step of x
        assert not res.qz.saturated.any()
        step = steps_of(res, lin)
        assert (2 * np.abs(x - xh) <= step).all()
        assert lin.recon_sum.tolist() == xh.tolist()
        assert not lin.flags["xhat_saturated"] and not lin.flags["Y_saturated"]
        assert not lin.flags["acc_overflow"] and lin.flags["y_saturated"] == 0
        assert res.counters["subchannels"] == len(res.tiles) * C
        if t == 0:
            assert res.dx.tolist() == x.tolist()   # the first step is the same op against zero


def test_closed_loop_requantized_output():
    cfg = preset("tiny")
    N, C, O = 5, 3, 4
    bias = np.array([0.5, -0.25, 3.0, 0.0])
    lin = layer(cfg, C, O, seed=4, bias=bias)
    rng = np.random.default_rng(4)
    for x in random_walk(rng, 4, N, C, 2 ** 12, 50):
        res = lin.step(x)
        for j in range(O):
            m, sh = requant_params(lin.s_w[j] * 2.0 ** lin.r0)
            b = int(round(bias[j] * 2 ** cfg.act_frac))
            for i in range(N):
                v = ref_rnd(int(res.Y[i, j]) * m + b * 2 ** sh, sh)
                assert res.y[i, j] == max(ACT_LO, min(ACT_HI, v))
        # and it approximates the float product of the reconstruction
        approx = (lin.state / 2 ** cfg.act_frac) @ (lin.W * lin.s_w) + bias
        assert np.allclose(res.y / 2 ** cfg.act_frac, approx, atol=2 ** -cfg.act_frac)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 9), st.integers(1, 7),
       st.integers(0, 8), st.sampled_from([10, 300, 5000]))
def test_closed_loop_property(seed, N, C, base, step_scale):
    cfg = preset("tiny")
    rng = np.random.default_rng(seed)
    lin = layer(cfg, C, 5, seed=seed, base_log2=base)
    for x in random_walk(rng, 6, N, C, 2 ** 15, step_scale):
        res = lin.step(x)
        assert res.Y.tolist() == ((lin.state >> lin.r0) @ lin.W).tolist()
        if not res.qz.saturated.any():
            assert (2 * np.abs(x - lin.state) <= steps_of(res, lin)).all()


# ----------------------------------------------------------------------------- open loop
def test_open_loop_drifts_closed_loop_does_not():
    """x_t = 2t at base 2**-6 (r0 = 2, step 4): each difference of 2 rounds half away to one
    step of 4, so open loop gains 2 per step; closed loop stays within half a step."""
    xs = [np.full((4, 2), 2 * (t + 1)) for t in range(8)]
    closed = layer(preset("tiny"), 2, 2)
    opened = layer(preset("tiny", closed_loop=False), 2, 2)
    worst_open = worst_closed = 0
    for x in xs:
        rc, ro = closed.step(x), opened.step(x)
        half = steps_of(rc, closed) / 2
        worst_closed = max(worst_closed, (np.abs(x - closed.recon_sum) - half).max())
        worst_open = max(worst_open,
                         (np.abs(x - opened.recon_sum) - steps_of(ro, opened) / 2).max())
        assert rc.Y.tolist() == ((closed.recon_sum >> 2) @ closed.W).tolist()
        # open loop: Y still equals W · Σ dequant(q), but Σ dequant(q) is not x̂ ≈ x
        assert ro.Y.tolist() == ((opened.recon_sum >> 2) @ opened.W).tolist()
        assert opened.state.tolist() == x.tolist()
    assert worst_closed <= 0
    assert worst_open > 0
    assert (opened.recon_sum == 4 * 8).all() and (xs[-1] == 16).all()   # drifted by 16


def test_open_loop_Y_saturates_with_sticky_flag():
    cfg = preset("tiny", closed_loop=False, acc_width=12, overflow_detect=True, base_log2=8)
    W = np.full((2, 4), 127)
    lin = DiffLinear(W, np.full(4, 0.01), cfg)
    lim = 2 ** 11
    flags = []
    for t in range(6):
        res = lin.step(np.full((4, 2), 8 * (t + 1)))   # Δx = 8 per step: acc = 2·8·127 = 2032
        assert (res.acc == 2032).all()
        assert (res.Y >= -lim).all() and (res.Y <= lim - 1).all()
        flags.append(lin.flags["Y_saturated"])
    assert flags == [False, True, True, True, True, True]   # sticky
    assert (lin.Y == lim - 1).all()
    # A step back down does not clear the flag.
    lin.step(np.zeros((4, 2), np.int64))
    assert lin.flags["Y_saturated"]


@pytest.mark.parametrize("closed", [True, False])
def test_narrow_accumulator_flags_reach_the_layer(closed):
    """A narrow accumulator with overflow detection saturates the MPU accumulator and the running
    sum Y; both sticky flags reach the layer, in closed and in open loop."""
    cfg = preset("tiny", closed_loop=closed, acc_width=12, overflow_detect=True, base_log2=8)
    lin = DiffLinear(np.full((2, 4), 127), np.full(4, 0.01), cfg)
    lim = 2 ** 11
    res = lin.step(np.full((4, 2), 4))            # acc = 2 · 4 · 127 = 1016: fits
    assert (res.Y == 1016).all() and not lin.flags["acc_overflow"]
    res = lin.step(np.full((4, 2), 8))            # Y = 2032: fits
    assert not lin.flags["Y_saturated"]
    res = lin.step(np.full((4, 2), 12))           # Y would be 3048
    assert (res.Y == lim - 1).all() and lin.flags["Y_saturated"]
    assert not lin.flags["acc_overflow"]
    res = lin.step(np.full((4, 2), 100))          # one step's acc = 2 · 88 · 127 > 2047
    assert (res.acc == lim - 1).all() and lin.flags["acc_overflow"]
    assert (res.Y >= -lim).all() and (res.Y <= lim - 1).all()


def test_long_reduction_runs_in_pieces_with_the_whole_numerics():
    """40 input channels at max_reduction 16: three pieces (13, 13, 14 channels), each scheduled
    as its own tiles, whose quantization is the whole difference's and whose Y is W·x̂ (closed
    loop, nothing saturating), step after step."""
    from dstar_rtl.golden.schedule import quantize_counted
    cfg = preset("tiny", max_reduction=16)
    rng = np.random.default_rng(7)
    W = rng.integers(-127, 128, size=(40, 8))
    lay = DiffLinear(W, np.full(8, 1e-3), cfg, name="fc2")
    assert lay.pieces == 3 and DiffLinear(W[:16], np.ones(8), cfg).pieces == 1
    for x in random_walk(rng, 4, 8, 40):
        r = lay.step(x)
        whole, _, nt, ctr = quantize_counted(r.dx, cfg, lay.B, schedule=False)
        for f in ("q", "b", "e", "M", "saturated"):
            np.testing.assert_array_equal(getattr(r.qz, f), getattr(whole, f))
        assert r.counters["subchannels"] == ctr["subchannels"] == nt * 40
        assert len(r.tiles) == 3 * nt and all(ts.counters["subchannels"] <= 16 for ts in r.tiles)
        assert not lay.flags["Y_saturated"] and not lay.flags["xhat_saturated"]
        np.testing.assert_array_equal(r.Y, (lay.state >> lay.r0) @ W)


def test_long_reduction_saturates_y_after_each_piece():
    """Y saturates after every piece, as the core's GEMM adds each piece to YBUF: five pieces
    that push Y past its bound and one that pulls it back give ``Ymax - P``, not ``4·P``."""
    cfg = preset("tiny", max_reduction=16)
    B = cfg.act_frac - cfg.r0_min                      # the largest Y a piece can make
    W = np.concatenate([np.full((80, 4), 127), np.full((16, 4), -127)])
    x = np.full((4, 96), (1 << (cfg.act_width - 1)) - 1)
    one = DiffLinear(W[:16], np.full(4, 1e-6), cfg, base_log2=B)
    P = one.step(x[:, :16]).Y
    lay = DiffLinear(W, np.full(4, 1e-6), cfg, base_log2=B)
    assert lay.pieces == 6
    ymax = (1 << (cfg.acc_bits - 1)) - 1
    assert (5 * P > ymax).all() and (4 * P <= ymax).all()   # the stimulus saturates
    r = lay.step(x)
    np.testing.assert_array_equal(r.Y, ymax - P)
    assert lay.flags["Y_saturated"]


@pytest.mark.parametrize("s_w", [1e-14, 2.0 ** 20])
def test_requant_shift_out_of_range_refused_at_build(s_w):
    cfg = preset("tiny")
    with pytest.raises(ValueError, match=r"output channel 1 needs requantization shift -?\d+, "
                                         r"outside \[0, 47\]"):
        DiffLinear(np.ones((2, 2), np.int64), np.array([0.01, s_w]), cfg, name="proj")
    DiffLinear(np.ones((2, 2), np.int64), np.array([0.0, 0.01]), cfg)   # s = 0: m = sh = 0


def test_input_width_mismatch_refused():
    lin = layer(preset("tiny"), 3, 4)
    with pytest.raises(ValueError, match="input has 4 channels"):
        lin.step(np.zeros((2, 4), np.int64))


def test_reset_restarts_from_zero():
    lin = layer(preset("tiny"), 3, 4)
    x = np.full((4, 3), 1000)
    first = lin.step(x)
    lin.step(x + 7)
    lin.reset()
    again = lin.step(x)
    assert again.Y.tolist() == first.Y.tolist() and again.dx.tolist() == x.tolist()


# ----------------------------------------------------------------------------- fused qkv
def test_fused_qkv_split():
    """QK (state x̂_QK, Y_Q, Y_K) updated only on SAR cache steps, V every step: one fused QK
    layer gives exactly what separate Q and K layers give, and V is independent of both."""
    cfg = preset("tiny", sar_interval=2)
    C, D = 6, 5
    rng = np.random.default_rng(11)
    Wf = rng.normal(size=(C, 3 * D)) * 0.2
    Wq, sq = quantize_weights(Wf[:, :D])
    Wk, sk = quantize_weights(Wf[:, D:2 * D])
    Wv, sv = quantize_weights(Wf[:, 2 * D:])
    qk = DiffLinear(np.hstack([Wq, Wk]), np.concatenate([sq, sk]), cfg, name="qk")
    q_only = DiffLinear(Wq, sq, cfg, name="q")
    k_only = DiffLinear(Wk, sk, cfg, name="k")
    v = DiffLinear(Wv, sv, cfg, name="v")
    v_ref = DiffLinear(Wv, sv, cfg, name="v_ref")
    xs = random_walk(rng, 9, 7, C, 2 ** 13, 300)
    last_qk = None
    for t, x in enumerate(xs):
        rv = v.step(x)
        assert rv.Y.tolist() == v_ref.step(x).Y.tolist()
        assert rv.Y.tolist() == ((v.state >> v.r0) @ Wv).tolist()
        if t % cfg.sar_interval == 0:
            r = qk.step(x)
            rq, rk = q_only.step(x), k_only.step(x)
            assert r.Y[:, :D].tolist() == rq.Y.tolist()
            assert r.Y[:, D:].tolist() == rk.Y.tolist()
            assert r.y[:, :D].tolist() == rq.y.tolist()
            assert r.y[:, D:].tolist() == rk.y.tolist()
            assert qk.state.tolist() == q_only.state.tolist() == k_only.state.tolist()
            last_qk = qk.state.copy()
        else:
            # reuse step: the QK state is untouched, V has moved on
            assert qk.state.tolist() == last_qk.tolist()
    # the two states differ: x̂_V tracks every step, x̂_QK only the cache steps
    assert not np.array_equal(qk.state, v.state)
    assert (2 * np.abs(xs[-1] - v.state) <= 2 ** (11 + 2)).all()


# ----------------------------------------------------------------------------- weights
def test_quantize_weights():
    Wf = np.array([[1.0, 0.0, -0.5], [-2.0, 0.0, 0.25]])
    W, s = quantize_weights(Wf)
    assert W.tolist() == [[64, 0, -127], [-127, 0, 64]]
    assert np.allclose(s, [2 / 127, 0, 0.5 / 127])
    assert W.dtype == np.int64 and np.abs(W).max() <= 127


def test_layer_without_schedule_has_the_same_numerics():
    """``schedule=False`` skips the group schedule, not the arithmetic: every output and state
    equals the scheduled layer's, step after step."""
    cfg = preset("tiny")
    rng = np.random.default_rng(11)
    W = rng.integers(-127, 128, (16, 8))
    s_w = rng.uniform(0.002, 0.02, 8)
    a = DiffLinear(W, s_w, cfg)
    b = DiffLinear(W, s_w, cfg, schedule=False)
    x = rng.integers(-3000, 3000, (10, 16))
    for _ in range(3):
        ra, rb = a.step(x), b.step(x)
        assert rb.tiles is None and ra.tiles
        for k in ("y", "Y", "acc", "dx"):
            np.testing.assert_array_equal(getattr(ra, k), getattr(rb, k))
        np.testing.assert_array_equal(a.state, b.state)
        x = x + rng.integers(-50, 50, x.shape)
    assert a.flags == b.flags


@pytest.mark.parametrize("g", [0, 3])
def test_stored_y_is_the_running_sum_rounded_by_the_channel_shift(g):
    """``ystate_frac = g`` (numerics §2.5, "Stored Y"): each step adds the product to the
    stored ``Y`` brought back by its channel's shift ``s``, gives ``y`` from that full sum, and
    keeps it rounded by ``s`` in ``ystate_width`` bits: the exact running sum's, within half a
    stored LSB per step, and the output within an LSB of the exact path's per step."""
    from dstar_rtl.golden.fmdq import requantize, rnd

    cfg = preset("fpga", ystate_frac=g)
    exact, narrow = layer(preset("fpga"), 64, 16, seed=3), layer(cfg, 64, 16, seed=3)
    s = cfg.ystate_shift(narrow.sh)
    assert (s > 0).any() and cfg.ystate_width == cfg.act_width + 2 + g
    lim = 1 << (cfg.ystate_width - 1)
    rng = np.random.default_rng(4)
    Z = np.zeros((8, 16), np.int64)
    for k, x in enumerate(random_walk(rng, 6, 8, 64), 1):
        re, rn = exact.step(x), narrow.step(x)
        full = (Z << s) + rn.acc                       # the stored sum brought back, plus acc
        y, _ = requantize(full, narrow.m, narrow.sh, narrow.bias_int, cfg.act_width,
                          cfg.sh_max)
        Z = np.clip(rnd(full, s), -lim, lim - 1)
        np.testing.assert_array_equal(rn.Y, Z)
        np.testing.assert_array_equal(rn.y, y)
        assert (np.abs((Z << s) - re.Y) <= k * (1 << s) / 2).all()
        assert (np.abs(rn.y - re.y) <= k).all()
        np.testing.assert_array_equal(rn.acc, re.acc)  # the same quantization: x̂ is exact
    assert not narrow.flags["Y_saturated"]


def test_stored_y_saturates_at_its_width_with_the_sticky_flag():
    """A stored Y beyond twice the output's range saturates at ``ystate_width`` and sets
    ``Y_saturated``; the output saturates too (it had already)."""
    cfg = preset("tiny", ystate_frac=0)
    W = np.full((16, 4), 127)
    lay = DiffLinear(W, np.full(4, 1.0), cfg)
    r = lay.step(np.full((4, 16), (1 << (cfg.act_width - 1)) - 1))
    lim = 1 << (cfg.ystate_width - 1)
    assert (r.Y == lim - 1).all() and lay.flags["Y_saturated"]
    assert (r.y == (1 << (cfg.act_width - 1)) - 1).all()


def test_stored_y_with_pieces_rounds_after_each_piece():
    """A long reduction with a stored Y: each piece's full sum is rounded back into the stored
    Y, as the core's GEMM writes YBUF after each piece; ``y`` comes from the last piece's full
    sum."""
    from dstar_rtl.golden.fmdq import requantize, rnd

    cfg = preset("tiny", max_reduction=16, ystate_frac=1)
    rng = np.random.default_rng(9)
    W = rng.integers(-127, 128, size=(40, 8))
    lay = DiffLinear(W, np.full(8, 3e-4), cfg)
    one = [DiffLinear(W[c0:c0 + n], np.full(8, 3e-4), preset("tiny", max_reduction=16))
           for c0, n in ((0, 13), (13, 13), (26, 14))]
    s = cfg.ystate_shift(lay.sh)
    assert lay.pieces == 3 and (s > 0).any()
    lim = 1 << (cfg.ystate_width - 1)
    Z = np.zeros((8, 8), np.int64)
    for x in random_walk(rng, 3, 8, 40, start_scale=2 ** 9, step_scale=40):
        r = lay.step(x)
        for piece, (c0, n) in zip(one, ((0, 13), (13, 13), (26, 14))):
            full = (Z << s) + piece.step(x[:, c0:c0 + n]).acc
            Z = np.clip(rnd(full, s), -lim, lim - 1)
        y, _ = requantize(full, lay.m, lay.sh, lay.bias_int, cfg.act_width, cfg.sh_max)
        np.testing.assert_array_equal(r.Y, Z)
        np.testing.assert_array_equal(r.y, y)


def test_stored_y_is_refused_where_there_is_no_state_or_room():
    from dstar_rtl.golden.config import ConfigError
    with pytest.raises(ConfigError, match="ystate_frac must be None with datapath 'int8'"):
        preset("fpga", datapath="int8", ystate_frac=2)
    with pytest.raises(ConfigError, match=r"ystate_frac must be an integer in \[0, 47\]"):
        preset("tiny", ystate_frac=64)
    assert preset("tiny").ystate_width == preset("tiny").acc_bits
    assert preset("tiny", ystate_frac=2).hash() != preset("tiny").hash()
