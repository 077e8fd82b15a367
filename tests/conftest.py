"""A short wall time on few cores.

- Test ordering: the simulator runs (marked ``cocotb``), whose model builds take the longest,
  start first, so that the many short tests fill the cores while the last builds finish instead
  of after them (pytest-xdist hands tests out in collection order).
- One BLAS thread per process: each pytest-xdist worker (and every simulator or ``dstar``
  process it starts) already has a core to itself; OpenBLAS's own threads would spin on the
  other worker's core (a float DiT's sampling took twice as long with them). Set here, before
  the workers start, unless the environment says otherwise.
"""

import os

import pytest

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.get_closest_marker("cocotb") is None)


@pytest.fixture(autouse=True)
def _no_library_beside_the_project(request, tmp_path_factory, monkeypatch):
    """The fast tier sees what a user's clone sees: no standard-cell library beside the project
    (``../shared`` is a developer's, never a user's), whether or not this checkout has one. Tests
    that need a library pass their own (``tests/data/tiny_cells.lib``); the slow tier (``make
    regress``) measures on the real Nangate45 and keeps the default. ``.ci/run`` proves the rest,
    subprocesses included, in a clone with nothing beside it."""
    if request.node.get_closest_marker("slow") is None:
        import dstar_rtl.flows.liberty
        missing = tmp_path_factory.getbasetemp() / "no-shared" / "nangate45_typ.lib.gz"
        monkeypatch.setattr(dstar_rtl.flows.liberty, "NANGATE", missing)
