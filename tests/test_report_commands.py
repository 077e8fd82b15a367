"""Every figure is reproducible by a make target: each committed report JSON names the command
that made it (``"command"``, added by :func:`gen.outputs.write_together` to every JSON object a
``dstar`` command writes), that command is one the Makefile's ``reports`` target runs (itself or
through a target it names), and ``make bench`` runs exactly the command of the headline in
``reports/bench.json``."""

import json
import re
import shlex
from pathlib import Path

import pytest

from gen import outputs

ROOT = Path(__file__).resolve().parent.parent


def _make_recipes() -> dict:
    """``{target: [recipe line, ...]}`` of the Makefile, with ``$(BIN)/dstar`` as ``dstar``,
    ``$(JOBS)`` as 2 and ``$(BENCH)`` expanded; a ``$(MAKE) T`` line is replaced by T's lines."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    bench = re.search(r"^BENCH\s*=\s*(.+)$", text, re.M).group(1)
    recipes, target = {}, None
    for line in text.splitlines():
        m = re.match(r"^([a-z0-9-]+):", line)
        if m:
            target = m.group(1)
            recipes[target] = []
        elif line.startswith("\t") and target:
            recipes[target].append(line.strip())

    def expand(t):
        out = []
        for r in recipes.get(t, []):
            sub = re.match(r"^\$\(MAKE\)\s+([a-z0-9-]+)$", r)
            if sub:
                out += expand(sub.group(1))
                continue
            r = r.replace("$(BENCH)", bench).replace("$(BIN)/dstar", "dstar")
            out.append(" ".join(r.replace("$(JOBS)", "2").split()))
        return out
    return {t: expand(t) for t in recipes}


def _key(command: str) -> tuple:
    """A command's subcommand words (up to the first option)."""
    words = shlex.split(command)
    i = next((k for k, w in enumerate(words) if w.startswith("-")), len(words))
    return tuple(words[:i])


def _reports():
    return sorted(p for p in (ROOT / "reports").rglob("*.json"))


def test_make_bench_runs_the_headline_command():
    bench = json.loads((ROOT / "reports" / "bench.json").read_text())
    assert _make_recipes()["bench"] == [bench["command"]]


@pytest.mark.parametrize("path", _reports(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_report_names_a_command_make_reports_runs(path):
    rec = json.loads(path.read_text())
    assert isinstance(rec, dict) and rec.get("command", "").startswith("dstar "), \
        f"{path.name} does not name the command that made it"
    made = {_key(c) for c in _make_recipes()["reports"]}
    assert _key(rec["command"]) in made, f"make reports runs no {' '.join(_key(rec['command']))}"


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
    from dstar.cli import main

    rc = main(["sample", "--model", "tiny", "--backend", "float", "--steps", "1", "--labels",
               "1", "--out", str(tmp_path)])
    assert rc == 0, capsys.readouterr().err
    rec = json.loads((tmp_path / "sample.json").read_text())
    assert rec["command"] == (f"dstar sample --model tiny --backend float --steps 1 --labels 1 "
                              f"--out {tmp_path}")
