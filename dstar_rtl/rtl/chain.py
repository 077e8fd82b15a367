"""QPU feeding the MPU directly: differences in, accumulators out (the FMDQ matmul path)."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from dstar_rtl.golden.config import Config

from .mpu import MPU
from .params import check_config
from .qpu import QPU

__all__ = ["QuantizedMatmul"]


class QuantizedMatmul(wiring.Component):
    """:class:`~rtl.qpu.QPU` → :class:`~rtl.mpu.MPU`: each tile of differences becomes one tile
    of accumulators ``Σ_c q[i,c] · 2**e[c] · W[c, j]``.

    Members are the QPU's ``subch``, ``config``, ``recon``, ``counters``, ``counters_clear``,
    ``config_error``, ``overflow`` and the MPU's ``wload`` and ``drain``.

    Latency: the QPU's plus the MPU's; throughput one group per cycle.
    """

    def __init__(self, cfg: Config):
        check_config(cfg)
        self._cfg = cfg
        self._qpu = QPU(cfg)
        self._mpu = MPU(cfg)
        q, p = self._qpu.signature.members, self._mpu.signature.members
        super().__init__({
            "subch": q["subch"], "config": q["config"], "recon": q["recon"],
            "counters": q["counters"], "counters_clear": q["counters_clear"],
            "config_error": q["config_error"], "overflow": q["overflow"],
            "wload": p["wload"], "drain": p["drain"],
        })

    @property
    def cfg(self):
        return self._cfg

    def elaborate(self, platform):
        m = Module()
        m.submodules.qpu = qpu = self._qpu
        m.submodules.mpu = mpu = self._mpu
        wiring.connect(m, qpu.groups, mpu.groups)
        for name in ("subch", "config", "wload"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(
                qpu if name != "wload" else mpu, name))
        wiring.connect(m, mpu.drain, wiring.flipped(self.drain))
        wiring.connect(m, qpu.recon, wiring.flipped(self.recon))
        m.d.comb += [self.counters.eq(qpu.counters), qpu.counters_clear.eq(self.counters_clear),
                     self.config_error.eq(qpu.config_error), self.overflow.eq(qpu.overflow)]
        return m
