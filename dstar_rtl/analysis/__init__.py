"""Analyses of the numerics on the models: the FMDQ and SAR profile and the operating-point
sweep (:mod:`analysis.profile`), layer traces (:mod:`analysis.trace`) and the VPU's accuracy
against float (:mod:`analysis.vpu_accuracy`). Depends on :mod:`golden` and :mod:`models`."""
