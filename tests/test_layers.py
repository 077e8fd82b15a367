"""The layering of docs/architecture.md §1, checked on every import the source holds.

``golden`` (the numerics) ← ``models`` ← {``analysis``, ``program``} and ``program`` ← ``rtl`` ←
``gen`` ← {``fpga``, ``sim``} ← ``tb``, with the application ``dstar`` on top: a package imports
only the packages below it (``fpga`` and ``sim`` never each other, the RTL only the core's
program package besides the numerics), and nothing but the tests imports ``dstar``. Imports
inside functions count like any other, and no package's modules import each other in a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sim.sources import PACKAGES, ROOT, imported_modules, module_file

#: What each package may import besides itself.
ALLOWED = {
    "golden": set(),
    "models": {"golden"},
    "analysis": {"golden", "models"},
    "program": {"golden", "models"},
    "rtl": {"golden", "program"},
    "gen": {"golden", "program", "rtl"},
    "fpga": {"golden", "models", "program", "rtl", "gen"},
    "sim": {"golden", "models", "program", "rtl", "gen"},
    "tb": {"golden", "models", "program", "rtl", "gen", "fpga", "sim"},
    "dstar": {"golden", "models", "analysis", "program", "rtl", "gen", "fpga", "sim", "tb"},
}


def modules(root: Path = ROOT) -> list[str]:
    """Every module of the project's packages (and their subpackages) under ``root``."""
    out = []
    for pk in PACKAGES:
        for f in (root / pk).rglob("*.py"):
            parts = f.relative_to(root).with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(out)


def forbidden_arrows(root: Path = ROOT) -> list[str]:
    """``"a.b -> c.d"`` for every import of a package that ``ALLOWED`` does not grant."""
    bad = []
    for mod in modules(root):
        pk = mod.split(".")[0]
        for dep in sorted(imported_modules(mod, root)):
            dpk = dep.split(".")[0]
            if dpk != pk and dpk not in ALLOWED[pk]:
                bad.append(f"{mod} -> {dep}")
    return bad


def dynamic_arrows(root: Path = ROOT) -> list[str]:
    """Modules named by string to ``importlib.import_module`` (or to a test runner) across a
    forbidden arrow: a string constant or f-string that starts with a package name."""
    bad = []
    for mod in modules(root):
        pk = mod.split(".")[0]
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
                dpk = str(text).split(".")[0]
                if dpk in ALLOWED and dpk != pk and dpk not in ALLOWED[pk]:
                    bad.append(f"{mod} -> {text}")
    return bad


def cycles(root: Path = ROOT) -> list[list[str]]:
    """Import cycles among the modules of one package (each cycle once, as found)."""
    mods = set(modules(root))
    graph = {m: {d for d in imported_modules(m, root) if d in mods and d != m
                 and d.split(".")[0] == m.split(".")[0] and "." in d} for m in mods}
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
        path = tmp_path.joinpath(*name.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for pk in PACKAGES:
        (tmp_path / pk).mkdir(exist_ok=True)
        (tmp_path / pk / "__init__.py").touch()
    return tmp_path


@pytest.mark.parametrize("text, target", [
    ("from fpga.synth import synthesize\n", "fpga.synth"),
    ("def f():\n    import sim.runner\n", "sim.runner"),
    ("def f():\n    from dstar import cli\n", "dstar.cli"),
])
def test_the_checker_finds_an_upward_import(tmp_path, text, target):
    root = _tree(tmp_path, {"gen/a.py": text, "fpga/synth.py": "", "sim/runner.py": "",
                            "dstar/cli.py": ""})
    pk = target.split(".")[0]
    assert forbidden_arrows(root) == [f"gen.a -> {pk}", f"gen.a -> {target}"]


def test_the_checker_finds_fpga_and_sim_importing_each_other(tmp_path):
    root = _tree(tmp_path, {"fpga/a.py": "from sim import b\n", "sim/b.py": ""})
    assert forbidden_arrows(root) == ["fpga.a -> sim", "fpga.a -> sim.b"]


def test_the_checker_finds_a_module_named_by_string(tmp_path):
    root = _tree(tmp_path, {"sim/a.py": "import importlib\n"
                                        "def f(m):\n    importlib.import_module(f'tb.{m}')\n"})
    assert dynamic_arrows(root) == ["sim.a -> tb."]


def test_the_checker_finds_a_cycle(tmp_path):
    root = _tree(tmp_path, {"golden/a.py": "from .b import x\n",
                            "golden/b.py": "def f():\n    from .a import y\n"})
    assert cycles(root) == [["golden.a", "golden.b", "golden.a"]]


@pytest.mark.parametrize("src, target", [
    ("golden/a.py", "models.dit"),          # the numerics import no model
    ("golden/a.py", "program.isa"),         # ... nor the core's ISA or compiler
    ("models/a.py", "program.model"),       # a model knows no core
    ("models/a.py", "analysis.profile"),
    ("analysis/a.py", "program.compiler"),
    ("program/a.py", "analysis.trace"),
    ("program/a.py", "rtl.core"),           # the compiler does not reach into the RTL
    ("rtl/a.py", "models.dit"),             # the RTL takes the ISA, not the models
])
def test_the_checker_finds_a_planted_upward_import_in_each_package(tmp_path, src, target):
    mod, name = target.rsplit(".", 1)
    root = _tree(tmp_path, {src: f"def f():\n    from {mod} import {name}\n",
                            f"{mod.replace('.', '/')}/{name}.py": ""})
    a = src[:-3].replace("/", ".")
    assert forbidden_arrows(root) == [f"{a} -> {mod}", f"{a} -> {target}"]


def test_golden_holds_the_numerics_alone():
    """The numerics reference stays small enough to read in an hour: under 6,000 lines, none of
    them the core's software, the models or the analyses."""
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "golden").glob("*.py"))
    assert lines < 6000, lines
    names = {p.stem for p in (ROOT / "golden").glob("*.py")}
    assert not names & {"core_isa", "core_compiler", "dit", "checkpoint", "profile", "trace"}


