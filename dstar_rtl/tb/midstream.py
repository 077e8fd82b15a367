"""Reset in the middle of traffic, for every cocotb testbench: a receiver that takes a few beats
of an output and then holds it, the reset with the drivers stopped, and a watch that records
every cycle an output's ``valid`` is high from the reset on.

A test drives an old stream until its inputs are partly sent and its outputs partly received,
calls :func:`reset_midstream`, runs a fresh stream through the testbench's usual drivers and
checks it against golden, then checks each :class:`OutputWatch`: the first beat valid after the
reset is the fresh stream's first, the beats taken are exactly the fresh stream's, and nothing is
valid after its last.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge, Timer

from .streams import CLOCK_NS, StreamSink

__all__ = ["OutputWatch", "take", "hold_until_stalled", "reset_midstream", "quiet"]


class OutputWatch:
    """Every cycle an output stream ``name`` of ``dut`` has ``valid`` high, from :meth:`start`.

    Parameters
    ----------
    dut : the cocotb handle of the top level.
    name : str
        The stream's port name (``name__valid``, ``name__ready``, ``name__payload``).

    Attributes
    ----------
    beats : list of (int, bool)
        One entry per cycle with ``valid`` high: the payload and whether ``ready`` was high too
        (the beat was taken). While ``valid`` is low the watch sleeps until it rises.
    """

    def __init__(self, dut, name: str):
        self.name = name
        self.clk = dut.clk
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.beats: list = []
        self._task = None

    def start(self):
        """Forget earlier beats and watch from the current time step on."""
        self.stop()
        self.beats = []
        self._task = cocotb.start_soon(self._watch())

    def stop(self):
        """Stop watching (the beats recorded stay)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    async def _watch(self):
        while True:
            await ReadOnly()
            if int(self.valid.value) != 1:
                await RisingEdge(self.valid)    # valid changes only on a clock edge
                continue
            self.beats.append((self.payload.value.to_unsigned(), int(self.ready.value) == 1))
            await RisingEdge(self.clk)

    @property
    def taken(self) -> list:
        """The payloads of the beats taken (``valid`` and ``ready`` high), in order."""
        return [p for p, t in self.beats if t]

    def check(self, expected, what: str | None = None):
        """Stop watching and assert that the stream since :meth:`start` is exactly ``expected``:
        its first valid beat is ``expected[0]``, the beats taken equal ``expected`` and no beat
        was valid after the last one taken.

        Parameters
        ----------
        expected : sequence of int
            The fresh stream's payloads (checked against golden by the caller), not empty.
        what : str, optional
            Name in the messages (default: the port name).
        """
        self.stop()
        what = what or self.name
        expected = [int(e) for e in expected]
        assert self.beats, f"{what}: no beat valid after the reset, expected {len(expected)}"
        first = self.beats[0][0]
        assert first == expected[0], (
            f"{what}: the first beat valid after the reset is {first:#x}, not the fresh "
            f"stream's first {expected[0]:#x} (a beat of the old stream?)")
        taken = self.taken
        for n, (g, e) in enumerate(zip(taken, expected)):
            assert g == e, f"{what}: beat {n} taken after the reset is {g:#x}, expected {e:#x}"
        assert len(taken) == len(expected), (
            f"{what}: {len(taken)} beats taken after the reset, expected {len(expected)}")
        assert self.beats[-1][1], f"{what}: a beat valid after the fresh stream's last"


async def take(dut, name: str, count: int, timeout: int = 20_000,
               into: list | None = None) -> list:
    """Take ``count`` beats of an output with a :class:`tb.streams.StreamSink` in ``hold``
    mode, then hold the output (``ready`` low). Call it right after a rising edge.

    Parameters
    ----------
    dut : the cocotb handle of the top level.
    name : str
        The output stream's port name.
    count : int
        Beats to take.
    timeout : int
        Cycles before a TimeoutError.
    into : list, optional
        Gets each payload as it is taken, so that a task cancelled before ``count`` beats leaves
        the beats it took there.

    Returns
    -------
    list of int
        The payloads taken.
    """
    sink = StreamSink(dut, name, dut.clk, window=1)
    if into is not None:
        sink.words = into
    start = len(sink.words)
    await sink.receive(start + count, timeout, hold=True)
    return sink.words[start:]


async def hold_until_stalled(dut, sources, quiet_cycles: int, timeout: int = 20_000) -> int:
    """Wait until the unit has stopped taking input (it back-pressures its inputs).

    Parameters
    ----------
    dut : the cocotb handle of the top level.
    sources : StreamSource or list of them
        :class:`tb.streams.StreamSource` objects sending in tasks (their ``cycles`` lists count
        the transfers).
    quiet_cycles : int
        Cycles without a transfer on any of them that count as stalled.
    timeout : int
        Cycles before a TimeoutError.

    Returns
    -------
    int
        The beats the sources have sent in all.
    """
    sources = list(sources) if isinstance(sources, (list, tuple)) else [sources]
    last, still = sum(len(s.cycles) for s in sources), 0
    for _ in range(timeout):
        await RisingEdge(dut.clk)
        n = sum(len(s.cycles) for s in sources)
        still = still + 1 if n == last else 0
        last = n
        if still >= quiet_cycles:
            return n
    raise TimeoutError(f"the input still flows after {timeout} cycles")


async def reset_midstream(dut, tasks=(), inputs=(), outputs=(), watches=(), cycles: int = 2):
    """Stop the testbench's drivers and reset the DUT in the middle of its traffic. Call it
    right after a rising edge; it returns right after the last reset edge, ``rst`` low.

    Parameters
    ----------
    dut : the cocotb handle of the top level.
    tasks : iterable of cocotb tasks
        The drivers (and receivers) of the old stream; they are cancelled.
    inputs, outputs : iterable of str
        Input streams that get ``valid`` low, output streams that get ``ready`` low.
    watches : iterable of OutputWatch
        Each starts right after the first reset edge (the first at which the registers are
        reset), so it sees every cycle from the reset on.
    cycles : int
        Rising edges with ``rst`` high.
    """
    for t in tasks:
        t.cancel()
    for name in inputs:
        getattr(dut, f"{name}__valid").value = 0
    for name in outputs:
        getattr(dut, f"{name}__ready").value = 0
    dut.rst.value = 1
    await RisingEdge(dut.clk)
    for w in watches:
        w.start()
    for _ in range(cycles - 1):
        await RisingEdge(dut.clk)
    dut.rst.value = 0


async def quiet(dut, cycles: int):
    """Let at least ``cycles`` clock cycles pass, up to the next rising edge (after a fresh
    stream, so that a late beat of the old stream would reach a watch); one timer, no Python
    per cycle."""
    await Timer(cycles * CLOCK_NS, unit="ns")
    await RisingEdge(dut.clk)
