"""The host side of the UART host link (:mod:`rtl.host_link`): frame encoder and decoder, flow
control, and a driver that runs unchanged over a real serial port and over the cocotb UART model.

Structure
---------
* :func:`encode_frame`, :func:`encode_query`, :class:`FrameDecoder`, :class:`Status`: the protocol
  as pure functions and an incremental decoder (no I/O).
* :class:`HostDriver`: the driver's logic is written once, as generators that *yield* I/O requests
  (``("write", data)``, ``("read",)``, ``("break",)``) and receive their results. The driver runs
  them against its transport: directly when the transport's methods are plain functions
  (:class:`SerialTransport`, pyserial), or awaiting them when they are coroutines
  (:class:`tb.uart_model.CocotbTransport`). So ``drv.run_vpu_rows(cfg, rows)`` returns the result
  on a board and ``await drv.run_vpu_rows(cfg, rows)`` in a cocotb test; the protocol code is the
  same.

Transport interface (duck-typed; all sync or all ``async``)
-----------------------------------------------------------
``write(data: bytes)``: queue bytes for the line (may return before they are sent).
``read(max_bytes: int) -> bytes``: at least one received byte (at most ``max_bytes``), or ``b""``
after the transport's timeout.
``send_break()``: hold the line low for at least one character time, after the queued bytes.

Flow control
------------
The link answers a status query only after every byte before the query has left its receive FIFO
(``rx_depth`` bytes, reported in the reply). The driver keeps at most ``window = rx_depth`` bytes
sent but not acknowledged by a reply: it sends a query after every ``window / 2`` bytes and, when
a frame would overflow the window, reads (and queues output words) until enough replies came
back. Input frames carry at most ``window / 2 - 4`` payload bytes (at least one word).
"""

from __future__ import annotations

import inspect
from collections import defaultdict, deque
from dataclasses import dataclass
from math import ceil

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.layouts import layout_width, vpu_cmd_layout, vpu_in_layout, vpu_out_layout
from dstar_rtl.golden.vpu_stream import cmd_word, in_words, out_beats
from dstar_rtl.program import isa
from dstar_rtl.rtl.host_link import (
    HEADER_BYTES,
    MAX_PORTS,
    STATUS_BYTES,
    STATUS_PORT,
    SYNC,
    word_bytes,
)
from dstar_rtl.rtl.uart_core import CORE_CMD_PORT, CORE_HOST_PORT, CORE_OUT_PORT
from dstar_rtl.rtl.uart_vpu import VPU_CMD_PORT, VPU_IN_PORT, VPU_OUT_PORT

__all__ = ["encode_frame", "encode_query", "FrameDecoder", "Frame", "Status", "HostDriver",
           "SerialTransport", "LinkError", "QUERY", "word_bytes", "link_row_bytes", "link_rates"]

QUERY = bytes([SYNC, STATUS_PORT, 0, 0])


class LinkError(Exception):
    """The link's reply cannot be decoded, or a request cannot be framed."""


def _check_width(width) -> int:
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise ValueError(f"width must be a positive integer (bits per word), not {width!r}")
    return width


def encode_frame(port: int, words, width: int) -> bytes:
    """One frame of ``words`` (non-negative integers below ``2**width``) for ``port``."""
    _check_width(width)
    if not isinstance(port, int) or not 0 <= port < MAX_PORTS:
        raise ValueError(f"port must be an integer in 0 .. {MAX_PORTS - 1}, not {port!r}")
    words = [int(w) for w in words]
    if len(words) > 0xFFFF:
        raise ValueError(f"a frame carries at most 65535 words, not {len(words)}")
    nb = word_bytes(width)
    out = bytearray([SYNC, port, len(words) & 0xFF, len(words) >> 8])
    for w in words:
        if not 0 <= w < 1 << width:
            raise ValueError(f"word {w:#x} does not fit {width} bits")
        out += w.to_bytes(nb, "little")
    return bytes(out)


def encode_query() -> bytes:
    """The status query ``[0xA5, 0xFF, 0, 0]``."""
    return QUERY


@dataclass(frozen=True)
class Frame:
    port: int
    words: tuple


@dataclass(frozen=True)
class Status:
    """A status reply: the link's sticky flags, the design's ``user_status`` byte and the size of
    the link's receive FIFO."""

    error: bool
    overrun: bool
    frame_error: bool
    user: int
    rx_depth: int

    @classmethod
    def from_words(cls, words) -> "Status":
        if len(words) != STATUS_BYTES:
            raise LinkError(f"status reply with {len(words)} bytes, expected {STATUS_BYTES}")
        f = words[0]
        return cls(bool(f & 1), bool(f & 2), bool(f & 4), words[1], words[2] | words[3] << 8)

    @property
    def link_ok(self) -> bool:
        return not (self.error or self.overrun or self.frame_error)


