"""The DSTAR core's compiler: one :class:`golden.dit_int.IntDiTBlock` → a core program
(:mod:`program.isa` commands) whose sequential execution (:mod:`program.executor`) equals the
block bit for bit at every step.

Program structure
-----------------
*Init* (once): LOAD the weights of every layer into WMEM, the requantization rows into RBUF, the
SAR masks into MASK, LOAD ``zero`` the x̂ (XBUF) and ``Y`` (YBUF) state regions; END.

*Step* (the same command list every step; the host sends ``x`` and the six adaLN vectors)::

    LOAD ABUF x; LOAD VBUF shift1..gate2; VPARAM eps_q
    VROW layernorm x → ln1; VROW modulate ln1 → a
    SKIP [qk layer]                                   cache steps only
    v layer
    SKIP [per head: kv_amax/kv_quant K → WMEM Kᵀ;      cache steps only
          per query tile: QCFG B; QUANT Q; (QCFG r0 = 0; QUANT the previous tile's P →
          its P-cache region, beside the GEMMs;) GEMM per kept key block → S (and each
          query's max over the kept keys → RMAX); BARRIER; VROW softmax_mx S → P (MASK row,
          RMAX); after the last tile QCFG r0 = 0; QUANT its P]
    per head: kv_amax/kv_quant V → WMEM; per query tile and column block: GEMM P-cache → o
    BARRIER; proj layer; VROW gated_residual → h1; layernorm → ln2; modulate → m
    fc1 layer; VROW gelu; fc2 layer; VROW gated_residual → out
    STORE out, o, per layer y, x̂, Y; STEP interval; END

*A differential layer* (cin → cout, ``nt = N/T`` token tiles, ``nb = cout/T`` column blocks):
QCFG (B, thr); then ``QUANT 0``; for each tile τ: ``QUANT τ+1`` (diff, into GMEM slot
``(τ+1) % 2``), then the ``nb`` GEMMs of τ (accum). Semaphore 0 (*full*): every QUANT signals
it, the first GEMM of each tile waits on it. Semaphore 1 (*free*): the last GEMM of tile τ
signals it when a QUANT ``τ+2`` exists, and that QUANT waits on it. So the QUANT of τ+1 runs
while the GEMMs of τ run, every wait is met in program order and both counts are 0 at the end
of the layer. A BARRIER ends each layer (its output is read next by a VROW or a QUANT).

*Reduction pieces* (``compile_block(..., pieces={layer: p})``, DSTAR only; a layer of more than
``max_reduction`` input channels always runs in its golden layer's ``ceil(cin /
max_reduction)`` pieces, :attr:`golden.differential.DiffLinear.pieces`): each token tile's
``cin`` input channels are quantized and multiplied in ``p`` pieces of ``floor`` or
``ceil(cin / p)`` channels (:func:`piece_bounds`), each piece a tile of the protocol above
(its own QUANT into the next slot, ``nb`` GEMMs with ``wbase`` advanced to the piece's first
channel, all with ``accum``), so the QUANT of piece ``k+1`` runs beside the GEMMs of piece
``k``; a core with a single token tile otherwise waits for the whole tile's QUANT. The pieces'
``Y`` updates add up
to the unsplit one: FMDQ quantizes each sub-channel on its own, so the pieces' slices are the
tile's, and within ``max_reduction`` channels ``Y`` cannot saturate between pieces while ``x̂``
does not (closed loop: every partial ``Y`` is ``x̂'·W`` for an ``x̂'`` in ``x̂``'s range, within
the accumulator bound, numerics §2.5); beyond, ``Y`` saturates after each piece on the core as
in the golden layer. Each piece's GEMM writes ``y`` of the partial ``Y``; the last piece's
overwrites it. With a stored Y (``ystate_frac``, numerics §2.5; every preset's) each piece
rounds the stored sum, so the pieces change the numbers: the golden block must run the same
ones (``IntDiTBlock(..., pieces=)``), and other pieces are refused. The INT8 core cannot split:
its quantizer scales the whole tile by one exponent (refused).

Group-stream bound (GMEM reservation, :func:`group_rows`): a tile of ``nch`` sub-channels emits
at most ``4·nch`` groups (at most ``b/2 <= 4`` slice columns per sub-channel and every group holds
at least one valid lane), or exactly 1 when every sub-channel is zero; ``4·nch`` is reached (e.g.
two 8-bit sub-channels per chunk with exponents of different parity). Each slot and each P-cache
region reserves ``4·nch`` rows.

**The INT8 core** (``cfg.datapath == "int8"``, numerics §2.8) runs the same programs with dense
layers: no QCFG, QUANT without ``diff``, GEMM without ``accum``, no ``x̂``/``Y`` regions (they
have 0 rows: nothing is zeroed, loaded or stored), and at most ``nch`` groups per tile (one per
sub-channel), so the slots and P-cache regions reserve ``nch`` rows.

The ``qk`` outputs are stored every step; on a reuse step ABUF still holds those of the last cache
step, which equal ``requant(Y_qk)`` of the unchanged state (:meth:`CoreProgram.expected`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.dit_int import LAYERS, MOD_NAMES, BlockStep, IntDiTBlock
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.golden.schedule import piece_bounds, reduction_pieces
from dstar_rtl.program.heads import padded_head_dim, padded_proj, unpad
from dstar_rtl.program.isa import (
    ADDR_BITS,
    BUFFERS,
    DRAM_BUFFERS,
    Cmd,
    CoreConfig,
    beat_bytes,
    buffer_depth,
    check_core,
    cmd_layout,
    dram_row_bytes,
    host_words_per_row,
    row_to_words,
    rows_tensor,
    rows_ysum,
    tensor_rows,
    vpu_row_excess,
    words_to_row,
)

__all__ = ["compile_block", "CoreProgram", "Region", "make_cmd", "FULL", "FREE", "D_READY",
           "TILE_IN", "TILE_DONE", "StateStream", "TileStream", "PCacheStream", "AttnStream",
           "Emitter",
           "group_rows", "dense", "emit_layer", "piece_bounds", "check_pieces",
           "ELEMENTWISE", "vrow_chunks", "emit_vrow", "emit_token_rows",
           "emit_block_body", "weight_words", "rbuf_words",
           "attention_words", "memory_table", "regions_end", "check_block", "check_bias"]

FULL, FREE = 1 << 0, 1 << 1          # semaphore masks: group slot full / free
S_READY, P_READY = 1 << 2, 1 << 3    # attention: a query tile's scores (and RMAX) / P written
D_READY = (1 << 4, 1 << 5)          # a layer's DRAM objects loaded, by window (program.model)
# A linear layer whose state streams by token tiles (StateStream) reuses attention's two
# semaphores, which are 0 outside attention: a tile's state loaded / its last GEMM done.
TILE_IN, TILE_DONE = S_READY, P_READY
SREG_K, SREG_V = 0, 1                # shift registers of K and V (one head at a time)
MAX_COUNT = (1 << ADDR_BITS) - 1     # largest count field
BUF_ORDER = ("ABUF", "XBUF", "YBUF", "WMEM", "RBUF", "VBUF", "MASK", "GMEM")


def dense(cfg: Config) -> bool:
    """Whether ``cfg``'s core runs dense layers (the INT8 datapath) rather than differential
    ones."""
    return cfg.datapath == "int8"


def group_rows(cfg: Config, nch: int) -> int:
    """GMEM rows reserved for the group stream of a tile of ``nch`` sub-channels (module
    docstring): ``4·nch`` (DSTAR), ``nch`` (INT8)."""
    return nch if dense(cfg) else 4 * nch


def make_cmd(cfg: Config, op: str, wait: int = 0, signal: int = 0, **fields) -> Cmd:
    """A :class:`~program.isa.Cmd` with every field of ``op`` present (0 unless given), so
    that it equals its own decoded word."""
    lay = cmd_layout(cfg, op)
    names = [f[0] for f in lay]
    extra = set(fields) - set(names)
    if extra:
        raise ValueError(f"{op} has no field(s) {sorted(extra)}")
    args = {}
    for name, w, dims, _s in lay:
        v = fields.get(name, 0 if not dims else [0] * int(np.prod(dims)))
        args[name] = [int(x) for x in v] if dims else int(v)
        for x in args[name] if dims else [args[name]]:
            if not 0 <= x < 1 << w:
                raise ValueError(f"{op}.{name} = {x} does not fit its {w} bits: the "
                                 f"configuration's buffer depths (abuf_rows ...) set the "
                                 f"address widths, so deepen the buffers there, not only in "
                                 f"the CoreConfig")
    return Cmd(op, args, wait, signal)


@dataclass(frozen=True)
class Region:
    """Rows ``base .. base+rows-1`` of ``buf`` named ``name``."""

    buf: str
    name: str
    base: int
    rows: int


@dataclass
class CoreProgram:
    """A compiled block (:func:`compile_block`): commands, host streams, memory map."""

    blk: IntDiTBlock
    core: CoreConfig
    regions: dict = field(default_factory=dict)
    init: list = field(default_factory=list)
    step: list = field(default_factory=list)
    sections: list = field(default_factory=list)    # (name, start, stop) into step
    init_words: list = field(default_factory=list)
    stores: list = field(default_factory=list)      # (key, region name) in STORE order
    pieces: dict = field(default_factory=dict)      # layer -> reduction pieces (default 1)
    abuf_base: int = 0                              # first ABUF row of the block's regions
    layers: dict = field(default_factory=dict)      # the layers as the core runs them

    @property
    def head_dim_padded(self) -> int:
        """The head width of ``o``'s layout: ``d`` rounded up to a multiple of ``T``
        (:mod:`program.heads`)."""
        return padded_head_dim(self.blk.spec.head_dim, self.cfg.tile)

    # ------------------------------------------------------------------ commands
    def init_commands(self) -> list:
        """The one-time program (weights, RBUF, masks, zero state; END)."""
        return list(self.init)

    def init_host_words(self) -> list:
        """The host words the init program's LOADs consume."""
        return list(self.init_words)

    def step_commands(self) -> list:
        """The program of one denoising step (identical every step)."""
        return list(self.step)

    def section(self, name: str) -> tuple:
        """``(start, stop)`` of the named part of :meth:`step_commands` (see :attr:`sections`)."""
        for n, a, b in self.sections:
            if n == name:
                return a, b
        raise KeyError(f"no section {name!r}; sections are {[s[0] for s in self.sections]}")

    # ------------------------------------------------------------------ host data
    @property
    def cfg(self) -> Config:
        """The block's configuration."""
        return self.blk.cfg

    def step_host_words(self, x, mod) -> list:
        """Host words of one step: ``x`` (N, D) into ABUF, then ``mod`` (6, D) into VBUF (act
        format integers, as :meth:`golden.dit_int.IntDiTBlock.step` takes them)."""
        s = self.blk.spec
        x = np.asarray(x, np.int64).reshape(s.tokens, s.hidden)
        mod = np.asarray(mod, np.int64).reshape(len(MOD_NAMES), s.hidden)
        words = []
        for r in tensor_rows(x, self.cfg.tile):
            words += row_to_words(self.cfg, "ABUF", {"v": r})
        for r in mod.reshape(-1, self.cfg.tile):
            words += row_to_words(self.cfg, "VBUF", {"v": r})
        return words

    def parse_step_output(self, words) -> dict:
        """The words STOREd by one step → ``{key: int64 array}`` in the shapes of
        :meth:`expected`."""
        cfg, s = self.cfg, self.blk.spec
        N, T = s.tokens, cfg.tile
        words, out, pos = list(words), {}, 0
        for key, rname in self.stores:
            reg = self.regions[rname]
            wpr = host_words_per_row(cfg, reg.buf)
            need = reg.rows * wpr
            if pos + need > len(words):
                raise ValueError(f"output stream ends inside {key!r} ({len(words)} words)")
            rows = np.array([words_to_row(cfg, reg.buf, words[pos + i * wpr:pos + (i + 1) * wpr])
                             ["v"] for i in range(reg.rows)], np.int64)
            pos += need
            out[key] = (rows_ysum if reg.buf == "YBUF" else rows_tensor)(rows, N, T)
        if pos != len(words):
            raise ValueError(f"output stream has {len(words) - pos} words past the last region")
        H, d, dp = s.heads, s.head_dim, self.head_dim_padded
        out["o"] = out["o"].reshape(N, H, dp)[..., :d].transpose(1, 0, 2)
        if dp != d and "proj.xhat" in out:
            out["proj.xhat"] = unpad(out["proj.xhat"], H, d, dp)
        return out

    def expected(self, step: BlockStep) -> dict:
        """The golden values of :meth:`parse_step_output`'s keys for one
        :class:`~golden.dit_int.BlockStep`: ``out`` (N, D), ``o`` (H, N, d) and per layer
        ``<layer>.y``, ``<layer>.xhat``, ``<layer>.Y``. For ``qk`` on a reuse step ``y`` is the
        last cache step's (what ABUF still holds). The INT8 core has no ``xhat`` and ``Y``
        keys."""
        cfg = self.cfg
        res = {"out": step.out, "o": step.attn.o}
        for k in LAYERS:
            ls = step.layers[k]
            res[f"{k}.y"] = ls.y
            if not dense(cfg):
                res[f"{k}.xhat"], res[f"{k}.Y"] = ls.xhat, ls.Y
        return {k: np.asarray(v, np.int64) for k, v in res.items()}

    # ------------------------------------------------------------------ memory
    def memory_map(self) -> str:
        """A readable table of the regions: buffer, name, base, rows (and the depth used)."""
        return memory_table(self.regions, self.core)

    def rows_used(self, buf: str) -> int:
        """Rows of ``buf`` the program needs (end of its highest region)."""
        return regions_end(self.regions, buf)

    def check_fits(self):
        """Raise ValueError naming the first buffer whose regions exceed its depth."""
        for buf in BUF_ORDER:
            need, depth = self.rows_used(buf), buffer_depth(self.core, buf)
            if need > depth:
                raise ValueError(f"the program does not fit {buf}: it needs {need} rows, the "
                                 f"core has {depth} (CoreConfig.{buf.lower()}_rows)")


