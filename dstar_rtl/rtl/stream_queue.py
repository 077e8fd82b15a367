"""A first-in first-out queue between two ``amaranth.lib.stream`` streams.

:class:`StreamQueue` puts the stream handshake around ``amaranth.lib.fifo.SyncFIFOBuffered``
(block-RAM friendly: the memory is read synchronously into an output register). The QPU, the
core's engines and the host link's receive FIFO use it wherever a stream needs slack.
"""

from amaranth.hdl import Shape
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .params import check_int, check_shape

__all__ = ["StreamQueue"]


class StreamQueue(wiring.Component, SyncFIFOBuffered):
    """A stream FIFO of ``depth`` beats of ``payload_shape``.

    The queue *is* the ``SyncFIFOBuffered`` (one module, the FIFO's own logic and memory, so a
    design has the same hierarchy and netlist as with the bare FIFO) with its write side driven
    from the stream ``i`` and its read side driving the stream ``o``. Use ``i``, ``o`` and
    ``level`` only: the FIFO's ``w_*`` and ``r_*`` signals belong to the streams.

    Parameters
    ----------
    payload_shape : shape-castable of width >= 1
        The payload of both streams (an int, a ``range``, a ``Shape``, a ``data.StructLayout``).
    depth : int, >= 2, keyword-only
        Beats held, the one on ``o`` included (``depth - 1`` memory words and the output
        register).

    Members
    -------
    i : In(stream.Signature(payload_shape)). ``i.ready`` depends only on the queue's state,
        never on ``i.valid`` or ``o.ready`` in the same cycle.
    o : Out(stream.Signature(payload_shape)), the beats in the order they were taken.
        ``o.valid`` is a register.

    Attributes
    ----------
    level : Signal(range(depth + 1)), the FIFO's: beats held (taken and not yet given out), the
        one on ``o`` included.

    Latency and throughput
    ----------------------
    A beat taken from ``i`` on a clock edge is offered on ``o`` two cycles later when the queue
    was empty (it is written to the memory, then read into the output register), and it then
    stays offered until ``o`` takes it. The queue takes one beat and gives one beat per cycle;
    while ``o`` is stalled it fills up to ``depth`` beats. For ``depth >= 3``, ``i.ready`` is
    high exactly while ``level < depth``; so a producer that starts a beat only while
    :meth:`room_for` of its beats still in flight holds, and offers it unconditionally later,
    never finds ``i.ready`` low (the credit rule of the core's engines).

    Raises
    ------
    ValueError
        ``payload_shape`` is not a shape of width >= 1; ``depth`` is not an integer >= 2.
    """

    def __init__(self, payload_shape, *, depth: int):
        self._shape = check_shape("payload_shape", payload_shape)
        self._depth = check_int("depth", depth, lo=2, why="beats held; a depth-1 FIFO could take "
                                "a beat only every other cycle")
        SyncFIFOBuffered.__init__(self, width=Shape.cast(payload_shape).width, depth=depth)
        wiring.Component.__init__(self, {
            "i": In(stream.Signature(payload_shape)),
            "o": Out(stream.Signature(payload_shape)),
        })

    @property
    def payload_shape(self):
        return self._shape

    def room_for(self, pending):
        """``level + pending < depth``: the queue has room for one more beat besides
        ``pending`` (a value) beats that were started and will be offered on ``i`` later."""
        return self.level + pending < self._depth

    def elaborate(self, platform):
        m = SyncFIFOBuffered.elaborate(self, platform)
        m.d.comb += [
            self.w_en.eq(self.i.valid),
            self.w_data.eq(self.i.payload),
            self.i.ready.eq(self.w_rdy),
            self.o.valid.eq(self.r_rdy),
            self.o.payload.eq(self.r_data),
            self.r_en.eq(self.o.ready),
        ]
        return m
