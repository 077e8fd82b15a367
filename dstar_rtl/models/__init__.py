"""The diffusion transformers: the reference DiT in float (:mod:`models.dit`) and in the integers
the core runs (:mod:`models.dit_int_model`), checkpoints in the reference layout
(:mod:`models.checkpoint`), the trained digits DiT and its data (:mod:`models.digits`,
``models/data``), its training (:mod:`models.train_dit`) and the workloads drawn from them.
Depends on the numerics (:mod:`golden`) only."""