class FrameDecoder:
    """Incremental decoder of the link's frames. ``widths``: output port → word width (the
    status port is known). Bytes that cannot start a frame (not 0xA5) are skipped and counted in
    ``skipped``; a frame for a port of unknown width raises :class:`LinkError`."""

    def __init__(self, widths: dict | None = None):
        self.widths = {STATUS_PORT: 8, **(widths or {})}
        self.skipped = 0
        self._buf = bytearray()

    def feed(self, data: bytes) -> list:
        self._buf += data
        frames = []
        while True:
            i = self._buf.find(SYNC)
            if i < 0:
                self.skipped += len(self._buf)
                self._buf.clear()
                return frames
            if i:
                self.skipped += i
                del self._buf[:i]
            if len(self._buf) < HEADER_BYTES:
                return frames
            port, count = self._buf[1], self._buf[2] | self._buf[3] << 8
            if port not in self.widths:
                raise LinkError(f"frame for output port {port}, whose width is unknown (pass "
                                f"out_widths or call recv_words for it)")
            nb = word_bytes(self.widths[port])
            end = HEADER_BYTES + count * nb
            if len(self._buf) < end:
                return frames
            mask = (1 << self.widths[port]) - 1
            body = self._buf[HEADER_BYTES:end]
            words = tuple(int.from_bytes(body[k * nb:(k + 1) * nb], "little") & mask
                          for k in range(count))
            del self._buf[:end]
            frames.append(Frame(port, words))


