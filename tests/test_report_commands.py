"""Every figure is reproducible by a make target: each committed report JSON names the command
that made it (``"command"``, added by :func:`gen.outputs.write_together` to every JSON object a
``dstar`` command writes), that command is one an experiment of the registry runs
(app/experiments.py; ``make reports`` is ``dstar measure --all``), and the registry's bench
runs exactly the command of the headline in ``reports/bench.json``."""

import json
import re
import shlex
from pathlib import Path

import pytest

from dstar_rtl.gen import outputs

ROOT = Path(__file__).resolve().parent.parent


def _registry_commands() -> list:
    """Every ``dstar`` command of the experiment registry (what ``make reports`` runs: ``dstar
    measure --all``), as a command line."""
    from dstar_rtl.app.experiments import EXPERIMENTS, REPORT
    return [shlex.join(c) for e in EXPERIMENTS.values() for c in e.commands
            if c[0] == "dstar"] + [shlex.join(REPORT), "dstar measure --all"]


#: Commands that are a measurement under its own name (app/commands/sweep.py, bench.py,
#: power.py forward every argument to it).
ALIASES = {("dstar", "sweep"): ("dstar", "measure", "design-sweep"),
           ("dstar", "bench"): ("dstar", "measure", "bench"),
           ("dstar", "power"): ("dstar", "measure", "power")}


def _key(command: str) -> tuple:
    """A command's subcommand words (up to the first option), an alias as its measurement."""
    words = shlex.split(command)
    i = next((k for k, w in enumerate(words) if w.startswith("-")), len(words))
    return ALIASES.get(tuple(words[:i]), tuple(words[:i]))


def _reports():
    return sorted(p for p in (ROOT / "reports").rglob("*.json"))


def test_the_registry_runs_the_headline_bench_command():
    from dstar_rtl.app.experiments import EXPERIMENTS
    from dstar_rtl.results.bench import Bench
    bench = Bench.load(ROOT / "reports" / "bench.json")
    assert [shlex.join(c) for c in EXPERIMENTS["bench"].commands] == [bench.provenance.command]



def test_make_reports_and_the_partial_targets_run_the_registry():
    text = (ROOT / "Makefile").read_text()
    assert re.search(r"^reports:.*\n\t\$\(BIN\)/dstar measure --all$", text, re.M)
    for target in ("bench", "profile", "board"):
        assert re.search(rf"^{target}:.*\n\t\$\(BIN\)/dstar measure --only [a-z0-9,-]+$",
                         text, re.M), target


@pytest.mark.parametrize("path", _reports(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_report_names_a_command_make_reports_runs(path):
    rec = json.loads(path.read_text())
    # a typed result (results/base.py) keeps it in its provenance
    command = rec.get("command") or (rec.get("provenance") or {}).get("command") or "" \
        if isinstance(rec, dict) else ""
    assert command.startswith("dstar "), f"{path.name} does not name the command that made it"
    made = {_key(c) for c in _registry_commands()}
    assert _key(command) in made, f"make reports runs no {' '.join(_key(command))}"


def test_every_json_output_of_a_command_records_it(tmp_path):
    outputs.record_command(["measure", "x", "--out", "a b"])
    try:
        outputs.write_together({tmp_path / "r.json": '{\n "a": 1\n}\n',
                                tmp_path / "own.json": '{"command": "dstar bench --x"}',
                                tmp_path / "list.json": "[1, 2]\n",
                                tmp_path / "r.md": '{"a": 1}'})
        outputs.write_together({tmp_path / "manifest.json": '{"b": 2}'}, record_command=False)
    finally:
        outputs.record_command(None)
    assert (tmp_path / "r.json").read_text() == \
        '{\n "a": 1,\n "command": "dstar measure x --out \'a b\'"\n}\n'
    assert json.loads((tmp_path / "own.json").read_text())["command"] == "dstar bench --x"
    assert (tmp_path / "list.json").read_text() == "[1, 2]\n"
    assert (tmp_path / "r.md").read_text() == '{"a": 1}'
    assert (tmp_path / "manifest.json").read_text() == '{"b": 2}'


def test_the_dstar_command_line_is_recorded(tmp_path, capsys):
    from dstar_rtl.app.cli import main

    rc = main(["sample", "--model", "tiny", "--backend", "float", "--steps", "1", "--labels",
               "1", "--out", str(tmp_path)])
    assert rc == 0, capsys.readouterr().err
    rec = json.loads((tmp_path / "sample.json").read_text())
    assert rec["provenance"]["command"] == (f"dstar sample --model tiny --backend float "
                                            f"--steps 1 --labels 1 --out {tmp_path}")
    assert "command" not in rec          # a typed result keeps it in its provenance alone