def regions_end(regions: dict, buf: str) -> int:
    """The end of the highest region of ``buf`` among ``regions`` (0 when none)."""
    return max((r.base + r.rows for r in regions.values() if r.buf == buf), default=0)


def memory_table(regions: dict, core: CoreConfig, marked=frozenset(), name_width: int = 14,
                 mark: str = "") -> str:
    """A memory map as a readable table: per buffer (:data:`BUF_ORDER`) its regions (buffer,
    name, base, rows; ``mark`` after those named in ``marked``), then the rows used and the
    depth."""
    lines = [f"{'buffer':<7}{'region':<{name_width}}{'base':>7}{'rows':>7}"]
    for buf in BUF_ORDER:
        regs = [r for r in regions.values() if r.buf == buf]
        for r in regs:
            lines.append(f"{buf:<7}{r.name:<{name_width}}{r.base:>7}{r.rows:>7}"
                         + (mark if r.name in marked else ""))
        if regs:
            lines.append(f"{buf:<7}{'(used/depth)':<{name_width}}{regions_end(regions, buf):>7}"
                         f"{buffer_depth(core, buf):>7}")
    return "\n".join(lines)


def check_block(blk: IntDiTBlock):
    """What the core needs of a block (raises ValueError naming it): every dimension but the
    head dim a multiple of ``T`` (a head dim that is not is padded, :mod:`program.heads`),
    closed-loop layers, the interval within STEP's field, biases within the act format,
    ``eps_q`` within VPARAM's."""
    cfg = blk.cfg
    check_core(cfg)
    s = blk.spec
    T = cfg.tile
    dims = (("N (tokens)", s.tokens), ("D (hidden)", s.hidden), ("M (MLP width)", s.mlp_hidden))
    for what, v in dims:
        if v % T:
            raise ValueError(f"{what} = {v} is not a multiple of the tile size T = {T}")
    if not cfg.closed_loop:
        raise ValueError("the core implements closed-loop differential layers only "
                         "(cfg.closed_loop is False)")
    if not 1 <= blk.interval <= 255:
        raise ValueError(f"SAR interval {blk.interval} does not fit STEP.interval (1..255)")
    for k in LAYERS:
        check_bias(cfg, blk.layers[k], f"{k!r} ({blk.layers[k].name})")
    if not 0 <= blk.eps_q < 1 << 64:
        raise ValueError(f"LayerNorm eps_q {blk.eps_q} does not fit VPARAM.value (64 bits)")


