"""The experiment registry (app/experiments.py): dependency order, what is stale after an
input changes (exactly the changed experiments and what depends on them), the ledger a run
writes, and the command line of ``dstar measure --all/--stale``."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import dstar_rtl.app.cli
from dstar_rtl.app import experiments as ex
from dstar_rtl.app.experiments import MEASUREMENTS


def dependents(names: set) -> set:
    """``names`` and every experiment that needs one of them, directly or not."""
    out = set(names)
    grew = True
    while grew:
        grew = False
        for n, e in ex.EXPERIMENTS.items():
            if n not in out and set(e.needs) & out:
                out.add(n)
                grew = True
    return out


@pytest.fixture(scope="module")
def prints():
    return {n: ex.fingerprint(e) for n, e in ex.EXPERIMENTS.items()}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A checkout whose every output exists."""
    r = tmp_path_factory.mktemp("root")
    for e in ex.EXPERIMENTS.values():
        for o in e.outputs:
            (r / o).parent.mkdir(parents=True, exist_ok=True)
            (r / o).write_text("{}")
    return r


def current_ledger(prints):
    return {n: dict(fingerprint=prints[n], seq=i + 1, ran="2026-12-05 00:00 UTC")
            for i, n in enumerate(ex.EXPERIMENTS)}


def test_every_need_comes_first_and_every_measurement_is_registered():
    seen = set()
    for n, e in ex.EXPERIMENTS.items():
        assert set(e.needs) <= seen, (n, set(e.needs) - seen)
        seen.add(n)
        assert e.outputs and e.commands
    assert set(MEASUREMENTS) - {"estimate"} <= set(ex.EXPERIMENTS)


def test_a_current_ledger_has_nothing_stale(prints, root):
    assert ex.stale(current_ledger(prints), prints, root) == {}


def test_an_upstream_rerun_makes_exactly_its_dependents_stale(prints, root):
    led = current_ledger(prints)
    led["perf"]["seq"] = 10**6                       # perf ran again after everything
    got = ex.stale(led, prints, root)
    assert set(got) == dependents({"perf"}) - {"perf"}
    assert "needs perf, which ran after it" in got["compare"]
    assert list(got) == ex.order(got)


def test_a_tool_change_makes_exactly_its_users_and_their_dependents_stale(prints, root,
                                                                         monkeypatch):
    led = current_ledger(prints)
    real = ex._tools

    def tools(rtl):
        return real(rtl) if rtl else (("amaranth", "9.9.9"),)
    monkeypatch.setattr(ex, "_tools", tools)
    now = {n: ex.fingerprint(e) for n, e in ex.EXPERIMENTS.items()}
    changed = {n for n, e in ex.EXPERIMENTS.items() if not e.rtl}
    assert changed and {n for n in now if now[n] != prints[n]} == changed
    got = ex.stale(led, now, root)
    assert set(got) == dependents(changed)
    assert all("its code, the RTL, a tool or the weights changed" in got[n] for n in changed)


@pytest.mark.parametrize("source", ["dstar_rtl/app/benches/sizes.py",
                                    "dstar_rtl/perf/chip_model.py"])
def test_a_source_change_makes_exactly_its_importers_and_their_dependents_stale(
        prints, root, monkeypatch, source):
    """A change to one source file: exactly the experiments whose code imports it, and those
    that read their results, are listed."""
    from dstar_rtl.gen.paths import ROOT
    from dstar_rtl.sim import sources

    target, real = (ROOT / source).resolve(), sources.digest

    def digest(files, root=ROOT):
        return real(files, root) + ("changed" if target in {Path(f).resolve() for f in files}
                                    else "")
    monkeypatch.setattr(sources, "digest", digest)
    ex._code_digest.cache_clear()
    try:
        now = {n: ex.fingerprint(e) for n, e in ex.EXPERIMENTS.items()}
    finally:
        ex._code_digest.cache_clear()
    changed = {n for n, e in ex.EXPERIMENTS.items()
               if target in {Path(f).resolve() for f in ex._code_files(e.modules, e.rtl)}}
    assert changed and {n for n in now if now[n] != prints[n]} == changed
    assert set(ex.stale(current_ledger(prints), now, root)) == dependents(changed)


def test_the_registry_and_the_results_format_are_not_inputs_of_the_experiments():
    """Editing one experiment's entry, the results' format or the runner leaves the
    experiments current (an entry's commands are hashed; the format is checked by rendering
    every stored result); every other module of a measurement's closure counts."""
    from dstar_rtl.gen.paths import ROOT

    left_out = {(ROOT / f).resolve() for f in ex.NOT_MEASURING}
    assert Path(ex.__file__).resolve() in left_out
    for e in ex.EXPERIMENTS.values():
        files = {Path(f).resolve() for f in ex._code_files(e.modules, e.rtl)}
        assert not files & left_out
        assert {(ROOT / m.replace(".", "/")).with_suffix(".py").resolve()
                for m in e.modules} <= files


