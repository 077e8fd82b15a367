"""The layering of docs/architecture.md §1, checked on every import the source holds.

Inside the one top-level package ``dstar_rtl``: ``golden`` (the numerics) ← ``models`` ←
{``analysis``, ``program``} and ``program`` ← ``rtl`` ← ``gen`` ← ``perf`` (the performance
models) ← {``flows``, ``sim``} ← ``tb``, with the application ``app`` on top: a package imports
only the packages below it (``flows`` and ``sim`` never each other, the RTL only the core's
program package besides the numerics), and nothing but the tests imports ``app``. Imports inside
functions count like any other, and no package's modules import each other in a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dstar_rtl.sim.sources import PACKAGE, PACKAGES, ROOT, imported_modules, module_file

#: What each package may import besides itself.
ALLOWED = {
    "golden": set(),
    "models": {"golden"},
    "analysis": {"golden", "models"},
    "program": {"golden", "models"},
    "rtl": {"golden", "program"},
    "gen": {"golden", "program", "rtl"},
    "perf": {"golden", "models", "program", "rtl", "gen"},
    "flows": {"golden", "models", "program", "rtl", "gen", "perf"},
    "sim": {"golden", "models", "program", "rtl", "gen", "perf"},
    "tb": {"golden", "models", "program", "rtl", "gen", "perf", "flows", "sim"},
    "results": {"golden", "models", "analysis", "program", "rtl", "gen", "perf", "flows", "sim",
                "tb"},
    "bench": {"golden", "models", "analysis", "program", "rtl", "gen", "perf", "flows", "sim",
              "tb", "results"},
    "app": {"golden", "models", "analysis", "program", "rtl", "gen", "perf", "flows", "sim", "tb",
            "results", "bench"},
}


def layer(mod: str) -> str | None:
    """The package of ``dstar_rtl`` that module ``mod`` belongs to (``None`` for the top
    package itself)."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else None


def modules(root: Path = ROOT) -> list[str]:
    """Every module of the project's packages (and their subpackages) under ``root``."""
    out = []
    for pk in PACKAGES:
        for f in (root / PACKAGE / pk).rglob("*.py"):
            parts = f.relative_to(root).with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(out)


def forbidden_arrows(root: Path = ROOT) -> list[str]:
    """``"a.b -> c.d"`` for every import of a package that ``ALLOWED`` does not grant."""
    bad = []
    for mod in modules(root):
        pk = layer(mod)
        for dep in sorted(imported_modules(mod, root)):
            dpk = layer(dep)
            if dpk is not None and dpk != pk and dpk not in ALLOWED[pk]:
                bad.append(f"{mod} -> {dep}")
    return bad


def dynamic_arrows(root: Path = ROOT) -> list[str]:
    """Modules named by string to ``importlib.import_module`` (or to a test runner) across a
    forbidden arrow: a string constant or f-string that starts with a package name."""
    bad = []
    for mod in modules(root):
        pk = layer(mod)
        path = module_file(mod, root)
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr",
                                                           getattr(node.func, "id", "")) in
                    ("import_module", "__import__")):
                continue
            for arg in node.args[:1]:
                text = arg.value if isinstance(arg, ast.Constant) else (
                    arg.values[0].value if isinstance(arg, ast.JoinedStr) and arg.values
                    and isinstance(arg.values[0], ast.Constant) else "")
                dpk = layer(str(text)) if str(text).startswith(f"{PACKAGE}.") else None
                if dpk in ALLOWED and dpk != pk and dpk not in ALLOWED[pk]:
                    bad.append(f"{mod} -> {text}")
    return bad


def cycles(root: Path = ROOT) -> list[list[str]]:
    """Import cycles among the modules of one package (each cycle once, as found)."""
    mods = set(modules(root))
    graph = {m: {d for d in imported_modules(m, root) if d in mods and d != m
                 and layer(d) == layer(m) and d.count(".") > 1} for m in mods}
    state, found = {}, []

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                found.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(mods):
        if m not in state:
            visit(m, [])
    return found


def test_every_package_is_in_the_graph():
    assert set(PACKAGES) == set(ALLOWED)


