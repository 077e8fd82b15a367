"""One module per ``dstar`` subcommand: its parser (``register``) and what it runs; the
measurements of ``dstar measure NAME`` live in :mod:`app.benches`, :mod:`app.reports` and
:mod:`app.sweeps`."""
