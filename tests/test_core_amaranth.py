"""The core (rtl/core.py) in Amaranth's simulator: host LOAD/STORE, each VROW operation, a
differential layer over steps, and errors; golden values from golden.vpu / DiffLinear.

The whole DiT block runs in tests/test_cocotb_core.py (Verilator and Icarus) against the ISA
executor and IntDiTBlock.
"""

import math

import numpy as np
import pytest

from dstar_rtl.golden import vpu as gv
from dstar_rtl.golden.config import preset
from dstar_rtl.golden.differential import DiffLinear
from dstar_rtl.golden.fmdq import requant_params
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.program.executor import CoreExecutor
from dstar_rtl.program.isa import (
    BUFFERS,
    COUNTERS,
    CYCLE_COUNTERS,
    Cmd,
    core_preset,
    encode,
    host_words_per_row,
    row_to_words,
    words_to_row,
)
from dstar_rtl.rtl.core import Core
from dstar_rtl.sim.amaranth_core import run_core

T = 4


@pytest.fixture(scope="module")
def cfg():
    return preset("tiny")


@pytest.fixture(scope="module")
def dut(cfg):
    return Core(cfg, core=core_preset("tiny"))


class Prog:
    """A command list with its host words and the host words it will return."""

    def __init__(self, cfg):
        self.cfg, self.cmds, self.host, self.stores = cfg, [], [], []

    def load(self, buf, addr, rows):
        self.cmds.append(Cmd("LOAD", dict(buf=BUFFERS.index(buf), addr=addr, count=len(rows))))
        for r in rows:
            self.host.extend(row_to_words(self.cfg, buf, r))

    def zero(self, buf, addr, count):
        self.cmds.append(Cmd("LOAD", dict(buf=BUFFERS.index(buf), addr=addr, count=count,
                                          zero=1)))

    def store(self, buf, addr, count):
        self.cmds.append(Cmd("STORE", dict(buf=BUFFERS.index(buf), addr=addr, count=count)))
        self.stores.append((buf, count))

    def tensor(self, base, x):
        """LOAD an (N, C) tensor to ABUF at ``base`` (row base + tile·C + c, lane token)."""
        N, C = x.shape
        self.load("ABUF", base, [dict(v=x[t * T:(t + 1) * T, c]) for t in range(N // T)
                                 for c in range(C)])

    def vector(self, base, vec):
        self.load("VBUF", base, [dict(v=vec[k * T:(k + 1) * T]) for k in range(len(vec) // T)])

    def run(self, dut, **kw):
        self.cmds.append(Cmd("END", {}))
        n = sum(c * host_words_per_row(self.cfg, b) for b, c in self.stores)
        r = run_core(dut, self.cmds, self.host, expect_out=n, **kw)
        out, o = [], list(r.host_out)
        for buf, count in self.stores:
            k = host_words_per_row(self.cfg, buf)
            rows = [words_to_row(self.cfg, buf, o[i * k:(i + 1) * k]) for i in range(count)]
            del o[:count * k]
            out.append(rows)
        return r, out


def as_tensor(rows, N, C):
    v = np.array([r["v"] for r in rows])
    return v.reshape(N // T, C, T).transpose(0, 2, 1).reshape(N, C)


def test_load_store_every_buffer(cfg, dut):
    rng = np.random.default_rng(0)
    p = Prog(cfg)
    data = {}
    for buf, width in (("ABUF", cfg.act_width), ("XBUF", cfg.xhat_width),
                       ("YBUF", cfg.ystate_width)):
        v = rng.integers(-(1 << (width - 1)), 1 << (width - 1), (5, T))
        p.load(buf, 7, [dict(v=r) for r in v])
        data[buf] = v
    for buf in data:
        p.store(buf, 7, 5)
    p.zero("ABUF", 8, 2)
    p.store("ABUF", 7, 4)
    r, out = p.run(dut)
    assert r.error == "none"
    for (buf, v), rows in zip(data.items(), out):
        assert np.array_equal(np.array([x["v"] for x in rows]), v), buf
    z = np.array([x["v"] for x in out[3]])
    assert np.array_equal(z[0], data["ABUF"][0]) and not z[1:3].any()
    assert np.array_equal(z[3], data["ABUF"][3])


def test_a_reused_simulator_starts_each_run_from_reset(cfg, dut):
    """sim.amaranth_reuse: the core's simulator is reset between runs, so a run sees the
    buffers' initial contents (not what the run before left there) and takes the same cycles
    as the first run of the same program."""
    rows = [dict(v=r) for r in np.random.default_rng(1).integers(1, 100, (2, T))]

    def program(load: bool) -> Prog:
        p = Prog(cfg)
        if load:
            p.load("ABUF", 3, rows)
        p.store("ABUF", 3, 2)
        return p
    r1, _ = program(True).run(dut)
    r2, out = program(False).run(dut)
    assert r1.error == r2.error == "none" and not np.array([x["v"] for x in out[0]]).any()
    r3, _ = program(True).run(dut)
    assert (r3.cycles, r3.host_out) == (r1.cycles, r1.host_out)


def _vrow(op, R, n, a, C, dst=0, c=0, vb=0, cols=0, sreg=0, overlap=0, **sem):
    return Cmd("VROW", dict(vop=VPU_OPS.index(op), cols=cols, R=R, n=n, a=a, C=C, c=c, vb=vb,
                            dst=dst, sreg=sreg, overlap=overlap), **sem)


def test_row_operations(cfg, dut):
    """layernorm, modulate, gated_residual, gelu and softmax under a block mask over token rows
    of ABUF tensors, each equal to golden.vpu."""
    rng = np.random.default_rng(1)
    N, D = 8, 8
    tabs = gv.vpu_tables(cfg)
    x = rng.integers(-3000, 3000, (N, D))
    sh, sc, g = (rng.integers(-300, 300, D) for _ in range(3))
    s = rng.integers(-2000, 2000, (T, N))
    bmask = np.array([1, 0], bool)           # key block 1 dropped
    eps = gv.layernorm_eps_int(D, 1e-6, cfg, tabs)
    p = Prog(cfg)
    p.tensor(0, x)
    p.tensor(400, s)
    p.vector(0, sh)
    p.vector(2, sc)
    p.vector(4, g)
    p.load("MASK", 3, [dict(bits=int(bmask[0]) | int(bmask[1]) << 1)])
    p.cmds.append(Cmd("VPARAM", dict(value=eps)))
    p.cmds.append(_vrow("layernorm", N, D, a=0, C=D, dst=100))
    p.cmds.append(_vrow("modulate", N, D, a=100, C=D, dst=200, vb=0, c=2))
    p.cmds.append(_vrow("gated_residual", N, D, a=0, C=D, dst=300, vb=4, c=200))
    p.cmds.append(_vrow("gelu", N, D, a=300, C=D, dst=500))
    p.cmds.append(_vrow("softmax", T, N, a=400, C=N, dst=600, vb=3))
    for base in (100, 200, 300, 500):
        p.store("ABUF", base, N // T * D)
    p.store("ABUF", 600, N)
    r, out = p.run(dut)
    assert r.error == "none"
    ln, _ = gv.layernorm(x, cfg, tables=tabs, eps_q=eps)
    mo, _ = gv.modulate(ln, sh, sc, cfg)
    gr, _ = gv.gated_residual(x, g, mo, cfg)
    ge, _ = gv.gelu(gr, cfg, tabs)
    mask_el = np.repeat(bmask, T)[None].repeat(T, 0)
    P, _ = gv.softmax(s, mask_el, cfg, tabs)
    for name, rows, exp in (("layernorm", out[0], ln), ("modulate", out[1], mo),
                            ("gated_residual", out[2], gr), ("gelu", out[3], ge)):
        assert np.array_equal(as_tensor(rows, N, D), exp), name
    assert np.array_equal(as_tensor(out[4], T, N), P), "softmax"


def _head_program(cfg, rng, N, d, mask):
    """The start of one head's program: Q, K, V (random, N × d) at ABUF 0, 100, 200, the S and
    O requantization rows in RBUF 0 and 1, the mask rows, and K and V made INT8 weights in WMEM
    (K by sub-channels at 0, V by token rows at 64). Returns ``(Prog, B, thresholds)``."""
    B = cfg.base_log2
    Q, K, V = (rng.integers(-6000, 6000, (N, d)) for _ in range(3))
    s_m, s_sh = requant_params(2.0 ** -B / math.sqrt(d), cfg.mult_width)
    o_m, o_sh = requant_params(2.0 ** -cfg.p_base_log2, cfg.mult_width)
    th = cfg.thresholds
    p = Prog(cfg)
    p.tensor(0, Q)
    p.tensor(100, K)
    p.tensor(200, V)
    p.load("RBUF", 0, [dict(m=[s_m] * T, sh=[s_sh] * T, bias=[0] * T),
                       dict(m=[o_m] * T, sh=[o_sh] * T, bias=[0] * T)])
    p.load("MASK", 0, [dict(bits=sum(int(b) << j for j, b in enumerate(row))) for row in mask])
    nq = N // T
    p.cmds += [_vrow("kv_amax", nq, d, a=100, C=d, cols=1, sreg=0),
               _vrow("kv_quant", nq, d, a=100, C=d, cols=1, dst=0, sreg=0),
               _vrow("kv_amax", N, d, a=200, C=d, sreg=1),
               _vrow("kv_quant", N, d, a=200, C=d, dst=64, sreg=1)]
    return p, B, [th[2], th[4], th[6]]


@pytest.mark.parametrize("softmax", ["softmax", "softmax_mx"])
@pytest.mark.parametrize("keep", [(1, 1, 1, 1), (1, 0, 1, 1)], ids=["dense", "sar"])
def test_attention_head(cfg, dut, keep, softmax):
    """One head end to end: K and V to INT8 in WMEM (kv_amax + kv_quant, both walks), Q·Kᵀ on
    the kept blocks with the runtime shift, softmax under the mask (or softmax_mx with the row
    maxima the Q·Kᵀ drains kept in RMAX), P quantized into GMEM and replayed against V: every
    stored word equals the ISA executor's."""
    rng = np.random.default_rng(3)
    N, d = 8, 8
    nb = N // T
    mask = np.array(keep, bool).reshape(nb, nb)
    p, B, thr = _head_program(cfg, rng, N, d, mask)
    for qa in range(nb):
        p.cmds.append(Cmd("QCFG", dict(base_log2=B, thr=thr)))
        p.cmds.append(Cmd("QUANT", dict(src=qa * d, nch=d, gdst=0), signal=1))
        kept = [kb for kb in range(nb) if mask[qa, kb]]
        for i, kb in enumerate(kept):
            rmax = (1 if i == 0 else 2) if softmax == "softmax_mx" else 0
            p.cmds.append(Cmd("GEMM", dict(gsrc=0, wbase=kb * d, rrow=0, use_sreg=1, sreg=0,
                                           dst=300 + kb * T, rmax=rmax), wait=1 if i == 0 else 0))
        p.cmds.append(Cmd("BARRIER", {}))
        p.cmds.append(_vrow(softmax, T, N, a=300, C=N, dst=400, vb=qa))
        p.cmds.append(Cmd("QCFG", dict(base_log2=cfg.act_frac, thr=thr)))
        p.cmds.append(Cmd("QUANT", dict(src=400, nch=N, gdst=512 + 64 * qa, pcache=1),
                          signal=1))
        for cb in range(d // T):
            p.cmds.append(Cmd("GEMM", dict(gsrc=512 + 64 * qa, wbase=64 + cb * N, rrow=1,
                                           use_sreg=1, sreg=1, dst=500 + qa * d + cb * T,
                                           pcache=1), wait=1 if cb == 0 else 0))
        p.cmds.append(Cmd("BARRIER", {}))
    p.store("ABUF", 500, nb * d)
    p.store("CNT", 0, len(COUNTERS))
    r, out = p.run(dut)
    assert r.error == "none"
    # The reference is the ISA executor on the same program (it equals IntDiTBlock's attention,
    # tests/test_core_program.py), so the whole head is compared word for word.
    want = CoreExecutor(cfg, core_preset("tiny")).run(p.cmds, p.host)
    n_o = len(out[0]) * host_words_per_row(cfg, "ABUF")
    assert r.host_out[:n_o] == want[:n_o] and as_tensor(out[0], N, d).any()
    for i, name in enumerate(COUNTERS):       # event counters too (cycles are RTL only)
        if name not in CYCLE_COUNTERS:
            assert r.host_out[n_o + i] == want[n_o + i], name
    cnt = dict(zip(COUNTERS, (r_["count"] for r_ in out[1])))
    # Each query tile's P stream is replayed once per column block of V.
    assert cnt["pcache_groups_read"] == (d // T) * cnt["pcache_groups_written"] > 0


def _pipelined_head(cfg, overlap):
    """One head of three query tiles in the software-pipelined order: query tile τ's softmax (a
    VROW with ``overlap``) runs while Q quantizes tile τ+1 and M computes its Q·Kᵀ, on
    double-buffered score and P tiles. Semaphores: 0 a Q tile quantized, 1 a tile's scores (and
    RMAX) ready, 2 a P tile quantized, 3 a softmax done."""
    rng = np.random.default_rng(11)
    N, d = 3 * T, 8
    nq = N // T
    mask = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1]], bool)
    p, B, thr = _head_program(cfg, rng, N, d, mask)
    S, P = (300, 320), (400, 420)

    def scores(qa):
        p.cmds.append(Cmd("QCFG", dict(base_log2=B, thr=thr)))
        p.cmds.append(Cmd("QUANT", dict(src=qa * d, nch=d, gdst=32 * (qa % 2)), signal=1))
        kept = [kb for kb in range(nq) if mask[qa, kb]]
        for i, kb in enumerate(kept):
            p.cmds.append(Cmd("GEMM", dict(gsrc=32 * (qa % 2), wbase=kb * d, rrow=0, use_sreg=1,
                                           sreg=0, dst=S[qa % 2] + kb * T, rmax=1 if i == 0 else 2),
                              wait=1 if i == 0 else 0, signal=2 if i == len(kept) - 1 else 0))

    scores(0)
    for qa in range(nq):
        p.cmds.append(_vrow("softmax_mx", T, N, a=S[qa % 2], C=N, dst=P[qa % 2], vb=qa,
                            overlap=overlap, wait=2, signal=8))
        if qa + 1 < nq:
            scores(qa + 1)
        p.cmds.append(Cmd("QCFG", dict(base_log2=cfg.act_frac, thr=thr)))
        p.cmds.append(Cmd("QUANT", dict(src=P[qa % 2], nch=N, gdst=512 + 64 * qa, pcache=1),
                          wait=8, signal=4))
        for cb in range(d // T):
            p.cmds.append(Cmd("GEMM", dict(gsrc=512 + 64 * qa, wbase=64 + cb * N, rrow=1,
                                           use_sreg=1, sreg=1, dst=500 + qa * d + cb * T,
                                           pcache=1), wait=4 if cb == 0 else 0))
    p.cmds.append(Cmd("BARRIER", {}))
    p.store("ABUF", 500, nq * d)
    p.store("CNT", 0, len(COUNTERS))
    return p


def test_attention_softmax_overlapped(cfg, dut):
    """The pipelined head with its softmax VROWs overlapped equals the ISA executor word for
    word (outputs and event counters), and the overlap is real: the same program with
    ``overlap = 0`` (every softmax alone) takes more cycles, and the V engine's busy cycles
    then add to the others' where with overlap they do not."""
    runs = {}
    for ovl in (1, 0):
        p = _pipelined_head(cfg, ovl)
        r, out = p.run(dut)
        assert r.error == "none"
        want = CoreExecutor(cfg, core_preset("tiny")).run(p.cmds, p.host)
        n_o = len(out[0]) * host_words_per_row(cfg, "ABUF")
        assert r.host_out[:n_o] == want[:n_o] and as_tensor(out[0], 3 * T, 8).any()
        for i, name in enumerate(COUNTERS):
            if name not in CYCLE_COUNTERS:
                assert r.host_out[n_o + i] == want[n_o + i], name
        runs[ovl] = dict(zip(COUNTERS, (r_["count"] for r_ in out[1])))
    assert runs[1]["cycles"] < runs[0]["cycles"]
    assert runs[1]["busy_V"] == pytest.approx(runs[0]["busy_V"], rel=0.2)


def test_overlap_refused_for_two_abuf_operands(cfg, dut):
    """gated_residual reads two ABUF operands (the port QUANT uses among them): overlap is an
    operand error, before anything runs."""
    p = Prog(cfg)
    p.cmds.append(_vrow("gated_residual", T, T, a=0, C=T, c=16, dst=32, overlap=1))
    p.cmds.append(Cmd("END", {}))
    r = run_core(dut, [encode(cfg, c) for c in p.cmds], [], limit=2_000)
    assert r.error == "operand" and r.error_index == 0
    with pytest.raises(Exception, match="overlap"):
        CoreExecutor(cfg, core_preset("tiny")).run(p.cmds, [])


def test_differential_layer_over_steps(cfg, dut):
    """A differential layer (2 token tiles, 2 output blocks) over 3 steps with the group double
    buffer: every y, x̂ and Y equal to golden.differential.DiffLinear."""
    _differential_layer_over_steps(cfg, dut)


def test_differential_layer_with_a_stored_y():
    """The same with a stored Y (``ystate_frac``, numerics §2.5): YBUF rows of
    ``ystate_width`` bits, brought back and rounded by each channel's shift."""
    c = preset("tiny", ystate_frac=1)
    lay = _differential_layer_over_steps(c, Core(c, core=core_preset("tiny")))
    assert (c.ystate_shift(lay.sh) > 0).any()


def _differential_layer_over_steps(cfg, dut):
    rng = np.random.default_rng(4)
    N, cin, cout = 8, 8, 8
    nt, nob = N // T, cout // T
    W = rng.integers(-127, 128, (cin, cout))
    lay = DiffLinear(W, rng.uniform(0.002, 0.02, cout), cfg, bias=rng.uniform(-1, 1, cout))
    th = cfg.thresholds
    p = Prog(cfg)
    p.load("WMEM", 0, [dict(w=W[c, ob * T:(ob + 1) * T]) for ob in range(nob)
                       for c in range(cin)])
    p.load("RBUF", 0, [dict(m=lay.m[ob * T:(ob + 1) * T], sh=lay.sh[ob * T:(ob + 1) * T],
                            bias=lay.bias_int[ob * T:(ob + 1) * T]) for ob in range(nob)])
    p.zero("XBUF", 0, nt * cin)
    p.zero("YBUF", 0, nt * nob * T)
    x = rng.integers(-3000, 3000, (N, cin))
    xs = [x, x + rng.integers(-60, 60, (N, cin)), x + rng.integers(-60, 60, (N, cin))]
    for x in xs:
        p.tensor(0, x)
        p.cmds.append(Cmd("QCFG", dict(base_log2=lay.B, thr=[th[2], th[4], th[6]])))
        for tau in range(nt):
            slot = 512 * (tau % 2)
            p.cmds.append(Cmd("QUANT", dict(src=tau * cin, xsrc=tau * cin, nch=cin, gdst=slot,
                                            diff=1), signal=1))
            for ob in range(nob):
                p.cmds.append(Cmd("GEMM", dict(gsrc=slot, wbase=ob * cin,
                                               ysrc=(tau * nob + ob) * T, rrow=ob,
                                               dst=256 + tau * cout + ob * T, accum=1),
                                  wait=1 if ob == 0 else 0))
        p.cmds.append(Cmd("BARRIER", {}))
        p.store("ABUF", 256, nt * cout)
        p.store("XBUF", 0, nt * cin)
        p.store("YBUF", 0, nt * nob * T)
    r, out = p.run(dut)
    assert r.error == "none"
    for s, x in enumerate(xs):
        res = lay.step(x)
        y, xh, Y = out[3 * s:3 * s + 3]
        assert np.array_equal(as_tensor(y, N, cout), res.y), f"y, step {s}"
        assert np.array_equal(as_tensor(xh, N, cin), lay.state), f"x̂, step {s}"
        Yg = np.array([r_["v"] for r_ in Y]).reshape(nt, nob, T, T).transpose(0, 2, 1, 3)
        assert np.array_equal(Yg.reshape(N, cout), res.Y), f"Y, step {s}"
    return lay


def _errors_case(cfg, kind):
    p = Prog(cfg)
    if kind == "opcode":
        bad = len(__import__("dstar_rtl.program.isa", fromlist=["OPCODES"]).OPCODES)
        p.cmds.append(bad)                       # a raw word with an unknown opcode
    elif kind == "address":
        p.cmds.append(Cmd("LOAD", dict(buf=BUFFERS.index("ABUF"), addr=2040, count=16)))
    elif kind == "operand":
        p.cmds.append(_vrow("acc_requant", 4, 4, a=0, C=4))
    elif kind == "replay":                       # GMEM holds no tile end: replay runs off
        p.cmds.append(Cmd("GEMM", dict(gsrc=1000, wbase=0, rrow=0, dst=0)))
    elif kind == "shift":
        p.load("ABUF", 0, [dict(v=[30000] * T)])
        p.cmds += [_vrow("kv_amax", 1, 1, a=0, C=1, cols=1, sreg=3),
                   Cmd("QCFG", dict(base_log2=cfg.base_log2, thr=[1, 7, 31])),
                   Cmd("QUANT", dict(src=0, nch=1, gdst=0), signal=1),
                   Cmd("GEMM", dict(gsrc=0, rrow=5, dst=8, use_sreg=1, sreg=3), wait=1)]
    elif kind == "shift_high":                   # sh above sh_max (the RBUF field holds it)
        p.load("ABUF", 0, [dict(v=[300] * T)])
        p.load("RBUF", 6, [dict(m=[1] * T, sh=[cfg.sh_max + 1] * T, bias=[0] * T)])
        p.cmds += [Cmd("QCFG", dict(base_log2=cfg.base_log2, thr=[1, 7, 31])),
                   Cmd("QUANT", dict(src=0, nch=1, gdst=0), signal=1),
                   Cmd("GEMM", dict(gsrc=0, rrow=6, dst=8), wait=1)]
    elif kind == "semaphore":
        p.cmds.append(Cmd("GEMM", dict(gsrc=0, rrow=0, dst=0), wait=2))
    return p


@pytest.mark.parametrize("kind, code", [("opcode", "opcode"), ("address", "address"),
                                        ("operand", "operand"), ("replay", "address"),
                                        ("shift", "shift"), ("shift_high", "shift"),
                                        ("semaphore", "semaphore")])
def test_errors_stop_cleanly(cfg, dut, kind, code):
    """Each error sets its code and the core then drains every further command (the trailing
    STOREs produce nothing, END is consumed): the stream never hangs."""
    p = _errors_case(cfg, kind)
    n_before = len(p.cmds)
    p.store("ABUF", 0, 2)
    p.cmds.append(Cmd("END", {}))
    words = [c if isinstance(c, int) else encode(cfg, c) for c in p.cmds]
    r = run_core(dut, words, p.host, limit=20_000)
    assert r.error == code
    assert not r.host_out and not r.done
    assert r.error_index == n_before - 1     # the failing command


def test_host_back_pressure_and_gaps(cfg, dut):
    """STORE under a host that stalls half the time and LOAD data with gaps: nothing lost."""
    rng = np.random.default_rng(5)
    v = rng.integers(-(1 << 15), 1 << 15, (12, T))
    p = Prog(cfg)
    p.load("ABUF", 3, [dict(v=r) for r in v])
    p.store("ABUF", 3, 12)
    r, out = p.run(dut, gap=0.4, stall=0.5, seed=2)
    assert r.error == "none"
    assert np.array_equal(np.array([x["v"] for x in out[0]]), v)


def test_dispatcher_commands_wait_for_a_counter_read(cfg, dut):
    """VPARAM, STEP, SKIP and NOP right after a ``STORE CNT`` execute only once it has finished
    (H runs alone), so both reads equal the ISA executor's (the cycle counters aside)."""
    p = Prog(cfg)
    # STEP with interval 1 keeps phase 0, so the SKIP discards nothing.
    for op, args in (("VPARAM", dict(value=3)), ("STEP", dict(interval=1)),
                     ("SKIP", dict(count=1)), ("NOP", {})):
        p.store("CNT", 0, len(COUNTERS))
        p.cmds.append(Cmd(op, args))
    p.store("CNT", 0, len(COUNTERS))
    r, out = p.run(dut)
    want = CoreExecutor(cfg, core_preset("tiny")).run(p.cmds, p.host)
    got = [w for rows in out for row in rows for w in row_to_words(cfg, "CNT", row)]
    assert r.error == "none" and len(got) == len(want)
    skip = {i * len(COUNTERS) + COUNTERS.index(k) for i in range(len(out))
            for k in CYCLE_COUNTERS}
    assert [g for i, g in enumerate(got) if i not in skip] == \
        [w for i, w in enumerate(want) if i not in skip]


def test_host_word_count_is_checked(cfg, dut):
    """:func:`run_core` counts the host words the core stores, up to ``done`` and through the
    trailing window after it: one more or one fewer than ``expect_out`` fails with the count,
    not a timeout."""
    p = Prog(cfg)
    p.load("ABUF", 0, [dict(v=[1, 2, 3, 4]), dict(v=[5, 6, 7, 8])])
    p.store("ABUF", 0, 2)
    p.cmds.append(Cmd("END", {}))
    n = 2 * host_words_per_row(cfg, "ABUF")
    assert len(run_core(dut, p.cmds, p.host, expect_out=n).host_out) == n
    for wrong in (n - 1, n + 1):
        with pytest.raises(AssertionError, match=f"{n} host words stored, expected {wrong}"):
            run_core(dut, p.cmds, p.host, expect_out=wrong)
