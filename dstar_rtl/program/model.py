"""The DSTAR core's compiler for a whole DiT: :class:`models.dit_int_model.IntDiT` → a core program
whose sequential execution equals the integer model bit for bit at every step.

A block is lowered exactly as :mod:`program.compiler` lowers one (the same command sequence
over this program's memory map, :func:`program.compiler.emit_block_body`); around the blocks
come the patch embedding, the position embedding and the final layer.

Program structure
-----------------
*Init* (once): LOAD every resident layer's weights (WMEM), every layer's requantization rows and
the blocks' attention rows (RBUF), the SAR masks (MASK), the position embedding (ABUF ``pos``) and
the gate ``1.0`` (VBUF ``one``); END. Before each sample's first step
:func:`zero_state_commands` zeroes every resident ``x̂`` (XBUF) and ``Y`` (YBUF) and brings the
STEP phase back to 0.

**ABUF by lifetime.** Every activation tensor of a step lives from the command that writes it to
the last that reads it; tensors whose lifetimes do not meet share rows (first fit by rows and
time, the best of three orders). Through DRAM a layer run in one pass writes its output over
its input, and a residual sum and a partial ``fc2`` output over what they read
(:func:`_shared_offsets`). The batch rows run one after the other and share the placement.

*Step* (the same command list every step; every batch row in turn, then the last line)::

    LOAD ABUF patches; LOAD VBUF mods (every block's six adaLN vectors, then the final two)
    VPARAM eps_q
    x_embed layer (patches → x_embed.y)
    VROW gated_residual pos + 1.0 · x_embed.y → h.0;  STORE h.0              ("h0")
    block i (x = h.i, out = h.(i+1));  STORE out                            ("blocks.i.out")
    VROW layernorm → ln;  VROW modulate → f;  STORE f                        ("f")
    final.linear layer (f → eps);  STORE eps                                 ("eps")
    STORE CNT ("counters");  STEP interval;  END

**Streamed layers.** A layer's weights (WMEM), ``x̂`` (XBUF) or ``Y`` (YBUF) that do not fit the
core stay with the host: all streamed objects of a buffer share one *window* region (as large as
the largest of them). Around such a layer the step LOADs its weights (the same words every step)
and its state (the words the host kept from the step before: zero before the first), and after
its BARRIER it STOREs the state back. :func:`compile_model` keeps every object resident when its
buffer can hold them all; otherwise it streams the largest objects of that buffer first until the
rest fit (``stream`` forces every object of the named buffers to stream). The state transfers of
the ``qk`` layers lie inside their SKIP, so a reuse step neither sends nor returns them
(:meth:`ModelProgram.transfers`).

**DRAM** (a core with a DRAM port, ``cfg.dram_width``; docs/core.md §9). Every layer's
weights and state live in DRAM instead of on chip or with the host
(:attr:`ModelProgram.dram_map`: each object at its own beats; :meth:`ModelProgram.dram_image`
holds the weights and RBUF rows, pass by pass, written before the init program;
:meth:`ModelProgram.zero_state_image` zeroes the state before a trajectory) and move through
the D engine: the state one token tile at a time inside each pass
(:class:`program.compiler.StateStream`), the weights as below.
:meth:`ModelProgram.dram_state` reads a row's state back for the sampler's check.

**Passes** (through DRAM; :class:`Pass`, :func:`_layer_passes`). Each layer runs in one or
more passes (:func:`program.compiler.emit_layer` ``blocks``/``chans``), each pass's weights
and RBUF rows in one of two windows as large as the largest pass, loaded while the pass before
runs: before pass ``p`` a NOP waits for its window's ``D_READY`` (which its last DLOAD
signals); once ``p`` has asked for its first state tiles, the DLOADs of the next pass follow,
running beside it. With ``cfg.mlp_chunks = k`` each block's ``fc1`` runs in ``k`` column-block
passes and ``fc2`` in ``k`` reduction pieces (its golden layer's), chunk by chunk (``fc1``'s
pass, the chunk's GELU, ``fc2``'s piece); any other layer whose weights exceed the window
runs in column-block passes (each quantizing the whole input again from the same ``x̂``:
:func:`quant_counters` counts it). The pass order (:func:`_pass_order`) runs each block's
``v`` before ``qk``: the first ``qk`` pass's weights load behind a SKIP beside ``v`` (a reuse
step skips ``qk``), ``proj``'s beside the last head's P·V GEMMs, and the windows alternate
along a reuse step's passes (:func:`_windows`), so both kinds of step find the same windows
and the D engine's order keeps a window's loads after the pass that used it.

**Padding.** A patch size below the tile size ``T`` (e.g. 2×2 patches of one channel, 4 values,
at ``T = 8``) is padded to the next multiple of ``T``: the patch embedding gets zero input
channels (zero weight rows), the final layer zero output channels (zero weights, bias and
multiplier). Every value is unchanged: a zero sub-channel quantizes to zero and contributes
nothing, a zero output channel requantizes to zero. The host pads the patches and drops the
padded channels of ``eps``; only the QPU counters see the extra (zero) sub-channels.

Host tensors (:meth:`ModelProgram.host_words`, :meth:`ModelProgram.parse_output`) are named by
*keys*: ``patches``, ``mods``, ``<layer>.W``, ``<layer>.xhat``, ``<layer>.Y`` (layers
``x_embed``, ``blocks.<i>.<qk|v|proj|fc1|fc2>``, ``final.linear``), ``h0``, ``blocks.<i>.out``,
``f``, ``eps``, ``counters``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from dstar_rtl.golden.dit_int import LAYERS, MOD_NAMES
from dstar_rtl.golden.layouts import pack, unpack
from dstar_rtl.golden.schedule import Counters, piece_bounds
from dstar_rtl.models.dit_int_model import IntDiT, ModelStep
from dstar_rtl.program.compiler import (
    BUF_ORDER,
    D_READY,
    AttnStream,
    Emitter,
    PCacheStream,
    Region,
    StateStream,
    TileStream,
    attention_words,
    check_bias,
    check_block,
    core_layers,
    dense,
    emit_block_body,
    emit_layer,
    emit_token_rows,
    group_rows,
    memory_table,
    rbuf_words,
    regions_end,
    weight_words,
)
from dstar_rtl.program.heads import padded_head_dim
from dstar_rtl.program.isa import (
    BUFFERS,
    COUNTERS,
    DRAM_BUFFERS,
    CoreConfig,
    abuf_bits,
    beat_bytes,
    buffer_depth,
    bytes_to_rows,
    check_core,
    dram_beats,
    dram_row_bytes,
    host_words_per_row,
    row_layout,
    row_to_words,
    rows_tensor,
    rows_to_bytes,
    rows_ysum,
    tensor_rows,
    words_to_row,
    ysum_rows,
)

__all__ = ["compile_model", "ModelProgram", "STREAMABLE", "layer_names",
           "zero_state_commands", "resident_depths", "deepened", "quant_counters"]

#: Buffers whose per-layer objects may stay with the host and stream through the host port.
STREAMABLE = ("WMEM", "XBUF", "YBUF")
_SUFFIX = {"WMEM": "W", "XBUF": "xhat", "YBUF": "Y"}
#: ABUF tensors of one block in compile_block's order, in units of D (None: 2·N rows, the
#: double-buffered score and P tiles; "M": M).
_SCRATCH = {"ln1": 1, "a": 1, "qk.y": 2, "v.y": 1, "S": None, "P": None, "o": 1, "proj.y": 1,
            "h1": 1, "ln2": 1, "m": 1, "fc1.y": "M", "gelu": "M", "fc2.y": 1}
#: Element-wise VROWs that write their result over their input (a token row's elements are its
#: own lane of the rows, so the row read next is never one just written): the result's tensor
#: lives in its input's rows.
_IN_PLACE = {"a": "ln1", "m": "ln2", "gelu": "fc1.y"}


def quant_counters(model: IntDiT, steps: list, again: dict | None = None) -> dict:
    """The QPU counters (``qpu_<name>``, :data:`golden.layouts.COUNTER_NAMES`) a core adds while
    it runs one model step of every batch row (``steps``: each row's
    :class:`~models.dit_int_model.ModelStep`), recomputed from the integer golden: every QUANT
    of the step, in the same tiles.

    - each differential layer that ran (the golden's counters; the patch embedding's input is
      padded to a multiple of T with zero channels, each a zero sub-channel per token tile: the
      one thing this lowering adds);
    - every block's attention (:attr:`golden.dit_int.AttnStep.counters`: on a cache step ``Q``
      and ``P`` per query tile);
    - ``again``: ``{block layer name: n}``, the layers quantized ``n`` more times (passes over
      column blocks each quantize the whole input: module docstring, "Passes").
    """
    T = model.cfg.tile
    total = Counters()
    pad = _pad_to(model.x_embed.W.shape[0], T) - model.x_embed.W.shape[0]
    tiles = -(-model.spec.tokens // T)
    for ms in steps:
        for name, v in ms.quant_counters().items():
            total.add(name, v)
        total.add("subchannels", pad * tiles)
        total.add("subchannels_zero", pad * tiles)
        for name, n in (again or {}).items():
            i, k = name.split(".")[1:]
            ls = ms.blocks[int(i)].layers[k]
            for c, v in (ls.counters.items() if ls.updated else ()):
                total.add(c, n * v)
    return {f"qpu_{k}": v for k, v in total.values.items()}


def layer_names(depth: int) -> list:
    """The model's differential layers in execution order."""
    return ["x_embed"] + [f"blocks.{i}.{k}" for i in range(depth) for k in LAYERS] + \
        ["final.linear"]


