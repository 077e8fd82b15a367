"""One renderer: a result's Markdown from a Jinja2 template (issue 48, step 3).

The prose of a report lives in ``app/templates/<name>.md`` and takes every number from the
result it is given (``r``) and the tables its measurement declares (Python functions that
return :func:`gen.tables.md_table` text, passed in by name); nothing is typed into the prose.
:func:`render` fills a template: undefined names are errors (a renamed field breaks the
template's test, not a report), blocks leave no blank lines of their own
(``trim_blocks``/``lstrip_blocks``), and the text ends as the template does.

Filters every template has: ``num(v, digits=0)`` (thousands separators, ``–`` for ``None``),
``pct(v, digits=1)`` (a share as a percentage), ``kib(v)`` (bytes as KB), ``tick(v)`` (as
code: `` `v` ``).

>>> render_string("{{ r.x | num(1) }} and {{ r.y | pct }}", r=dict(x=1234.56, y=0.25))
'1,234.6 and 25.0 %'
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["render", "render_string"]


def _num(v, digits: int = 0) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def _pct(v, digits: int = 1) -> str:
    return "–" if v is None else f"{100 * v:.{digits}f} %"


@lru_cache(maxsize=1)
def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("dstar_rtl.app", "templates"),
                      undefined=StrictUndefined, autoescape=False, trim_blocks=True,
                      lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(num=_num, pct=_pct, kib=lambda v: f"{v // 1024:,}",
                       tick=lambda v: f"`{v}`")
    return env


def render(name: str, **context) -> str:
    """``app/templates/<name>.md`` filled with ``context``."""
    return _environment().get_template(f"{name}.md").render(**context)


def render_string(text: str, **context) -> str:
    """A template given as text (tests, one-line fragments)."""
    return _environment().from_string(text).render(**context)