def test_an_unrecorded_experiment_and_a_missing_output_are_stale(prints, root):
    led = current_ledger(prints)
    del led["sizes"]
    got = ex.stale(led, prints, root)
    assert set(got) == dependents({"sizes"})
    assert "never run through the registry" in got["sizes"][0]
    (root / "reports" / "core.json").unlink()
    try:
        got = ex.stale(current_ledger(prints), prints, root)
        assert set(got) == dependents({"core"}) and "reports/core.json missing" in got["core"]
    finally:
        (root / "reports" / "core.json").write_text("{}")


def test_a_run_records_each_experiment_in_order_and_stops_at_a_failure(tmp_path, prints):
    ledger = tmp_path / "ledger.json"
    calls = []

    def runner(argv, cwd):
        calls.append(argv)
        return SimpleNamespace(returncode=0 if "--fail" not in argv else 3)
    assert ex.run_experiments(["projection", "sizes"], ledger, runner) == 0
    led = ex.read_ledger(ledger)
    assert led["sizes"]["seq"] < led["projection"]["seq"]          # registry order
    assert led["sizes"]["fingerprint"] == prints["sizes"]
    assert [c[-1] for c in calls] == ["--reuse", "projection"]
    bad = ex.Experiment("bad", (("dstar", "measure", "sizes", "--fail"),), ("x",), rtl=False)
    ex.EXPERIMENTS["bad"] = bad
    try:
        with pytest.raises(SystemExit) as exc:
            ex.run_experiments(["bad"], ledger, runner)
        assert exc.value.code == 1
    finally:
        del ex.EXPERIMENTS["bad"]
    assert set(ex.read_ledger(ledger)) == {"sizes", "projection"}


def test_an_edit_during_a_run_leaves_the_experiment_stale(tmp_path, prints, monkeypatch):
    """The ledger records the code as the run started: an edit while it runs does not make
    the old figures look current."""
    ledger = tmp_path / "ledger.json"

    def runner(argv, cwd):
        monkeypatch.setattr(ex, "fingerprint", lambda e: "edited")     # a source edited now
        return SimpleNamespace(returncode=0)
    ex.run_experiments(["sizes"], ledger, runner)
    assert ex.read_ledger(ledger)["sizes"]["fingerprint"] == prints["sizes"] != "edited"


@pytest.mark.parametrize("argv, frag", [
    (["measure"], "name a measurement"),
    (["measure", "--dry-run"], "--dry-run goes with --all, --stale or --only"),
    (["measure", "--all", "sizes"], "--all, --stale and --only take no NAME"),
    (["measure", "--only", "sizes,nope"], "nope is not an experiment"),
    (["measure", "--all", "--stale"], "not allowed with argument"),
])
def test_the_command_line_is_checked_before_any_work(argv, frag, capsys):
    assert dstar_rtl.app.cli.main(argv) == 2
    err = capsys.readouterr().err
    assert frag in err and err.count("\n") == 1


def test_all_dry_run_lists_every_experiment_and_runs_nothing(capsys, monkeypatch):
    monkeypatch.setattr(ex, "run_experiments", lambda *a, **k: pytest.fail("ran"))
    assert dstar_rtl.app.cli.main(["measure", "--all", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == list(ex.EXPERIMENTS)


def test_a_corrupt_ledger_is_one_line(tmp_path):
    f = tmp_path / "ledger.json"
    f.write_text("{not json")
    with pytest.raises(Exception, match="is not a ledger"):
        ex.read_ledger(f)
    assert json.loads(json.dumps(ex.read_ledger(tmp_path / "none.json"))) == {}


def test_report_md_lists_every_experiment_with_its_state():
    from dstar_rtl.app.reports.summary import registry_lines

    led = {"sizes": dict(fingerprint="x", seq=1, ran="2026-12-05 01:00 UTC")}
    md = "\n".join(registry_lines({"bench": ["needs sizes, which ran after it"]}, led))
    assert "reruns exactly the stale ones: 1 of " in md
    assert "| sizes | reports/sweep.json | 2026-12-05 01:00 UTC | current |" in md
    assert "| bench | reports/bench.json | – | **stale**: needs sizes, which ran after it |" in md
    assert md.count("\n| ") == len(ex.EXPERIMENTS) + 1