#: Inside the application: the shared pieces (``dstar.cli``, ``dstar.options``) ← ``benches`` ←
#: ``reports`` ← ``sweeps`` ← ``commands`` (the command line reaches its modules by name).
DSTAR_ALLOWED = {
    "benches": {"top"},
    "reports": {"top", "benches"},
    "sweeps": {"top", "benches", "reports"},
    "commands": {"top", "benches", "reports", "sweeps"},
}


def _dstar_room(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 2 or parts[-1] in DSTAR_ALLOWED else "top"


def forbidden_dstar_arrows(root: Path = ROOT) -> list[str]:
    """``"a -> b"`` for every import between the application's rooms that DSTAR_ALLOWED does not
    grant (the shared pieces import no room)."""
    bad = []
    for mod in modules(root):
        if not mod.startswith("dstar.") or mod == "dstar.cli":
            continue
        room = _dstar_room(mod)
        for dep in sorted(imported_modules(mod, root)):
            if dep.startswith("dstar.") and dep != "dstar":
                to = _dstar_room(dep)
                if to != room and to not in DSTAR_ALLOWED.get(room, set()):
                    bad.append(f"{mod} -> {dep}")
    return bad


def test_the_application_rooms_import_one_way():
    assert {p.name for p in (ROOT / "dstar").iterdir() if (p / "__init__.py").is_file()} == \
        set(DSTAR_ALLOWED)
    assert forbidden_dstar_arrows() == []


@pytest.mark.parametrize("src, target", [
    ("dstar/benches/a.py", "dstar.reports.b"),
    ("dstar/reports/a.py", "dstar.commands.b"),
    ("dstar/sweeps/a.py", "dstar.commands.b"),
    ("dstar/options.py", "dstar.benches.b"),
])
def test_the_checker_finds_an_upward_import_inside_the_application(tmp_path, src, target):
    files = {src: f"from {target} import x\n", target.replace(".", "/") + ".py": ""}
    for room in DSTAR_ALLOWED:
        files[f"dstar/{room}/__init__.py"] = ""
    root = _tree(tmp_path, files)
    a = src[:-3].replace("/", ".")
    assert f"{a} -> {target}" in forbidden_dstar_arrows(root)


def test_the_application_serializes_json_in_one_place():
    """Results are written as JSON by :func:`gen.outputs.json_text` (one format) and job files,
    cache entries and keys by :func:`gen.outputs.data_json`: no module of the application calls
    ``json.dumps`` itself (issue 48)."""
    bad = []
    for f in sorted((ROOT / "dstar").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("dumps", "dump")
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "json"):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno}")
    assert not bad, bad
