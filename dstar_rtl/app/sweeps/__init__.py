"""The design-space sweep (``dstar sweep``): area, throughput and per-µm² of DSTAR against INT8
over array sizes, and its report."""
