"""One differential linear layer as a core program: the unit of work the host-link tests and the
layer benchmarks run (the whole DiT block is :mod:`golden.core_compiler`).

:class:`LayerProgram` wraps a :class:`golden.differential.DiffLinear` of ``cin → cout`` over
``N`` tokens (multiples of ``T``): :meth:`init` loads the weights and requantization rows and
zeroes the state; :meth:`step` quantizes a new input differentially through the double-buffered
group slots (the same schedule and semaphores as the compiler's linear layers) and stores ``y``,
``x̂`` and ``Y``; :meth:`parse` turns the stored words back into arrays; :meth:`expected`
steps the golden layer.

Memory map (rows): ABUF input at 0, output after it; XBUF / YBUF state at 0; WMEM block ``j``
at ``j·cin``; RBUF row ``j`` per output block; GMEM slots at 0 and ``4·cin``.
"""

from __future__ import annotations

import numpy as np

from .config import Config
from .core_compiler import FREE, FULL, make_cmd
from .core_isa import (
    BUFFERS,
    CoreConfig,
    buffer_depth,
    check_core,
    host_words_per_row,
    row_to_words,
    words_to_row,
)
from .differential import DiffLinear

__all__ = ["LayerProgram"]


class LayerProgram:
    """Programs for one closed-loop differential layer on the core (module docstring)."""

    def __init__(self, layer: DiffLinear, tokens: int, core: CoreConfig):
        cfg: Config = layer.cfg
        check_core(cfg)
        T = cfg.tile
        cin, cout = layer.W.shape
        for what, v in (("tokens", tokens), ("input channels", cin), ("output channels", cout)):
            if v % T:
                raise ValueError(f"{what} = {v} is not a multiple of the tile size T = {T}")
        if not cfg.closed_loop:
            raise ValueError("the core implements closed-loop differential layers only")
        lim = 1 << (cfg.act_width - 1)
        if layer.bias_int.min(initial=0) < -lim or layer.bias_int.max(initial=0) >= lim:
            raise ValueError(f"layer {layer.name!r}: a bias does not fit act_width "
                             f"{cfg.act_width}")
        self.layer, self.cfg, self.core, self.N = layer, cfg, core, tokens
        self.nt, self.nb = tokens // T, cout // T
        self.out_base = self.nt * cin
        need = {"ABUF": self.nt * (cin + cout), "XBUF": self.nt * cin,
                "YBUF": tokens * self.nb, "WMEM": cin * self.nb, "RBUF": self.nb}
        for buf, rows in need.items():
            if rows > buffer_depth(core, buf):
                raise ValueError(f"the layer does not fit {buf}: it needs {rows} rows, the core "
                                 f"has {buffer_depth(core, buf)} (CoreConfig."
                                 f"{buf.lower()}_rows)")
        if 8 * cin > core.gmem_rows:
            raise ValueError(f"the layer does not fit GMEM: two group slots need {8 * cin} rows, "
                             f"the core has {core.gmem_rows}")

    def _cmd(self, op, wait=0, signal=0, **f):
        return make_cmd(self.cfg, op, wait, signal, **f)

    def _rows(self, x):
        T = self.cfg.tile
        N, C = x.shape
        return x.reshape(N // T, T, C).transpose(0, 2, 1).reshape(N // T * C, T)

    def init(self):
        """``(commands, host words)``: weights, requantization rows, zero state, END."""
        cfg, lay, T = self.cfg, self.layer, self.cfg.tile
        cin = lay.W.shape[0]
        cmds = [self._cmd("LOAD", buf=BUFFERS.index("WMEM"), addr=0, count=cin * self.nb),
                self._cmd("LOAD", buf=BUFFERS.index("RBUF"), addr=0, count=self.nb),
                self._cmd("LOAD", buf=BUFFERS.index("XBUF"), addr=0, count=self.nt * cin,
                          zero=1),
                self._cmd("LOAD", buf=BUFFERS.index("YBUF"), addr=0, count=self.N * self.nb,
                          zero=1),
                self._cmd("END")]
        words = []
        for j in range(self.nb):
            for c in range(cin):
                words += row_to_words(cfg, "WMEM", {"w": lay.W[c, j * T:(j + 1) * T]})
        for j in range(self.nb):
            s = slice(j * T, (j + 1) * T)
            words += row_to_words(cfg, "RBUF", {"m": lay.m[s], "sh": lay.sh[s],
                                                "bias": lay.bias_int[s]})
        return cmds, words

    def step(self, x):
        """``(commands, host words)`` of one step with input ``x`` (N, cin), act format."""
        cfg, lay, T = self.cfg, self.layer, self.cfg.tile
        cin, cout = lay.W.shape
        x = np.asarray(x, np.int64)
        if x.shape != (self.N, cin):
            raise ValueError(f"x must have shape {(self.N, cin)}, not {x.shape}")
        slots = (0, 4 * cin)
        cmds = [self._cmd("LOAD", buf=BUFFERS.index("ABUF"), addr=0, count=self.nt * cin),
                self._cmd("QCFG", base_log2=lay.B, thr=list(cfg.thr))]

        def quant(t):
            cmds.append(self._cmd("QUANT", wait=FREE if t >= 2 else 0, signal=FULL,
                                  src=t * cin, xsrc=t * cin, nch=cin, gdst=slots[t % 2], diff=1))

        quant(0)
        for t in range(self.nt):
            if t + 1 < self.nt:
                quant(t + 1)
            for j in range(self.nb):
                cmds.append(self._cmd(
                    "GEMM", wait=FULL if j == 0 else 0,
                    signal=FREE if j == self.nb - 1 and t + 2 < self.nt else 0,
                    gsrc=slots[t % 2], wbase=j * cin, ysrc=(t * self.nb + j) * T, rrow=j,
                    dst=self.out_base + t * cout + j * T, accum=1))
        cmds += [self._cmd("BARRIER"),
                 self._cmd("STORE", buf=BUFFERS.index("ABUF"), addr=self.out_base,
                           count=self.nt * cout),
                 self._cmd("STORE", buf=BUFFERS.index("XBUF"), addr=0, count=self.nt * cin),
                 self._cmd("STORE", buf=BUFFERS.index("YBUF"), addr=0, count=self.N * self.nb),
                 self._cmd("END")]
        words = []
        for r in self._rows(x):
            words += row_to_words(cfg, "ABUF", {"v": r})
        return cmds, words

    def out_words(self) -> int:
        """Host words one :meth:`step` returns."""
        cin, cout = self.layer.W.shape
        k = lambda b: host_words_per_row(self.cfg, b)   # noqa: E731
        return (self.nt * cout * k("ABUF") + self.nt * cin * k("XBUF") +
                self.N * self.nb * k("YBUF"))

    def parse(self, words) -> dict:
        """The words of one step → ``{"y", "xhat", "Y"}`` (N × channels, int64)."""
        cfg, T, N = self.cfg, self.cfg.tile, self.N
        cin, cout = self.layer.W.shape
        words, out = list(words), {}
        if len(words) != self.out_words():
            raise ValueError(f"expected {self.out_words()} words, got {len(words)}")

        def take(buf, rows):
            k = host_words_per_row(cfg, buf)
            a = np.array([words_to_row(cfg, buf, words[i * k:(i + 1) * k])["v"]
                          for i in range(rows)], np.int64)
            del words[:rows * k]
            return a

        for key, buf, C in (("y", "ABUF", cout), ("xhat", "XBUF", cin)):
            out[key] = take(buf, self.nt * C).reshape(self.nt, C, T).transpose(0, 2, 1) \
                .reshape(N, C)
        out["Y"] = take("YBUF", N * self.nb).reshape(self.nt, self.nb, T, T) \
            .transpose(0, 2, 1, 3).reshape(N, cout)
        return out

    def expected(self, x) -> dict:
        """Step the golden layer (it keeps its state) and return the same keys as
        :meth:`parse`."""
        r = self.layer.step(x)
        return {"y": r.y, "xhat": self.layer.state.copy(), "Y": r.Y}
