"""One module per ``dstar`` subcommand: its parser (``register``) and what it runs; the
measurements of ``dstar measure NAME`` live in :mod:`dstar.benches`, :mod:`dstar.reports` and
:mod:`dstar.sweeps`."""