class HostDriver:
    """Host-side driver of a :class:`rtl.host_link.HostLink` over ``transport`` (see the module
    docstring). Every public method returns its result for a sync transport and an awaitable for
    an async one.

    Parameters
    ----------
    transport : a sync or async transport.
    out_widths : dict, optional
        Output port → word width, for frames that arrive before :meth:`recv_words` names them.
    window : int, optional
        Bytes in flight (the link's ``rx_depth``); by default learned from the first status reply.
    """

    def __init__(self, transport, *, out_widths: dict | None = None, window: int | None = None):
        self.transport = transport
        self._async = inspect.iscoroutinefunction(type(transport).read)
        self.decoder = FrameDecoder(out_widths)
        self.window = window
        self.last_status: Status | None = None
        self._words = defaultdict(deque)          # output port → received words
        self._pending = deque()                   # bytes each outstanding query acknowledges
        self._unacked = 0                         # bytes sent, not yet acknowledged
        self._since_query = 0                     # bytes sent after the last query
        self._queries = 0                         # queries sent
        self._replies = 0                         # status replies received

    # ------------------------------------------------------------------ public API
    def sync(self):
        """Send a break (aborting any frame the link is in), then a status query; returns the
        reply's :class:`Status` and sets ``window`` from it. For the start of a session (or after
        :meth:`status`): a reply still owed to an earlier query would be taken for this one."""
        return self._run(self._g_sync())

    def status(self):
        """A status query; returns the :class:`Status` of its reply (output words that arrive
        before it are kept for :meth:`recv_words`)."""
        return self._run(self._g_status())

    def send_words(self, port: int, words, width: int):
        """Send ``words`` (packed integers of ``width`` bits) to input port ``port``."""
        return self._run(self._g_send(port, words, width))

    def recv_words(self, port: int, count: int, width: int):
        """The next ``count`` words of output port ``port`` (``width`` bits each)."""
        return self._run(self._g_recv(port, count, width))

    def run_core(self, cfg, cmds, host_words=()):
        """Run a core program on a :class:`rtl.uart_core.UartCore`: each command (a
        :class:`program.isa.Cmd` or its command word), each LOAD followed by the host words
        it consumes (taken in order from ``host_words``); returns the words the STOREs send
        back."""
        return self._run(self._g_core(cfg, cmds, host_words))

    def run_vpu_rows(self, cfg, rows):
        """Send every row's command and operand beats (:mod:`golden.vpu_stream`) to a
        :class:`rtl.uart_vpu.UartVPU`; returns the output words of each row."""
        return self._run(self._g_vpu_rows(cfg, rows))

    # ------------------------------------------------------------------ running the generators
    def _run(self, gen):
        return self._drive_async(gen) if self._async else self._drive_sync(gen)

    def _drive_sync(self, gen):
        res = None
        while True:
            try:
                req = gen.send(res)
            except StopIteration as stop:
                return stop.value
            if req[0] == "write":
                res = self.transport.write(req[1])
            elif req[0] == "read":
                res = self.transport.read(4096)
            else:
                res = self.transport.send_break()

    async def _drive_async(self, gen):
        res = None
        while True:
            try:
                req = gen.send(res)
            except StopIteration as stop:
                return stop.value
            if req[0] == "write":
                res = await self.transport.write(req[1])
            elif req[0] == "read":
                res = await self.transport.read(4096)
            else:
                res = await self.transport.send_break()

    # ------------------------------------------------------------------ protocol logic
    def _g_read(self):
        """Read what arrived; queue output words, account status replies."""
        data = yield ("read",)
        if not data:
            raise TimeoutError(f"no byte from the link within the transport's timeout "
                               f"({self._replies}/{self._queries} status replies, "
                               f"{sum(map(len, self._words.values()))} words queued)")
        for fr in self.decoder.feed(data):
            if fr.port == STATUS_PORT:
                self.last_status = Status.from_words(fr.words)
                self._replies += 1
                if self._pending:
                    self._unacked -= self._pending.popleft()
            else:
                self._words[fr.port].extend(fr.words)

    def _g_query(self):
        yield ("write", QUERY)
        self._queries += 1
        self._unacked += len(QUERY)
        self._pending.append(self._since_query + len(QUERY))
        self._since_query = 0

    def _g_status(self):
        yield from self._g_query()
        target = self._queries
        while self._replies < target:
            yield from self._g_read()
        if self.window is None:
            self.window = self.last_status.rx_depth
        return self.last_status

    def _g_sync(self):
        yield ("break",)
        # Bytes sent before the break are processed (or dropped) by the link; start afresh.
        self._pending.clear()
        self._unacked = self._since_query = 0
        self._replies = self._queries = 0
        yield from self._g_query()
        while self._replies < 1:
            yield from self._g_read()
        self.window = self.last_status.rx_depth
        return self.last_status

    def _g_room(self, nbytes: int):
        """Wait until ``nbytes`` and a query fit the window."""
        while self._unacked + nbytes + len(QUERY) > self.window:
            if self._since_query:
                yield from self._g_query()
            yield from self._g_read()

    def _g_send(self, port, words, width):
        _check_width(width)
        words = list(words)
        if self.window is None:
            yield from self._g_status()
        nb = word_bytes(width)
        per_frame = min(0xFFFF, max(1, (self.window // 2 - HEADER_BYTES) // nb))
        if HEADER_BYTES + nb + len(QUERY) > self.window:
            raise LinkError(f"a {width}-bit word ({HEADER_BYTES + nb} bytes framed) and a query "
                            f"do not fit the link's window of {self.window} bytes")
        for k in range(0, len(words), per_frame):
            frame = encode_frame(port, words[k:k + per_frame], width)
            yield from self._g_room(len(frame))
            yield ("write", frame)
            self._unacked += len(frame)
            self._since_query += len(frame)
            if self._since_query >= self.window // 2:
                yield from self._g_query()

    def _g_recv(self, port, count, width):
        _check_width(width)
        known = self.decoder.widths.get(port)
        if known is not None and known != width:
            raise ValueError(f"output port {port} was declared {known} bits wide, not {width}")
        self.decoder.widths[port] = width
        q = self._words[port]
        while len(q) < count:
            yield from self._g_read()
        return [q.popleft() for _ in range(count)]

    def _g_core(self, cfg, cmds, host_words):
        self.decoder.widths.setdefault(CORE_OUT_PORT, isa.HOST_WORD)
        host, pos, n_out = list(host_words), 0, 0
        for c in cmds:
            c = isa.decode(cfg, c) if isinstance(c, int) else c
            yield from self._g_send(CORE_CMD_PORT, [isa.encode(cfg, c)], isa.cmd_bits(cfg))
            if c.op in ("LOAD", "STORE"):
                n = c.count * isa.host_words_per_row(cfg, isa.BUFFERS[c.buf])
                if c.op == "STORE":
                    n_out += n
                elif not c.zero:
                    if pos + n > len(host):
                        raise ValueError(f"host_words end inside a LOAD ({len(host)} words)")
                    yield from self._g_send(CORE_HOST_PORT, host[pos:pos + n], isa.HOST_WORD)
                    pos += n
        if pos != len(host):
            raise ValueError(f"{len(host) - pos} host words left over after the program")
        return (yield from self._g_recv(CORE_OUT_PORT, n_out, isa.HOST_WORD))

    def _g_vpu_rows(self, cfg, rows):
        wc, wi, wo = (layout_width(f(cfg)) for f in (vpu_cmd_layout, vpu_in_layout,
                                                      vpu_out_layout))
        self.decoder.widths.setdefault(VPU_OUT_PORT, wo)
        for row in rows:
            yield from self._g_send(VPU_CMD_PORT, [cmd_word(cfg, row)], wc)
            yield from self._g_send(VPU_IN_PORT, in_words(cfg, row), wi)
        counts = [out_beats(cfg, r) for r in rows]
        words = yield from self._g_recv(VPU_OUT_PORT, sum(counts), wo)
        out, k = [], 0
        for c in counts:
            out.append(words[k:k + c])
            k += c
        return out


def link_row_bytes(cfg, op: str, n: int, window: int = 256) -> dict:
    """Bytes on the line for one VPU row of ``n`` elements as :meth:`HostDriver.run_vpu_rows`
    sends it: ``in`` = the command frame and the beat frames (``window / 2 - 4`` payload bytes
    at most per frame) plus the driver's status queries (4 bytes per ``window / 2`` bytes sent,
    averaged), ``out`` = one frame per output beat. Fractional because of the averaged queries."""
    nb = ceil(n / cfg.vpu_lanes)
    beats_out = 1 if op == "kv_amax" else nb
    wc, wi, wo = (word_bytes(layout_width(f(cfg))) for f in (vpu_cmd_layout, vpu_in_layout,
                                                           vpu_out_layout))
    per_frame = max(1, (window // 2 - HEADER_BYTES) // wi)
    data = HEADER_BYTES + wc + ceil(nb / per_frame) * HEADER_BYTES + nb * wi
    return {"in": data * (1 + len(QUERY) / (window // 2)), "out": beats_out * (HEADER_BYTES + wo)}


def link_rates(cfg, cycles_per_bit: int, n: int, window: int = 256) -> dict:
    """One row of ``n`` elements (any operation but ``kv_amax``): bytes each way, the line's
    cycles per row (rows back to back; the busier direction at ``10·cycles_per_bit`` cycles per
    byte, the other overlaps) and the VPU's own cycles per row from :mod:`rtl.vpu`'s formulas
    (element-wise ``nb``, softmax ``3·nb + 20``, LayerNorm ``2·nb + 22``)."""
    nb = ceil(n / cfg.vpu_lanes)
    b = link_row_bytes(cfg, "modulate", n, window)
    return dict(n=n, bytes_in=b["in"], bytes_out=b["out"],
                line_cycles=max(b["in"], b["out"]) * 10 * cycles_per_bit,
                vpu_cycles=(nb, 3 * nb + 20, 2 * nb + 22))


def _print_rates(f_clk: float = 25e6, baud: int = 115200) -> None:
    """``python -m dstar_rtl.sim.host_driver``: the table of docs/architecture.md, section 10."""
    cpb = round(f_clk / baud)
    print(f"{f_clk / 1e6:g} MHz, {baud} baud: cycles_per_bit = {cpb} ({f_clk / cpb:.0f} baud, "
          f"{10 * cpb} cycles per byte)\n")
    print("| preset | bytes per word: cmd / beat in / beat out | row | bytes in | bytes out | "
          "line cycles per row | ms per row | VPU cycles per row (element-wise / softmax / "
          "LayerNorm) |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for name in ("tiny", "fpga"):
        cfg = preset(name)
        wb = " / ".join(str(word_bytes(layout_width(f(cfg))))
                        for f in (vpu_cmd_layout, vpu_in_layout, vpu_out_layout))
        for n in (cfg.vpu_lanes, cfg.max_reduction):
            r = link_rates(cfg, cpb, n)
            print(f"| {name} | {wb} | n = {n} | {r['bytes_in']:.0f} | {r['bytes_out']} | "
                  f"{r['line_cycles']:,.0f} | {r['line_cycles'] / f_clk * 1e3:.1f} | "
                  f"{' / '.join(map(str, r['vpu_cycles']))} |")


class SerialTransport:
    """A serial port through pyserial (imported here, so only a board host needs it:
    ``pip install -e '.[board]'``). 8N1; ``timeout`` in seconds bounds every read. ``port`` is a
    device (``/dev/ttyUSB0``, ``COM3``) or a pyserial URL."""

    def __init__(self, port: str, baudrate: int = 115200, timeout: float = 2.0):
        try:
            import serial
        except ImportError as exc:
            raise ImportError("SerialTransport needs pyserial: pip install -e '.[board]'") from exc
        self.serial = serial.serial_for_url(port, baudrate=baudrate, bytesize=8, parity="N",
                                            stopbits=1, timeout=timeout)

    def write(self, data: bytes) -> None:
        self.serial.write(data)

    def read(self, max_bytes: int) -> bytes:
        return self.serial.read(max(1, min(max_bytes, self.serial.in_waiting)))

    def send_break(self, duration: float = 0.01) -> None:
        self.serial.flush()
        self.serial.send_break(duration)

    def close(self) -> None:
        self.serial.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if __name__ == "__main__":
    _print_rates()
