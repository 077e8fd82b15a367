"""``preset`` of the presets' ``initial`` variant, for the tests that check by hand the datapath
they name (slice digits, forwarded operands, no open groups, thresholds 1, 7, 31, one static
base); the default datapath is checked end to end by the core's and the sampling tests."""

from functools import partial

from dstar_rtl.golden.config import preset as _preset

preset = partial(_preset, variant="initial")
