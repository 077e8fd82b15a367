"""One differential linear layer as a core program: the unit of work the host-link tests and the
layer benchmarks run (the whole DiT block is :mod:`program.compiler`).

:class:`LayerProgram` wraps a :class:`golden.differential.DiffLinear` of ``cin → cout`` over
``N`` tokens (multiples of ``T``): :meth:`init` loads the weights and requantization rows and
zeroes the state; :meth:`step` quantizes a new input differentially through the double-buffered
group slots (the compiler's own layer schedule, :func:`program.compiler.emit_layer`) and
stores ``y``, ``x̂`` and ``Y``; :meth:`parse` turns the stored words back into arrays;
:meth:`expected` steps the golden layer.

Memory map (rows): ABUF input at 0, output after it; XBUF / YBUF state at 0; WMEM block ``j``
at ``j·cin``; RBUF row ``j`` per output block; GMEM slots at 0 and ``4·cin``.
"""

from __future__ import annotations

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.differential import DiffLinear
from dstar_rtl.program.compiler import (
    Emitter,
    Region,
    check_bias,
    emit_layer,
    make_cmd,
    rbuf_words,
    weight_words,
)
from dstar_rtl.program.isa import (
    BUFFERS,
    CoreConfig,
    buffer_depth,
    check_core,
    host_words_per_row,
    row_to_words,
    rows_tensor,
    rows_ysum,
    tensor_rows,
    words_to_row,
)

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
        if cfg.datapath != "dstar":
            raise ValueError(f"LayerProgram runs a differential layer on the DSTAR datapath; "
                             f"cfg.datapath is {cfg.datapath!r}")
        check_bias(cfg, layer, repr(layer.name))
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

    def init(self):
        """``(commands, host words)``: weights, requantization rows, zero state, END."""
        cfg, lay = self.cfg, self.layer
        cin = lay.W.shape[0]
        cmds = [self._cmd("LOAD", buf=BUFFERS.index("WMEM"), addr=0, count=cin * self.nb),
                self._cmd("LOAD", buf=BUFFERS.index("RBUF"), addr=0, count=self.nb),
                self._cmd("LOAD", buf=BUFFERS.index("XBUF"), addr=0, count=self.nt * cin,
                          zero=1),
                self._cmd("LOAD", buf=BUFFERS.index("YBUF"), addr=0, count=self.N * self.nb,
                          zero=1),
                self._cmd("END")]
        return cmds, weight_words(cfg, lay) + rbuf_words(cfg, lay)

    def step(self, x):
        """``(commands, host words)`` of one step with input ``x`` (N, cin), act format."""
        cfg, lay, T = self.cfg, self.layer, self.cfg.tile
        cin, cout = lay.W.shape
        x = np.asarray(x, np.int64)
        if x.shape != (self.N, cin):
            raise ValueError(f"x must have shape {(self.N, cin)}, not {x.shape}")
        R = {"x": Region("ABUF", "x", 0, self.nt * cin),
             "L.xhat": Region("XBUF", "xhat", 0, self.nt * cin),
             "L.Y": Region("YBUF", "Y", 0, self.N * self.nb),
             "L.W": Region("WMEM", "W", 0, cin * self.nb), "L.r": Region("RBUF", "r", 0, self.nb),
             "L.y": Region("ABUF", "y", self.out_base, self.nt * cout),
             "slot0": Region("GMEM", "slot0", 0, 4 * cin),
             "slot1": Region("GMEM", "slot1", 4 * cin, 4 * cin)}
        e = Emitter(cfg)
        e("LOAD", buf=BUFFERS.index("ABUF"), addr=0, count=self.nt * cin)
        emit_layer(e, cfg, lay, self.N, R, "L", "x", pieces=lay.pieces)     # ... BARRIER
        for reg in (R["L.y"], R["L.xhat"], R["L.Y"]):
            e.transfer("STORE", reg.buf, reg)
        e("END")
        cmds = e.cmds
        return cmds, [w for r in tensor_rows(x, T) for w in row_to_words(cfg, "ABUF", {"v": r})]

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
            out[key] = rows_tensor(take(buf, self.nt * C), N, T)
        out["Y"] = rows_ysum(take("YBUF", N * self.nb), N, T)
        return out

    def expected(self, x) -> dict:
        """Step the golden layer (it keeps its state) and return the same keys as
        :meth:`parse`."""
        r = self.layer.step(x)
        return {"y": r.y, "xhat": self.layer.state.copy(), "Y": r.Y}
