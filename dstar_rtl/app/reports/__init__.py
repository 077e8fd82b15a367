"""The report writers: ``dstar measure NAME`` flows and the Markdown, JSON and plots they write
into ``reports/`` (and ``dstar report``'s REPORT.md)."""
