"""The project source files a piece of code can load, found by reading their imports.

The simulator build cache (:mod:`sim.runner`) must be keyed on every file that elaboration
reads: the RTL, the generator, and every golden module the RTL takes constants, tables or layouts
from (the VPU's ROM contents come from ``golden/vpu.py``, the packer's order from
``golden/schedule.py``, ...). A fixed list goes stale the day someone adds an import; this module
walks the import statements instead, module level and inside functions alike, from a set of root
modules and through every project module they name, so the closure is a superset of what any call
path can load.

>>> from dstar_rtl.sim.sources import import_closure
>>> files = import_closure(["dstar_rtl.gen.generate"])       # doctest: +SKIP
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

from dstar_rtl.gen.paths import ROOT

#: The project's one top-level package (a name outside it is a third-party or stdlib import).
PACKAGE = "dstar_rtl"
#: Its packages, by role (docs/architecture.md §1): the numerics, the DiT models, analysis, the
#: compiler, the RTL, the Verilog generator, the performance models, the simulators, the synthesis
#: and power flows, the testbenches and the application.
PACKAGES = ("golden", "models", "analysis", "program", "rtl", "gen", "perf", "sim", "flows", "tb",
            "results", "bench", "app")
#: Where elaboration starts: the generator and its catalogue, which imports every unit's module.
ELABORATION_ROOTS = ("dstar_rtl.gen.generate", "dstar_rtl.gen.units")

__all__ = ["PACKAGES", "ELABORATION_ROOTS", "module_file", "imported_modules", "import_closure",
           "elaboration_sources", "digest"]


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The file of project module ``name`` (``dstar_rtl/pkg/mod.py`` or ``.../__init__.py``), or
    ``None``
    when ``name`` is not a project module."""
    parts = name.split(".")
    if parts[0] != PACKAGE or (len(parts) > 1 and parts[1] not in PACKAGES):
        return None
    base = root.joinpath(*parts)
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _resolve(module: str | None, level: int, here: str, is_package: bool) -> str:
    """Absolute name of ``from <level dots><module> import ...`` written in module ``here``."""
    if level == 0:
        return module or ""
    pkg = here.split(".") if is_package else here.split(".")[:-1]
    if level > 1:
        pkg = pkg[:-(level - 1)]
    return ".".join(pkg + ([module] if module else []))


def imported_modules(name: str, root: Path = ROOT) -> set[str]:
    """Project modules that module ``name`` imports anywhere in its body (functions included).

    ``from pkg import x`` counts ``pkg`` and, when ``pkg.x`` is a module, ``pkg.x`` too; a parent
    package of every imported module counts as well (Python runs its ``__init__``)."""
    f = module_file(name, root)
    if f is None:
        return set()
    st = f.stat()
    found = _import_names(name, str(f), st.st_mtime_ns, st.st_size)
    out = set()
    for mod in found:
        parts = mod.split(".")
        for k in range(1, len(parts) + 1):
            sub = ".".join(parts[:k])
            if module_file(sub, root) is not None:
                out.add(sub)
    return out


@lru_cache(maxsize=4096)
def _import_names(name: str, path: str, mtime_ns: int, size: int) -> frozenset:
    """Every name module ``name`` (file ``path``) imports, as written (parsed once per version
    of the file: the key holds its modification time and size)."""
    tree = ast.parse(Path(path).read_text(), filename=path)
    is_package = Path(path).name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, name, is_package)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return frozenset(found)


def import_closure(roots, root: Path = ROOT) -> list[Path]:
    """Files of ``roots`` and of every project module reachable through their imports, sorted."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        mod = todo.pop()
        if mod in seen or module_file(mod, root) is None:
            continue
        seen.add(mod)
        todo.extend(imported_modules(mod, root) - seen)
    return sorted(module_file(m, root) for m in seen)


@lru_cache(maxsize=None)
def _elaboration_sources(root: Path) -> tuple[Path, ...]:
    return tuple(import_closure(ELABORATION_ROOTS, root))


def elaboration_sources(root: Path = ROOT) -> list[Path]:
    """Every project file that generating a unit's Verilog can load."""
    return list(_elaboration_sources(root))


def digest(files, root: Path = ROOT) -> str:
    """SHA-256 over the files' paths (relative to ``root``) and contents."""
    h = hashlib.sha256()
    for f in files:
        h.update(str(Path(f).relative_to(root)).encode() + b"\0")
        h.update(Path(f).read_bytes())
    return h.hexdigest()
