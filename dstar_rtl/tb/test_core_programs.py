"""Run a list of core programs from a file and return what they store: the harness of the
performance-model validation (``sim/perf_validate.py``).

``DSTAR_PROGRAMS`` names a JSON file ``[{"name", "runs": [{"cmds", "host", "expect",
"ignore"}]}]``. Each program starts from a reset core; its runs go in order (each ends with END).
The testbench takes every word the core stores until it reports ``done`` (and fails on one
after it), so their number is the core's own, whatever the STOREs and SKIPs of the run: it must
equal ``len(expect)``, and every stored word must equal ``expect`` (the ISA executor's words),
except the word indices in ``ignore`` (the cycle counters of a ``STORE CNT``, which the executor
leaves at 0): bit-exact results, so every measured figure belongs to a correct run. The stored
words of every run are written as JSON (``{name: [[words], ...]}``) to ``DSTAR_PROGRAMS_OUT``.
"""

import json
import os

import cocotb

from dstar_rtl.gen.outputs import data_json

from .core_tb import CoreTB


@cocotb.test()
async def programs(dut):
    tb = CoreTB(dut)
    with open(os.environ["DSTAR_PROGRAMS"]) as fh:
        progs = json.load(fh)
    result = {}
    for prog in progs:
        await tb.reset()
        outs = []
        for i, run in enumerate(prog["runs"]):
            exp = run["expect"]
            got = await tb.run(run["cmds"], run["host"])
            skip = set(run.get("ignore", ()))
            assert len(got) == len(exp), (f"{prog['name']} run {i}: {len(got)} words stored, "
                                          f"expected {len(exp)}")
            bad = [k for k, (g, e) in enumerate(zip(got, exp)) if k not in skip and g != e]
            assert not bad, (f"{prog['name']} run {i}: {len(bad)} stored words differ from the "
                             f"ISA executor, first at word {bad[0]}: {got[bad[0]]} != "
                             f"{exp[bad[0]]}")
            outs.append(got)
        result[prog["name"]] = outs
        dut._log.info(f"{prog['name']}: {len(prog['runs'])} runs checked")
    with open(os.environ["DSTAR_PROGRAMS_OUT"], "w") as fh:
        fh.write(data_json(result))
