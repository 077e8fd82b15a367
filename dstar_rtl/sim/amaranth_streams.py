"""Stream helpers for Amaranth-simulator testbenches (``lib.stream`` interfaces, packed payloads).

Transfers are decided at the clock edge (``ctx.tick().sample(...)``), after every testbench has
set its inputs for the cycle, so concurrent producers and consumers never race.
"""

from __future__ import annotations

from amaranth.hdl import Value

__all__ = ["stream_put", "stream_get", "trailing_window"]


async def stream_put(ctx, port, words, *, gap=0.0, rng=None, cycles=None, limit=1_000_000):
    """Send packed ``words`` on ``port``; ``gap``: probability of an idle cycle before a beat.
    Appends the cycle number of each transfer to ``cycles`` if given."""
    cycle = 0
    for w in words:
        while gap and rng.random() < gap:
            ctx.set(port.valid, 0)
            await ctx.tick()
            cycle += 1
        ctx.set(Value.cast(port.payload), int(w))
        ctx.set(port.valid, 1)
        while True:
            _, _, ready = await ctx.tick().sample(port.ready)
            cycle += 1
            if ready:
                if cycles is not None:
                    cycles.append(cycle - 1)
                break
            if cycle > limit:
                raise TimeoutError(f"stream input not accepted within {limit} cycles")
    ctx.set(port.valid, 0)


async def stream_get(ctx, port, count, out, *, stall=0.0, rng=None, cycles=None,
                     limit=1_000_000, window: int):
    """Receive ``count`` packed beats from ``port`` into the list ``out``.

    Parameters
    ----------
    stall : float
        Probability of holding ``ready`` low for a cycle (``rng`` draws it).
    cycles : list, optional
        Gets the cycle (from the call) of each transfer.
    limit : int
        Cycles before a TimeoutError.
    window : int
        The trailing window: after the ``count`` beats ``ready`` stays high for ``window``
        cycles and a ``valid`` in any of them raises AssertionError (a duplicated or extra
        trailing beat). Every caller sets it, to at least twice its unit's latency
        (:mod:`perf.timing`).
    """
    if window < 1:
        raise ValueError(f"the trailing window must be at least one cycle, not {window}")
    cycle = 0
    while len(out) < count:
        ready = not (stall and rng.random() < stall)
        ctx.set(port.ready, int(ready))
        _, _, valid, payload = await ctx.tick().sample(port.valid, Value.cast(port.payload))
        if valid and ready:
            out.append(int(payload))
            if cycles is not None:
                cycles.append(cycle)
        cycle += 1
        if cycle > limit:
            raise TimeoutError(f"{len(out)}/{count} beats after {cycle} cycles")
    await trailing_window(ctx, port, window, f"the {count} expected beats")
    ctx.set(port.ready, 0)


async def trailing_window(ctx, port, window, after):
    """Hold ``port.ready`` high for ``window`` cycles; raise AssertionError if ``port.valid`` is
    high in any of them (``after`` names what came before, for the message)."""
    ctx.set(port.ready, 1)
    for k in range(window):
        _, _, valid, payload = await ctx.tick().sample(port.valid, Value.cast(port.payload))
        if valid:
            raise AssertionError(f"a beat ({int(payload):#x}) valid {k} cycles after {after} "
                                 f"(a duplicated or extra trailing beat)")
