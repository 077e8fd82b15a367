"""The DRAM behind the core's DRAM port, as the ISA executor and the host see it: a byte
memory of the port's address space (``2**DRAM_ADDR_BITS`` beats), zero where nothing was
written, grown as it is written (docs/core.md §9).

The core moves rows between its buffers and this memory with DLOAD and DSTORE
(:mod:`program.isa`, "DRAM image"); the host writes the model into it before a run and reads
results back (:meth:`Dram.write`, :meth:`Dram.read`). The RTL's testbenches hold the same bytes
in cocotbext-axi's AXI RAM.
"""

from __future__ import annotations

__all__ = ["Dram"]


class Dram:
    """A byte-addressed memory of ``size`` bytes (``beat_bytes · 2**DRAM_ADDR_BITS`` for a
    port), zero until written."""

    def __init__(self, size: int):
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive number of bytes, not {size!r}")
        self.size = size
        self._mem = bytearray()

    def _check(self, addr: int, n: int):
        if addr < 0 or n < 0 or addr + n > self.size:
            raise ValueError(f"DRAM bytes {addr}..{addr + n - 1} outside 0..{self.size - 1}")

    def write(self, addr: int, data: bytes):
        """Write ``data`` from byte ``addr``."""
        self._check(addr, len(data))
        end = addr + len(data)
        if end > len(self._mem):
            self._mem.extend(bytes(end - len(self._mem)))
        self._mem[addr:end] = data

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes from byte ``addr`` (zeros past what was ever written)."""
        self._check(addr, n)
        out = bytes(self._mem[addr:addr + n])
        return out + bytes(n - len(out))

    @property
    def used(self) -> int:
        """One past the highest byte ever written."""
        return len(self._mem)