def _pad_to(n: int, T: int) -> int:
    return -(-n // T) * T


@dataclass(frozen=True)
class DramObject:
    """Where an object lives in DRAM (module docstring, "DRAM"): from beat ``beat``, ``rows``
    rows of ``buf`` in pieces of ``tile_rows`` (a token tile of the state; all the rows for
    weights), each piece's image ``stride`` beats from the one before."""

    beat: int
    rows: int
    buf: str
    tile_rows: int
    stride: int

    @property
    def pieces(self) -> list:
        """``(first row, rows, beat)`` of each piece."""
        return [(i * self.tile_rows, self.tile_rows, self.beat + i * self.stride)
                for i in range(self.rows // self.tile_rows)]


@dataclass
class ModelProgram:
    """A compiled model (:func:`compile_model`): commands with their host-tensor tags, the
    memory map and the host side of every transfer."""

    model: IntDiT
    core: CoreConfig
    rows: int = 1
    layers: dict = field(default_factory=dict)      # name → the core's (padded) layer
    weights: dict = field(default_factory=dict)     # "<layer>.W" → its WMEM host words
    patch_values: int = 0                           # values of a patch before padding
    regions: dict = field(default_factory=dict)
    streamed: dict = field(default_factory=dict)    # buffer → streamed layer names
    streamed_rows: dict = field(default_factory=dict)   # buffer → streamed (row, layer)
    dram_map: dict = field(default_factory=dict)    # DRAM object key → DramObject
    tile_windows: dict = field(default_factory=dict)    # XBUF/YBUF → bases of a tile's windows
    passes: dict = field(default_factory=dict)      # layer → its Passes (through DRAM)
    pass_order: list = field(default_factory=list)  # (layer, pass) of a cache step, in order
    window: dict = field(default_factory=dict)      # (layer, pass) → its weight window
    pass_of: dict = field(default_factory=dict)     # DRAM key of weights → (layer, pass)
    init: list = field(default_factory=list)
    init_words: list = field(default_factory=list)
    step: list = field(default_factory=list)
    tags: list = field(default_factory=list)        # parallel to step: ((row, key), first)
    sections: list = field(default_factory=list)

    @property
    def cfg(self):
        """The configuration."""
        return self.model.cfg

    @property
    def interval(self) -> int:
        """The SAR interval of every block (1 without blocks)."""
        return self.model.blocks[0].interval if self.model.blocks else 1

    @property
    def patch_dim(self) -> tuple:
        """``(patch values, padded to T)``."""
        return self.patch_values, self.layers["x_embed"].W.shape[0]

    # ------------------------------------------------------------------ transfers
    def transfers(self, cache: bool) -> list:
        """The host transfers of one step in order: ``(op, row, key, first row, rows, buffer)``
        for every LOAD (not ``zero``) and STORE the core runs on a cache (``cache``) or reuse
        step; ``row`` is the batch row (None for ``counters``)."""
        out, i = [], 0
        while i < len(self.step):
            c = self.step[i]
            if c.op == "SKIP" and not cache:
                i += 1 + c.count
                continue
            tag = self.tags[i]
            if tag is not None and c.op in ("LOAD", "STORE") and not c.args.get("zero"):
                (row, key), first = tag
                out.append((c.op, row, key, first, c.count, BUFFERS[c.buf]))
            i += 1
        return out

    def dram_traffic(self, cache: bool) -> dict:
        """The DRAM beats one step moves on a cache (``cache``) or reuse step, by kind:
        ``{"weights" | "state" | "pcache" | "activations": (read beats, write beats)}``
        (weights: WMEM and RBUF rows; state: x̂ and Y; activations: ABUF rows, ``pos`` and the
        residuals; pcache: the group streams' headers and their most rows,
        the groups a step really moves being the data's: the core's counters). Empty without
        a DRAM port."""
        kinds = {"WMEM": "weights", "RBUF": "weights", "XBUF": "state", "YBUF": "state",
                 "GMEM": "pcache"}
        out: dict = {}
        i = 0
        while i < len(self.step):
            c = self.step[i]
            if c.op == "SKIP" and not cache:
                i += 1 + c.count
                continue
            if c.op in ("DLOAD", "DSTORE"):
                buf = DRAM_BUFFERS[c.buf]
                beats = dram_beats(self.cfg, buf, c.count) + c.groups
                r, w = out.get(kinds.get(buf, "activations"), (0, 0))
                out[kinds.get(buf, "activations")] = ((r + beats, w) if c.op == "DLOAD"
                                                      else (r, w + beats))
            i += 1
        return out

    def is_cache_step(self, t: int) -> bool:
        """Whether step ``t`` (from 0) is a SAR cache step (the core's STEP phase is 0)."""
        return t % self.interval == 0

    # ------------------------------------------------------------------ host data
    def _rows(self, key: str, value) -> np.ndarray:
        """A host tensor → its buffer rows (``(rows, T)`` lanes)."""
        T = self.cfg.tile
        if key == "mods":
            return np.asarray(value, np.int64).reshape(-1, T)
        return (ysum_rows if key.endswith(".Y") else tensor_rows)(value, T)

    def _tensor(self, key: str, rows: np.ndarray):
        """Inverse of :meth:`_rows` for an ABUF, XBUF or YBUF tensor of ``N`` tokens."""
        return (rows_ysum if key.endswith(".Y") else rows_tensor)(
            rows, self.model.spec.tokens, self.cfg.tile)

    def initial_state(self) -> list:
        """The host's copy of every streamed state before the first step, per batch row:
        zeros (none when the state streams through DRAM: :meth:`zero_state_image`)."""
        N, states = self.model.spec.tokens, []
        for r in range(self.rows):
            state = {}
            if self.cfg.dram_width:
                states.append(state)
                continue
            for name in self.streamed.get("XBUF", []):
                state[f"{name}.xhat"] = np.zeros((N, self.layers[name].W.shape[0]), np.int64)
            for name in self.streamed.get("YBUF", []):
                state[f"{name}.Y"] = np.zeros((N, self.layers[name].W.shape[1]), np.int64)
            states.append(state)
        return states

    def host_words(self, inputs: list, states: list, cache: bool) -> list:
        """The host words of one step: per batch row its
        :class:`models.dit_int_model.HostInputs` and the host's copy of its streamed state
        (:meth:`initial_state`, then :meth:`next_state`), in the order of the step's LOADs."""
        if len(inputs) != self.rows or len(states) != self.rows:
            raise ValueError(f"the program runs {self.rows} batch row(s): give that many inputs "
                             f"and states, not {len(inputs)} and {len(states)}")
        P, Pp = self.patch_dim
        data = []
        for inp, state in zip(inputs, states):
            patches = np.zeros((self.model.spec.tokens, Pp), np.int64)
            patches[:, :P] = inp.patches
            mods = np.concatenate([np.asarray(inp.mods, np.int64).reshape(-1),
                                   np.asarray(inp.final_mod, np.int64).reshape(-1)])
            data.append(dict(state, patches=patches, mods=mods))
        words = []
        rows_of = {}
        for op, row, key, first, count, buf in self.transfers(cache):
            if op != "LOAD":
                continue
            if key.endswith(".W"):
                wpr = host_words_per_row(self.cfg, "WMEM")
                words += self.weights[key][first * wpr:(first + count) * wpr]
                continue
            if (row, key) not in rows_of:
                rows_of[row, key] = self._rows(key, data[row][key])
            for r in rows_of[row, key][first:first + count]:
                words += row_to_words(self.cfg, buf, {"v": r})
        return words

    def parse_output(self, words, cache: bool) -> tuple:
        """The words one step STOREd → ``(per batch row {key: int64 array}, counters {name:
        value})``; raises ValueError when the stream is short or long."""
        rows, pos = {}, 0
        words = list(words)
        for op, row, key, first, count, buf in self.transfers(cache):
            if op != "STORE":
                continue
            wpr = host_words_per_row(self.cfg, buf)
            need = count * wpr
            if pos + need > len(words):
                raise ValueError(f"output stream ends inside {key!r} ({len(words)} words)")
            if buf == "CNT":
                rows.setdefault((row, key), []).extend(words[pos:pos + need])
            else:
                rows.setdefault((row, key), []).extend(
                    words_to_row(self.cfg, buf, words[pos + i * wpr:pos + (i + 1) * wpr])["v"]
                    for i in range(count))
            pos += need
        if pos != len(words):
            raise ValueError(f"output stream has {len(words) - pos} words past the last region")
        out, counters = [{} for _ in range(self.rows)], {}
        for (row, key), r in rows.items():
            if key == "counters":
                counters = dict(zip(COUNTERS, (int(w) for w in r)))
            else:
                out[row][key] = self._tensor(key, np.array(r, np.int64))
        return out, counters

    def next_state(self, out: dict) -> dict:
        """The host's copy of the streamed state after a step whose parsed output is ``out``
        (a reuse step leaves the ``qk`` state as it was)."""
        return {k: v for k, v in out.items() if k.endswith((".xhat", ".Y"))}

    def eps(self, out: dict) -> np.ndarray:
        """The model output (N, patch values) of a parsed step output (padding dropped)."""
        return out["eps"][:, :self.patch_dim[0]]

    def expected(self, ms: ModelStep, cache: bool, row: int = 0) -> dict:
        """The golden values of batch row ``row``'s :meth:`parse_output` keys after the integer
        model's step ``ms`` of that row."""
        res = {"h0": ms.h0, "f": ms.f, "eps": self._pad_cols(ms.eps, "final.linear")}
        for i, b in enumerate(ms.blocks):
            res[f"blocks.{i}.out"] = b.out
        for op, r, key, *_ in self.transfers(cache):
            if r != row or op != "STORE" or not key.endswith((".xhat", ".Y")):
                continue
            name, what = key.rsplit(".", 1)
            res[key] = self._state_value(ms, name, what)
        return {k: np.asarray(v, np.int64) for k, v in res.items()}

    def expected_counters(self, steps: list) -> dict:
        """The QPU counters the core adds in one step of every batch row (``steps``, the golden
        rows' :class:`ModelStep`): :func:`quant_counters`."""
        if len(steps) != self.rows:
            raise ValueError(f"the program runs {self.rows} batch row(s), not {len(steps)}")
        again = {n: len(ps) - 1 for n, ps in self.passes.items()
                 if len(ps) > 1 and ps[0].chans is None}
        return quant_counters(self.model, steps, again)

    def _pad_cols(self, v, name: str, rows_in: bool = False):
        """``v`` (N, C) with zero columns up to the core layer's padded width (a ``proj`` input
        with padded heads: its columns where the heads put them, :mod:`program.heads`)."""
        v = np.asarray(v, np.int64)
        lay = self.layers[name]
        cin, cout = lay.W.shape
        if rows_in and hasattr(lay, "real_in"):
            out = np.zeros((v.shape[0], cin), np.int64)
            out[:, lay.real_in] = v
            return out
        want = cin if rows_in else cout
        return np.pad(v, ((0, 0), (0, want - v.shape[1]))) if v.shape[1] < want else v

    # ------------------------------------------------------------------ DRAM
    def dram_image(self) -> dict:
        """``{byte address: bytes}``: the weights (and requantization rows) of every layer
        whose weights live in DRAM (module docstring, "DRAM"), written before the init program
        runs."""
        bb, out = beat_bytes(self.cfg), {}
        if "pos" in self.dram_map:
            lay = row_layout(self.cfg, "ABUF")
            out[self.dram_map["pos"].beat * bb] = rows_to_bytes(
                self.cfg, "ABUF", [pack(lay, {"v": r}) for r in self._rows("pos", self.model.pos)])
        for key, obj in self.dram_map.items():
            if obj.buf in ("WMEM", "RBUF"):
                out[obj.beat * bb] = rows_to_bytes(self.cfg, obj.buf,
                                                   self._pass_image(*self.pass_of[key], obj.buf))
        return out

    def _pass_image(self, name: str, q: int, buf: str) -> list:
        """The packed WMEM or RBUF rows of pass ``q`` of layer ``name``: per column block of
        the pass, its input channels' weight rows (WMEM) or its requantization row (RBUF)."""
        lay, cfg, T = self.layers[name], self.cfg, self.cfg.tile
        j0, j1 = self.passes[name][q].blocks
        c0, n = _pass_chans(self, name, q)
        if buf == "WMEM":
            wl = row_layout(cfg, "WMEM")
            return [pack(wl, {"w": lay.W[c, j * T:(j + 1) * T]})
                    for j in range(j0, j1) for c in range(c0, c0 + n)]
        w, k = rbuf_words(cfg, lay), host_words_per_row(cfg, "RBUF")
        return [sum(int(x) << (32 * i) for i, x in enumerate(w[j * k:(j + 1) * k]))
                for j in range(j0, j1)]

    def zero_state_image(self) -> dict:
        """``{byte address: bytes}`` of zeros over every state object in DRAM: what the host
        writes before a trajectory's first step (the resident state is zeroed by
        :func:`zero_state_commands`)."""
        bb = beat_bytes(self.cfg)
        return {o.beat * bb: bytes(len(o.pieces) * o.stride * bb)
                for o in self.dram_map.values() if o.buf in ("XBUF", "YBUF")}

    def dram_state(self, read, row: int, cache: bool) -> dict:
        """Batch row ``row``'s state objects in DRAM after a step, read with ``read(byte
        address, count)`` (:meth:`program.dram.Dram.read`, or an AXI RAM's): ``{"<layer>.xhat"
        | "<layer>.Y": (N, C) array}``, the ``qk`` layers' only after a cache step."""
        bb, out = beat_bytes(self.cfg), {}
        for name in self.layers:
            if name.endswith(".qk") and not cache:
                continue
            for buf, key in _dram_objects(self, row, name, ("XBUF", "YBUF")):
                rb, lay = dram_row_bytes(self.cfg, buf), row_layout(self.cfg, buf)
                vals = [unpack(lay, w)["v"] for _r0, n, beat in self.dram_map[key].pieces
                        for w in bytes_to_rows(self.cfg, buf, bytes(read(beat * bb, n * rb)))]
                hk = f"{name}.{_SUFFIX[buf]}"
                out[hk] = self._tensor(hk, np.array(vals, np.int64))
        return out

    def expected_dram_state(self, ms: ModelStep, row: int, cache: bool) -> dict:
        """The golden values of :meth:`dram_state` after the integer model's step ``ms``."""
        got = {}
        for name in self.layers:
            if name.endswith(".qk") and not cache:
                continue
            for buf, _key in _dram_objects(self, row, name, ("XBUF", "YBUF")):
                what = _SUFFIX[buf]
                got[f"{name}.{what}"] = np.asarray(self._state_value(ms, name, what), np.int64)
        return got

    def _state_value(self, ms: ModelStep, name: str, what: str):
        """Layer ``name``'s ``x̂`` (``what`` "xhat") or ``Y`` after step ``ms``, padded as the
        core holds it."""
        if name in ms.state:
            v = ms.state[name][0 if what == "xhat" else 1]
        else:
            i, k = name.split(".")[1:]
            ls = ms.blocks[int(i)].layers[k]
            v = ls.xhat if what == "xhat" else ls.Y
        return self._pad_cols(v, name, rows_in=what == "xhat")

    # ------------------------------------------------------------------ memory
    def memory_map(self) -> str:
        """A readable table of the regions (streamed objects share their buffer's window)."""
        streamed = {f"{n}.W" if r is None else _state(r, n, _SUFFIX[buf])
                    for buf, objs in self.streamed_rows.items() for r, n in objs}
        return memory_table(self.regions, self.core, streamed, name_width=24,
                            mark=" (streamed)")

    def rows_used(self, buf: str) -> int:
        """Rows of ``buf`` the program needs."""
        return regions_end(self.regions, buf)


def compile_model(model: IntDiT, core: CoreConfig, *, rows: int = 1, stream=()) -> ModelProgram:
    """Lower ``model`` to a :class:`ModelProgram` for a core of buffer depths ``core`` (module
    docstring). ``rows``: batch rows per step (2 for classifier-free guidance), each with its own
    state and P-cache; ``stream``: buffers of :data:`STREAMABLE` whose objects all stream (the
    others stream only what does not fit). Raises ValueError naming the dimension, value or
    buffer that does not fit."""
    cfg = model.cfg
    check_core(cfg)
    for blk in model.blocks:
        check_block(blk)
    if not isinstance(rows, int) or isinstance(rows, bool) or not 1 <= rows <= 16:
        raise ValueError(f"rows must be an integer in 1..16, not {rows!r}")
    bad = sorted(set(stream) - set(STREAMABLE))
    if bad:
        raise ValueError(f"stream: {bad} cannot stream; allowed buffers are {list(STREAMABLE)}")
    if not cfg.closed_loop:         # (check_block says so too, for a model with blocks)
        raise ValueError("the core implements closed-loop differential layers only "
                         "(cfg.closed_loop is False)")
    s, T = model.spec, cfg.tile
    for what, v in (("N (tokens)", s.tokens), ("D (hidden)", s.hidden)):
        if v % T:
            raise ValueError(f"{what} = {v} is not a multiple of the tile size T = {T}")
    if any(b.eps_q != model.eps_q for b in model.blocks):
        raise ValueError("every LayerNorm of the model must use the same eps (one VPARAM)")
    prog = ModelProgram(model=model, core=core, rows=rows)
    _core_layers(prog)
    _plan(prog, set(stream))
    _lower(prog)
    return prog


def deepened(cfg, depths: dict) -> tuple:
    """``(configuration, deeper)``: ``cfg`` with each buffer at least ``depths[buffer]`` rows
    deep (``{"abuf_rows": rows, ...}``, e.g. :func:`resident_depths`) and the depths that grew.
    The configuration's depths set the command fields' widths (:func:`program.isa.core_for`),
    so a deeper core is a new configuration, and a model for it is built from that."""
    import dataclasses

    from dstar_rtl.program.isa import core_for

    have = core_for(cfg).to_dict()
    deeper = {k: v for k, v in depths.items() if v > have[k]}
    return (dataclasses.replace(cfg, **deeper) if deeper else cfg), deeper


def resident_depths(model: IntDiT, *, rows: int = 1, streamed: bool = False) -> dict:
    """The buffer depths (``abuf_rows`` ...: rows) at which ``model`` with ``rows`` batch rows
    runs with nothing streamed (for ``--set``), or with ``streamed`` every layer of
    :data:`STREAMABLE` buffers streamed (the least depths it runs at); with a DRAM port
    (everything in DRAM) either gives the depths with the widest weight windows (column passes
    only where ``mlp_chunks`` sets them, or where a ``wmem_rows`` the configuration sets needs
    them: that depth is kept). Raises ValueError when even the deepest core cannot hold it."""
    from dstar_rtl.golden.config import core_rows_limit

    cfg = model.cfg
    keep = {"wmem_rows": cfg.wmem_rows} if cfg.dram_width and cfg.wmem_rows else {}
    deepest = CoreConfig(**{f: keep.get(f) or core_rows_limit(f)
                            for f in CoreConfig.__dataclass_fields__})
    prog = ModelProgram(model=model, core=deepest, rows=rows)     # the memory map only
    _core_layers(prog)
    _plan(prog, set(STREAMABLE) if streamed else set())
    return {f"{b.lower()}_rows": prog.rows_used(b) for b in BUF_ORDER}


def _core_layers(prog: ModelProgram):
    """Every differential layer as the core runs it (the patch embedding's input and the final
    layer's output padded to a multiple of T); the biases of the two checked (the blocks' are
    by check_block)."""
    m, cfg = prog.model, prog.cfg
    T = cfg.tile
    P = m.x_embed.W.shape[0]
    Pp = _pad_to(P, T)
    prog.patch_values = P
    xe, fin = m.x_embed, m.final
    prog.layers["x_embed"] = SimpleNamespace(
        W=np.pad(xe.W, ((0, Pp - P), (0, 0))), B=xe.B, m=xe.m, sh=xe.sh, bias_int=xe.bias_int,
        pieces=xe.pieces)
    pad = Pp - fin.W.shape[1]
    prog.layers["final.linear"] = SimpleNamespace(
        W=np.pad(fin.W, ((0, 0), (0, pad))), B=fin.B, m=np.pad(fin.m, (0, pad)),
        sh=np.pad(fin.sh, (0, pad)), bias_int=np.pad(fin.bias_int, (0, pad)),
        pieces=fin.pieces)
    for i, blk in enumerate(m.blocks):
        for k, lay in core_layers(blk).items():
            prog.layers[f"blocks.{i}.{k}"] = lay
    order = layer_names(len(m.blocks))
    prog.layers = {n: prog.layers[n] for n in order}
    for n in ("x_embed", "final.linear"):
        check_bias(cfg, prog.layers[n], repr(n))
    prog.weights = {f"{n}.W": weight_words(cfg, lay) for n, lay in prog.layers.items()}


def _tile_rows(prog: ModelProgram, buf: str, name: str) -> int:
    """Rows of one token tile of layer ``name``'s ``x̂`` (XBUF: its inputs) or ``Y`` (YBUF:
    its outputs)."""
    cin, cout = prog.layers[name].W.shape
    return cin if buf == "XBUF" else cout


def _object_rows(prog: ModelProgram, buf: str, name: str) -> int:
    """Rows of layer ``name``'s weights (WMEM), ``x̂`` (XBUF) or ``Y`` (YBUF)."""
    cin, cout = prog.layers[name].W.shape
    N, T = prog.model.spec.tokens, prog.cfg.tile
    state = 0 if dense(prog.cfg) else 1      # the INT8 core keeps no x̂ and no Y
    return {"WMEM": cin * cout // T, "XBUF": state * N // T * cin,
            "YBUF": state * N * cout // T}[buf]


def _state(r: int, name: str, suffix: str) -> str:
    """Region name of batch row ``r``'s ``x̂`` / ``Y`` (or P-cache) of ``name``."""
    return f"r{r}.{name}.{suffix}"


def _plan(prog: ModelProgram, force: set):
    """The memory map: fixed regions, then per streamable buffer resident objects and a window
    (objects: each layer's weights; each batch row's ``x̂`` and ``Y`` of each layer)."""
    m, cfg = prog.model, prog.cfg
    s, T = m.spec, cfg.tile
    N, D, H = s.tokens, s.hidden, s.heads
    nt = N // T
    depth = len(m.blocks)
    top = dict.fromkeys(BUF_ORDER, 0)

    def take(buf, name, rows, base=None):
        b = top[buf] if base is None else base
        prog.regions[name] = Region(buf, name, b, rows)
        if base is None:
            top[buf] += rows
        return prog.regions[name]

    att = (nt * s.head_dim + padded_head_dim(s.head_dim, T) // T * N) if depth else 0
    prog.passes = _layer_passes(prog, (buffer_depth(prog.core, "WMEM") - att) // 2)
    top["ABUF"] = _place_abuf(prog)
    if not cfg.dram_width:     # (through DRAM: after the weights, with which they travel)
        for name in prog.layers:
            take("RBUF", f"{name}.r", prog.layers[name].W.shape[1] // T)
    for i in range(depth):
        take("RBUF", f"blocks.{i}.S.r", 1)
        take("RBUF", f"blocks.{i}.O.r", 1)
    per = len(MOD_NAMES) * D // T                  # one block's adaLN vectors
    if cfg.dram_width:   # one block's vectors at a time (the host sends each before its block)
        take("VBUF", "mods", per + 2 * D // T)
        blocks_at = [0] * depth
    else:                # every block's, sent at the step's start
        take("VBUF", "mods", (len(MOD_NAMES) * depth + 2) * D // T)
        blocks_at = [i * per for i in range(depth)]
    for i in range(depth):
        for j, n in enumerate(MOD_NAMES):
            take("VBUF", f"blocks.{i}.{n}", D // T, base=blocks_at[i] + j * D // T)
    base = per if cfg.dram_width else len(MOD_NAMES) * depth * D // T
    take("VBUF", "final.shift", D // T, base=base)
    take("VBUF", "final.scale", D // T, base=base + D // T)
    take("VBUF", "one", D // T)
    for i in range(depth):
        take("MASK", f"blocks.{i}.mask", H * nt)
    if depth:
        d = s.head_dim
        take("WMEM", "K^T", nt * d)
        v = take("WMEM", "V", padded_head_dim(d, T) // T * N)
        reach = 1 << abuf_bits(cfg)           # VROW kv_quant's dst field (ABUF's width)
        if v.base + v.rows > reach:
            raise ValueError(f"K^T and V of one head need {v.base + v.rows} WMEM rows; VROW "
                             f"reaches {reach}")
    slot = group_rows(cfg, max(_pass_chans(prog, n, q)[1] for n, ps in prog.passes.items()
                               for q in range(len(ps))))
    take("GMEM", "slot0", slot)
    take("GMEM", "slot1", slot)
    pc = H * nt * group_rows(cfg, N)
    if cfg.dram_width and depth:         # in DRAM: two query tiles in GMEM at a time
        window = take("GMEM", "pcache.window", 2 * group_rows(cfg, N))
        for r in range(prog.rows):
            for i in range(depth):
                prog.regions[_state(r, f"blocks.{i}", "pcache")] = window
    elif prog.interval == 1 and depth:   # no reuse step: the P-cache lives inside one block
        shared = take("GMEM", "pcache", pc)
        for r in range(prog.rows):
            for i in range(depth):
                prog.regions[_state(r, f"blocks.{i}", "pcache")] = shared
    else:
        for r in range(prog.rows):
            for i in range(depth):
                take("GMEM", _state(r, f"blocks.{i}", "pcache"), pc)
    over = [f"{buf} needs {top[buf]} rows, the core has {buffer_depth(prog.core, buf)} "
            f"({buf.lower()}_rows)" for buf in BUF_ORDER
            if buf not in STREAMABLE and top[buf] > buffer_depth(prog.core, buf)]
    if over:
        raise ValueError("the model does not fit: " + "; ".join(over))
    dram = bool(cfg.dram_width)
    bb = beat_bytes(cfg) if dram else 1
    beat = 0

    def in_dram(key, buf, rows, tile_rows):
        """Place DRAM object ``key`` (``rows`` of ``buf`` in pieces of ``tile_rows``, each
        from a beat) after the ones before."""
        nonlocal beat
        stride = -(-tile_rows * dram_row_bytes(cfg, buf) // bb)
        prog.dram_map[key] = DramObject(beat, rows, buf, tile_rows, stride)
        beat += rows // tile_rows * stride
    if dram:
        _plan_dram_objects(prog, top, take, in_dram)
    else:
        _plan_host_streams(prog, top, take, force)
    if dram:       # pos, and each row's residuals of every block, wait in DRAM
        in_dram("pos", "ABUF", nt * D, nt * D)
        for r in range(prog.rows):
            for i in range(depth):
                for h in (f"h.{i}", f"blocks.{i}.h1"):
                    in_dram(_state(r, h, "spill"), "ABUF", nt * D, nt * D)
                for k, per in (("qk", 2 * D), ("v", D)):      # qk.y and v.y, by token tiles
                    in_dram(_state(r, f"blocks.{i}.{k}", "y"), "ABUF", nt * per, per)
    if dram and depth:                   # each block's P cache, one group stream a tile
        g = group_rows(cfg, N)
        stride = 1 + -(-g * dram_row_bytes(cfg, "GMEM") // bb)
        for r in range(prog.rows):
            for i in range(depth):
                prog.dram_map[_state(r, f"blocks.{i}", "pcache")] = DramObject(
                    beat, H * nt * g, "GMEM", g, stride)
                beat += H * nt * stride


def _plan_host_streams(prog: ModelProgram, top: dict, take, force: set):
    """Per streamable buffer: resident objects, and one window for those that stream through
    the host (the largest first until the rest fit; all of a buffer in ``force``)."""
    for buf in STREAMABLE:
        rows_of = [None] if buf == "WMEM" else list(range(prog.rows))
        objs = [(r, n) for r in rows_of for n in prog.layers]
        size = {o: _object_rows(prog, buf, o[1]) for o in objs}
        room = buffer_depth(prog.core, buf) - top[buf]
        streamed = list(objs) if buf in force else []
        if buf not in force and sum(size.values()) > room:
            for o in sorted(objs, key=lambda o: -size[o]):
                streamed.append(o)
                rest = sum(size[k] for k in objs if k not in streamed)
                if rest + max(size[k] for k in streamed) <= room:
                    break
        streamed = [o for o in streamed if size[o]]
        window = max((size[o] for o in streamed), default=0)
        if window + sum(size[o] for o in objs if o not in streamed) > room:
            raise ValueError(f"the model does not fit: {buf} needs {top[buf] + window} rows "
                             f"even with every layer streamed, the core has "
                             f"{buffer_depth(prog.core, buf)} ({buf.lower()}_rows)")
        wbase = top[buf]
        top[buf] += window
        for o in objs:
            r, n = o
            key = f"{n}.W" if r is None else _state(r, n, _SUFFIX[buf])
            take(buf, key, size[o], base=wbase if o in streamed else None)
        prog.streamed[buf] = list(dict.fromkeys(n for _, n in streamed))
        prog.streamed_rows[buf] = streamed


def _plan_dram_objects(prog: ModelProgram, top: dict, take, in_dram):
    """Through DRAM (module docstring, "Passes"): every pass's weights and RBUF rows in one of
    two windows (the window :func:`_windows` gives it), the state of every layer in DRAM by
    token tiles through three tile windows per buffer, each as large as the largest pass's."""
    prog.pass_order = _pass_order(prog)
    prog.window = _windows(prog)
    for buf in ("WMEM", "RBUF"):
        rows = {(n, q): _pass_rows(prog, n, q, buf) for n, ps in prog.passes.items()
                for q in range(len(ps))}
        window = max(rows.values())
        base = top[buf]
        top[buf] += 2 * window
        for (n, q), nrows in rows.items():
            key = _pass_key(prog, n, q, buf)
            take(buf, key, nrows, base=base + window * prog.window[n, q])
            in_dram(key, buf, nrows, nrows)
            prog.pass_of[key] = (n, q)
    prog.streamed["WMEM"] = list(prog.layers)
    prog.streamed_rows["WMEM"] = [(None, n) for n in prog.layers]
    for buf in ("XBUF", "YBUF"):
        objs = [(r, n) for r in range(prog.rows) for n in prog.layers
                if _object_rows(prog, buf, n)]
        unit = max((_tile_pass_rows(prog, n, q, buf) for _, n in objs
                    for q in range(len(prog.passes[n]))), default=0)
        wbase = top[buf]
        top[buf] += 3 * unit
        if unit:
            prog.tile_windows[buf] = tuple(wbase + i * unit for i in range(3))
            for i, b in enumerate(prog.tile_windows[buf]):
                take(buf, f"{buf.lower()}.tile{i}", unit, base=b)
        for r in range(prog.rows):
            for n in prog.layers:       # (the INT8 core's: no rows, nothing in DRAM)
                key = _state(r, n, _SUFFIX[buf])
                take(buf, key, unit if (r, n) in objs else 0, base=wbase)
                if (r, n) in objs:
                    in_dram(key, buf, _object_rows(prog, buf, n), _tile_rows(prog, buf, n))
        prog.streamed[buf] = list(dict.fromkeys(n for _, n in objs))
        prog.streamed_rows[buf] = objs
    for buf in ("WMEM", "XBUF", "YBUF", "RBUF"):
        if top[buf] > buffer_depth(prog.core, buf):
            raise ValueError(f"the model does not fit: {buf} needs {top[buf]} rows, the core "
                             f"has {buffer_depth(prog.core, buf)} ({buf.lower()}_rows)")


@dataclass(frozen=True)
class Pass:
    """One pass of a layer through DRAM (module docstring, "Passes";
    :func:`program.compiler.emit_layer` ``blocks``/``chans``): its output column ``blocks``
    ``(j0, j1)`` and its reduction piece ``chans`` ``(c0, n)`` (None: every input channel)."""

    blocks: tuple
    chans: tuple | None = None

    def channels(self, cin: int) -> tuple:
        """``(first channel, channels)`` the pass reduces over, of a layer of ``cin``."""
        return self.chans or (0, cin)

    def weight_rows(self, cin: int) -> int:
        """WMEM rows of the pass's weights, of a layer of ``cin`` input channels."""
        return (self.blocks[1] - self.blocks[0]) * self.channels(cin)[1]


def _layer_passes(prog: ModelProgram, cap: int) -> dict:
    """``{layer: [Pass]}``: one pass each without a DRAM port; through DRAM, with
    ``mlp_chunks`` > 1 each block's ``fc1`` in that many column-block passes and ``fc2`` in as
    many reduction pieces (its golden layer's), and every other layer in the fewest column-block
    passes whose weights fit the window: the largest MLP pass (the largest layer without chunks),
    or ``cap`` rows (half the WMEM the attention leaves) if that is less."""
    cfg, T = prog.cfg, prog.cfg.tile
    out = {n: [Pass((0, lay.W.shape[1] // T))] for n, lay in prog.layers.items()}
    if not cfg.dram_width:
        return out
    k = cfg.mlp_chunks
    def rows(n, p):
        return p.weight_rows(prog.layers[n].W.shape[0])
    for i in range(len(prog.model.blocks) if k > 1 else 0):
        f1, f2 = prog.layers[f"blocks.{i}.fc1"], prog.layers[f"blocks.{i}.fc2"]
        nb = f1.W.shape[1] // T
        if nb % k:
            raise ValueError(f"mlp_chunks = {k} must divide the MLP's {nb} column blocks "
                             f"(mlp hidden {f1.W.shape[1]} / T = {T})")
        if f2.pieces % k or f2.W.shape[0] % f2.pieces:
            raise ValueError(f"blocks.{i}.fc2 runs in {f2.pieces} reduction pieces of its "
                             f"{f2.W.shape[0]} channels; the MLP's chunks need a multiple of "
                             f"{k} (mlp_chunks) that divides them")
        out[f"blocks.{i}.fc1"] = [Pass((a, a + n)) for a, n in piece_bounds(nb, k)]
        out[f"blocks.{i}.fc2"] = [Pass((0, f2.W.shape[1] // T), (a, n))
                                  for a, n in piece_bounds(f2.W.shape[0], k)]
    chunked = [(n, p) for n, ps in out.items() if k > 1 and n.endswith((".fc1", ".fc2"))
               for p in ps]
    window = min(cap, max(rows(n, p) for n, p in (chunked or
                                                  [(n, ps[0]) for n, ps in out.items()])))
    for n, p in chunked:
        if rows(n, p) > window:
            raise ValueError(f"{n}: an MLP chunk's weights need {rows(n, p)} WMEM rows, a "
                             f"window has {window} (wmem_rows {buffer_depth(prog.core, 'WMEM')}"
                             f"; more mlp_chunks or a deeper WMEM)")
    for n, lay in prog.layers.items():
        if k > 1 and n.endswith((".fc1", ".fc2")):
            continue
        cin, nb = lay.W.shape[0], lay.W.shape[1] // T
        if cin > window:
            raise ValueError(f"{n}: one column block's weights need {cin} WMEM rows, a window "
                             f"has {window} (wmem_rows {buffer_depth(prog.core, 'WMEM')})")
        count = next(c for c in range(1, nb + 1) if -(-nb // c) * cin <= window)
        out[n] = [Pass((a, a + m)) for a, m in piece_bounds(nb, count)]
    return out


def _pass_chans(prog: ModelProgram, name: str, q: int) -> tuple:
    """``(first channel, channels)`` pass ``q`` of ``name`` reduces over."""
    return prog.passes[name][q].channels(prog.layers[name].W.shape[0])


def _pass_rows(prog: ModelProgram, name: str, q: int, buf: str) -> int:
    """WMEM or RBUF rows of pass ``q`` of layer ``name``."""
    p = prog.passes[name][q]
    return p.weight_rows(prog.layers[name].W.shape[0]) if buf == "WMEM" else \
        p.blocks[1] - p.blocks[0]


def _tile_pass_rows(prog: ModelProgram, name: str, q: int, buf: str) -> int:
    """Rows of one token tile of pass ``q``'s ``x̂`` (XBUF) or ``Y`` (YBUF)."""
    j0, j1 = prog.passes[name][q].blocks
    return _pass_chans(prog, name, q)[1] if buf == "XBUF" else (j1 - j0) * prog.cfg.tile


def _pass_key(prog: ModelProgram, name: str, q: int, buf: str) -> str:
    """Region and DRAM key of pass ``q``'s weights (WMEM: ``<layer>.W``) or RBUF rows
    (``<layer>.r``), ``@q`` added when the layer runs in several passes."""
    key = f"{name}.{'W' if buf == 'WMEM' else 'r'}"
    return key if len(prog.passes[name]) == 1 else f"{key}@{q}"


def _pass_order(prog: ModelProgram) -> list:
    """``(layer, pass)`` in the order a cache step runs them through DRAM: per block ``v``
    before ``qk`` (so a reuse step, which skips ``qk``, sees the same windows), then ``proj``,
    then per MLP chunk its ``fc1`` pass and its ``fc2`` piece (without chunks, ``fc1``'s passes
    and then ``fc2``'s)."""
    out = [("x_embed", 0)]
    for i in range(len(prog.model.blocks)):
        b = f"blocks.{i}."
        for k in ("v", "qk", "proj"):
            out += [(b + k, q) for q in range(len(prog.passes[b + k]))]
        if prog.cfg.mlp_chunks > 1:
            for c in range(prog.cfg.mlp_chunks):
                out += [(b + "fc1", c), (b + "fc2", c)]
        else:
            out += [(b + k, q) for k in ("fc1", "fc2") for q in range(len(prog.passes[b + k]))]
    return out + [("final.linear", 0)]


def _windows(prog: ModelProgram) -> dict:
    """``{(layer, pass): 0 | 1}``, each pass's weight window: alternating along a reuse step's
    passes (every pass but ``qk``'s), a ``qk`` layer's passes alternating from the window the
    ``v`` before it does not use; so both kinds of step find the same windows, and the pass
    after ``qk`` (``proj``) never the window of the pass before it."""
    out, w = {}, 1
    for n, q in _pass_order(prog):
        if n.endswith(".qk"):
            out[n, q] = (w + 1 + q) % 2
        else:
            w = 1 - w
            out[n, q] = w
    return out


def _abuf_ops(prog: ModelProgram) -> tuple:
    """One batch row's step as a sequence of ``(written, read)`` ABUF tensor names (a layer,
    a VROW, a STORE or an attention part is one entry), every tensor's rows, and (through
    DRAM, where ABUF is small) the ``(result, input)`` pairs whose result is written over its
    input (:func:`_shared_offsets`)."""
    m, T = prog.model, prog.cfg.tile
    s = m.spec
    N, D, M, nt = s.tokens, s.hidden, s.mlp_hidden, s.tokens // T
    Pp = prog.layers["x_embed"].W.shape[0]
    rows = {"patches": nt * Pp, "x_embed.y": nt * D, "ln": nt * D, "f": nt * D,
            "final.linear.y": nt * Pp}
    dram = bool(prog.cfg.dram_width)    # pos and the residuals wait in DRAM
    pos = ["pos"] if dram else []
    ops = [(["patches"], []), (["x_embed.y"], ["patches"]), (pos, []),
           (["h.0"], ["x_embed.y"] + pos), ([], ["h.0"])]
    rows["pos"] = nt * D
    shares = [("x_embed.y", "patches"), ("h.0", "pos")] if dram else []
    for i in range(len(m.blocks)):
        b = {n: f"blocks.{i}.{_IN_PLACE.get(n, n)}" for n in _SCRATCH}
        for n, w in _SCRATCH.items():
            rows[b[n]] = 2 * N if w is None else nt * (M if w == "M" else w * D)
        rows[b["o"]] = nt * s.heads * padded_head_dim(s.head_dim, T)    # program.heads
        x, out = f"h.{i}", f"h.{i + 1}"
        # Through DRAM the block input goes out after ln1 and comes back (x.res) for res1,
        # h1 after ln2 and back for res2; otherwise both stay.
        xr, h1r = (f"{x}.res", f"{b['h1']}.res") if dram else (x, b["h1"])
        rows[xr], rows[h1r] = nt * D, nt * D
        if dram:    # qk.y and v.y go out by token tiles; attention takes one head at a time
            d = s.head_dim
            qkw, vw = f"blocks.{i}.qk.win", f"blocks.{i}.v.win"
            hq, hv = f"blocks.{i}.attn.qk", f"blocks.{i}.attn.v"
            rows.update({qkw: 3 * 2 * D, vw: 3 * D, hq: 2 * nt * d, hv: nt * d})
            att = [([qkw], [b["a"]]), ([vw], [b["a"]]), ([hq], []), ([b["S"], b["P"]], [hq]),
                   ([hv], []), ([b["o"]], [hv])]
        else:
            att = [([b["qk.y"]], [b["a"]]), ([b["v.y"]], [b["a"]]),
                   ([b["S"], b["P"]], [b["qk.y"]]), ([b["o"]], [b["v.y"]])]
        # The MLP: whole, or through DRAM in chunks (fc1's pass, its GELU, fc2's piece).
        mlp, ys = _mlp_tensors(prog, i)
        for y in ys:
            rows[y] = nt * M // len(ys)
        for c, y in enumerate(ys[:-1]):       # a piece's partial output over its input
            mlp += [([y], [b["m"]]), ([y], [y]), _partial_op(prog, i, y, rows)]
        mlp += [([ys[-1]], [b["m"]]), ([ys[-1]], [ys[-1]]), ([b["fc2.y"]], [ys[-1]])]
        if dram:    # a layer's output over its input, a residual sum over the output it adds
            one = {k: len(prog.passes[f"blocks.{i}.{k}"]) == 1 for k in ("proj", "fc1", "fc2")}
            chunked = len(ys) > 1               # (the last chunk's passes are single)
            shares += [(b["proj.y"], b["o"])] if one["proj"] else []
            shares += [(b["h1"], b["proj.y"])]
            shares += [(ys[-1], b["m"])] if chunked or one["fc1"] else []
            shares += [(b["fc2.y"], ys[-1])] if chunked or one["fc2"] else []
            shares += [(out, b["fc2.y"])]
        ops += [([b["ln1"]], [x]), ([], [x]), ([b["a"]], [b["ln1"]]), *att,
                ([b["proj.y"]], [b["o"]]), ([xr], []), ([b["h1"]], [xr, b["proj.y"]]),
                ([b["ln2"]], [b["h1"]]), ([], [b["h1"]]), ([b["m"]], [b["ln2"]]), *mlp,
                ([h1r], []), ([out], [h1r, b["fc2.y"]]), ([], [out])]
    depth = len(m.blocks)
    ops += [(["ln"], [f"h.{depth}"]), (["f"], ["ln"]), ([], ["f"]), (["final.linear.y"], ["f"]),
            ([], ["final.linear.y"])]
    if dram:
        shares += [("f", "ln"), ("final.linear.y", "f")]
    for i in range(depth + 1):
        rows[f"h.{i}"] = nt * D
    return ops, rows, shares


def _mlp_tensors(prog: ModelProgram, i: int) -> tuple:
    """``([], [fc1 output tensor of each MLP chunk])`` of block ``i``: ``blocks.i.fc1.y``
    alone without chunks (its GELU in place), ``blocks.i.fc1.y.<c>`` per chunk through DRAM
    with ``mlp_chunks``."""
    k = prog.cfg.mlp_chunks if prog.cfg.dram_width else 1
    b = f"blocks.{i}.fc1.y"
    return [], ([b] if k == 1 else [f"{b}.{c}" for c in range(k)])


def _partial_op(prog: ModelProgram, i: int, y: str, rows: dict) -> tuple:
    """The ABUF entry of an MLP chunk's ``fc2`` piece but the last: its partial output over its
    input ``y`` when a token tile of it is no longer (:func:`_shared_offsets`'s argument), else
    into one token tile's rows of its own (``blocks.i.fc2.partial``)."""
    D, nt = prog.model.spec.hidden, prog.model.spec.tokens // prog.cfg.tile
    if D <= rows[y] // nt:
        return ([], [y])
    rows[f"blocks.{i}.fc2.partial"] = D
    return ([f"blocks.{i}.fc2.partial"], [y])


def _shared_offsets(shares: list, rows: dict, life: dict) -> dict:
    """``{tensor: (head, offset)}``: each tensor of a ``(result, input)`` pair of ``shares``
    placed inside one region with its input (``head``: the region's first tensor). The input
    must die where the result is born. A result no longer than its input starts with it; a
    longer one ends with it. Both are safe for an element-wise VROW (each element is read
    before it is written) and for a layer: its GEMMs write token tile ``t`` after the QUANT of
    tile ``t`` read it and beside the QUANT of ``t + 1``; with the result's tile at most the
    input's, result tile ``t`` starts at or before input tile ``t``; with a longer one the
    ends meet and result tile ``t`` covers input tiles up to ``t`` only."""
    at = {}
    for res, inp in shares:
        if life[inp][1] != life[res][0]:
            raise AssertionError(f"ABUF: {res} cannot be written over {inp}, which is read "
                                 f"after it is written")
        if res in at:
            raise AssertionError(f"ABUF: {res} is written over two tensors")
        head, off = at.get(inp, (inp, 0))
        at.setdefault(inp, (head, off))
        off += 0 if rows[res] <= rows[inp] else rows[inp] - rows[res]
        at[res] = (head, off)
        low = min(o for h, o in at.values() if h == head)
        if low < 0:
            at = {n: (h, o - low if h == head else o) for n, (h, o) in at.items()}
    return at


def _place_abuf(prog: ModelProgram) -> int:
    """ABUF regions by lifetime: ``pos`` (constant; through DRAM, loaded each step and placed
    like the rest) first, then every tensor of :func:`_abuf_ops` (a tensor written over
    another, :func:`_shared_offsets`, as one with it) at the lowest base where it overlaps no
    tensor alive at the same time (a tensor lives from the entry that writes it to the last
    that reads it, both included; the batch rows run one after the other and share the
    placement). Returns the rows used."""
    ops, rows, shares = _abuf_ops(prog)
    life = {}
    for k, (written, read) in enumerate(ops):
        for n in written + read:
            a, b = life.get(n, (k, k))
            life[n] = (min(a, k), max(b, k))
    at = _shared_offsets(shares, rows, life)
    units = {}                                  # head -> [(offset, rows, life)] of its tensors
    for n in life:
        head, off = at.get(n, (n, 0))
        units.setdefault(head, []).append((off, rows[n], life[n]))
    if prog.cfg.dram_width:             # pos is a tensor like the others (loaded each step)
        pos = Region("ABUF", "-", 0, 0)
    else:
        pos = Region("ABUF", "pos", 0, rows["pos"])
        prog.regions["pos"] = pos
    size = {u: max(o + n for o, n, _ in parts) for u, parts in units.items()}
    span = {u: (min(a for _, _, (a, _) in parts), max(b for _, _, (_, b) in parts))
            for u, parts in units.items()}
    orders = (lambda u: (span[u][0], -size[u]), lambda u: (-size[u], span[u][0]),
              lambda u: (-size[u] * (span[u][1] - span[u][0] + 1), span[u][0]))
    base_of = min((_first_fit(units, sorted(units, key=key), pos.rows) for key in orders),
                  key=lambda b: max(b[u] + size[u] for u in units))
    for n in life:
        head, off = at.get(n, (n, 0))
        prog.regions[n] = Region("ABUF", n, base_of[head] + off, rows[n])
    return max([pos.rows] + [base_of[u] + size[u] for u in units])


def _first_fit(units: dict, order: list, low: int) -> dict:
    """``{unit: base}``: each unit (``[(offset, rows, (first op, last op))]`` of its tensors)
    in ``order`` at the lowest base from ``low`` where none of its tensors overlaps, in rows
    and in time, one placed before."""
    placed, base_of = [], {}             # placed: (first row, end row, first op, last op)
    for u in order:
        parts = units[u]
        starts = sorted({low} | {hi - o for _, hi, _, _ in placed for o, _, _ in parts
                                 if hi - o >= low})
        base_of[u] = next(b for b in starts if not any(
            lo < b + o + n and b + o < hi and c <= z and a <= d
            for o, n, (a, z) in parts for lo, hi, c, d in placed))
        placed += [(base_of[u] + o, base_of[u] + o + n, a, z) for o, n, (a, z) in parts]
    return base_of


def _layer_regions(prog: ModelProgram, r: int, name: str, k: str | None = None) -> dict:
    """Batch row ``r``'s regions of layer ``name`` under the names emit_layer reads (``k`` or
    ``name``: ``<k>.xhat``, ``<k>.Y``, ``<k>.W``, ``<k>.r``)."""
    R, k = prog.regions, k or name
    out = {f"{k}.xhat": R[_state(r, name, "xhat")], f"{k}.Y": R[_state(r, name, "Y")]}
    for buf in ("WMEM", "RBUF"):       # (a layer in several passes: its pass's, _pass_call)
        key = f"{name}.{'W' if buf == 'WMEM' else 'r'}"
        if key in R:
            out[f"{k}.{key.rsplit('.', 1)[1]}"] = R[key]
    return out


def _block_view(prog: ModelProgram, r: int, i: int):
    """Block ``i`` of batch row ``r`` as :func:`program.compiler.emit_block_body` sees it:
    its :class:`~golden.dit_int.IntDiTBlock` and its region names mapped onto the model's map."""
    R = prog.regions
    view = {"x": R[f"h.{i}"], "out": R[f"h.{i + 1}"],
            "K^T": R["K^T"], "V": R["V"], "slot0": R["slot0"], "slot1": R["slot1"],
            "pcache": R[_state(r, f"blocks.{i}", "pcache")]}
    for n in _SCRATCH:
        if f"blocks.{i}.{_IN_PLACE.get(n, n)}" in R:     # (through DRAM qk.y, v.y: below)
            view[n] = R[f"blocks.{i}.{_IN_PLACE.get(n, n)}"]
    for k in LAYERS:
        view.update(_layer_regions(prog, r, f"blocks.{i}.{k}", k))
    for n in ("S.r", "O.r", "mask", *MOD_NAMES):
        view[n] = R[f"blocks.{i}.{n}"]

    if prog.cfg.dram_width:
        view["x.res"], view["h1.res"] = R[f"h.{i}.res"], R[f"blocks.{i}.h1.res"]
        view["qk.y"], view["v.y"] = R[f"blocks.{i}.qk.win"], R[f"blocks.{i}.v.win"]
        qk, v = (prog.dram_map[_state(r, f"blocks.{i}.{k}", "y")] for k in ("qk", "v"))
        nt_d = prog.model.spec.tokens // prog.cfg.tile * prog.model.spec.head_dim
        attn = AttnStream(TileStream((), qk.beat, qk.stride), TileStream((), v.beat, v.stride),
                          R[f"blocks.{i}.attn.qk"].base, R[f"blocks.{i}.attn.qk"].base + nt_d,
                          R[f"blocks.{i}.attn.v"].base)
    else:
        attn = None
    spills = {("ln1", "after"): ("DSTORE", f"h.{i}", f"h.{i}"),
              ("res1", "before"): ("DLOAD", f"h.{i}.res", f"h.{i}"),
              ("ln2", "after"): ("DSTORE", f"blocks.{i}.h1", f"blocks.{i}.h1"),
              ("res2", "before"): ("DLOAD", f"blocks.{i}.h1.res", f"blocks.{i}.h1")}

    dram = bool(prog.cfg.dram_width)
    for c in range(len(prog.passes[f"blocks.{i}.fc2"]) if dram else 0):
        if f"blocks.{i}.fc1.y.{c}" in R:          # an MLP chunk's fc1 output (and GELU)
            view[f"fc1.y.{c}"] = R[f"blocks.{i}.fc1.y.{c}"]

    def around(e, k, when, q=None):
        if k in LAYERS:
            _around(prog, e, r, f"blocks.{i}.{k}", when, q)
        elif k == "attn":               # proj's first pass loads beside the last P·V GEMMs
            if dram:
                _fetch(prog, e, r, f"blocks.{i}.proj", 0)
        elif dram:                      # a residual out to DRAM or back (the VROW after waits)
            op, region, obj = spills[k, when]
            e.dram(op, "ABUF", R[region], prog.dram_map[_state(r, obj, "spill")].beat)
    return SimpleNamespace(
        blk=prog.model.blocks[i], cfg=prog.cfg, regions=view, around=around,
        layers={k: prog.layers[f"blocks.{i}.{k}"] for k in LAYERS}, pieces={},
        state_streams={k: _state_stream(prog, r, f"blocks.{i}.{k}") for k in LAYERS},
        pcache_stream=_pcache_stream(prog, r, i), attn_stream=attn,
        passes={k: prog.passes[f"blocks.{i}.{k}"] for k in LAYERS} if dram else None,
        pass_call=lambda k, q: _pass_call(prog, r, i, view, k, q))


def _around(prog: ModelProgram, e: Emitter, r: int, name: str, when: str, q=None):
    """The transfers of a layer's (through DRAM: of its pass ``q``'s) streamed objects:
    through DRAM (:func:`_around_dram`), or with the host: LOADs before it, STOREs after it."""
    if prog.cfg.dram_width:
        return _around_dram(prog, e, r, name, when, q or 0)
    if when in ("prefetch", "started"):
        return
    R = prog.regions
    for buf in STREAMABLE if when == "before" else ("XBUF", "YBUF"):
        obj = (None if buf == "WMEM" else r, name)
        if obj not in prog.streamed_rows[buf]:
            continue
        suffix = _SUFFIX[buf]
        reg = R[f"{name}.W"] if buf == "WMEM" else R[_state(r, name, suffix)]
        e.transfer("LOAD" if when == "before" else "STORE", buf, reg, key=(r, f"{name}.{suffix}"))


def _dram_objects(prog: ModelProgram, r: int, name: str, bufs=STREAMABLE) -> list:
    """``(buffer, key)`` of batch row ``r``'s objects of layer ``name`` that live in DRAM
    (``bufs``: of :data:`STREAMABLE`, and RBUF: its requantization rows)."""
    keys = [(b, f"{name}.W" if b == "WMEM" else f"{name}.r" if b == "RBUF" else
             _state(r, name, _SUFFIX[b])) for b in bufs]
    return [(b, k) for b, k in keys if k in prog.dram_map]


def _fetch(prog: ModelProgram, e: Emitter, r: int, name: str, q: int = 0):
    """DLOAD pass ``q`` of layer ``name``'s weights and RBUF rows from DRAM into its window;
    the last DLOAD signals the window's ``D_READY``."""
    keys = [(b, _pass_key(prog, name, q, b)) for b in ("WMEM", "RBUF")]
    sig = D_READY[prog.window[name, q]]
    for i, (buf, key) in enumerate(keys):
        e.dram("DLOAD", buf, prog.regions[key], prog.dram_map[key].beat,
               signal=sig if i == len(keys) - 1 else 0)


def _beats(prog: ModelProgram, buf: str, rows: int) -> int:
    """Beats ``rows`` rows of ``buf`` take in DRAM, refused unless whole (a pass's part of a
    token tile must start on a beat)."""
    b, rest = divmod(rows * dram_row_bytes(prog.cfg, buf), beat_bytes(prog.cfg))
    if rest:
        raise ValueError(f"a pass starts {rows} rows into a token tile of {buf}: "
                         f"{rows * dram_row_bytes(prog.cfg, buf)} bytes, not a whole number of "
                         f"{beat_bytes(prog.cfg)}-byte beats (dram_width {prog.cfg.dram_width})")
    return b


def _state_stream(prog: ModelProgram, r: int, name: str, q: int = 0) -> StateStream | None:
    """Batch row ``r``'s state of pass ``q`` of layer ``name`` as
    :func:`program.compiler.emit_layer` streams it from DRAM by token tiles (None when all of
    it is resident): the pass's rows of each tile (``x̂``: its input channels; ``Y`` and the
    output: its column blocks), ``x̂`` stored by a reduction piece and by the last pass."""
    pa, T = prog.passes[name][q], prog.cfg.tile
    c0 = _pass_chans(prog, name, q)[0]
    j0, j1 = pa.blocks
    parts = {}
    for buf, skip in (("XBUF", c0), ("YBUF", j0 * T)):
        obj = prog.dram_map.get(_state(r, name, _SUFFIX[buf]))
        parts[buf] = obj and TileStream(prog.tile_windows[buf],
                                        obj.beat + _beats(prog, buf, skip), obj.stride)
    out = prog.dram_map.get(_state(r, name, "y"))       # qk.y, v.y: out by token tiles
    if out is not None:
        w, n = prog.regions[f"{name}.win"], (j1 - j0) * T
        parts["ABUF"] = TileStream(tuple(w.base + j * n for j in range(3)),
                                   out.beat + _beats(prog, "ABUF", j0 * T), out.stride)
    if not any(parts.values()):
        return None
    return StateStream(parts["XBUF"], parts["YBUF"], aout=parts.get("ABUF"),
                       xhat_out=pa.chans is not None or q == len(prog.passes[name]) - 1)


def _pcache_stream(prog: ModelProgram, r: int, i: int) -> PCacheStream | None:
    """Batch row ``r``'s P cache of block ``i`` in DRAM (None without a DRAM port)."""
    obj = prog.dram_map.get(_state(r, f"blocks.{i}", "pcache"))
    if obj is None:
        return None
    # The window of the block's v: its last pass waited for its D_READY before attention (a
    # qk pass in that window too, on a cache step), and the next load into it is the MLP's,
    # after attention: idle in between.
    v = f"blocks.{i}.v"
    free = D_READY[prog.window[v, len(prog.passes[v]) - 1]]
    return PCacheStream(prog.regions["pcache.window"].base, obj.beat, obj.stride, free)


def _around_dram(prog: ModelProgram, e: Emitter, r: int, name: str, when: str, q: int = 0):
    """Pass ``q`` of a layer through DRAM (module docstring, "Passes"): ``"before"`` it, the
    first layer's own DLOADs and a NOP waiting for its window's ``D_READY``; once it has asked
    for its first state tiles (``"started"``), the DLOADs of the next pass's weights, which run
    beside it: behind a SKIP when the next is a ``qk`` layer's first (a reuse step skips
    ``qk``), none when it is ``proj``'s first (loaded at the attention's tail, on every step).
    Its state moves inside the pass (:func:`_state_stream`)."""
    order = prog.pass_order
    k = order.index((name, q))
    if when == "before":
        if k == 0:
            _fetch(prog, e, r, name, q)
        e("NOP", wait=D_READY[prog.window[name, q]])
    elif when == "started" and k + 1 < len(order):
        n2, q2 = order[k + 1]
        if n2.endswith(".proj") and q2 == 0:
            return
        if n2.endswith(".qk") and q2 == 0:
            sub = Emitter(prog.cfg)
            _fetch(prog, sub, r, n2, q2)
            e.skip(sub)
            return
        _fetch(prog, e, r, n2, q2)


def _pass_call(prog: ModelProgram, r: int, i: int, view: dict, k: str, q: int) -> tuple:
    """``(regions, stream, emit_layer arguments)`` of pass ``q`` of block ``i``'s layer ``k``
    (through DRAM): its weight and RBUF windows; an MLP chunk's ``fc1`` pass writes the chunk's
    own tensor, its ``fc2`` piece reads it, and every piece but the last writes its partial
    output over that input (or, when a token tile of it is longer, into ``fc2.partial``)."""
    name = f"blocks.{i}.{k}"
    pa, lay, T = prog.passes[name][q], prog.layers[name], prog.cfg.tile
    R = dict(view, **{f"{k}.W": prog.regions[_pass_key(prog, name, q, "WMEM")],
                      f"{k}.r": prog.regions[_pass_key(prog, name, q, "RBUF")]})
    src = {"qk": "a", "v": "a", "proj": "o", "fc1": "m", "fc2": "gelu"}[k]
    kw = dict(blocks=pa.blocks, chans=pa.chans,       # (a chunk's piece: its own pieces)
              pieces=lay.pieces // len(prog.passes[name]) if pa.chans else lay.pieces)
    chunks = prog.cfg.mlp_chunks
    if f"{k}.y" in R and len(prog.passes[name]) > 1:    # the pass's columns of the output
        y = R[f"{k}.y"]
        R[f"{k}.y"] = Region("ABUF", y.name, y.base + pa.blocks[0] * T, y.rows)
    if chunks > 1 and k == "fc1":
        R["fc1.y"] = prog.regions[f"{name}.y.{q}"]
        kw["ostride"] = (pa.blocks[1] - pa.blocks[0]) * T
    if chunks > 1 and k == "fc2":
        R["gelu"] = inp = prog.regions[f"blocks.{i}.fc1.y.{q}"]
        if q < chunks - 1:
            part = prog.regions.get(f"{name}.partial")
            R["fc2.y"] = part or inp
            kw["ostride"] = 0 if part else pa.chans[1]
    return R, _state_stream(prog, r, name, q), dict(kw, src=src)


def _layer(prog: ModelProgram, e: Emitter, r: int, name: str, src: str):
    R = dict(_layer_regions(prog, r, name), slot0=prog.regions["slot0"],
             slot1=prog.regions["slot1"])
    R[src], R[f"{name}.y"] = prog.regions[src], prog.regions[f"{name}.y"]
    _around(prog, e, r, name, "before")
    lay = prog.layers[name]
    emit_layer(e, prog.cfg, lay, prog.model.spec.tokens, R, name, src, pieces=lay.pieces,
               stream=_state_stream(prog, r, name),
               started=lambda e2: _around(prog, e2, r, name, "started"))
    _around(prog, e, r, name, "after")


def _init(prog: ModelProgram):
    """Init commands and host words (module docstring)."""
    m, cfg, R = prog.model, prog.cfg, prog.regions
    e, words = Emitter(cfg), []
    for name in prog.layers:
        if (None, name) not in prog.streamed_rows["WMEM"]:
            e.transfer("LOAD", "WMEM", R[f"{name}.W"])
            words += prog.weights[f"{name}.W"]
    for name, lay in prog.layers.items():
        if not cfg.dram_width:          # (through DRAM: with the weights, pass by pass)
            e.transfer("LOAD", "RBUF", R[f"{name}.r"])
            words += rbuf_words(cfg, lay)
    for i, blk in enumerate(m.blocks):
        rwords, mwords = attention_words(cfg, blk)
        e.transfer("LOAD", "RBUF", R[f"blocks.{i}.S.r"])
        e.transfer("LOAD", "RBUF", R[f"blocks.{i}.O.r"])
        e.transfer("LOAD", "MASK", R[f"blocks.{i}.mask"])
        words += rwords + mwords
    if "pos" not in prog.dram_map:       # (through DRAM: in the image, loaded each step)
        e.transfer("LOAD", "ABUF", R["pos"])
        for row in prog._rows("pos", m.pos):
            words += row_to_words(cfg, "ABUF", {"v": row})
    e.transfer("LOAD", "VBUF", R["one"])
    for row in m.one.reshape(-1, cfg.tile):
        words += row_to_words(cfg, "VBUF", {"v": row})
    prog.init_words = words
    e("END")
    prog.init = e.cmds


def _lower(prog: ModelProgram):
    """The init and step programs (module docstring): every batch row in turn, then STEP."""
    m, cfg, R = prog.model, prog.cfg, prog.regions
    N, D = m.spec.tokens, m.spec.hidden
    _init(prog)
    e = Emitter(cfg)
    for r in range(prog.rows):
        p = f"r{r}." if prog.rows > 1 else ""
        e.section(p + "load")
        e.transfer("LOAD", "ABUF", R["patches"], key=(r, "patches"))
        per = len(MOD_NAMES) * D // cfg.tile
        depth = len(m.blocks)
        if cfg.dram_width:               # the final layer's vectors now, each block's before it
            e.transfer("LOAD", "VBUF", Region("VBUF", "mods", per, 2 * D // cfg.tile),
                       key=(r, "mods"), offset=depth * per)
        else:
            e.transfer("LOAD", "VBUF", R["mods"], key=(r, "mods"))
        e("VPARAM", value=m.eps_q)
        e.section(p + "x_embed")
        _layer(prog, e, r, "x_embed", "patches")
        e.section(p + "pos")
        if cfg.dram_width:               # in from DRAM (the VROW waits for it)
            e.dram("DLOAD", "ABUF", R["pos"], prog.dram_map["pos"].beat)
        emit_token_rows(e, "gated_residual", N, D, D, R["pos"].base, R["h.0"].base,
                        vb=R["one"].base, c=R["x_embed.y"].base)
        e.transfer("STORE", "ABUF", R["h.0"], key=(r, "h0"))
        for i in range(len(m.blocks)):
            view = _block_view(prog, r, i)
            if cfg.dram_width:           # this block's adaLN vectors (H waits for every engine)
                e.transfer("LOAD", "VBUF", Region("VBUF", "mods", 0, per), key=(r, "mods"),
                           offset=i * per)
            emit_block_body(view, e, prefix=f"{p}blocks.{i}.")
            e.section(f"{p}blocks.{i}.store")
            e.transfer("STORE", "ABUF", view.regions["out"], key=(r, f"blocks.{i}.out"))
        h = R[f"h.{len(m.blocks)}"]
        e.section(p + "final.norm")
        emit_token_rows(e, "layernorm", N, D, D, h.base, R["ln"].base)
        emit_token_rows(e, "modulate", N, D, D, R["ln"].base, R["f"].base,
                        vb=R["final.shift"].base, c=R["final.scale"].base)
        e.transfer("STORE", "ABUF", R["f"], key=(r, "f"))
        e.section(p + "final.linear")
        _layer(prog, e, r, "final.linear", "f")
        e.section(p + "store")
        e.transfer("STORE", "ABUF", R["final.linear.y"], key=(r, "eps"))
    e.section("end")
    e.transfer("STORE", "CNT", Region("CNT", "counters", 0, len(COUNTERS)),
               key=(None, "counters"))
    e("STEP", interval=prog.interval)
    e("END")
    e.section(None)
    prog.step, prog.tags, prog.sections = e.cmds, e.tags, e.sections


def zero_state_commands(prog: ModelProgram, steps_done: int = 0) -> list:
    """The program that starts a new trajectory: LOAD ``zero`` of every resident ``x̂`` and
    ``Y`` region and, after ``steps_done`` steps, the STEPs that bring the phase back to 0 (a
    cache step); END. The streamed state is the host's (:meth:`ModelProgram.initial_state`)."""
    e = Emitter(prog.cfg)
    for _ in range(-steps_done % prog.interval):
        e("STEP", interval=prog.interval)
    for buf in ("XBUF", "YBUF"):
        for r in range(prog.rows):
            for name in prog.layers:
                if (r, name) not in prog.streamed_rows[buf]:
                    e.transfer("LOAD", buf, prog.regions[_state(r, name, _SUFFIX[buf])], zero=1)
    e("END")
    return e.cmds
