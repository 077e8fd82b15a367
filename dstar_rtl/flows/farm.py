"""Run many independent jobs (synthesis runs, estimates, simulations) on local cores or on a Dask
cluster: the farm a design-space sweep moves to when one machine is not enough.

:func:`run_jobs` maps a module-level function over picklable arguments and returns the results
in the arguments' order:

- locally (``scheduler=None``): a :class:`concurrent.futures.ProcessPoolExecutor` of ``jobs``
  processes (elaboration runs in Python, so processes, not threads);
- on a cluster (``scheduler="tcp://host:8786"``, or a ``distributed.Client``): ``client.map``
  with every job marked pure=False (a synthesis run is not a cached value). The workers need
  this project importable (``pip install -e .`` on each) and the same tool versions.

A job that raises makes :func:`run_jobs` raise :class:`JobError` naming the job; the other jobs
still run to the end, so their results (and caches, such as stored synthesis runs) are kept.
Progress goes to ``progress`` (a callable, e.g. a stderr logger), one line per finished job.

>>> from dstar_rtl.flows.farm import run_jobs
>>> run_jobs(pow, [(2, 3), (3, 2)], jobs=2)            # doctest: +SKIP
[8, 9]
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor, as_completed

__all__ = ["JobError", "run_jobs"]


class JobError(RuntimeError):
    """One or more jobs failed; ``failures`` maps each failed job's index to its exception and
    ``results`` holds every job's result in order (None for the failed ones)."""

    def __init__(self, failures: dict, labels: list, results: list):
        first = min(failures)
        super().__init__(f"{len(failures)} of {len(labels)} jobs failed; first: "
                         f"{labels[first]}: {type(failures[first]).__name__}: "
                         f"{failures[first]}")
        self.failures = failures
        self.results = results


def _label(args) -> str:
    return ", ".join(map(str, args)) if isinstance(args, tuple) else str(args)


def _call(fn, args):
    return fn(*args) if isinstance(args, tuple) else fn(args)


def run_jobs(fn, arguments, *, jobs: int = 2, scheduler=None, progress=None,
             labels=None) -> list:
    """``[fn(*a) for a in arguments]`` (a non-tuple ``a`` is passed alone), run in parallel.

    Parameters
    ----------
    fn : a module-level function (it is pickled to the workers).
    arguments : list of tuples (or single arguments), one per job.
    jobs : int, local processes when ``scheduler`` is None (>= 1).
    scheduler : None, a Dask scheduler address (``"tcp://..."``) or a ``distributed.Client``.
    progress : callable taking one line, or None.
    labels : names of the jobs for progress and errors (default: their arguments).

    Raises
    ------
    ValueError : ``jobs`` < 1.
    JobError : a job raised (after every job has finished).
    """
    arguments = list(arguments)
    labels = [_label(a) for a in arguments] if labels is None else list(labels)
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, not {jobs!r}")
    say = progress or (lambda line: None)
    t0 = time.monotonic()
    results, failures, finished = [None] * len(arguments), {}, [0]

    def done(k, value=None, exc=None):
        if exc is None:
            results[k] = value
        else:
            failures[k] = exc
        finished[0] += 1
        say(f"[{finished[0]}/{len(arguments)}] {labels[k]}: {'failed' if exc else 'done'} "
            f"({time.monotonic() - t0:.0f} s)")

    if scheduler is None:
        with ProcessPoolExecutor(max_workers=min(jobs, max(1, len(arguments)))) as pool:
            futures = {pool.submit(_call, fn, a): k for k, a in enumerate(arguments)}
            for fut in as_completed(futures):
                exc = fut.exception()
                done(futures[fut], None if exc else fut.result(), exc)
    else:
        _run_dask(fn, arguments, scheduler, done)
    if failures:
        raise JobError(failures, labels, results)
    return results


def _run_dask(fn, arguments, scheduler, done):
    from distributed import Client
    from distributed import as_completed as dask_completed

    own = not isinstance(scheduler, Client)
    client = Client(scheduler) if own else scheduler
    try:
        futures = [client.submit(_call, fn, a, pure=False) for a in arguments]
        index = {f.key: k for k, f in enumerate(futures)}
        for fut in dask_completed(futures):
            exc = fut.exception()
            done(index[fut.key], None if exc else fut.result(), exc)
    finally:
        if own:
            client.close()
