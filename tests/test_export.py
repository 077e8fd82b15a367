"""gen/export.py and ``dstar generate --fusesoc --header``: the FuseSoC core and the C header.

The header is compiled by the system C compiler (no skip: a missing compiler is a failure), and a
C program checks its offsets and widths with ``_Static_assert`` against values this file computes
from :mod:`golden.layouts`. The core is parsed (PyYAML when installed, else a small parser of the
YAML subset the generator writes) and checked for its files, top and targets.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from math import prod
from pathlib import Path

import pytest

from dstar_rtl.app.cli import main
from dstar_rtl.gen.export import c_header, fusesoc_core, instance_name
from dstar_rtl.golden import layouts as gl
from dstar_rtl.golden.config import PRECISIONS, THR8, Config, preset

ROOT = Path(__file__).resolve().parents[1]
UNITS = ("pe", "qpu", "vpu")


# ---------------------------------------------------------------------------- helpers
def _cc() -> str:
    for name in ("cc", "gcc"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("no C compiler: neither `cc` nor `gcc` is on PATH; the generated C header must be "
                "compiled (Debian: apt-get install gcc)")


def _compile(tmp_path, source: str, std: str, *flags):
    src = tmp_path / "check.c"
    src.write_text(source)
    return subprocess.run([_cc(), f"-std={std}", "-Wall", "-Werror", *flags, "-fsyntax-only",
                           f"-I{tmp_path}", str(src)], capture_output=True, text=True)


def _defines(header: str) -> dict:
    return dict(re.findall(r"^#define (\w+)[ \t]+(\S+)", header, re.M))


def _golden_ports(unit, cfg) -> dict:
    """{port: golden layout} of every record port whose layout golden.layouts defines."""
    if unit == "qpu":
        return {"subch": gl.subchannel_layout(cfg), "config": gl.qpu_config_layout(cfg),
                "groups": gl.group_layout(cfg), "recon": gl.recon_layout(cfg),
                "counters": gl.counters_layout()}
    vpu = {"cmd": gl.vpu_cmd_layout(cfg), "i": gl.vpu_in_layout(cfg), "o": gl.vpu_out_layout(cfg)}
    if unit == "vpu":
        return vpu
    if unit == "uart_vpu":  # the host link's words: input 0 commands, 1 operands, output 0 results
        return {"link_in0": vpu["cmd"], "link_in1": vpu["i"], "link_out0": vpu["o"]}
    return {}


def _c_field_names(layout) -> list:
    """The documented naming rule: upper case, unless that merges two fields (the VPU's y, Y)."""
    upper = [name.upper() for name, *_ in layout]
    return [name if upper.count(u) > 1 else u for (name, *_), u in zip(layout, upper)]


def _static_asserts(unit, cfg) -> list:
    """(C expression, expected value) pairs, every value computed here from golden/ and cfg."""
    checks = []
    for port, layout in _golden_ports(unit, cfg).items():
        P = f"DSTAR_{port.upper()}"
        checks.append((f"{P}_PAYLOAD_WIDTH", gl.layout_width(layout)))
        off = 0
        for cname, (_, width, dims, signed) in zip(_c_field_names(layout), layout):
            F = f"{P}_{cname}"
            checks += [(f"{F}_OFFSET", off), (f"{F}_WIDTH", width), (f"{F}_COUNT", prod(dims)),
                       (f"{F}_SIGNED", int(signed))]
            checks += [(f"{F}_DIM{k}", n) for k, n in enumerate(dims)]
            off += width * prod(dims)
    if unit in ("vpu", "uart_vpu"):
        checks += [(f"DSTAR_VPU_OP_{op.upper()}", code) for code, op in enumerate(gl.VPU_OPS)]
        checks.append(("DSTAR_VPU_OP_COUNT", len(gl.VPU_OPS)))
    for name, v in cfg.to_dict().items():
        if isinstance(v, (bool, int)):
            checks.append((f"DSTAR_{name.upper()}", int(v)))
    checks += [(f"DSTAR_THR{b}", t) for b, t in zip(PRECISIONS, (*cfg.thr, THR8))]
    checks += [("DSTAR_ACC_BITS", cfg.acc_bits), ("DSTAR_DX_WIDTH", cfg.dx_width),
               ("DSTAR_RECON_WIDTH", cfg.recon_width), ("DSTAR_CHAN_WIDTH", cfg.chan_width),
               ("DSTAR_EXP_WIDTH", cfg.exp_width), ("DSTAR_B_MAX", cfg.B_max),
               ("DSTAR_BASELINE_ACC_WIDTH", cfg.baseline_acc_width)]
    return checks


def _program(name: str, checks) -> str:
    lines = [f'#include "{name}"']
    lines += [f'_Static_assert({expr} == {value}, "{expr}");' for expr, value in checks]
    lines.append("int main(void) { return 0; }")
    return "\n".join(lines) + "\n"


def _scalar(s: str):
    s = s.strip()
    if s.startswith('"'):
        return json.loads(s)
    if s.startswith("["):
        return [_scalar(x) for x in s[1:-1].split(",") if x.strip()]
    return s


def _load_core(text: str) -> dict:
    """Block mappings, block lists of scalars, flow lists, double-quoted and plain scalars and
    whole-line comments: the YAML subset gen/export.py writes (PyYAML is no dependency)."""
    rows = [(len(line) - len(line.lstrip()), line.strip()) for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]

    def block(i, indent):
        if rows[i][1].startswith("- "):
            out = []
            while i < len(rows) and rows[i][0] == indent and rows[i][1].startswith("- "):
                out.append(_scalar(rows[i][1][2:]))
                i += 1
        else:
            out = {}
            while i < len(rows) and rows[i][0] == indent:
                key, colon, rest = rows[i][1].partition(":")
                assert colon and key not in out, f"not a new mapping key: {rows[i][1]!r}"
                i += 1
                if rest.strip():
                    out[key] = _scalar(rest)
                elif i < len(rows) and rows[i][0] > indent:
                    out[key], i = block(i, rows[i][0])
                else:
                    out[key] = None
        assert i == len(rows) or rows[i][0] < indent, f"bad indentation at {rows[i][1]!r}"
        return out, i

    doc, end = block(0, 0)
    assert end == len(rows)
    try:
        import yaml
    except ImportError:
        return doc
    assert yaml.safe_load(text) == doc
    return doc


def _version():
    from importlib.metadata import version
    return version("dstar-rtl")


# ---------------------------------------------------------------------------- the header
@pytest.mark.parametrize("unit", [*UNITS, "uart_vpu"])
def test_header_compiles_and_matches_golden_layouts(tmp_path, unit):
    cfg = preset("tiny")
    header = c_header(unit, cfg)
    (tmp_path / "dstar.h").write_text(header)
    # The header alone, strict C99 (and twice: the include guard).
    alone = _compile(tmp_path, '#include "dstar.h"\n#include "dstar.h"\nint dstar_unused;\n',
                     "c99", "-Wextra", "-pedantic")
    assert alone.returncode == 0, alone.stderr
    checks = _static_asserts(unit, cfg)
    assert len(checks) > 30
    prog = _compile(tmp_path, _program("dstar.h", checks), "c11")
    assert prog.returncode == 0, prog.stderr
    # The asserts bite: one wrong value fails the build.
    wrong = _compile(tmp_path, _program("dstar.h", [("DSTAR_ROWS", cfg.rows + 1)]), "c11")
    assert wrong.returncode != 0 and "DSTAR_ROWS" in wrong.stderr

    d = _defines(header)
    # Exactly the expected record ports (the PE's array wiring ports come from rtl/, not golden/).
    ports = {m[len("DSTAR_"):-len("_PAYLOAD_WIDTH")] for m in d if m.endswith("_PAYLOAD_WIDTH")}
    expected = {p.upper() for p in _golden_ports(unit, cfg)}
    assert ports == (expected or {"A_IN", "A_OUT", "W_IN", "W_OUT"})
    assert ("DSTAR_VPU_OP_SOFTMAX" in d) == (unit in ("vpu", "uart_vpu"))
    # Identity and the configuration values a preprocessor cannot compare.
    assert d["DSTAR_CONFIG_HASH"] == json.dumps(cfg.hash())
    assert d["DSTAR_TOP"] == f'"dstar_{unit}"' and d["DSTAR_CONFIG_NAME"] == '"tiny"'
    assert float(d["DSTAR_SAR_THR"]) == cfg.sar_thr
    assert d["DSTAR_ALIGNMENT"] == json.dumps(cfg.alignment)
    # Every derived value of Config is there.
    for name, attr in vars(Config).items():
        if isinstance(attr, property) and name != "thresholds":
            assert f"DSTAR_{name.upper()}" in d, name
    guard = f"DSTAR_{unit.upper()}_TINY_H"
    assert header.count(guard) == 3 and header.endswith(f"#endif /* {guard} */\n")


def test_header_of_an_overridden_configuration(tmp_path):
    cfg = preset("tiny", packer="sort", sort_n=16, acc_width=40, alignment="horner",
                 max_reduction=4)
    header = c_header("qpu", cfg)
    d = _defines(header)
    assert instance_name("qpu", cfg) == f"qpu_tiny_{cfg.hash()[:8]}"
    assert f"DSTAR_QPU_TINY_{cfg.hash()[:8].upper()}_H" in header
    assert d["DSTAR_SORT_N"] == "16" and d["DSTAR_ACC_WIDTH"] == "40"
    assert d["DSTAR_ALIGNMENT_ID"] == d["DSTAR_ALIGNMENT_HORNER"] == "1"
    assert "DSTAR_ACC_WIDTH" not in _defines(c_header("qpu", preset("tiny")))  # None: derived
    (tmp_path / "q.h").write_text(header)
    prog = _compile(tmp_path, _program("q.h", _static_asserts("qpu", cfg)), "c11")
    assert prog.returncode == 0, prog.stderr


# ---------------------------------------------------------------------------- the core
@pytest.mark.parametrize("unit", UNITS)
def test_core_names_files_top_and_targets(unit):
    cfg = preset("tiny")
    text = fusesoc_core(unit, cfg, "out.v")
    assert text.startswith("CAPI=2:\n")
    core = _load_core(text)
    assert core["name"] == f"dstar:dstar:{unit}_tiny:{_version()}"
    assert cfg.hash() in core["description"]
    assert core["filesets"] == {"rtl": {"files": ["out.v"], "file_type": "verilogSource"}}
    targets = core["targets"]
    assert set(targets) == {"default", "sim", "lint"}
    for t in targets.values():
        assert t["toplevel"] == f"dstar_{unit}" and t["filesets"] == ["rtl"]
    assert targets["sim"]["default_tool"] == "icarus"
    assert set(targets["sim"]["tools"]) == {"icarus", "verilator"}
    assert targets["lint"]["default_tool"] == "verilator"
    assert targets["lint"]["tools"]["verilator"]["mode"] == "lint-only"


# ---------------------------------------------------------------------------- determinism
_DUMP = ("import hashlib, sys; from dstar_rtl.gen.export import c_header, fusesoc_core; "
         "from dstar_rtl.golden.config import preset; cfg = preset('tiny'); "
         "print(hashlib.sha256(''.join(c_header(u, cfg) + fusesoc_core(u, cfg, 'out.v') "
         "for u in sys.argv[1:]).encode()).hexdigest())")


def test_same_configuration_gives_the_same_bytes():
    import hashlib
    cfg = preset("tiny")
    texts = [c_header(u, cfg) + fusesoc_core(u, cfg, "out.v") for u in UNITS]
    assert texts == [c_header(u, preset("tiny")) + fusesoc_core(u, preset("tiny"), "out.v")
                     for u in UNITS]
    # Another process with another hash seed (set and dict order, object ids) agrees.
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    proc = subprocess.run([sys.executable, "-c", _DUMP, *UNITS], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == hashlib.sha256("".join(texts).encode()).hexdigest()
    # A different configuration is a different header and core.
    other = preset("tiny", pe_stages=2)
    assert c_header("pe", other) != c_header("pe", cfg)
    assert fusesoc_core("pe", other, "out.v") != fusesoc_core("pe", cfg, "out.v")


# ---------------------------------------------------------------------------- the CLI
@pytest.mark.parametrize("unit", [u if u != "qpu" else pytest.param(u, marks=pytest.mark.slow)
                                  for u in UNITS])          # the QPU's header: make regress
def test_cli_writes_core_and_header_beside_the_verilog(tmp_path, capsys, unit):
    from dstar_rtl.sim.runner import simulator_path

    out = tmp_path / f"dstar_{unit}.v"
    assert main(["generate", unit, "--preset", "tiny", "--fusesoc", "--header",
                 "-o", str(out)]) == 0
    said = capsys.readouterr().out
    core, header = out.with_suffix(".core"), out.with_suffix(".h")
    assert f"{core}" in said and f"{header}" in said
    cfg = preset("tiny")
    assert header.read_text() == c_header(unit, cfg)
    assert core.read_text() == fusesoc_core(unit, cfg, out.name)
    # The header's payload widths are the widths of the Verilog ports.
    ports = {p["name"]: p["width"]
             for p in json.loads(out.with_suffix(".json").read_text())["ports"]}
    widths = {m[len("DSTAR_"):-len("_PAYLOAD_WIDTH")].lower(): int(v)
              for m, v in _defines(header.read_text()).items() if m.endswith("_PAYLOAD_WIDTH")}
    assert widths
    for port, width in widths.items():
        assert ports.get(f"{port}__payload", ports.get(port)) == width, port
    # The core's lint target, as FuseSoC runs it: verilator --lint-only with the core's options.
    lint = _load_core(core.read_text())["targets"]["lint"]
    files = [core.parent / f for f in _load_core(core.read_text())["filesets"]["rtl"]["files"]]
    proc = subprocess.run(["verilator", "--lint-only",
                           *lint["tools"]["verilator"]["verilator_options"],
                           "--top-module", lint["toplevel"], *map(str, files)],
                          capture_output=True, text=True, env={**os.environ,
                                                               "PATH": simulator_path()})
    assert proc.returncode == 0 and "%Warning" not in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("args, message", [
    (["generate", "nope"], "invalid choice: 'nope'"),
    (["generate", "qpu", "--set", "sort_n=12"], "sort_n must be a power of two >= 2, not 12"),
])
def test_cli_errors_are_one_line_and_write_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "x.v"
    assert main([*args, "--fusesoc", "--header", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and message in err
    assert list(tmp_path.iterdir()) == []


def test_cli_refuses_to_overwrite_the_verilog_with_an_artefact(tmp_path, capsys):
    out = tmp_path / "x.h"
    assert main(["generate", "pe", "--header", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "would be overwritten" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("unit", ["core", "uart_core"])
def test_core_header_matches_the_instruction_set(tmp_path, unit):
    """The core's header carries its instruction set (opcodes, every command field, buffers,
    rows, host words per row, error codes, counters), each value checked by the compiler
    against program.isa."""
    from dstar_rtl.program import isa

    cfg = preset("tiny")
    (tmp_path / "dstar.h").write_text(c_header(unit, cfg))
    core = isa.core_for(cfg)
    checks = [(f"DSTAR_OP_{op}", i) for i, op in enumerate(isa.OPCODES)]
    for op in ("LOAD", "QUANT", "GEMM", "VROW"):
        off = 0
        for name, w, dims, _s in isa.header_layout() + isa.cmd_layout(cfg, op):
            if name not in ("op", "wait", "signal"):
                tag = f"DSTAR_CMD_{op}_{'STRIDE' if name == 'C' else name.upper()}"
                checks += [(f"{tag}_OFFSET", off), (f"{tag}_WIDTH", w)]
            off += w * prod(dims)
    for i, b in enumerate(isa.BUFFERS):
        checks += [(f"DSTAR_BUF_{b}", i), (f"DSTAR_BUF_{b}_ROWS", isa.buffer_depth(core, b)),
                   (f"DSTAR_BUF_{b}_WORDS_PER_ROW", isa.host_words_per_row(cfg, b))]
    checks += [(f"DSTAR_ERR_{e.upper()}", i) for i, e in enumerate(isa.ERRORS)]
    checks += [(f"DSTAR_CNT_{c.upper()}", i) for i, c in enumerate(isa.COUNTERS)]
    prog = _compile(tmp_path, _program("dstar.h", checks), "c11")
    assert prog.returncode == 0, prog.stderr
    d = _defines(c_header(unit, cfg))
    assert ("DSTAR_LINK_CORE_CMD_PORT" in d) == (unit == "uart_core")
