"""Formal checks of the QPU sorter and packer (properties in :mod:`sim.formal_props`).

Each test runs SymbiYosys (yowasp-sby + smtbmc + boolector, or z3 where named) on a wrapper around
the unchanged RTL unit; ``make formal`` runs all of them, ``make test`` the ones not marked slow.
Two tests inject a bug and require the checker to find it, so a checker that passes everything
cannot go unnoticed.

Sorter coverage: full key width (``exp_width + 1 = 6`` bits) for n = 4 and 8; 1-bit keys for
n = 16 and 32, which by the 0-1 principle proves that the network sorts keys of any width (the
comparators themselves are exercised at full width by the n <= 8 checks, same code). Payload
routing (each output carries its own key, payloads a permutation) is checked at the same widths,
and the output equals the golden network's exactly (ties included) with narrow keys up to n = 32.
Packer: bounded (BMC) over a chunk of ``sort_n`` groups plus the hand-off to the next chunk.
"""

import pytest

from golden.bitonic import network
from golden.config import preset
from sim.formal import run_formal
from sim.formal_props import PackerProps, SorterProps, reverse_comparator

KEY_WIDTH = preset("tiny").exp_width + 1      # the QPU's sort key: valid bit over the exponent
ALL = ("sorted", "keys", "perm", "golden")


def check(wrapper, name, mode="bmc", depth=None, engine=None, expect="PASS"):
    res = run_formal(wrapper, wrapper.ports(), name=name, mode=mode, depth=depth, engine=engine)
    assert res.status == expect, str(res)
    return res


# ---------------------------------------------------------------------------------------- sorter

def test_sorter_combinational_n4_prove_z3():
    """All stages before one register (latency 1): an unbounded proof, through z3."""
    w = SorterProps(4, KEY_WIDTH, stall=True)
    check(w, "sorter_comb_n4_z3", mode="prove", depth=2, engine="smtbmc z3")


@pytest.mark.parametrize("n", [4, 8])
def test_sorter_pipelined_full_width(n):
    """The QPU's configuration (a register after every stage), full key width, streaming."""
    checks = ALL if n == 4 else ("sorted", "keys", "perm")
    w = SorterProps(n, KEY_WIDTH, stages_per_register=1, stall=False, checks=checks)
    check(w, f"sorter_pipe_n{n}", depth=w.latency + 1)


@pytest.mark.parametrize("n,spr", [(8, 1), (8, 2), (8, 4)])
def test_sorter_back_pressure(n, spr):
    """Free valid and ready: the global stall, ready, hold under stall and data all follow the
    specified pipeline (1-bit keys: the enables do not depend on the data width)."""
    w = SorterProps(n, 1, stages_per_register=spr, stall=True, checks=ALL)
    check(w, f"sorter_stall_n{n}_spr{spr}", depth=w.latency + 3)


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
    """Any stream of sorted chunks, free back-pressure; depth covers a chunk of n one-lane groups
    plus the hand-off to the next chunk."""
    w = PackerProps(preset("tiny", sort_n=n, lanes=lanes))
    check(w, f"packer_n{n}_l{lanes}", depth=n + 4)


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
