"""``dstar measure verification``: the regression's verdicts recorded as a result.

The last cocotb run of every unit, preset, simulator and run name under ``build/sim`` (what
``make test`` or ``make regress`` left there) made on today's sources, testbench and tools,
judged by the runner's own verdicts (:func:`app.reports.summary.verification`: a run passes
only when every expected test ran and passed), written to ``reports/verification.json`` with
the digest of the RTL sources; runs left over from earlier sources are counted (``older``) and
left out, so the record is the regression just run, not whatever a build folder holds.
``dstar report`` reads that file, not a local ``build/``, and marks the table stale when the
sources have changed since.

Takes seconds (it reads verdicts; it runs nothing). Refused (exit 2, nothing written) when
``build/sim`` holds no cocotb run made on today's sources.
"""

from __future__ import annotations

import time
from pathlib import Path

from dstar_rtl.app.options import Parser
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import check_output_dir, command_line, json_text, write_together
from dstar_rtl.gen.progress import say

__all__ = ["record", "main", "ROW_FIELDS"]

#: The fields of a verification row that the record keeps (the table's and the unit files').
ROW_FIELDS = ("unit", "preset", "config_hash", "simulator", "run", "module", "tests", "passed",
              "failed", "skipped", "missing", "passing", "why", "has_verdict", "date")


def record(sim_root: Path | None = None) -> dict:
    """The record of ``sim_root`` (default ``build/sim``): its runs on today's sources, how
    many pass, how many older ones were left out, the sources' digest, the date.
    :class:`UserError` when there is no run on today's sources."""
    from dstar_rtl.app.reports.summary import SIM, verification
    from dstar_rtl.sim.sources import digest, elaboration_sources

    rows = verification(sim_root)
    current = [r for r in rows if not _stale(r)]
    if not current:
        raise UserError(f"no cocotb run on today's sources in {sim_root or SIM}"
                        + (f" ({len(rows)} older ones)" if rows else "")
                        + ": run `make test` (or `make regress`) first")
    return dict(generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                sources=digest(elaboration_sources()),
                runs=len(current), passing=sum(r["passing"] for r in current),
                older=len(rows) - len(current),
                rows=[{k: r[k] for k in ROW_FIELDS} for r in current])


def _stale(row: dict) -> bool:
    """Whether a run was made on other sources, testbench or tools than today's (a leftover
    of an earlier regression, not a result of this one; a verdict without a valid key is not
    one: it stays in the record, not passing)."""
    return any(w.startswith("stale") and w.endswith("since the run")
               for w in row["why"].split("; "))


def main(argv=None, prog=None) -> int:
    ap = Parser(prog=prog or "dstar measure verification",
                description="Record the cocotb regression's verdicts (build/sim) in "
                            "reports/verification.json for REPORT.md.")
    ap.add_argument("--sim-root", type=Path, default=None,
                    help="the simulator builds to read (default: build/sim, or DSTAR_BUILD)")
    ap.add_argument("--out-dir", type=Path, default=Path("reports"),
                    help="report directory (default: reports)")
    a = ap.parse_args(argv)
    out = check_output_dir(a.out_dir)
    if a.sim_root is not None and not a.sim_root.is_dir():
        raise UserError(f"--sim-root {a.sim_root}: not a directory")
    rec = record(a.sim_root)
    rec["command"] = command_line() or "dstar measure verification"
    write_together({out / "verification.json": json_text(rec)})
    say(f"[verification] {rec['passing']} of {rec['runs']} runs pass; wrote "
        f"{out / 'verification.json'}")
    return 0
