"""The design-space sweep of ``dstar sweep``: the configurations and their syntheses
(:mod:`design`), the area model (:mod:`area`), the throughput model on the measured bench
(:mod:`throughput`), the Pareto front and crossover (:mod:`figures`)."""
