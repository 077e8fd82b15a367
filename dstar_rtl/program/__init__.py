"""The DSTAR core's software: its instruction set (:mod:`program.isa`), the block and
whole-model compilers (:mod:`program.compiler`, :mod:`program.model`), the ISA-level executor
(:mod:`program.executor`) and the host loop that samples a DiT on the core
(:mod:`program.sampling`). Depends on the numerics (:mod:`golden`) and the models
(:mod:`models`); the RTL depends on its ISA."""
