"""Typed results (results/base.py) and the one measurement runner (app/measurement.py): a result
goes to JSON and back unchanged, a file of another kind, schema or shape is refused in one line
naming the field, and a measurement's command line, checks and outputs come from its options
dataclass and result type alone."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.paths import REPORTS
from dstar_rtl.results.base import Provenance, Result, plain


@dataclass(frozen=True)
class Point:
    x: int
    y: float | None = None


@dataclass(frozen=True)
class Curve(Result):
    KIND = "curve"
    name: str
    points: tuple[Point, ...]
    by_name: dict[str, float]


def _curve(**kw) -> Curve:
    base = dict(name="c", points=(Point(1, 0.5), Point(2)), by_name={"a": 1.0})
    return Curve(Provenance("dstar measure curve", "2026-12-05 07:00 UTC", "ab" * 32,
                            {"yosys": "0.70"}, {"tiny": "c28b"}), **{**base, **kw})


def test_a_result_round_trips_through_its_json(tmp_path):
    c = _curve()
    path = tmp_path / "curve.json"
    path.write_text(c.to_json())
    data = json.loads(path.read_text())
    assert list(data)[:3] == ["kind", "schema", "provenance"]
    assert Curve.load(path) == c


def test_a_non_finite_figure_is_stored_as_null_and_read_as_nan(tmp_path):
    path = tmp_path / "curve.json"
    path.write_text(_curve(by_name={"a": float("nan")}).to_json())
    assert json.loads(path.read_text())["by_name"] == {"a": None}
    assert Curve.load(path).by_name["a"] != Curve.load(path).by_name["a"]     # NaN


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(kind="line"), "a result of kind 'line', not 'curve'"),
    (lambda d: d.update(schema=0), "schema 0 of 'curve'; this version reads schema 1"),
    (lambda d: d.pop("name"), "Curve.name is missing"),
    (lambda d: d.update(extra=1), "Curve has no field 'extra'"),
    (lambda d: d["points"][0].update(x="one"),
     r"Curve.points\[0\]: Point.x: expected int, not 'one'"),
    (lambda d: d.update(points={}), "Curve.points: expected a list"),
    (lambda d: d["by_name"].update(a=True), r"by_name\['a'\]: expected float, not True"),
])
def test_a_file_that_does_not_fit_the_type_is_refused_naming_the_field(tmp_path, edit,
                                                                        message):
    data = _curve().to_data()
    edit(data)
    path = tmp_path / "curve.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match=message) as e:
        Curve.load(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


@dataclass(frozen=True)
class CurveOptions:
    n: int = option(2, "points to measure")
    names: tuple[str, ...] = option(("a",), "curve names")
    fast: bool = option(False, "measure fast")

    def __post_init__(self):
        if self.n < 1:
            raise UserError(f"--n must be at least 1, not {self.n}")


def _measure(opts: CurveOptions, previous) -> Curve:
    return Curve(run_provenance(), name=",".join(opts.names),
                 points=tuple(Point(k, 0.5 * k) for k in range(opts.n)),
                 by_name={n: float(opts.fast) for n in opts.names})


CURVE = Measurement("curve", "curve", "A curve.", CurveOptions, Curve, _measure,
                    lambda r: f"# {r.name}\n\n{len(r.points)} points\n")


def test_the_runner_builds_the_command_line_from_the_options(tmp_path, capsys):
    assert CURVE.main(["--n", "3", "--names", "x", "y", "--fast", "--out", str(tmp_path)]) == 0
    res = Curve.load(tmp_path / "curve.json")
    assert res.name == "x,y" and len(res.points) == 3 and res.by_name == {"x": 1.0, "y": 1.0}
    assert (tmp_path / "curve.md").read_text() == "# x,y\n\n3 points\n"
    assert res.provenance.date is not None
    text = CURVE.parser().format_help()
    assert "points to measure (default: 2)" in text and "curve names (default: a)" in text


def test_bad_options_are_refused_before_any_work(tmp_path):
    with pytest.raises(UserError, match="--n must be at least 1, not 0"):
        CURVE.main(["--n", "0", "--out", str(tmp_path / "out")])
    with pytest.raises(UserError, match="invalid int value"):
        CURVE.main(["--n", "many", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_markdown_only_renders_the_stored_result_again(tmp_path):
    CURVE.main(["--out", str(tmp_path)])
    (tmp_path / "curve.md").write_text("edited")
    before = (tmp_path / "curve.json").read_text()
    assert CURVE.main(["--markdown-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "curve.md").read_text() == "# a\n\n2 points\n"
    assert (tmp_path / "curve.json").read_text() == before


@dataclass(frozen=True)
class RowsOptions:
    scale: int = option(1, "rows per preset row")
    config: object = None

    def __post_init__(self):
        if self.config.rows * self.scale > 64:
            raise UserError(f"--scale {self.scale}: {self.config.rows * self.scale} rows, at "
                            f"most 64")


def _rows(opts: RowsOptions, previous) -> Curve:
    n = opts.config.rows * opts.scale
    return Curve(run_provenance(), name=opts.config.name, points=(Point(n, 1.0),), by_name={})


ROWS = Measurement("rows", "rows", "Rows.", RowsOptions, Curve, _rows,
                   lambda r: f"# {r.name}\n", preset="tiny",
                   echo=lambda r: f"{r.points[0].x} rows")


def test_a_measurement_of_one_configuration_takes_the_configuration_options(tmp_path, capsys):
    """``Measurement.preset``: ``--preset``/``--set`` make the options' ``config``, which their
    checks see before any work; ``echo`` is what the run prints."""
    from dstar_rtl.golden.config import ConfigError, preset

    assert ROWS.main(["--set", "rows=8", "--set", "cols=8", "--out", str(tmp_path)]) == 0
    assert Curve.load(tmp_path / "rows.json").points[0].x == 8
    assert capsys.readouterr().out == "8 rows\n"
    assert ROWS.main(["--preset", "fpga", "--out", str(tmp_path)]) == 0
    assert Curve.load(tmp_path / "rows.json").name == "fpga"
    with pytest.raises(UserError, match="--scale 9: 72 rows, at most 64"):
        ROWS.main(["--set", "rows=8", "--set", "cols=8", "--scale", "9", "--out",
                   str(tmp_path / "new")])
    with pytest.raises(ConfigError):
        ROWS.main(["--set", "bogus=1", "--out", str(tmp_path / "new")])
    assert not (tmp_path / "new").exists()
    assert "--preset" in ROWS.parser().format_help() and preset("tiny").rows == 4


def test_the_qpu_rate_is_a_typed_measurement():
    """The first measurement on the runner: its stored result loads as its type and renders
    its committed table (tests/test_render.py keeps every report so)."""
    from dstar_rtl.app.benches.qpu import MEASUREMENT, QpuRate
    from dstar_rtl.gen.paths import REPORTS

    res = QpuRate.load(REPORTS / "qpu_rate.json")
    assert res.rows and all(0 < r.groups_per_cycle <= 2 for r in res.rows)
    assert MEASUREMENT.render(res) == (REPORTS / "qpu_rate.md").read_text()


def test_the_registry_commands_of_the_typed_measurements_parse():
    """Every ``dstar measure NAME ...`` that make reports runs parses with the options of NAME's
    typed measurement (a renamed option would otherwise fail only in make reports)."""
    import importlib

    from dstar_rtl.app.experiments import EXPERIMENTS, MEASUREMENTS

    typed = 0
    for e in EXPERIMENTS.values():
        for c in e.commands:
            if c[:2] == ("dstar", "measure") and c[2] in MEASUREMENTS:
                m = getattr(importlib.import_module(MEASUREMENTS[c[2]][0]), "MEASUREMENT", None)
                if m is not None:
                    m.parser().parse_args(list(c[3:]))
                    typed += 1
    assert typed >= 8


def test_a_typed_measurement_refuses_an_unknown_preset_at_construction():
    from dstar_rtl.app.reports.core import CoreOptions

    with pytest.raises(UserError, match=r"--presets must be among \['fpga', 'paper', 'tiny'\], "
                                        r"not 'huge'"):
        CoreOptions(presets=("fpga", "huge"))


def test_a_failure_found_in_the_result_is_raised_after_it_is_written(tmp_path):
    """A measurement whose result records failed runs (``dstar measure asic``) writes it, then
    exits 1 with one line."""
    import dataclasses

    from dstar_rtl.gen.errors import WorkError

    failing = dataclasses.replace(CURVE, failure=lambda r: f"{len(r.points)} runs failed")
    with pytest.raises(WorkError, match="2 runs failed"):
        failing.main(["--out", str(tmp_path)])
    assert Curve.load(tmp_path / "curve.json").name == "a" and (tmp_path / "curve.md").is_file()


def test_a_template_takes_its_numbers_from_the_result_and_refuses_a_missing_one():
    """app/markdown.py: the filters format numbers one way; a name the context lacks is an
    error, not an empty string in a report."""
    import jinja2

    from dstar_rtl.app.markdown import render_string

    assert render_string("{{ r.x | num(1) }} and {{ r.y | pct }}",
                         r=dict(x=1234.56, y=0.25)) == "1,234.6 and 25.0 %"
    assert render_string("{{ r.x | num }}", r=dict(x=None)) == "–"
    with pytest.raises(jinja2.UndefinedError):
        render_string("{{ r.nope }}", r=dict(x=1))


def test_plain_data_can_leave_out_the_absent_figures():
    """``plain(present=True)``: a field that is None is left out (a renderer asking whether a
    figure is there by its key), a None inside a dict is kept (it is a figure's value)."""
    from dataclasses import dataclass as dc

    @dc(frozen=True)
    class Run:
        error: str | None = None
        shares: dict | None = None

    assert plain(Run(shares={"a": None})) == {"error": None, "shares": {"a": None}}
    assert plain(Run(shares={"a": None}), present=True) == {"shares": {"a": None}}


def test_every_result_in_reports_is_typed():
    """Every JSON in reports/ but the registry's ledger and the per-unit summaries is a typed
    result (a kind and a schema), and the ones ``dstar render`` knows load as their type."""
    import json

    from dstar_rtl.app.commands import render as rd

    known = {rd.files(n)[0] for n in rd.NAMES}
    for path in sorted(REPORTS.rglob("*.json")):
        rel = path.relative_to(REPORTS)
        if rel.parts[0] == "units" or rel.name == "ledger.json":
            continue
        data = json.loads(path.read_text())
        assert {"kind", "schema", "provenance"} <= set(data), rel
        if str(rel) in known:
            name = next(n for n in rd.NAMES if rd.files(n)[0] == str(rel))
            rd.render(name)                      # loads it as its type (UserError if not)
