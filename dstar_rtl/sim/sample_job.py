"""The files between ``dstar sample``'s RTL backends and the cocotb sampling loop
(:mod:`tb.test_sample`): the *job* (the model, its SAR masks and per-layer bases, the run's
options) and the *result* (the images, and per step the core's cycles and counters).

Both are ``.npz`` files: the job holds ``spec`` and ``options`` (JSON text, the per-layer bases
included), ``param/<name>`` and ``mask/<name>`` arrays; the result holds ``images`` (n, C, H, W)
and ``record`` (JSON text: per sample and step the cycles, the counters, the cache flag), or only
``error`` (the first mismatch against the integer golden, one line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.models.dit import DiTSpec

__all__ = ["SampleJob", "write_job", "read_job", "write_result", "read_result", "JOB_ENV"]

#: The environment variable that names the job file for the cocotb module.
JOB_ENV = "DSTAR_SAMPLE_JOB"

#: The probability that each channel of the AXI RAM behind a core's DRAM port pauses in a cycle
#: when a job names no deterministic DRAM (``SampleJob.dram`` None).
DRAM_PAUSE = 0.2


@dataclass
class SampleJob:
    """A sampling run on the RTL core: the model (``spec``, ``params``, ``masks`` or None,
    ``bases``: ``{layer: B}`` or None, :class:`analysis.calibration.Calibration`) and
    ``steps``, ``labels`` with their start-noise ``seeds``, ``guidance``, ``stream`` (buffers that
    stream every layer, :data:`program.model.STREAMABLE`), ``result`` (the path the loop
    writes; it appends one line per step done to ``result`` + ``.progress``), ``dram``
    (``(latency, bytes_per_cycle)`` of a deterministic DRAM behind a core with a DRAM port,
    :class:`sim.dram_timing.DramTiming`; None: the AXI RAM paused at random)."""

    spec: DiTSpec
    params: dict
    masks: dict | None
    steps: int
    labels: list
    seeds: list
    guidance: float
    stream: tuple
    result: Path
    bases: dict | None = None
    dram: tuple | None = None

    @property
    def progress(self) -> Path:
        """The file of the loop's progress lines."""
        return self.result.with_name(self.result.name + ".progress")


def write_job(path: Path, job: SampleJob):
    """Write ``job`` to ``path`` (.npz)."""
    opts = dict(steps=job.steps, labels=[int(v) for v in job.labels],
                seeds=[int(v) for v in job.seeds], guidance=job.guidance,
                stream=list(job.stream), result=str(job.result),
                masks=job.masks is not None, bases=job.bases,
                dram=list(job.dram) if job.dram is not None else None)
    arrays = {f"param/{k}": np.asarray(v) for k, v in job.params.items()}
    arrays.update({f"mask/{k}": np.asarray(v) for k, v in (job.masks or {}).items()})
    np.savez(path, spec=data_json(job.spec.to_dict()), options=data_json(opts), **arrays)


def read_job(path) -> SampleJob:
    """The job at ``path``."""
    with np.load(path) as z:
        spec = DiTSpec(**json.loads(str(z["spec"])))
        o = json.loads(str(z["options"]))
        params = {k[6:]: z[k].astype(np.float64) for k in z.files if k.startswith("param/")}
        masks = {k[5:]: z[k].astype(bool) for k in z.files if k.startswith("mask/")}
    return SampleJob(spec=spec, params=params, masks=masks if o["masks"] else None,
                     steps=o["steps"], labels=o["labels"], seeds=o["seeds"],
                     guidance=o["guidance"], stream=tuple(o["stream"]),
                     result=Path(o["result"]), bases=o.get("bases"),
                     dram=tuple(o["dram"]) if o.get("dram") is not None else None)


def write_result(path: Path, images=None, record=None, error: str | None = None):
    """Write the loop's result (``images`` and ``record``) or its ``error``."""
    if error is not None:
        np.savez(path, error=error)
    else:
        np.savez(path, images=np.asarray(images), record=data_json(record))


def read_result(path) -> dict:
    """``{"images", "record"}`` or ``{"error"}`` from ``path``."""
    with np.load(path) as z:
        if "error" in z.files:
            return {"error": str(z["error"])}
        return {"images": z["images"], "record": json.loads(str(z["record"]))}