def check_bias(cfg: Config, lay, what: str):
    """Raise ValueError when layer ``what``'s biases (act LSBs) do not fit ``act_width``."""
    lim = 1 << (cfg.act_width - 1)
    b = lay.bias_int
    if b.min(initial=0) < -lim or b.max(initial=0) >= lim:
        raise ValueError(f"layer {what}: bias {int(np.abs(b).max())} LSBs does not fit "
                         f"act_width {cfg.act_width}")


def check_pieces(blk: IntDiTBlock, pieces) -> dict:
    """``pieces`` (``{layer: count}`` or None) checked against ``blk`` (ValueError naming the
    layer and the allowed values); returns the dict. A layer longer than ``max_reduction``
    runs in its golden layer's pieces (``pieces``: ``Y`` saturates after each, so another split
    could differ), and so does every layer with a stored Y (``ystate_frac``: rounded after each
    piece)."""
    pieces = dict(pieces or {})
    for k, p in pieces.items():
        if k not in LAYERS:
            raise ValueError(f"pieces: no layer {k!r}; layers are {list(LAYERS)}")
        cin = blk.layers[k].W.shape[0]
        if not isinstance(p, int) or isinstance(p, bool) or not 1 <= p <= cin:
            raise ValueError(f"pieces[{k!r}] = {p!r}: an int in 1..{cin} (the layer's input "
                             f"channels)")
        need = blk.layers[k].pieces
        if p != need and reduction_pieces(cin, blk.cfg) > 1:
            raise ValueError(f"pieces[{k!r}] = {p}: the layer's {cin} input channels exceed "
                             f"max_reduction {blk.cfg.max_reduction} and run in its golden "
                             f"layer's {need} pieces; {need} only")
        if p != need and blk.cfg.ystate_frac is not None:
            raise ValueError(f"pieces[{k!r}] = {p}: a stored Y (ystate_frac "
                             f"{blk.cfg.ystate_frac}) is rounded after every piece, so the "
                             f"golden block must run the same pieces: build it with "
                             f"IntDiTBlock(..., pieces={{{k!r}: {p}}}) (it runs {need})")
        if p > 1 and dense(blk.cfg):
            raise ValueError(f"pieces[{k!r}] = {p}: the INT8 core cannot split a reduction (its "
                             f"quantizer scales a whole tile by one exponent); 1 only")
    return pieces


def compile_block(blk: IntDiTBlock, core: CoreConfig, pieces: dict | None = None,
                  abuf_base: int = 0) -> CoreProgram:
    """Lower ``blk`` to a :class:`CoreProgram` for a core of buffer depths ``core`` (module
    docstring); ``pieces``: ``{layer: p}`` splits that layer's reduction into ``p`` pieces
    (module docstring; default 1 each, more beyond ``max_reduction``); ``abuf_base``: the first
    ABUF row of the block's activations (the rows below stay free). Raises ValueError for a
    dimension that is not a multiple of ``T``, a bias beyond ``act_width``, an open-loop
    configuration, a bad ``pieces`` or ``abuf_base``, or a program that does not fit."""
    check_block(blk)
    if not isinstance(abuf_base, int) or isinstance(abuf_base, bool) or abuf_base < 0:
        raise ValueError(f"abuf_base must be an integer >= 0, not {abuf_base!r}")
    layers = core_layers(blk)
    if layers["proj"].W.shape[0] != blk.layers["proj"].W.shape[0] \
            and (pieces or {}).get("proj", 1) != 1:
        raise ValueError(f"pieces['proj'] = {pieces['proj']}: the heads are padded "
                         f"(program.heads), so proj runs in one piece; 1 only")
    prog = CoreProgram(blk=blk, core=core, pieces=check_pieces(blk, pieces),
                       abuf_base=abuf_base, layers=layers)
    _plan(prog)
    prog.check_fits()
    _lower(prog)
    return prog


def core_layers(blk: IntDiTBlock) -> dict:
    """The block's layers as the core runs them: ``proj`` reads the heads padded to a multiple
    of ``T`` when ``T`` does not divide the head dim (:func:`program.heads.padded_proj`)."""
    s = blk.spec
    dp = padded_head_dim(s.head_dim, blk.cfg.tile)
    layers = dict(blk.layers)
    if dp != s.head_dim:
        layers["proj"] = padded_proj(blk.layers["proj"], s.heads, s.head_dim, dp)
    return layers


