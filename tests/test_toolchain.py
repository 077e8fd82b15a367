"""The setup's warm-up of the WebAssembly tools: it detects a tool that still compiles, and fails
when the cache does not keep the compiled code (checked with a stand-in tool, not the real ones:
those are warm after `make setup`)."""

import importlib
import importlib.util

import pytest

from dstar_rtl.sim import toolchain
from dstar_rtl.sim.toolchain import FIRST_RUN_MESSAGE, TOOLS, Tool, needs_compile, warm


def _fake(tmp_path, monkeypatch, body):
    (tmp_path / "fake_yowasp.py").write_text(f"import sys\ndef run(argv):\n{body}\n    return 0\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return Tool("fake", "fake_yowasp", "run", ("-V",))


def test_a_tool_that_compiles_on_every_call_is_refused(tmp_path, monkeypatch):
    tool = _fake(tmp_path, monkeypatch,
                 f"    print('{FIRST_RUN_MESSAGE} fake. This might take a while...', "
                 "file=sys.stderr)")
    assert needs_compile(tool)
    with pytest.raises(RuntimeError, match="fake: the YoWASP cache did not keep"):
        warm([tool], jobs=1)


def test_a_tool_that_compiles_once_is_warmed(tmp_path, monkeypatch, capsys):
    stamp = tmp_path / "compiled"
    tool = _fake(tmp_path, monkeypatch,
                 f"    import pathlib\n    p = pathlib.Path({str(stamp)!r})\n"
                 f"    if not p.exists():\n"
                 f"        print('{FIRST_RUN_MESSAGE} fake.', file=sys.stderr)\n"
                 f"        p.write_text('')")
    assert set(warm([tool], jobs=1)) == {"fake"}
    assert not needs_compile(tool)
    assert "toolchain: fake ready" in capsys.readouterr().err


def test_every_tool_entry_point_exists():
    """Each listed tool names a real function of an installed yowasp package."""
    for tool in TOOLS:
        assert importlib.util.find_spec(tool.module), tool
        assert callable(getattr(importlib.import_module(tool.module), tool.function)), tool


def test_check_mode_reports_cold_tools(monkeypatch, capsys):
    monkeypatch.setattr(toolchain, "needs_compile", lambda t: t.name == "boolector")
    assert toolchain.main(["--check"]) == 1
    assert "not yet compiled: boolector" in capsys.readouterr().err
