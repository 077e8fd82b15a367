"""The VROW command of the ISA-level executor (:mod:`program.executor`, whose module docstring
states the semantics and counter rules): the token-row and sub-channel walks of
:mod:`program.isa` over ABUF, VBUF, MASK and WMEM, each VPU command computed by the golden VPU
functions (:mod:`golden.vpu`).

:class:`VrowEngine` is a mixin of :class:`program.executor.CoreExecutor`: it uses the executor's
buffers (``abuf``, ``vbuf``, ``wmem``, ``mask``, ``sreg``, ``vparam``), its configuration
(``cfg``, ``T``, ``tables``) and its helpers ``_rows`` (address check), ``_fail`` (raise a
CoreError), ``_add`` (counter) and ``_read`` (memory reads).
"""

from __future__ import annotations

import numpy as np

from dstar_rtl.golden import vpu
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.program.isa import VROW_OPS, vpu_row_excess

__all__ = ["VrowEngine"]

# Operations whose results go to ABUF (kv_quant writes WMEM, kv_amax a shift register).
_ABUF_RESULT = ("softmax", "layernorm", "modulate", "gelu", "gated_residual", "softmax_mx")


class VrowEngine:
    """VROW execution for :class:`program.executor.CoreExecutor` (module docstring)."""

    def _op_vrow(self, a, out):
        """VROW: check the operation and walk, then run its VPU commands."""
        cfg = self.cfg
        vop = a["vop"]
        if vop >= len(VPU_OPS) or VPU_OPS[vop] not in VROW_OPS:
            self._fail("operand", f"VROW vop {vop} "
                       f"({VPU_OPS[vop] if vop < len(VPU_OPS) else 'undefined'}) is not one of "
                       f"{VROW_OPS}")
        op, R, n = VPU_OPS[vop], a["R"], a["n"]
        if R == 0 or n == 0:
            self._fail("operand", f"VROW {op} with R = {R}, n = {n}")
        if a.get("overlap") and op == "gated_residual":
            self._fail("operand", "VROW gated_residual cannot overlap (its two ABUF operands "
                                  "take the port QUANT reads)")
        if a["cols"] and op not in ("kv_amax", "kv_quant"):
            self._fail("operand", f"VROW {op} has no sub-channel walk (cols = 1)")
        why = vpu_row_excess(cfg, op, n, a["cols"])
        if why:
            self._fail("operand", why)
        if a["cols"]:
            self._subchannel_walk(op, a)
        else:
            self._token_walk(op, a)

    def _vpu(self, op: str, x, b=None, c=None, mask=None, e=0):
        """One VPU command on a row ``x`` (1-D): ``(result, n_saturated)``."""
        cfg, tb = self.cfg, self.tables
        try:
            if op == "softmax":
                y, ns = vpu.softmax(x[None], mask[None], cfg, tb)
                return y[0], ns
            if op == "softmax_mx":
                y, ns = vpu.softmax(x[None], mask[None], cfg, tb, mx=[[e]])
                return y[0], ns
            if op == "layernorm":
                y, ns = vpu.layernorm(x[None], cfg, tables=tb, eps_q=self.vparam)
                return y[0], ns
            if op == "modulate":
                return vpu.modulate(x, b, c, cfg)
            if op == "gelu":
                return vpu.gelu(x, cfg, tb)
            if op == "gated_residual":
                return vpu.gated_residual(x, b, c, cfg)
            return vpu.kv_quant(x, e, cfg)
        except ValueError as err:
            self._fail("vpu", f"{op}: {err}")

    def _token_walk(self, op: str, a):
        """VROW over token rows (``cols = 0``): one VPU command per token."""
        T = self.T
        R, n, C = a["R"], a["n"], a["C"]
        nb = -(-n // T)
        span = ((R - 1) // T) * C + nb * T      # rows from a base to its last touched row + 1
        self._rows("ABUF", a["a"], span, "VROW a")
        if op == "gated_residual":
            self._rows("ABUF", a["c"], span, "VROW c")
        if op in ("modulate", "gated_residual"):
            self._rows("VBUF", a["vb"], nb, "VROW vb")
        if op == "modulate":
            self._rows("VBUF", a["c"], nb, "VROW c")
        if op in ("softmax", "softmax_mx"):
            self._rows("MASK", a["vb"], (R - 1) // T + 1, "VROW mask")
        if op in _ABUF_RESULT:
            self._rows("ABUF", a["dst"], span, "VROW dst")
        if op == "kv_quant":
            self._rows("WMEM", a["dst"], (nb - 1) * R + R, "VROW dst")
        k = np.arange(nb * T)
        amax = 0
        for r in range(R):
            lane, off = r % T, (r // T) * C
            x = self.abuf[a["a"] + off + k, lane][:n]
            b = c = mask = None
            if op in ("modulate", "gated_residual"):
                b = self.vbuf[a["vb"]:a["vb"] + nb].reshape(-1)[:n]
            if op == "modulate":
                c = self.vbuf[a["c"]:a["c"] + nb].reshape(-1)[:n]
            elif op == "gated_residual":
                c = self.abuf[a["c"] + off + k, lane][:n]
            elif op in ("softmax", "softmax_mx"):
                bits = self.mask[a["vb"] + r // T]
                mask = ((bits >> (k // T)) & 1).astype(bool)[:n]
            self._count_row(op, nb, vpu.layernorm_passes(self.cfg, n) if op == "layernorm" else 1)
            if op == "kv_amax":
                amax = max(amax, int(np.abs(x).max()))
                continue
            e = int(self.rmax[lane]) if op == "softmax_mx" else self.sreg[a["sreg"]]
            y, ns = self._vpu(op, x, b, c, mask, e)
            self._add("vpu_saturated", ns)
            full = np.zeros(nb * T, np.int64)
            full[:n] = y
            if op == "kv_quant":
                self.wmem[a["dst"] + np.arange(nb) * R + r] = full.reshape(nb, T)
            else:
                self.abuf[a["dst"] + off + k, lane] = full
        if op == "kv_amax":
            self.sreg[a["sreg"]] = vpu.kv_shift(amax)

    def _subchannel_walk(self, op: str, a):
        """VROW over sub-channels (``cols = 1``): one VPU command per token tile."""
        R, n, C = a["R"], a["n"], a["C"]
        self._rows("ABUF", a["a"], (R - 1) * C + n, "VROW a")
        if op == "kv_quant":
            self._rows("WMEM", a["dst"], R * n, "VROW dst")
        amax = 0
        for j in range(R):
            x = self.abuf[a["a"] + j * C:a["a"] + j * C + n]   # (n beats, T lanes)
            self._count_row(op, n)
            if op == "kv_amax":
                amax = max(amax, int(np.abs(x).max()))
                continue
            w, ns = self._vpu(op, x.reshape(-1), e=self.sreg[a["sreg"]])
            self._add("vpu_saturated", ns)
            self.wmem[a["dst"] + j * n:a["dst"] + (j + 1) * n] = w.reshape(n, -1)
        if op == "kv_amax":
            self.sreg[a["sreg"]] = vpu.kv_shift(amax)

    def _count_row(self, op: str, beats: int, passes: int = 1):
        """Counters of one VPU command of ``beats`` beats, its input sent ``passes`` times (a
        LayerNorm row longer than ``max_reduction``: twice)."""
        sent = beats * passes
        self._add("vpu_rows")
        self._add("vpu_beats", sent)
        self._read("vbuf_reads", 2 * sent)      # both VBUF ports and MASK read with each beat
        self._read("mask_reads", sent)
        self._add("abuf_reads", sent * (2 if op == "gated_residual" else 1))
        if op in _ABUF_RESULT:
            self._add("abuf_writes", beats)
        elif op == "kv_quant":
            self._add("wmem_writes", beats)
