"""Test ordering for a short wall time on few cores: the simulator runs (marked ``cocotb``), whose
model builds take the longest, start first, so that the many short tests fill the cores while
the last builds finish instead of after them (pytest-xdist hands tests out in collection
order)."""


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.get_closest_marker("cocotb") is None)
