"""The results schema: every measurement's typed result (a frozen dataclass with a kind, a schema
version and its provenance, :mod:`results.base`), the quantities several hold
(:mod:`results.quantities`), written in the one JSON format and loaded back as their type by any
reader, the application's renderers and the models below it alike."""
