"""The benches: a DiT's workloads run on the generated RTL (the arrays, the QPU, the VPU, the
core, their gate-level netlists) and on the golden models, returning what they measure (cycles,
rates, events, energies, samples) as plain data. The application (:mod:`app`) types, records and
renders it; nothing here writes a report."""
