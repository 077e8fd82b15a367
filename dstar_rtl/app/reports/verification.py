"""``dstar measure verification``: the regression's verdicts recorded as a result.

The last cocotb run of every unit, preset, simulator and run name under ``build/sim`` (what
``make test`` or ``make regress`` left there) made on today's sources, testbench and tools,
judged by the runner's own verdicts (:func:`sim.regression.verification`: a run passes
only when every expected test ran and passed), written to ``reports/verification.json`` with
the digest of the RTL sources; runs left over from earlier sources are counted (``older``) and
left out, so the record is the regression just run, not whatever a build folder holds.
``dstar report`` reads that file, not a local ``build/``, and marks the table stale when the
sources have changed since.

Takes seconds (it reads verdicts; it runs nothing). Refused (exit 2, nothing written) when
``build/sim`` holds no cocotb run made on today's sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.markdown import render
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.progress import say
from dstar_rtl.gen.tables import md_table
from dstar_rtl.results.verification import Run, Verification
from dstar_rtl.sim import regression
from dstar_rtl.sim.regression import is_stale, verification

__all__ = ["record", "section", "MEASUREMENT", "ROW_FIELDS"]

#: The fields of a verification row that the record keeps (the table's and the unit files').
ROW_FIELDS = ("unit", "preset", "config_hash", "simulator", "run", "module", "tests", "passed",
              "failed", "skipped", "missing", "passing", "why", "has_verdict", "date")


def record(sim_root: Path | None = None) -> Verification:
    """The record of ``sim_root`` (default ``build/sim``): its runs on today's sources, how
    many pass, how many older ones were left out, the sources' digest.
    :class:`UserError` when there is no run on today's sources."""
    from dstar_rtl.sim.sources import digest, elaboration_sources

    rows = verification(sim_root)
    current = [r for r in rows if not is_stale(r)]
    if not current:
        raise UserError(f"no cocotb run on today's sources in {sim_root or regression.SIM_BUILD}"
                        + (f" ({len(rows)} older ones)" if rows else "")
                        + ": run `make test` (or `make regress`) first")
    return Verification(run_provenance("verification"),
                        sources=digest(elaboration_sources()), runs=len(current),
                        passing=sum(r["passing"] for r in current),
                        older=len(rows) - len(current),
                        rows=tuple(Run(**{k: r[k] for k in ROW_FIELDS}) for r in current))


def section(rec: Verification | None, today: bool = True) -> list:
    """The verification section's Markdown lines (REPORT.md's and ``verification.md``'s,
    ``app/templates/verification_section.md``): the recorded runs, marked stale when today's
    RTL sources differ from the recorded ones (``today``; ``verification.md`` is the record as
    made, without that mark, so that it renders the same whatever the sources: the render
    check of ``make test``, which records it again, must not depend on it)."""
    from dstar_rtl.sim.sources import digest, elaboration_sources

    table = None if rec is None else md_table(
        ["unit", "preset", "config", "run", "simulator", "tests passed", "verdict", "date"],
        [[r.unit, r.preset, r.config_hash, r.run, r.simulator,
          f"{r.passed}/{r.tests}" if r.has_verdict else "?",
          "pass" if r.passing else f"**not passing**: {r.why}", r.date] for r in rec.rows],
        left=8, digits=None)
    text = render("verification_section", r=rec, table=table,
                  stale=today and rec is not None and rec.sources != digest(elaboration_sources()),
                  passing=sum(r.passing for r in rec.rows) if rec else 0)
    return ["## Verification (last cocotb run per unit, preset, simulator and test module)", "",
            *text.split("\n")]


def markdown(rec: Verification) -> str:
    """``reports/verification.md``: the section, under a title (the record as made: REPORT.md
    marks it stale against today's sources)."""
    return "\n".join(["# Verification", "", *section(rec, today=False)[2:]])


@dataclass(frozen=True)
class VerificationOptions:
    """Where ``dstar measure verification`` reads the regression's runs."""

    sim_root: Path | None = option(None, "the simulator builds to read (default: build/sim, "
                                         "or DSTAR_BUILD)", metavar="DIR")

    def __post_init__(self):
        if self.sim_root is not None and not self.sim_root.is_dir():
            raise UserError(f"--sim-root {self.sim_root}: not a directory")


def measure(opts: VerificationOptions, previous=None) -> Verification:
    """The record of the regression's runs (seconds: it reads verdicts, it runs nothing)."""
    rec = record(opts.sim_root)
    say(f"[verification] {rec.passing} of {rec.runs} runs pass")
    return rec


MEASUREMENT = Measurement(
    name="verification", stem="verification",
    summary="Record the cocotb regression's verdicts (build/sim) in reports/verification.json "
            "for REPORT.md (run make test first).",
    options=VerificationOptions, result=Verification, measure=measure, render=markdown)
