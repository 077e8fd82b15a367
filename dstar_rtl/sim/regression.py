"""The regression's verdicts as the simulator builds hold them: the last cocotb run of every unit,
preset, simulator and run name under ``build/sim``, judged by the runner's own verdict
(:data:`sim.runner.VERDICT`) and against today's sources, testbench and tools
(``dstar measure verification``, :mod:`app.reports.verification`, records them)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from dstar_rtl.gen.paths import SIM_BUILD

__all__ = ["verification", "is_stale"]


def _names(what, names) -> str:
    return f"{what} {', '.join(map(str, names))}"


def _judge_verdict(v: dict, current) -> list:
    """Why the verdict ``v`` is not a pass (``[]`` when it is): the runner's own faults, then
    staleness against ``current(unit, config_hash, simulator, module)``, today's
    :func:`sim.runner.run_identity`."""
    from dstar_rtl.sim.runner import run_key

    why = []
    if not v.get("expected"):
        why.append("no tests expected")
    if v.get("failed"):
        why.append(_names("failed:", v["failed"]))
    if v.get("skipped"):
        why.append(_names("skipped:", v["skipped"]))
    if v.get("missing"):
        why.append(_names("missing:", v["missing"]))
    if v.get("extra"):
        why.append(_names("unexpected:", v["extra"]))
    if not v.get("results", True):
        why.append("no results.xml")
    if v.get("exit_code") != 0:
        why.append(f"simulator exit {v.get('exit_code')}")
    if v.get("pass") is not True and not why:
        why.append(f"runner: {v.get('reason') or 'failed'}")
    rec = v.get("identity")
    try:
        now = current(v["unit"], v["config_hash"], v["simulator"], v["module"])
    except (OSError, SyntaxError, ValueError) as exc:   # a source that no longer reads
        return why + [f"stale: cannot key today's sources ({type(exc).__name__}: {exc})"]
    if not isinstance(rec, dict) or v.get("key") != run_key(rec):
        return why + ["stale: the verdict carries no valid key"]
    if run_key(now) != v["key"]:
        changed = [label for k, label in (("sources", "RTL/generator sources"),
                                          ("testbench", "testbench"))
                   if rec.get(k) != now.get(k)]
        old, new = rec.get("tools") or {}, now.get("tools") or {}
        changed += [f"{t} {old.get(t)} -> {new.get(t)}" for t in sorted(set(old) | set(new))
                    if old.get(t) != new.get(t)]
        why.append("stale: " + (", ".join(changed) if changed else "key differs") +
                   " since the run")
    return why


def _run_row(run_dir: Path, current) -> dict | None:
    """One row of the verification table from a run folder (``None`` when it is not one)."""
    from dstar_rtl.sim.runner import VERDICT

    unit_dir = run_dir.parent.parent.name
    parts = unit_dir.rsplit("-", 2)
    if len(parts) != 3:
        return None
    unit, preset, chash = parts
    sim, _, rest = run_dir.name.partition("-")
    module = rest.rsplit("-", 1)[0] if rest[-1:].isdigit() else rest
    row = dict(unit=unit, preset=preset, config_hash=chash, simulator=sim, run=rest,
               module=module, tests=0, passed=0, failed=0, skipped=0, missing=0)
    f = run_dir / VERDICT
    v = None
    if not f.is_file():
        why = ["no verdict (a run without the runner's judgement: interrupted, or older than "
               "verdicts)"]
    else:
        try:
            v = json.loads(f.read_text())
        except (OSError, ValueError) as exc:
            why = [f"unreadable verdict ({type(exc).__name__})"]
        if v is not None and not (isinstance(v, dict) and all(
                isinstance(v.get(k), str) for k in ("unit", "config_hash", "simulator",
                                                     "module"))):
            v, why = None, ["unreadable verdict (no unit, config, simulator or module)"]
    if v is None:
        mtime = max([run_dir.stat().st_mtime] + [p.stat().st_mtime for p in run_dir.iterdir()])
    else:
        why = _judge_verdict(v, current)
        mtime = float(v.get("unix_time") or f.stat().st_mtime)
        row.update(unit=v["unit"], preset=v.get("preset", preset),
                   config_hash=v["config_hash"], simulator=v["simulator"],
                   module=v["module"].rsplit(".", 1)[-1],
                   tests=len(v.get("expected") or []), passed=len(v.get("passed") or []),
                   failed=len(v.get("failed") or []), skipped=len(v.get("skipped") or []),
                   missing=len(v.get("missing") or []))
    row.update(passing=not why, why="; ".join(why), has_verdict=v is not None, mtime=mtime,
               date=time.strftime("%Y-%m-%d %H:%M", time.localtime(mtime)))
    return row


def verification(sim_root: Path | None = None) -> list:
    """The last cocotb run of every (unit, preset, simulator, run name) under ``build/sim``
    (``sim_root``), judged by its verdict (:data:`sim.runner.VERDICT`) alone: ``passing`` only
    when the runner passed it, no test failed, was skipped or is missing, and it is not stale;
    ``why`` says what is wrong otherwise. ``tests`` is the number of tests expected."""
    from dstar_rtl.sim.runner import run_identity

    root = Path(sim_root) if sim_root is not None else SIM_BUILD
    memo = {}

    def current(*key):
        if key not in memo:
            memo[key] = run_identity(*key)
        return memo[key]

    rows = {}
    for run_dir in sorted(p for p in root.glob("*/runs/*") if p.is_dir()):
        row = _run_row(run_dir, current)
        if row is None:
            continue
        key = (row["unit"], row["preset"], row["simulator"], row["run"])
        if key not in rows or rows[key]["mtime"] < row["mtime"]:
            rows[key] = row
    return sorted(rows.values(), key=lambda r: (r["unit"], r["preset"], r["run"], r["simulator"]))


def is_stale(row: dict) -> bool:
    """Whether a run was made on other sources, testbench or tools than today's (a leftover
    of an earlier regression, not a result of this one; a verdict without a valid key is not
    one: it stays in the record, not passing)."""
    return any(w.startswith("stale") and w.endswith("since the run")
               for w in row["why"].split("; "))
