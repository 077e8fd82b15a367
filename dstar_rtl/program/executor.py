"""ISA-level executor of the DSTAR core (:mod:`program.isa`): NumPy buffers, one command at a
time, every value computed by the golden functions the units were verified against.

The executor runs commands *sequentially in program order*: it is the reference the RTL core
(which overlaps Q and M commands under the semaphores) must equal at the ISA level. A program is
correct for the core only if its semaphores make the overlapped order produce the same result;
the executor checks the necessary half of that (every wait is satisfiable in sequential order).

State (ISA level, attributes of :class:`CoreExecutor`)
------------------------------------------------------
``abuf`` (abuf_rows, T), ``xbuf`` (xbuf_rows, T), ``ybuf`` (ybuf_rows, T), ``vbuf``
(vbuf_rows, T), ``wmem`` (wmem_rows, cols): int64. ``rbuf``: dict of (rbuf_rows, T) arrays ``m``,
``sh``, ``bias``. ``mask``: list of Python ints (one bit per key block). ``gmem``: list of
:class:`golden.schedule.Group`, one group per row (reset: an all-zero group, ``first = last = 0``).
``sreg`` [16], ``vparam``, ``phase``, ``sem`` [4], the QPU configuration ``qpu_base`` /
``qpu_thr`` (reset: the configuration's ``base_log2`` and ``thr``, as the QPU's registers),
``counters`` (dict in :data:`program.isa.COUNTERS` order). ABUF is not skewed here.

Semantics beyond the table of :mod:`program.isa`
-----------------------------------------------------
* Issue: ``commands`` += 1; every semaphore of ``wait`` must be non-zero (else ``semaphore``) and
  is decremented; the command runs; every semaphore of ``signal`` is incremented (one already at
  15: ``semaphore``). A command that fails changes no buffer (all checks precede all writes).
* SKIP (phase != 0) discards the next ``count`` commands without decoding them (an unknown opcode
  among them is no error); the discard continues into the next :meth:`CoreExecutor.run`.
* STEP: ``phase := 0 if phase + 1 >= interval else phase + 1``; ``interval == 0`` is ``operand``.
* LOAD/STORE with ``count == 0`` do nothing. LOAD ``zero`` reads no host word.
* DLOAD/DSTORE (:mod:`program.isa`, "DRAM image") move rows between a buffer and
  :attr:`CoreExecutor.dram` (a :class:`program.dram.Dram`, kept across resets; given to the
  constructor or made empty); on a core without a DRAM port (``dram_width`` 0) they are
  ``opcode``. A GMEM row goes through its group record (:meth:`golden.schedule.Group.word`,
  ``from_word``), so a group back from DRAM has ``k`` 0 (not part of the record).
* QCFG with ``base_log2 > B_max`` or thresholds not ``thr2 < thr4 < thr6 < 127``: ``qpu`` (the
  QPU's ``config_error``).
* QUANT: ``nch == 0`` ``operand``; ``nch > max_reduction`` ``qpu``; the groups must fit
  ``gdst ..`` (``address``). The quantizer is :func:`golden.fmdq.quantize_subchannels` with the
  QCFG thresholds and ``r0 = act_frac - base``; the stream is :func:`golden.schedule.schedule_tile`.
* GEMM: the replay ends at the first group with ``last`` (running off GMEM: ``address``); the
  product is :func:`golden.schedule.execute` of the replayed groups (it clears the accumulators at
  a ``first`` group; the replay starts from zero anyway); only valid lanes read WMEM (address
  checked on those); ``sh - s`` outside ``[0, sh_max]`` on any lane is ``shift``.
* The INT8 core (``cfg.datapath == "int8"``, numerics §2.8): GMEM rows are
  :class:`golden.dense_int8.Int8Group`; QCFG does nothing; QUANT is the INT8 quantizer
  (:func:`golden.dense_int8.quantize_tile`), ``diff`` is ``operand``, and it reads the tile twice
  (``abuf_reads`` +2·nch); GEMM's product is :func:`golden.dense_int8.execute` and its shift
  ``max(0, sh - s - e)`` with the tile's exponent ``e`` (the last group's), never ``shift`` below
  0; ``lanes_valid`` +1 per valid group.
* VROW: ``vop`` must name one of :data:`program.isa.VROW_OPS` (``operand``); ``R == 0`` or
  ``n == 0`` is ``operand``; the token walk needs ``n <= max_reduction`` (LayerNorm ``n <=
  ln_row_max``, :attr:`golden.config.Config.ln_max`), the sub-channel walk
  (``cols = 1``) only ``kv_amax``/``kv_quant`` with ``n·T <= max_reduction`` (``operand``). A
  token-walk beat touches all ``T`` rows of its segment (address-checked); elements past ``n`` are
  read as don't-care and written as 0. Commands run one after another (command ``r`` writes before
  ``r + 1`` reads). A golden VPU function refusing its input is ``vpu``. ``overlap`` changes
  nothing here (the executor runs every command alone; the program's semaphores make the core's
  overlapped run equal to it) but is ``operand`` for ``gated_residual``.

Counter rules (event counters; the cycle counters ``cycles``, ``busy_*``, ``stall_*`` stay 0)
---------------------------------------------------------------------------------------------
All 32-bit, saturating at ``2**32 - 1``. A "row" is one logical row of a buffer (an ABUF token
segment counts as one row access: one access of the skewed banks).

===================== ==========================================================================
commands              +1 per command issued (SKIP/STEP/NOP/END/BARRIER included; a command
                      discarded by SKIP or after an error is not counted). Incremented at issue,
                      so a STORE of CNT already includes itself here.
host_words_in         +words per LOAD row (0 for ``zero``).
host_words_out        +words per STORE row; applied after a STORE of CNT has read the counters.
dram_read_beats       DLOAD: +beats (:func:`program.isa.dram_beats`).
dram_write_beats      DSTORE: +beats.
abuf_reads            STORE or DSTORE ABUF: +1 per row. QUANT: +nch. VROW: +1 per beat sent per ABUF
                      operand (``a``; also ``c`` of gated_residual; a LayerNorm row longer than
                      ``max_reduction`` is sent twice).
abuf_writes           LOAD ABUF (also ``zero``), DLOAD ABUF: +1 per row. GEMM: +T. VROW writing ABUF
                      (softmax, layernorm, modulate, gelu, gated_residual): +1 per beat.
xbuf_reads/_writes    (D)STORE/(D)LOAD XBUF: +1 per row. QUANT with diff: +nch reads and +nch
                      writes.
ybuf_reads/_writes    (D)STORE/(D)LOAD YBUF: +1 per row. GEMM with accum: +T reads and +T writes.
wmem_writes           LOAD or DLOAD WMEM: +1 per row. VROW kv_quant: +1 per beat.
gmem_writes           QUANT: +groups written. DLOAD GMEM: +1 per row.
groups_replayed       GEMM: +groups replayed (the ``last`` one included).
lanes_valid           GEMM: +valid lanes of the replayed groups.
pcache_groups_written QUANT with pcache: +groups written.
pcache_groups_read    GEMM with pcache: +groups replayed.
vpu_rows              VROW: +1 per VPU command (R per VROW). GEMM: +T (one acc_requant row per
                      token).
vpu_beats             VROW: +input beats per VPU command (ceil(n/T) token walk, twice that for a
                      LayerNorm row longer than ``max_reduction``; n sub-channels).
                      GEMM: +T (one beat per acc_requant row).
vpu_saturated         VROW: +saturated result elements (the golden function's count); QUANT with
                      diff: +x̂ elements that saturated in ``xhat_update``.
y_saturated           GEMM: +outputs y that saturated (acc_requant).
ysum_saturated        GEMM: +running sums Y that saturated (acc_requant).
qpu_<name>            QUANT: + the tile's :class:`golden.schedule.Counters` (``saturated``
                      included, as :func:`golden.schedule.schedule_matrix` adds it).
===================== ==========================================================================

Memory reads the counters leave out (``reads``, :data:`READS`; not core counters, so not checked
against the RTL; what the energy model charges per access, :mod:`bench.image_energy`):
``wmem_reads`` +groups · read ports per GEMM (every port of the weight buffer reads with each
group taken: ``lanes`` on the DSTAR core, 1 on the INT8 core), ``gmem_reads`` +groups replayed,
``rbuf_reads`` +T per GEMM (one per drained token), ``vbuf_reads`` +2 and ``mask_reads`` +1 per
VROW beat (the V engine reads both VBUF ports and MASK with every beat it issues); a DSTORE of
GMEM +1 per row.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from dstar_rtl.golden import dense_int8, vpu
from dstar_rtl.golden.config import Config, ConfigError
from dstar_rtl.golden.fmdq import dequant, quantize_subchannels
from dstar_rtl.golden.layouts import pack, unpack
from dstar_rtl.golden.schedule import Group, execute, schedule_tile
from dstar_rtl.program.dram import Dram
from dstar_rtl.program.isa import (
    BUFFERS,
    COUNTERS,
    DRAM_ADDR_BITS,
    DRAM_BUFFERS,
    DSTORABLE,
    ERRORS,
    OPCODES,
    SEM_BITS,
    SEMAPHORES,
    SREGS,
    STORABLE,
    Cmd,
    CoreConfig,
    beat_bytes,
    buffer_depth,
    bytes_to_rows,
    check_core,
    cmd_bits,
    decode,
    dram_beats,
    dram_row_bytes,
    encode,
    host_words_per_row,
    row_layout,
    row_to_words,
    rows_to_bytes,
    words_to_row,
)
from dstar_rtl.program.vrow import VrowEngine

__all__ = ["CoreError", "CoreExecutor", "COUNTER_MAX", "READS"]

#: The memory reads :attr:`CoreExecutor.reads` counts (module docstring), beside the counters.
READS = ("wmem_reads", "gmem_reads", "rbuf_reads", "vbuf_reads", "mask_reads")

COUNTER_MAX = (1 << 32) - 1
SEM_MAX = (1 << SEM_BITS) - 1
# (read counter, write counter) of the buffers that have row counters.
_ROW_COUNTERS = {"ABUF": ("abuf_reads", "abuf_writes"), "XBUF": ("xbuf_reads", "xbuf_writes"),
                 "YBUF": ("ybuf_reads", "ybuf_writes"), "WMEM": (None, "wmem_writes")}


class CoreError(Exception):
    """A sticky core error: ``code`` (a name of :data:`program.isa.ERRORS`), ``index`` (the
    failing command's index in the list given to :meth:`CoreExecutor.run`) and a message."""

    def __init__(self, code: str, index: int, message: str):
        if code not in ERRORS or code == "none":
            raise ValueError(f"unknown core error code {code!r}")
        self.code, self.index, self.detail = code, index, message
        super().__init__(f"command {index}: {code} error: {message}")


def zero_group(cfg: Config) -> Group:
    """The reset content of a GMEM row: exponent 0, every lane invalid, no markers."""
    L, T = cfg.lanes, cfg.rows
    z = np.zeros(L, np.int64)
    return Group(exp=0, channel=z.copy(), signed=z.copy(), valid=z.copy(),
                 digits=np.zeros((T, L), np.int64), k=z.copy())


class CoreExecutor(VrowEngine):
    """Sequential ISA-level model of one core (module docstring): :meth:`run` executes commands.
    VROW runs in :class:`program.vrow.VrowEngine`."""

    def __init__(self, cfg: Config, core: CoreConfig, dram: Dram | None = None):
        check_core(cfg)
        self.cfg, self.core, self.T = cfg, core, cfg.tile
        self.tables = vpu.vpu_tables(cfg)
        self._qcfgs = {}
        #: The DRAM behind the port (kept across :meth:`reset`; None without a port).
        self.dram = dram if dram is not None or not cfg.dram_width else \
            Dram(beat_bytes(cfg) << DRAM_ADDR_BITS)
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self):
        """Reset: zero buffers, GMEM of zero groups, registers and counters cleared, no error."""
        cfg, core, T = self.cfg, self.core, self.T
        self.abuf = np.zeros((core.abuf_rows, T), np.int64)
        self.xbuf = np.zeros((core.xbuf_rows, T), np.int64)
        self.ybuf = np.zeros((core.ybuf_rows, T), np.int64)
        self.vbuf = np.zeros((core.vbuf_rows, T), np.int64)
        self.wmem = np.zeros((core.wmem_rows, cfg.cols), np.int64)
        self.rbuf = {k: np.zeros((core.rbuf_rows, T), np.int64) for k in ("m", "sh", "bias")}
        self.mask = [0] * core.mask_rows
        self.int8 = cfg.datapath == "int8"
        self.gmem = [dense_int8.zero_group(cfg) if self.int8 else zero_group(cfg)] * \
            core.gmem_rows
        self.sreg = [0] * SREGS
        self.rmax = np.full(T, -(1 << (cfg.act_width - 1)), np.int64)    # RMAX (GEMM rmax)
        self.vparam = 0
        self.phase = 0
        self.sem = [0] * SEMAPHORES
        self.qpu_base, self.qpu_thr = cfg.base_log2, tuple(cfg.thr)
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.reads = dict.fromkeys(READS, 0)
        self.done = False
        self.error = None
        self.host_out = []
        self._skip = 0
        self._index = 0
        #: The last QUANT's cycles in the exponent bins (``TileSchedule.packer_cycles``).
        self.packer_cycles = None

    def counter_values(self) -> list:
        """The counters in :data:`program.isa.COUNTERS` (CNT row) order."""
        return [self.counters[k] for k in COUNTERS]

    def gmem_records(self, start: int, count: int) -> list:
        """The group records (:meth:`golden.schedule.Group.record`) of GMEM rows
        ``start .. start+count-1``."""
        return [g.record() for g in self.gmem[start:start + count]]

    def state(self) -> dict:
        """Copies of every buffer and register."""
        return dict(abuf=self.abuf.copy(), xbuf=self.xbuf.copy(), ybuf=self.ybuf.copy(),
                    vbuf=self.vbuf.copy(), wmem=self.wmem.copy(),
                    rbuf={k: v.copy() for k, v in self.rbuf.items()}, mask=list(self.mask),
                    gmem=list(self.gmem), sreg=list(self.sreg), rmax=self.rmax.copy(),
                    vparam=self.vparam,
                    phase=self.phase, sem=list(self.sem), qpu=(self.qpu_base, self.qpu_thr),
                    counters=dict(self.counters), done=self.done, error=self.error)

    # ------------------------------------------------------------------ running
    def run(self, cmds, host_in=()) -> list:
        """Execute ``cmds`` (:class:`~program.isa.Cmd` objects or command words) in order,
        reading LOAD rows from ``host_in`` (32-bit words). Returns the words STOREd by this call
        (also appended to :attr:`host_out`). Raises :class:`CoreError` on a core error (sticky:
        later calls raise it again until :meth:`reset`); ValueError when the host stream runs
        short or is left with unread words, or when a Cmd has a field that does not fit its
        word (an assembler error, not a core error)."""
        if self.error is not None:
            raise self.error
        self._host = deque(int(w) for w in host_in)
        for w in self._host:
            if not 0 <= w <= 0xFFFFFFFF:
                raise ValueError(f"host word {w} is not a 32-bit word")
        out = []
        self.done = False
        for i, c in enumerate(cmds):
            self._index = i
            if self._skip:
                self._skip -= 1
                continue
            try:
                self._issue(self._decode(c), out)
            except CoreError as e:
                self.error = e
                raise
        if self._host:
            raise ValueError(f"the program left {len(self._host)} host words unread")
        self.host_out.extend(out)
        return out

    def _fail(self, code: str, msg: str):
        """Raise the CoreError ``code`` for the current command."""
        raise CoreError(code, self._index, msg)

    def _decode(self, c) -> Cmd:
        """A Cmd or a command word → the decoded Cmd (unknown opcode: ``opcode``)."""
        if isinstance(c, Cmd):
            if c.op not in OPCODES:
                self._fail("opcode", f"unknown opcode {c.op!r}")
            c = encode(self.cfg, c)   # fields that do not fit raise ValueError (assembler error)
        c = int(c)
        if not 0 <= c < 1 << cmd_bits(self.cfg):
            raise ValueError(f"command word {c} is not a {cmd_bits(self.cfg)}-bit word")
        try:
            cmd = decode(self.cfg, c)
        except ValueError as e:
            self._fail("opcode", str(e))
        if cmd.op in ("DLOAD", "DSTORE") and not self.cfg.dram_width:
            self._fail("opcode", f"{cmd.op} on a core without a DRAM port (dram_width 0)")
        return cmd

    def _read(self, name: str, n=1):
        """Add ``n`` memory reads to ``reads[name]`` (:data:`READS`; not a core counter)."""
        self.reads[name] += int(n)

    def _add(self, name: str, n=1):
        """Add ``n`` to counter ``name``, saturating at 32 bits."""
        self.counters[name] = min(COUNTER_MAX, self.counters[name] + int(n))

    def _issue(self, cmd: Cmd, out: list):
        """Wait on the semaphores, run one command, signal (module docstring)."""
        self._add("commands")
        for s in range(SEMAPHORES):
            if cmd.wait >> s & 1 and self.sem[s] == 0:
                self._fail("semaphore", f"{cmd.op} waits on semaphore {s}, which is 0 (the wait "
                                        f"can never be met in program order)")
        for s in range(SEMAPHORES):
            if cmd.wait >> s & 1:
                self.sem[s] -= 1
        getattr(self, "_op_" + cmd.op.lower())(cmd.args, out)
        for s in range(SEMAPHORES):
            if cmd.signal >> s & 1:
                if self.sem[s] == SEM_MAX:
                    self._fail("semaphore", f"{cmd.op} signals semaphore {s} beyond {SEM_MAX}")
                self.sem[s] += 1

    def _rows(self, buf: str, base: int, count: int, what: str = ""):
        """Check that rows ``base .. base+count-1`` lie in ``buf`` (``address`` otherwise)."""
        depth = self.core.gmem_rows if buf == "GMEM" else buffer_depth(self.core, buf)
        if base < 0 or base + count > depth:
            self._fail("address", f"{what or buf} rows {base}..{base + count - 1} outside "
                                  f"{buf} (depth {depth})")

    # ------------------------------------------------------------------ control
    def _op_nop(self, a, out):
        """NOP: nothing."""
        pass

    def _op_barrier(self, a, out):
        """BARRIER: nothing in sequential execution."""
        pass

    def _op_end(self, a, out):
        """END: report done."""
        self.done = True

    def _op_step(self, a, out):
        """STEP: advance the step phase modulo ``interval``."""
        if a["interval"] == 0:
            self._fail("operand", "STEP interval must be >= 1")
        self.phase = 0 if self.phase + 1 >= a["interval"] else self.phase + 1

    def _op_skip(self, a, out):
        """SKIP: on a reuse step (phase != 0) discard the next ``count`` commands."""
        if self.phase != 0:
            self._skip = a["count"]

    def _op_vparam(self, a, out):
        """VPARAM: set the VROW parameter register."""
        self.vparam = a["value"]

    # ------------------------------------------------------------------ host transfers
    def _row_dict(self, buf: str, r: int) -> dict:
        """Row ``r`` of a storable buffer as the dict :func:`row_to_words` packs."""
        if buf == "CNT":
            return {"count": self.counters[COUNTERS[r]]}
        return {"v": getattr(self, buf.lower())[r]}

    def _set_row(self, buf: str, r: int, row: dict):
        """Write a row dict (:func:`words_to_row`) to row ``r`` of ``buf``."""
        if buf == "RBUF":
            for k in ("m", "sh", "bias"):
                self.rbuf[k][r] = row[k]
        elif buf == "MASK":
            self.mask[r] = int(row["bits"])
        elif buf == "WMEM":
            self.wmem[r] = row["w"]
        else:
            getattr(self, buf.lower())[r] = row["v"]

    def _zero_row(self, buf: str) -> dict:
        """An all-zero row dict of ``buf``."""
        T = self.T
        if buf == "RBUF":
            return {k: np.zeros(T, np.int64) for k in ("m", "sh", "bias")}
        if buf == "MASK":
            return {"bits": 0}
        if buf == "WMEM":
            return {"w": np.zeros(self.cfg.cols, np.int64)}
        return {"v": np.zeros(T, np.int64)}

    def _op_load(self, a, out):
        """LOAD rows of a buffer from the host stream (or zero them)."""
        buf = BUFFERS[a["buf"]]
        if buf == "CNT":
            self._fail("operand", "LOAD of CNT (read-only)")
        addr, count = a["addr"], a["count"]
        self._rows(buf, addr, count)
        wpr = host_words_per_row(self.cfg, buf)
        if not a["zero"] and len(self._host) < count * wpr:
            raise ValueError(f"LOAD {buf} needs {count * wpr} host words, "
                             f"{len(self._host)} left")
        for r in range(addr, addr + count):
            if a["zero"]:
                row = self._zero_row(buf)
            else:
                row = words_to_row(self.cfg, buf, [self._host.popleft() for _ in range(wpr)])
            self._set_row(buf, r, row)
        if not a["zero"]:
            self._add("host_words_in", count * wpr)
        if buf in _ROW_COUNTERS:
            self._add(_ROW_COUNTERS[buf][1], count)

    def _op_store(self, a, out):
        """STORE rows of ABUF/XBUF/YBUF/CNT to the host stream."""
        buf = BUFFERS[a["buf"]]
        if buf not in STORABLE:
            self._fail("operand", f"STORE of {buf} (storable: {STORABLE})")
        addr, count = a["addr"], a["count"]
        self._rows(buf, addr, count)
        wpr = host_words_per_row(self.cfg, buf)
        for r in range(addr, addr + count):
            out.extend(row_to_words(self.cfg, buf, self._row_dict(buf, r)))
        if buf in _ROW_COUNTERS:
            self._add(_ROW_COUNTERS[buf][0], count)
        self._add("host_words_out", count * wpr)

    # ------------------------------------------------------------------ DRAM transfers
    def _dram_rows(self, a) -> tuple:
        """``(buffer, first row, rows, first byte, beats)`` of a DLOAD/DSTORE, checked
        (``operand``, ``address``; a group stream's beats: its header and ``count`` rows)."""
        buf = DRAM_BUFFERS[a["buf"]]
        addr, count, beat = a["addr"], a["count"], a["dram"]
        if a["groups"] and buf != "GMEM":
            self._fail("operand", f"a group stream of {buf} (groups is for GMEM)")
        self._rows(buf, addr, count)
        beats = dram_beats(self.cfg, buf, count) + a["groups"]
        if beat + beats > 1 << DRAM_ADDR_BITS:
            self._fail("address", f"DRAM beats {beat}..{beat + beats - 1} outside the port's "
                                  f"{1 << DRAM_ADDR_BITS} beats")
        return buf, addr, count, beat * beat_bytes(self.cfg), beats

    def _op_dload(self, a, out):
        """DLOAD: rows of a buffer from their DRAM image (a group stream: after its header)."""
        buf, addr, count, byte, beats = self._dram_rows(a)
        if a["groups"]:
            bb = beat_bytes(self.cfg)
            n = int.from_bytes(self.dram.read(byte, 4), "little")
            self._add("dram_read_beats", 1)
            if n > count:
                self._fail("dram", f"a group stream of {n} rows at beat {a['dram']} does not "
                                   f"fit the {count} rows of the DLOAD")
            count, byte, beats = n, byte + bb, dram_beats(self.cfg, buf, n)
        if count == 0:
            return
        image = self.dram.read(byte, count * dram_row_bytes(self.cfg, buf))
        for r, word in zip(range(addr, addr + count), bytes_to_rows(self.cfg, buf, image)):
            if buf == "GMEM":
                self.gmem[r] = (dense_int8.Int8Group if self.int8 else Group).from_word(
                    self.cfg, word)
            else:
                self._set_row(buf, r, unpack(row_layout(self.cfg, buf), word))
        self._add("dram_read_beats", beats)
        if buf == "GMEM":
            self._add("gmem_writes", count)
        elif buf in _ROW_COUNTERS:
            self._add(_ROW_COUNTERS[buf][1], count)

    def _op_dstore(self, a, out):
        """DSTORE: the DRAM image of rows of a buffer."""
        if DRAM_BUFFERS[a["buf"]] not in DSTORABLE:
            self._fail("operand", f"DSTORE of {DRAM_BUFFERS[a['buf']]} (DSTORE moves "
                                  f"{DSTORABLE})")
        buf, addr, count, byte, beats = self._dram_rows(a)
        if a["groups"]:                  # through the first last group, then the header
            n = next((i + 1 for i in range(count) if self.gmem[addr + i].last), count)
            bb = beat_bytes(self.cfg)
            count, beats = n, dram_beats(self.cfg, buf, n)
            self.dram.write(byte, n.to_bytes(4, "little") + bytes(bb - 4))
            self._add("dram_write_beats", 1)
            byte += bb
        if count == 0:
            return
        if buf == "GMEM":
            words = [self.gmem[r].word(self.cfg) for r in range(addr, addr + count)]
        else:
            lay = row_layout(self.cfg, buf)
            words = [pack(lay, {"v": getattr(self, buf.lower())[r]})
                     for r in range(addr, addr + count)]
        self.dram.write(byte, rows_to_bytes(self.cfg, buf, words))
        self._add("dram_write_beats", beats)
        if buf == "GMEM":
            self._read("gmem_reads", count)
        else:
            self._add(_ROW_COUNTERS[buf][0], count)

    # ------------------------------------------------------------------ QPU
    def _op_qcfg(self, a, out):
        """QCFG: set the QPU's base and thresholds (illegal values: ``qpu``); nothing on the INT8
        core."""
        if self.int8:
            return
        base, thr = a["base_log2"], tuple(int(t) for t in a["thr"])
        if base > self.cfg.B_max or not thr[0] < thr[1] < thr[2] < 127:
            self._fail("qpu", f"QCFG base_log2={base} thr={thr} refused (B_max "
                              f"{self.cfg.B_max}, thresholds must increase below 127)")
        self.qpu_base, self.qpu_thr = base, thr

    def _qpu_cfg(self) -> Config:
        """The configuration with the QCFG thresholds (cached per threshold tuple)."""
        thr = self.qpu_thr
        if thr not in self._qcfgs:
            try:
                self._qcfgs[thr] = self.cfg.replace(thr=thr)
            except ConfigError as e:   # unreachable after QCFG's check; kept as a guard
                self._fail("qpu", str(e))
        return self._qcfgs[thr]

    def _op_quant(self, a, out):
        """QUANT: quantize one tile into GMEM groups (and update x̂ when ``diff``)."""
        cfg = self.cfg
        src, xsrc, nch, gdst = a["src"], a["xsrc"], a["nch"], a["gdst"]
        if nch == 0:
            self._fail("operand", "QUANT with nch = 0")
        if nch > cfg.max_reduction:
            self._fail("qpu", f"QUANT tile of {nch} sub-channels exceeds max_reduction "
                              f"{cfg.max_reduction}")
        if self.int8 and a["diff"]:
            self._fail("operand", "QUANT diff on the INT8 core (its layers are dense)")
        self._rows("ABUF", src, nch, "QUANT src")
        if self.int8:
            return self._quant_int8(a)
        if a["diff"]:
            self._rows("XBUF", xsrc, nch, "QUANT xsrc")
        self._rows("GMEM", gdst, 1, "QUANT gdst")
        x = self.abuf[src:src + nch]
        try:
            if a["diff"]:
                xh = self.xbuf[xsrc:xsrc + nch]
                u = vpu.diff_delta(x, xh, cfg)
            else:
                u = x.copy()
            qc = self._qpu_cfg()
            qz = quantize_subchannels(u, qc, r0=cfg.act_frac - self.qpu_base)
            ts = schedule_tile(qz.q, qz.b, qz.e, qc)
            self.packer_cycles = ts.packer_cycles
            ts.counters.add("saturated", np.count_nonzero(qz.saturated))
            if a["diff"]:
                xnew, xsat = vpu.xhat_update(xh, dequant(qz), cfg)
        except ValueError as e:
            self._fail("qpu", str(e))
        n = len(ts.groups)
        self._rows("GMEM", gdst, n, f"QUANT group stream ({n} groups)")
        self.gmem[gdst:gdst + n] = ts.groups
        self._add("abuf_reads", nch)
        if a["diff"]:
            self.xbuf[xsrc:xsrc + nch] = xnew
            self._add("xbuf_reads", nch)
            self._add("xbuf_writes", nch)
            self._add("vpu_saturated", xsat)
        self._add("gmem_writes", n)
        if a["pcache"]:
            self._add("pcache_groups_written", n)
        for k, v in ts.counters.values.items():
            self._add("qpu_" + k, v)

    def _quant_int8(self, a):
        """QUANT on the INT8 core: the INT8 quantizer (numerics §2.8)."""
        src, nch, gdst = a["src"], a["nch"], a["gdst"]
        self._rows("GMEM", gdst, 1, "QUANT gdst")
        tile = dense_int8.quantize_tile(self.abuf[src:src + nch], self.cfg)
        n = len(tile.groups)
        self._rows("GMEM", gdst, n, f"QUANT group stream ({n} groups)")
        self.gmem[gdst:gdst + n] = tile.groups
        self._add("abuf_reads", 2 * nch)
        self._add("gmem_writes", n)
        if a["pcache"]:
            self._add("pcache_groups_written", n)
        for k, v in tile.counters.values.items():
            self._add("qpu_" + k, v)

    # ------------------------------------------------------------------ MPU
    def _op_gemm(self, a, out):
        """GEMM: replay a group stream against WMEM, requantize into ABUF (and YBUF)."""
        cfg, T = self.cfg, self.T
        gsrc, wbase, ysrc, rrow, dst = a["gsrc"], a["wbase"], a["ysrc"], a["rrow"], a["dst"]
        self._rows("GMEM", gsrc, 1, "GEMM gsrc")
        groups, i = [], gsrc
        while True:
            if i >= self.core.gmem_rows:
                self._fail("address", f"GEMM replay from GMEM row {gsrc} runs past the end "
                                      f"({self.core.gmem_rows} rows) without a last group")
            groups.append(self.gmem[i])
            if self.gmem[i].last:
                break
            i += 1
        if self.int8:
            chans = [int(g.channel) for g in groups if g.valid]
        else:
            chans = [int(c) for g in groups for c, v in zip(g.channel, g.valid) if v]
        maxch = max(chans, default=-1)
        self._rows("WMEM", wbase, maxch + 1, "GEMM weight rows")
        if a["accum"]:
            self._rows("YBUF", ysrc, T, "GEMM ysrc")
        self._rows("RBUF", rrow, 1, "GEMM rrow")
        self._rows("ABUF", dst, T, "GEMM dst")
        s = self.sreg[a["sreg"]] if a["use_sreg"] else 0
        m, sh, bias = (self.rbuf[k][rrow] for k in ("m", "sh", "bias"))
        shift = sh - s
        if self.int8:                    # the tile's exponent; below 0 is taken as 0
            shift = np.maximum(shift - groups[-1].exp, 0)
        if shift.min() < 0 or shift.max() > cfg.sh_max:
            self._fail("shift", f"requantization shift sh - s = {shift.min()}..{shift.max()} "
                                f"outside [0, {cfg.sh_max}] (RBUF row {rrow}, s = {s})")
        W = self.wmem[wbase:wbase + maxch + 1] if maxch >= 0 else \
            np.zeros((1, cfg.cols), np.int64)
        if self.int8:
            acc = dense_int8.execute(groups, W, cfg)
        else:
            acc = execute(groups, W, cfg)[0][-1]
        Y = self.ybuf[ysrc:ysrc + T] if a["accum"] else np.zeros((T, cfg.cols), np.int64)
        try:
            r = vpu.acc_requant(Y, acc, m, shift, bias, cfg, stored=True)
        except ValueError as e:
            self._fail("vpu", str(e))
        self.abuf[dst:dst + T] = r.y.T
        self._add("abuf_writes", T)
        if a.get("rmax"):                # the row maxima of the drained y, for softmax_mx
            beat = r.y.max(axis=1)
            self.rmax = beat if a["rmax"] == 1 else np.maximum(self.rmax, beat)
        if a["accum"]:
            self.ybuf[ysrc:ysrc + T] = r.Y
            self._add("ybuf_reads", T)
            self._add("ybuf_writes", T)
        self._add("groups_replayed", len(groups))
        self._add("lanes_valid", len(chans))
        self._read("gmem_reads", len(groups))
        self._read("wmem_reads", len(groups) * (1 if self.int8 else cfg.lanes))
        self._read("rbuf_reads", T)
        if a["pcache"]:
            self._add("pcache_groups_read", len(groups))
        self._add("y_saturated", r.y_saturated)
        self._add("ysum_saturated", r.Y_saturated)
        self._add("vpu_rows", T)     # one acc_requant row of T elements per token
        self._add("vpu_beats", T)
