"""The two errors a ``dstar`` command reports as one line (exit statuses in :mod:`app.cli`).

They live apart from :mod:`app.cli` so that library code (:mod:`gen.outputs`, which
:func:`gen.generate.generate` uses) can raise them without importing the command line.
"""

__all__ = ["UserError", "WorkError"]


class UserError(Exception):
    """A problem with the user's input: reported as one line, exit status 2."""


class WorkError(Exception):
    """A failure during the work on valid input (a tool, a check, a write): one line, exit
    status 1."""