def test_no_forbidden_import():
    assert forbidden_arrows() == []


def test_no_module_named_across_a_forbidden_arrow():
    assert dynamic_arrows() == []


def test_no_import_cycle_inside_a_package():
    assert cycles() == []


def _tree(tmp_path, files: dict) -> Path:
    for name, text in files.items():
        path = tmp_path.joinpath(PACKAGE, *name.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / PACKAGE).mkdir(exist_ok=True)
    (tmp_path / PACKAGE / "__init__.py").touch()
    for pk in PACKAGES:
        (tmp_path / PACKAGE / pk).mkdir(exist_ok=True)
        (tmp_path / PACKAGE / pk / "__init__.py").touch()
    return tmp_path


@pytest.mark.parametrize("text, target", [
    ("from dstar_rtl.flows.synth import synthesize\n", "dstar_rtl.flows.synth"),
    ("def f():\n    import dstar_rtl.sim.runner\n", "dstar_rtl.sim.runner"),
    ("def f():\n    from dstar_rtl.app import cli\n", "dstar_rtl.app.cli"),
    ("from ..perf import chip_model\n", "dstar_rtl.perf.chip_model"),
])
def test_the_checker_finds_an_upward_import(tmp_path, text, target):
    root = _tree(tmp_path, {"gen/a.py": text, "flows/synth.py": "", "sim/runner.py": "",
                            "app/cli.py": "", "perf/chip_model.py": ""})
    pk = target.rsplit(".", 1)[0]
    assert forbidden_arrows(root) == [f"dstar_rtl.gen.a -> {pk}",
                                      f"dstar_rtl.gen.a -> {target}"]


def test_the_checker_finds_flows_and_sim_importing_each_other(tmp_path):
    root = _tree(tmp_path, {"flows/a.py": "from dstar_rtl.sim import b\n", "sim/b.py": ""})
    assert forbidden_arrows(root) == ["dstar_rtl.flows.a -> dstar_rtl.sim",
                                      "dstar_rtl.flows.a -> dstar_rtl.sim.b"]


def test_the_checker_finds_a_module_named_by_string(tmp_path):
    root = _tree(tmp_path, {"sim/a.py": "import importlib\ndef f(m):\n"
                                        "    importlib.import_module(f'dstar_rtl.tb.{m}')\n"})
    assert dynamic_arrows(root) == ["dstar_rtl.sim.a -> dstar_rtl.tb."]


def test_the_checker_finds_a_cycle(tmp_path):
    root = _tree(tmp_path, {"golden/a.py": "from .b import x\n",
                            "golden/b.py": "def f():\n    from .a import y\n"})
    assert cycles(root) == [["dstar_rtl.golden.a", "dstar_rtl.golden.b", "dstar_rtl.golden.a"]]


@pytest.mark.parametrize("src, target", [
    ("golden/a.py", "dstar_rtl.models.dit"),          # the numerics import no model
    ("golden/a.py", "dstar_rtl.program.isa"),         # ... nor the core's ISA or compiler
    ("models/a.py", "dstar_rtl.program.model"),       # a model knows no core
    ("models/a.py", "dstar_rtl.analysis.profile"),
    ("analysis/a.py", "dstar_rtl.program.compiler"),
    ("program/a.py", "dstar_rtl.analysis.trace"),
    ("program/a.py", "dstar_rtl.rtl.core"),           # the compiler does not reach into the RTL
    ("rtl/a.py", "dstar_rtl.models.dit"),             # the RTL takes the ISA, not the models
])
def test_the_checker_finds_a_planted_upward_import_in_each_package(tmp_path, src, target):
    mod, name = target.rsplit(".", 1)
    root = _tree(tmp_path, {src: f"def f():\n    from {mod} import {name}\n",
                            f"{mod.split('.', 1)[1].replace('.', '/')}/{name}.py": ""})
    a = "dstar_rtl." + src[:-3].replace("/", ".")
    assert forbidden_arrows(root) == [f"{a} -> {mod}", f"{a} -> {target}"]