def _plan(prog: CoreProgram):
    """Allocate every region (the memory map) in ``prog.regions``."""
    blk, cfg = prog.blk, prog.cfg
    s, T = blk.spec, cfg.tile
    N, D, H, M = s.tokens, s.hidden, s.heads, s.mlp_hidden
    d, dp, layers = s.head_dim, prog.head_dim_padded, prog.layers
    nt = N // T
    top = dict.fromkeys(BUF_ORDER, 0)
    top["ABUF"] = prog.abuf_base

    def take(buf, name, rows):
        prog.regions[name] = Region(buf, name, top[buf], rows)
        top[buf] += rows

    widths = {"x": D, "ln1": D, "a": D, "qk.y": 2 * D, "v.y": D, "S": None, "P": None,
              "o": H * dp,
              "proj.y": D, "h1": D, "ln2": D, "m": D, "fc1.y": M, "gelu": M, "fc2.y": D, "out": D}
    for name, C in widths.items():
        # S, P: T queries × N keys, twice (query tile qa uses the half qa % 2)
        take("ABUF", name, 2 * N if C is None else nt * C)
    state = 0 if dense(cfg) else 1       # the INT8 core keeps no x̂ and no Y
    for k in LAYERS:
        take("XBUF", f"{k}.xhat", state * nt * layers[k].W.shape[0])
    for k in LAYERS:
        take("YBUF", f"{k}.Y", state * N * layers[k].W.shape[1] // T)
    for k in LAYERS:
        cin, cout = layers[k].W.shape
        take("WMEM", f"{k}.W", cin * cout // T)
    take("WMEM", "K^T", nt * d)          # row kb·d + c: K[kb·T + lane, c] (one head)
    take("WMEM", "V", (dp // T) * N)     # row cb·N + key: V[key, cb·T + lane] (one head)
    for k in LAYERS:
        take("RBUF", f"{k}.r", layers[k].W.shape[1] // T)
    take("RBUF", "S.r", 1)
    take("RBUF", "O.r", 1)
    for name in MOD_NAMES:
        take("VBUF", name, D // T)
    take("MASK", "mask", H * nt)         # row h·nt + query tile
    slot = group_rows(cfg, max(layers[k].W.shape[0] for k in LAYERS))
    take("GMEM", "slot0", slot)
    take("GMEM", "slot1", slot)
    take("GMEM", "pcache", H * nt * group_rows(cfg, N))   # region (h·nt + qa)·group_rows(N)


# ================================================================================ lowering
class Emitter:
    """Appends commands to a list; :meth:`section` marks named parts, :meth:`skip` wraps a part in
    SKIPs, and every command carries a *tag* (None, or the name of the host tensor a LOAD reads
    or a STORE writes, with the row offset into it) in :attr:`tags`, parallel to :attr:`cmds`."""

    def __init__(self, cfg: Config):
        self.cfg, self.cmds, self.tags, self.sections = cfg, [], [], []
        self._mark = None

    def __call__(self, op: str, wait: int = 0, signal: int = 0, tag=None, **f):
        """Append one command (:func:`make_cmd`)."""
        self.cmds.append(make_cmd(self.cfg, op, wait, signal, **f))
        self.tags.append(tag)

    def section(self, name):
        """End the open section (if any) here and open ``name`` (None: open none)."""
        if self._mark is not None:
            self.sections.append((self._mark[0], self._mark[1], len(self.cmds)))
        self._mark = None if name is None else (name, len(self.cmds))

    def skip(self, body: "Emitter"):
        """``body``'s commands behind SKIPs of at most :data:`MAX_COUNT` commands each."""
        for i in range(0, len(body.cmds), MAX_COUNT):
            part = body.cmds[i:i + MAX_COUNT]
            self("SKIP", count=len(part))
            self.cmds.extend(part)
            self.tags.extend(body.tags[i:i + MAX_COUNT])

    def dram(self, op: str, buf: str, reg: Region, beat: int, signal: int = 0, wait: int = 0,
             groups: int = 0):
        """DLOAD/DSTORE of a whole region from/to DRAM beat ``beat`` (its rows' image laid
        out from there), split into parts of at most :data:`MAX_COUNT` rows that each start on
        a beat; the first part waits on ``wait``, the last signals ``signal``. ``groups``: the
        region holds one group stream (program.isa), moved as one (at most MAX_COUNT rows)."""
        if groups:
            if reg.rows > MAX_COUNT:
                raise ValueError(f"a group stream of {reg.rows} rows exceeds {MAX_COUNT}")
            self(op, wait=wait, signal=signal, buf=DRAM_BUFFERS.index(buf), groups=1,
                 addr=reg.base, count=reg.rows, dram=beat)
            return
        rb, bb = dram_row_bytes(self.cfg, buf), beat_bytes(self.cfg)
        step = bb // math.gcd(rb, bb)                  # rows whose image fills whole beats
        part = MAX_COUNT - MAX_COUNT % step
        for a in range(0, reg.rows, part):
            n = min(part, reg.rows - a)
            self(op, wait=wait if a == 0 else 0, signal=signal if a + n == reg.rows else 0,
                 buf=DRAM_BUFFERS.index(buf), addr=reg.base + a, count=n,
                 dram=beat + a * rb // bb)

    def transfer(self, op: str, buf: str, reg: Region, zero: int = 0, key: str | None = None,
                 offset: int = 0):
        """LOAD/STORE of a whole region, split at :data:`MAX_COUNT` rows; ``key`` names the host
        tensor the rows come from or go to (the tag ``(key, first row)`` of each command, the
        region's rows starting ``offset`` rows into that tensor)."""
        for a in range(0, reg.rows, MAX_COUNT):
            f = dict(buf=BUFFERS.index(buf), addr=reg.base + a, count=min(MAX_COUNT, reg.rows - a))
            if op == "LOAD":
                f["zero"] = zero
            self(op, tag=None if key is None else (key, offset + a), **f)


#: VPU operations that work element by element along a row (their VBUF operands per channel,
#: ``gated_residual``'s ``c`` an ABUF row like ``a``): a row longer than ``max_reduction`` runs
#: as several VROWs over consecutive channels (:func:`vrow_chunks`).
ELEMENTWISE = ("modulate", "gelu", "gated_residual")


def vrow_chunks(cfg: Config, op: str, n: int) -> list:
    """``(first channel, channels)`` of the VROWs one token row of ``n`` elements runs in: one
    for a row of at most ``max_reduction`` or a LayerNorm row of at most ``ln_row_max`` (the VPU
    takes a longer one twice); an :data:`ELEMENTWISE` operation's longer row in chunks of the
    largest multiple of ``T`` within ``max_reduction`` (a VROW writes whole ``T``-element
    beats), the last one shorter. Raises ValueError for a softmax row longer than
    ``max_reduction`` or a LayerNorm row longer than ``ln_row_max`` (they need their whole row
    in the VPU)."""
    if n <= (cfg.ln_max if op == "layernorm" else cfg.max_reduction):
        return [(0, n)]
    if op == "layernorm":
        raise ValueError(f"a layernorm row of {n} elements exceeds ln_row_max {cfg.ln_max} "
                         f"(--set ln_row_max={n} lets the VPU take it twice)")
    if op not in ELEMENTWISE:
        raise ValueError(f"a {op} row of {n} elements exceeds max_reduction "
                         f"{cfg.max_reduction} (the VPU holds a whole row)")
    step = cfg.max_reduction // cfg.tile * cfg.tile
    return [(c0, min(step, n - c0)) for c0 in range(0, n, step)]


def emit_vrow(e: Emitter, op: str, **f):
    """Append a VROW of the VPU operation named ``op``. Raises ValueError for a VPU row the
    core would refuse (``operand``): more than ``max_reduction`` elements (a LayerNorm row: more
    than ``ln_row_max``; the sub-channel walk: ``n·T``)."""
    why = vpu_row_excess(e.cfg, op, f["n"], f.get("cols", 0))
    if why:
        raise ValueError(why)
    e("VROW", vop=VPU_OPS.index(op), **f)


def emit_token_rows(e: Emitter, op: str, N: int, n: int, C: int, a: int, dst: int, **f):
    """VROW ``op`` over ``N`` token rows of ``n`` channels (ABUF ``a`` and ``dst``, token-tile
    stride ``C``), in the VROWs of :func:`vrow_chunks`: each chunk's ABUF operands from its first
    channel, its VBUF operands (``vb``, modulate's ``c``) from its first VBUF row."""
    T = e.cfg.tile
    for c0, m in vrow_chunks(e.cfg, op, n):
        g = {k: v + (c0 if (k, op) == ("c", "gated_residual") else c0 // T)
             for k, v in f.items()}
        emit_vrow(e, op, R=N, n=m, a=a + c0, C=C, dst=dst + c0, **g)


def emit_kv(e: Emitter, cfg: Config, a: int, C: int, N: int, d: int, sreg: int,
            kt: int | None = None):
    """The K/V shift of one head (``kv_amax`` into SREG ``sreg``) over its ``d`` channels of
    ``N`` tokens at ABUF ``a`` (token-tile stride ``C``), and for K (``kt``: its WMEM base) the
    INT8 ``Kᵀ`` rows ``kt + kb·d + c``. One sub-channel row per token tile (``d·T`` elements)
    while that fits ``max_reduction``; beyond it the shift takes one token row per token
    (``d`` elements; the running max continues over every command of the VROW) and ``Kᵀ`` one
    VROW per token tile and chunk of at most ``max_reduction / T`` channels."""
    T = cfg.tile
    nt = N // T
    if d * T <= cfg.max_reduction:
        walk = dict(cols=1, R=nt, n=d, a=a, C=C, sreg=sreg)
        emit_vrow(e, "kv_amax", **walk)
        if kt is not None:
            emit_vrow(e, "kv_quant", dst=kt, **walk)
        return
    emit_vrow(e, "kv_amax", R=N, n=d, a=a, C=C, sreg=sreg)
    if kt is None:
        return
    step = max(1, cfg.max_reduction // T)
    for kb in range(nt):
        for c0 in range(0, d, step):
            emit_vrow(e, "kv_quant", cols=1, R=1, n=min(step, d - c0), a=a + kb * C + c0, C=C,
                      dst=kt + kb * d + c0, sreg=sreg)


def _layer(prog, e: Emitter, k: str, src: str, started=None, q: int | None = None):
    """One differential layer ``k`` of ``prog.blk`` reading ABUF region ``src`` (its state
    streamed when ``prog.state_streams`` names it; ``started`` as :func:`emit_layer`), or its
    pass ``q`` (``prog.pass_call(k, q)``: the regions, stream and :func:`emit_layer` arguments
    of the pass)."""
    lay = prog.layers[k]
    if q is not None:
        regions, stream, kw = prog.pass_call(k, q)
        emit_layer(e, prog.cfg, lay, prog.blk.spec.tokens, regions, k, kw.pop("src"),
                   stream=stream, started=started, **kw)
        return
    emit_layer(e, prog.cfg, lay, prog.blk.spec.tokens, prog.regions, k, src,
               pieces=prog.pieces.get(k, lay.pieces),
               stream=getattr(prog, "state_streams", {}).get(k), started=started)


@dataclass(frozen=True)
class TileStream:
    """One state buffer of a layer moved through DRAM by token tiles: ``win`` the buffer base
    of each window (a tile's rows: ``cin`` of ``x̂``, ``cout`` of ``Y``), ``beat`` the DRAM beat
    of tile 0's image, ``stride`` the beats from one tile's image to the next."""

    win: tuple
    beat: int
    stride: int


@dataclass(frozen=True)
class AttnStream:
    """A block's ``qk.y`` and ``v.y`` kept in DRAM by their layers (``qk``/``v``: the
    :class:`TileStream` of their token tiles, 2·D and D rows a tile): attention loads one
    head's Q and K (``qwin``, ``kwin``) and V (``vwin``) at a time, ``nt·d`` rows each, tile
    ``t``'s ``d`` rows from ``t·d``."""

    qk: TileStream
    v: TileStream
    qwin: int
    kwin: int
    vwin: int


def _head_in(e: Emitter, cfg: Config, src: TileStream, c0: int, win: int, nt: int, d: int):
    """DLOAD channels ``c0 .. c0+d-1`` of each of ``nt`` token tiles of an ABUF tensor in DRAM
    (``src``) into ``win`` (tile ``t`` at ``win + t·d``); the rows must start on a beat."""
    rb, bb = dram_row_bytes(cfg, "ABUF"), beat_bytes(cfg)
    if c0 * rb % bb:
        raise ValueError(f"a head's rows start {c0} rows into a token tile: {c0 * rb} bytes, "
                         f"not a whole number of {bb}-byte beats (dram_width {cfg.dram_width})")
    for t in range(nt):
        e.dram("DLOAD", "ABUF", Region("ABUF", "head", win + t * d, d),
               src.beat + t * src.stride + c0 * rb // bb)


@dataclass(frozen=True)
class PCacheStream:
    """A block's P cache kept in DRAM (program.model "DRAM"): two query tiles at a time in
    GMEM from ``window`` (``group_rows(N)`` rows a tile, tile ``qa`` in slot ``qa`` mod 2),
    tile ``(h, qa)`` a group stream at DRAM beat ``beat + (h·nt + qa)·stride``; ``free``: a
    semaphore idle during the block's attention, which a slot's DSTORE signals to the QUANT
    that fills the slot again."""

    window: int
    beat: int
    stride: int
    free: int


@dataclass(frozen=True)
class StateStream:
    """What of a layer moves through DRAM one token tile at a time (:func:`emit_layer`): its
    ``x̂`` (XBUF) and ``Y`` (YBUF) :class:`TileStream`, and its input and output activations
    (ABUF: ``ain`` loaded like the state, ``aout`` stored like it); None for what is
    resident."""

    xhat: TileStream | None
    Y: TileStream | None
    ain: TileStream | None = None
    aout: TileStream | None = None
    #: Whether the ``x̂`` tiles go back to DRAM (False: a pass that re-quantizes them, whose
    #: ``x̂`` a later pass of the layer writes, :func:`emit_layer` ``blocks``).
    xhat_out: bool = True


def emit_layer(e: Emitter, cfg: Config, lay, N: int, R, k: str, src: str, pieces: int = 1,
               stream: StateStream | None = None, started=None, blocks: tuple | None = None,
               chans: tuple | None = None, ostride: int | None = None):
    """One linear layer (module docstring): ``lay`` (a :class:`golden.differential.DiffLinear`, or
    on the INT8 core a dense :class:`golden.dense_int8.DenseInt8Linear`) over ``N`` tokens read
    from ``R[src]``, each token tile's reduction in ``pieces`` pieces (:func:`piece_bounds`);
    ``R`` maps ``<k>.xhat``, ``<k>.Y``, ``<k>.W``, ``<k>.r``, ``<k>.y``, ``slot0`` and ``slot1``
    to their regions.

    ``stream`` (a :class:`StateStream`): the state (and, with ``ain``/``aout``, the input and
    output activations) comes from DRAM one token tile at a time into windows (tile ``t`` in
    window ``t`` mod their number, three: the tile the GEMMs use, the one the QUANT fills, the
    one moving): tiles 0 and 1 are loaded first (the last DLOAD of each signals ``TILE_IN``,
    which the tile's first QUANT waits on); after the first GEMM of tile ``t`` the D engine
    stores tile ``t-1`` (state and output, waiting on ``TILE_DONE``, which tile ``t-1``'s last
    GEMM signals) and loads tile ``t+2`` (input and state) into the windows it leaves, beside
    the GEMMs; the last tile is stored after the loop. ``started(e)``, if given, runs once the
    first tiles are asked for (what the layer's caller loads beside it).

    **A pass** runs part of the layer, so that a core holds only that part's weights (the
    compiler loads the next pass's beside it; program.model "Passes"):

    - ``blocks = (j0, j1)``: output column blocks ``j0 .. j1-1`` only, every token tile.
      WMEM at ``<k>.W`` holds those blocks' rows (``cin`` a block), RBUF at ``<k>.r`` their
      rows; a streamed ``Y`` (and ``aout``) window holds their ``(j1-j0)·T`` rows of the tile
      (its :class:`TileStream` starting there); ``<k>.y`` starts at the pass's first column
      (``ostride`` rows a token tile). Each pass quantizes the whole input again; on the
      core with state, from the same ``x̂`` (each pass loads the tiles' ``x̂`` from DRAM and
      only the last stores it, ``StateStream.xhat_out``), so every pass's groups are the
      layer's.
    - ``chans = (c0, n)``: input channels ``c0 .. c0+n-1`` only (a reduction piece run over
      every token tile; DSTAR only), read from ``R[src]``, a tensor of those ``n`` channels.
      WMEM holds the piece's rows (``n`` a block); ``x̂`` is the piece's rows of each tile; each
      pass accumulates into ``Y``, so ``Y`` streams through every pass; the golden layer must
      run the same pieces (numerics §2.5).
    - ``ostride``: the output's rows per token tile (default ``cout``; 0: every tile's into
      the same rows, for a piece whose partial output is discarded)."""
    T = cfg.tile
    cin, cout = lay.W.shape
    nt, nb = N // T, cout // T
    j0, j1 = blocks or (0, nb)
    p0, pn = chans or (0, cin)
    if not (0 <= j0 < j1 <= nb and 0 <= p0 < p0 + pn <= cin):
        raise ValueError(f"layer {k!r}: blocks {blocks} / chans {chans} outside its {nb} "
                         f"column blocks and {cin} input channels")
    slots = (R["slot0"].base, R["slot1"].base)
    xa, xh, Yb = R[src].base, R[f"{k}.xhat"].base, R[f"{k}.Y"].base
    wb, rb, ya = R[f"{k}.W"].base, R[f"{k}.r"].base, R[f"{k}.y"].base
    ostride = cout if ostride is None else ostride
    diff = 0 if dense(cfg) else 1
    if chans and not diff:
        raise ValueError(f"layer {k!r}: the INT8 core cannot split a reduction (chans)")
    if stream is not None and not diff and (stream.xhat or stream.Y):
        raise ValueError(f"layer {k!r}: the INT8 core's dense layers keep no state to stream")
    if stream is not None and not (stream.xhat or stream.Y or stream.ain or stream.aout):
        stream = None

    # The protocol's tiles: (token tile, first channel of the pass, channels) in order.
    tiles = [(t, c0, n) for t in range(nt) for c0, n in piece_bounds(pn, pieces)]
    first = {t: min(i for i, x in enumerate(tiles) if x[0] == t) for t in range(nt)}
    last = {t: max(i for i, x in enumerate(tiles) if x[0] == t) for t in range(nt)}
    xs, ys = (stream.xhat, stream.Y) if stream else (None, None)
    ai, ao = (stream.ain, stream.aout) if stream else (None, None)
    xout = bool(xs) and stream.xhat_out
    loads, stores = bool(ai or xs or ys), bool(xout or ys or ao)     # what moves each tile

    def xrow(t):             # x̂ of the pass's channels of tile t: a window, or resident rows
        return xs.win[t % len(xs.win)] if xs else xh + t * cin + p0

    def yrow(t):             # Y of the pass's blocks of tile t
        return ys.win[t % len(ys.win)] if ys else Yb + (t * nb + j0) * T

    def arow(t):             # the input activations of tile t
        return ai.win[t % len(ai.win)] if ai else xa + t * pn

    def orow(t):             # its outputs
        return ao.win[t % len(ao.win)] if ao else ya + t * ostride

    def move(op, t, wait=0, signal=0):
        """DLOAD (the input, x̂, Y) or DSTORE (x̂, Y, the output) of tile ``t``'s streamed
        parts (the first waits on ``wait``, the last signals ``signal``)."""
        ny = (j1 - j0) * T
        each = ((("ABUF", ai, arow, pn), ("XBUF", xs, xrow, pn), ("YBUF", ys, yrow, ny))
                if op == "DLOAD" else
                (("XBUF", xs if xout else None, xrow, pn), ("YBUF", ys, yrow, ny),
                 ("ABUF", ao, orow, ny)))
        parts = [(b, ts, row(t), n) for b, ts, row, n in each if ts]
        for i, (b, ts, base, n) in enumerate(parts):
            e.dram(op, b, Region(b, k, base, n), ts.beat + t * ts.stride,
                   wait=wait if i == 0 else 0, signal=signal if i == len(parts) - 1 else 0)

    if loads:
        for t in range(min(2, nt)):
            move("DLOAD", t, signal=TILE_IN)
    if started:
        started(e)
    if diff:
        e("QCFG", base_log2=lay.B, thr=list(cfg.thr))

    def quant(i):
        t, c0, n = tiles[i]
        # A tile's windows are free once the D engine is past the tile three before: its
        # DLOAD says so (the D engine stored that tile's first), or with nothing to load, that
        # tile's DSTORE.
        tin = TILE_IN if i == first[t] and (loads or (stores and t >= 3)) else 0
        e("QUANT", wait=(FREE if i >= 2 else 0) | tin, signal=FULL, src=arow(t) + c0,
          xsrc=(xrow(t) + c0) * diff, nch=n, gdst=slots[i % 2], diff=diff)

    quant(0)
    for i, (t, c0, _n) in enumerate(tiles):
        if i + 1 < len(tiles):
            quant(i + 1)
        for j in range(j0, j1):
            done = TILE_DONE if stores and j == j1 - 1 and i == last[t] else 0
            e("GEMM", wait=FULL if j == j0 else 0,
              signal=(FREE if j == j1 - 1 and i + 2 < len(tiles) else 0) | done,
              gsrc=slots[i % 2], wbase=wb + (j - j0) * pn + c0,
              ysrc=(yrow(t) + (j - j0) * T) * diff, rrow=rb + j - j0,
              dst=orow(t) + (j - j0) * T,
              accum=diff)
            if stream and j == j0 and i == first[t]:
                if t >= 1 and stores:
                    move("DSTORE", t - 1, wait=TILE_DONE,
                         signal=TILE_IN if not loads and t + 2 < nt else 0)
                if t + 2 < nt and loads:
                    move("DLOAD", t + 2, signal=TILE_IN)
    if stores:
        move("DSTORE", nt - 1, wait=TILE_DONE)
    e("BARRIER")


def weight_words(cfg: Config, lay) -> list:
    """The host words of a layer's WMEM rows: per column block ``j``, per input channel ``c``,
    ``W[c, j·T .. j·T+T-1]``."""
    T = cfg.tile
    cin, cout = lay.W.shape
    return [w for j in range(cout // T) for c in range(cin)
            for w in row_to_words(cfg, "WMEM", {"w": lay.W[c, j * T:(j + 1) * T]})]


def rbuf_words(cfg: Config, lay) -> list:
    """The host words of a layer's RBUF rows (``m``, ``sh``, bias of each column block)."""
    T = cfg.tile
    words = []
    for j in range(lay.W.shape[1] // T):
        sl = slice(j * T, (j + 1) * T)
        words += row_to_words(cfg, "RBUF", {"m": lay.m[sl], "sh": lay.sh[sl],
                                            "bias": lay.bias_int[sl]})
    return words


def attention_words(cfg: Config, blk: IntDiTBlock) -> tuple:
    """The host words of a block's two attention RBUF rows (``S.r``, ``O.r``) and of its MASK
    rows (row ``h·nt + query tile``, bit ``kb`` = key block kept)."""
    T, nt = cfg.tile, blk.spec.tokens // cfg.tile
    r = []
    for m, sh in ((blk.s_m, blk.s_sh), (blk.o_m, blk.o_sh)):
        r += row_to_words(cfg, "RBUF", {"m": [m] * T, "sh": [sh] * T, "bias": [0] * T})
    mask = []
    for h in range(blk.spec.heads):
        for qa in range(nt):
            bits = sum(1 << kb for kb in range(nt) if blk.mask[h, qa, kb])
            mask += row_to_words(cfg, "MASK", {"bits": bits})
    return r, mask


def _attention_cache(prog: CoreProgram, e: Emitter):
    """Cache-step part: per head Kᵀ into WMEM; per query tile S, softmax, P into the P cache,
    software-pipelined on two halves of S and P: query tile qa's softmax (a VROW with
    ``overlap``) runs while the Q engine quantizes tile qa+1's queries and the matrix engine
    computes its S (finding each query's max on the way, RMAX); then P of tile qa is quantized.
    Semaphores: ``S_READY`` (the last S GEMM of a tile, once RMAX holds its maxima) before the
    softmax, ``P_READY`` (the softmax) before P's QUANT. The rest is ordered by the engines
    themselves: a softmax issues only once the previous one is done, after P's QUANT of the
    tile before (so tile qa+2's S GEMMs, issued after softmax qa+1, never overwrite the half
    softmax qa reads, and softmax qa+2 never the half P's QUANT of qa reads, the Q engine taking
    one command at a time). With the P cache in DRAM (``prog.pcache_stream``) each tile's P
    goes out as a group stream once quantized (its QUANT signals ``FREE``, unused here, which
    the DSTORE waits on), from the head's window, which the next head's K rows (VROWs that wait
    for every engine) free again."""
    blk, cfg, R = prog.blk, prog.cfg, prog.regions
    s, T = blk.spec, cfg.tile
    N, D, H, d = s.tokens, s.hidden, s.heads, s.head_dim
    nt = N // T
    qk, kt = R["qk.y"].base, R["K^T"].base
    stream = getattr(prog, "pcache_stream", None)
    attn = getattr(prog, "attn_stream", None)
    slots = (R["slot0"].base, R["slot1"].base)

    def q_row(h, qa):       # the first row of head h's queries of tile qa
        return attn.qwin + qa * d if attn else qk + qa * 2 * D + h * d

    def scores(h, qa):
        if not dense(cfg):
            e("QCFG", base_log2=blk.B, thr=list(cfg.thr))
        e("QUANT", signal=FULL, src=q_row(h, qa), nch=d, gdst=slots[qa % 2])
        kept = [kb for kb in range(nt) if blk.mask[h, qa, kb]]
        for i, kb in enumerate(kept):
            # The drain finds each query's max over the kept keys (RMAX) on the way.
            e("GEMM", wait=FULL if i == 0 else 0, signal=S_READY if i == len(kept) - 1 else 0,
              gsrc=slots[qa % 2], wbase=kt + kb * d, rrow=R["S.r"].base,
              dst=R["S"].base + (qa % 2) * N + kb * T, use_sreg=1, sreg=SREG_K,
              rmax=1 if i == 0 else 2)
        if not kept:                      # nothing to wait for: signal the softmax anyway
            e("NOP", signal=S_READY)

    for h in range(H):
        if attn:            # the head's Q and K in from DRAM (the VROWs below wait for them)
            _head_in(e, cfg, attn.qk, h * d, attn.qwin, nt, d)
            _head_in(e, cfg, attn.qk, D + h * d, attn.kwin, nt, d)
            emit_kv(e, cfg, attn.kwin, d, N, d, SREG_K, kt)
        else:
            emit_kv(e, cfg, qk + D + h * d, 2 * D, N, d, SREG_K, kt)
        scores(h, 0)
        for qa in range(nt):
            emit_vrow(e, "softmax_mx", wait=S_READY, signal=P_READY, overlap=1, R=T, n=N,
                      a=R["S"].base + (qa % 2) * N, C=N, vb=R["mask"].base + h * nt + qa,
                      dst=R["P"].base + (qa % 2) * N)
            if qa + 1 < nt:
                scores(h, qa + 1)
            if not dense(cfg):
                e("QCFG", base_log2=cfg.act_frac, thr=list(cfg.thr))
            again = stream.free if stream and qa >= 2 else 0     # its slot stored
            e("QUANT", wait=P_READY | again, signal=FREE if stream else 0,
              src=R["P"].base + (qa % 2) * N, nch=N, gdst=_pcache(prog, h, qa), pcache=1)
            if stream:          # out to DRAM once quantized (FREE: no QUANT/GEMM slot here)
                _pcache_dram(prog, e, "DSTORE", h, qa, wait=FREE,
                             signal=stream.free if qa + 2 < nt else 0)
    e("BARRIER")


def _pcache(prog: CoreProgram, h: int, qa: int) -> int:
    """GMEM base of the P-cache region of head ``h``, query tile ``qa`` (``group_rows(N)`` rows
    each; with the P cache in DRAM, the tile's place in the head's window)."""
    N = prog.blk.spec.tokens
    ps = getattr(prog, "pcache_stream", None)
    if ps is not None:
        return ps.window + (qa % 2) * group_rows(prog.cfg, N)
    return prog.regions["pcache"].base + (h * (N // prog.cfg.tile) + qa) * group_rows(prog.cfg, N)


def _pcache_dram(prog, e: Emitter, op: str, h: int, qa: int, **sem):
    """DSTORE or DLOAD of the P cache of head ``h``, query tile ``qa`` as a group stream."""
    ps = prog.pcache_stream
    N, T = prog.blk.spec.tokens, prog.cfg.tile
    rows = group_rows(prog.cfg, N)
    e.dram(op, "GMEM", Region("GMEM", "pcache", _pcache(prog, h, qa), rows),
           ps.beat + (h * (N // T) + qa) * ps.stride, groups=1, **sem)


def _attention_every(prog: CoreProgram, e: Emitter):
    """Every step: per head V into WMEM, then ``o`` = P-cache · V per query tile, column block.
    With the P cache in DRAM (``prog.pcache_stream``) the head's tiles come back into the two
    slots after the head's V rows (the VROWs before wait for every engine: the slots are the
    last head's no more): tiles 0 and 1 first, tile ``qa+1`` behind tile ``qa``'s first GEMM
    once tile ``qa-1``'s GEMMs are done (``FREE``); each tile's first GEMM waits for its DLOAD
    (``FULL``)."""
    blk, cfg, R = prog.blk, prog.cfg, prog.regions
    stream = getattr(prog, "pcache_stream", None)
    s, T = blk.spec, cfg.tile
    N, D, H, d = s.tokens, s.hidden, s.heads, s.head_dim
    dp = padded_head_dim(d, T)      # o's head width (program.heads)
    vw = R["V"].base
    for h in range(H):
        # The head's max |v| over sub-channels (one VPU row per token tile, as for K: a
        # token-row walk pays each row's fixed cycles N times); its INT8 rows by token rows,
        # the layout the P·V GEMM reads (WMEM row = key, T columns of the head).
        attn = getattr(prog, "attn_stream", None)
        if attn:            # the head's V in from DRAM (the VROWs wait for it)
            _head_in(e, cfg, attn.v, h * d, attn.vwin, N // T, d)
            a, C = attn.vwin, d
        else:
            a, C = R["v.y"].base + h * d, D
        emit_kv(e, cfg, a, C, N, d, SREG_V)
        emit_vrow(e, "kv_quant", R=N, n=d, a=a, C=C, dst=vw, sreg=SREG_V)
        nt, nb = N // T, dp // T
        if stream:              # the head's first two P tiles in from DRAM
            for qa in range(min(2, nt)):
                _pcache_dram(prog, e, "DLOAD", h, qa, signal=FULL)
        around = getattr(prog, "around", None)
        if around and h == H - 1:    # after the last VROW: what D may load beside the GEMMs
            around(e, "attn", "tail")
        for qa in range(nt):
            for cb in range(nb):
                last = stream and cb == nb - 1 and qa + 2 < nt
                e("GEMM", wait=FULL if stream and cb == 0 else 0, signal=FREE if last else 0,
                  gsrc=_pcache(prog, h, qa), wbase=vw + cb * N, rrow=R["O.r"].base,
                  dst=R["o"].base + (qa * H + h) * dp + cb * T, use_sreg=1, sreg=SREG_V,
                  pcache=1)
                if stream and cb == 0 and qa >= 1 and qa + 1 < nt:
                    # Tile qa+1 into the slot tile qa-1's GEMMs leave (FREE), behind this
                    # tile's first GEMM so that the matrix engine never waits for it.
                    _pcache_dram(prog, e, "DLOAD", h, qa + 1, wait=FREE, signal=FULL)
    e("BARRIER")


def _init(prog: CoreProgram):
    """Init commands and host words: weights, RBUF rows, masks, zero x̂/Y state; END."""
    blk, cfg, R = prog.blk, prog.cfg, prog.regions
    e, words = Emitter(cfg), []
    for k in LAYERS:
        e.transfer("LOAD", "WMEM", R[f"{k}.W"])
        words += weight_words(cfg, prog.layers[k])
    for k in LAYERS:
        e.transfer("LOAD", "RBUF", R[f"{k}.r"])
        words += rbuf_words(cfg, prog.layers[k])
    rwords, mwords = attention_words(cfg, blk)
    e.transfer("LOAD", "RBUF", R["S.r"])
    e.transfer("LOAD", "RBUF", R["O.r"])
    e.transfer("LOAD", "MASK", R["mask"])
    words += rwords + mwords
    for buf, suffix in (("XBUF", "xhat"), ("YBUF", "Y")):
        regs = [R[f"{k}.{suffix}"] for k in LAYERS]
        whole = Region(buf, suffix, regs[0].base, sum(r.rows for r in regs))   # contiguous
        e.transfer("LOAD", buf, whole, zero=1)
    e("END")
    prog.init, prog.init_words = e.cmds, words


def emit_block_body(prog, e: Emitter, prefix: str = ""):
    """The step of one block from ``ln1`` to ``res2`` (module docstring), one section per part
    (named ``prefix + part``). ``prog`` has ``blk``, ``cfg`` and ``regions``, the last mapping
    the block's region names (``x``, ``out``, ``ln1`` ..., ``<layer>.W`` ..., ``shift1`` ...)
    to regions (``x.res`` and ``h1.res``, if present, are where the residuals read ``x`` and
    ``h1`` back); ``prog.around(e, k, when)`` (if present) is also called ``"after"`` ``ln1`` and
    ``ln2`` and ``"before"`` ``res1`` and ``res2``, and ``"before"`` and ``"after"`` each layer
    ``k``, inside the layer's SKIP for ``qk``, ``"started"`` inside it once its
    first state tiles are asked for (:func:`emit_layer`), and for ``qk`` also ``"prefetch"``
    just before its SKIP (what must run on every step)."""
    blk, cfg, R = prog.blk, prog.cfg, prog.regions
    s = blk.spec
    N, D, M = s.tokens, s.hidden, s.mlp_hidden
    around = getattr(prog, "around", None)

    passes = getattr(prog, "passes", None)     # through DRAM: each layer in its passes

    def layer(em, k, src, qs=None):
        for q in (qs if qs is not None else range(len(passes[k])) if passes else [None]):
            if around:
                around(em, k, "before", q)
            _layer(prog, em, k, src, q=q,
                   started=(lambda e2, q=q: around(e2, k, "started", q)) if around else None)
            if around:
                around(em, k, "after", q)

    def vr(op, a, dst, n=D, C=D, **f):
        emit_token_rows(e, op, N, n, C, R[a].base, R[dst].base, **f)

    vb = {k: R[k].base for k in MOD_NAMES}

    def res(name):          # the residual's copy (R[name + ".res"], if the caller reloads it)
        return name + ".res" if name + ".res" in R else name

    e.section(prefix + "ln1")
    vr("layernorm", "x", "ln1")
    if around:
        around(e, "ln1", "after")
    e.section(prefix + "mod1")
    vr("modulate", "ln1", "a", vb=vb["shift1"], c=vb["scale1"])
    if passes:              # v first: a reuse step skips qk and finds the same windows
        e.section(prefix + "v")
        layer(e, "v", "a")
    e.section(prefix + "qk")
    sub = Emitter(cfg)
    layer(sub, "qk", "a")
    if around and not passes:       # what runs every step before the qk layer's SKIP
        around(e, "qk", "prefetch")
    e.skip(sub)
    if not passes:
        e.section(prefix + "v")
        layer(e, "v", "a")
    e.section(prefix + "attn.cache")
    sub = Emitter(cfg)
    _attention_cache(prog, sub)
    e.skip(sub)
    e.section(prefix + "attn.pv")
    _attention_every(prog, e)
    e.section(prefix + "proj")
    layer(e, "proj", "o")
    e.section(prefix + "res1")
    if around:
        around(e, "res1", "before")
    vr("gated_residual", res("x"), "h1", vb=vb["gate1"], c=R["proj.y"].base)
    e.section(prefix + "ln2")
    vr("layernorm", "h1", "ln2")
    if around:
        around(e, "ln2", "after")
    e.section(prefix + "mod2")
    vr("modulate", "ln2", "m", vb=vb["shift2"], c=vb["scale2"])
    chunks = cfg.mlp_chunks if passes else 1
    for c in range(chunks):     # the MLP, or through DRAM each chunk: fc1's pass, GELU, fc2's
        part = "" if chunks == 1 else f".{c}"
        e.section(prefix + "fc1" + part)
        layer(e, "fc1", "m", qs=[c] if chunks > 1 else None)
        e.section(prefix + "gelu" + part)
        y = "fc1.y" if chunks == 1 else f"fc1.y.{c}"
        vr("gelu", y, y if chunks > 1 else "gelu", n=M // chunks, C=M // chunks)
        e.section(prefix + "fc2" + part)
        layer(e, "fc2", "gelu", qs=[c] if chunks > 1 else None)
    e.section(prefix + "res2")
    if around:
        around(e, "res2", "before")
    vr("gated_residual", res("h1"), "out", vb=vb["gate2"], c=R["fc2.y"].base)


def _lower(prog: CoreProgram):
    """Fill ``prog``'s init and step programs, sections and STORE list."""
    blk, cfg, R = prog.blk, prog.cfg, prog.regions
    D = blk.spec.hidden
    _init(prog)
    e = Emitter(cfg)
    e.section("load")
    e.transfer("LOAD", "ABUF", R["x"])
    e.transfer("LOAD", "VBUF", Region("VBUF", "mod", R["shift1"].base,
                                      len(MOD_NAMES) * D // cfg.tile))
    e("VPARAM", value=blk.eps_q)
    emit_block_body(prog, e)
    e.section("store")
    prog.stores = [("out", "out"), ("o", "o")]
    for k in LAYERS:
        prog.stores += [(f"{k}.y", f"{k}.y")] + ([] if dense(cfg) else
                                                 [(f"{k}.xhat", f"{k}.xhat"), (f"{k}.Y", f"{k}.Y")])
    for _key, rname in prog.stores:
        e.transfer("STORE", R[rname].buf, R[rname])
    e("STEP", interval=blk.interval)
    e("END")
    e.section(None)
    prog.step, prog.sections = e.cmds, e.sections
