"""Paths that the package derives from its own place in the checkout (they moved with the
package into ``dstar_rtl/``): the standard-cell library beside the checkout, never inside it,
and the default operating point in the checkout's ``reports/``."""

from dstar_rtl.gen.paths import REPORTS, ROOT


def test_the_default_library_is_looked_for_beside_the_checkout():
    from dstar_rtl.flows.liberty import default_library

    assert default_library().relative_to(ROOT.parent).parts[:3] == ("shared", "pdk", "nangate45")
    assert (ROOT / "dstar_rtl").is_dir() and (ROOT / "pyproject.toml").is_file()


def test_the_default_operating_point_is_the_checkouts():
    from dstar_rtl.analysis.profile import load_operating_point

    assert load_operating_point() == load_operating_point(REPORTS / "profile_sweep.json")
