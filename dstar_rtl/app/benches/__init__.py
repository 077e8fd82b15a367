"""The benches: runs of the generated RTL and of the golden models that measure something
(cycles, rates, the whole DiT sampled by a backend, the cycle model's validation)."""