def test_golden_holds_the_numerics_alone():
    """The numerics reference stays small enough to read in an hour: under 6,000 lines, none of
    them the core's software, the models or the analyses."""
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / PACKAGE / "golden").glob("*.py"))
    assert lines < 6000, lines
    names = {p.stem for p in (ROOT / PACKAGE / "golden").glob("*.py")}
    assert not names & {"core_isa", "core_compiler", "dit", "checkpoint", "profile", "trace"}


#: Inside the application: the shared pieces (``app.cli``, ``app.options``) ← ``benches`` ←
#: ``reports`` ← ``sweeps`` ← ``commands`` (the command line reaches its modules by name).
DSTAR_ALLOWED = {
    "benches": {"top"},
    "reports": {"top", "benches"},
    "sweeps": {"top", "benches", "reports"},
    "commands": {"top", "benches", "reports", "sweeps"},
}


def _dstar_room(mod: str) -> str:
    parts = mod.split(".")[2:]
    return parts[0] if len(parts) > 1 or parts[-1] in DSTAR_ALLOWED else "top"


def forbidden_dstar_arrows(root: Path = ROOT) -> list[str]:
    """``"a -> b"`` for every import between the application's rooms that DSTAR_ALLOWED does not
    grant (the shared pieces import no room)."""
    bad = []
    for mod in modules(root):
        if not mod.startswith("dstar_rtl.app.") or mod == "dstar_rtl.app.cli":
            continue
        room = _dstar_room(mod)
        for dep in sorted(imported_modules(mod, root)):
            if dep.startswith("dstar_rtl.app."):
                to = _dstar_room(dep)
                if to != room and to not in DSTAR_ALLOWED.get(room, set()):
                    bad.append(f"{mod} -> {dep}")
    return bad


def test_the_application_rooms_import_one_way():
    app = ROOT / PACKAGE / "app"
    assert {p.name for p in app.iterdir() if (p / "__init__.py").is_file()} == set(DSTAR_ALLOWED)
    assert forbidden_dstar_arrows() == []


@pytest.mark.parametrize("src, target", [
    ("app/benches/a.py", "dstar_rtl.app.reports.b"),
    ("app/reports/a.py", "dstar_rtl.app.commands.b"),
    ("app/sweeps/a.py", "dstar_rtl.app.commands.b"),
    ("app/options.py", "dstar_rtl.app.benches.b"),
])
def test_the_checker_finds_an_upward_import_inside_the_application(tmp_path, src, target):
    files = {src: f"from {target} import x\n",
             target.split(".", 1)[1].replace(".", "/") + ".py": ""}
    for room in DSTAR_ALLOWED:
        files[f"app/{room}/__init__.py"] = ""
    root = _tree(tmp_path, files)
    a = "dstar_rtl." + src[:-3].replace("/", ".")
    assert f"{a} -> {target}" in forbidden_dstar_arrows(root)


#: The packages below ``gen`` (they cannot import :mod:`gen.outputs`), each with what it
#: serializes itself: the configuration's hash, the training script's metadata in the weights.
BELOW_OUTPUTS = {"golden": {"config.py"}, "models": {"train_dit.py"}}


def test_json_is_serialized_in_one_place():
    """Results are written as JSON by :func:`gen.outputs.json_text` (one format) and job files,
    cache entries, keys, manifests and testbench records by :func:`gen.outputs.data_json`: no
    other module of a package that can import it calls ``json.dumps``/``json.dump`` (issue 48);
    below it only the modules :data:`BELOW_OUTPUTS` names."""
    bad = []
    for f in sorted((ROOT / PACKAGE).rglob("*.py")):
        rel = f.relative_to(ROOT / PACKAGE)
        if rel.as_posix() == "gen/outputs.py" or rel.name in BELOW_OUTPUTS.get(rel.parts[0], ()):
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("dumps", "dump")
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "json"):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno}")
    assert not bad, bad


def test_only_the_application_plots():
    """Figures are rendering: no module below the application imports matplotlib (the
    measurements below it return data; their reports draw it, issue 48)."""
    bad = []
    for f in sorted((ROOT / PACKAGE).rglob("*.py")):
        if (ROOT / PACKAGE / "app") in f.parents:
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "matplotlib" or n.startswith("matplotlib.") for n in names):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno}")
    assert not bad, bad
