"""The output files of a ``dstar`` command: checked before any work, written together.

Every command names its outputs before it starts. :func:`check_outputs` (files) and
:func:`check_output_dir` (a folder the command writes into) refuse, with one line
(:class:`gen.errors.UserError`, exit status 2) and before anything is written, a destination that
cannot be written: an existing folder where a file goes, a file where a folder goes, a folder
without write permission, two outputs of one command that name the same file, an output that
is one of the command's inputs. A missing folder is not an error: it is created when the outputs
are written.

:func:`write_together` then writes all of a command's outputs at once: each to a temporary file
in its destination folder (creating missing folders), and only when every one of them is
complete renames them all into place. On any failure (a writer raises, the disk is full) it
removes the temporaries and the folders it created, so the outputs appear together or not at
all; an OS error becomes :class:`gen.errors.WorkError` (one line, exit status 1: the input was
valid, the work failed).

**The command line in every JSON output.** :func:`record_command` (called by ``dstar``'s
``main``) sets the command line of the run; :func:`write_together` adds it as ``"command"`` to
every JSON object it writes to a ``.json`` path that does not hold one already (a command that
states its own canonical form, e.g. ``dstar bench`` with every default spelled out, keeps it),
so that every report names the command that made it. A command whose JSON must not depend on
how it was called (``dstar generate``'s manifest: the same configuration, the same bytes)
passes ``record_command=False``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from .errors import UserError, WorkError

__all__ = ["check_outputs", "check_output_dir", "write_together", "json_text", "read_json",
           "save_png", "png_writer", "record_command", "command_line"]

_COMMAND: list = [None]        # the running command line (record_command)


def record_command(argv) -> None:
    """Record the running command line, ``dstar`` followed by ``argv`` (shell-quoted), for the
    JSON outputs :func:`write_together` writes; None clears it."""
    import shlex

    _COMMAND[0] = None if argv is None else shlex.join(["dstar", *map(str, argv)])


def command_line():
    """The command line :func:`record_command` recorded, or None."""
    return _COMMAND[0]


def _with_command(text: str) -> str:
    """``text`` (a JSON document) with ``"command"`` added to its top-level object, its indent
    kept; unchanged when it is not an object, already names a command, or none is recorded."""
    if _COMMAND[0] is None:
        return text
    try:
        obj = json.loads(text)
    except ValueError:
        return text
    if not isinstance(obj, dict) or "command" in obj:
        return text
    lines = text.split("\n", 2)
    indent = None
    if text.startswith("{\n") and len(lines) > 1:
        indent = len(lines[1]) - len(lines[1].lstrip(" ")) or None
    obj["command"] = _COMMAND[0]
    out = json.dumps(obj, indent=indent)          # a NaN the writer let through stays
    return out + "\n" if text.endswith("\n") else out


def json_text(obj) -> str:
    """``obj`` as the JSON text of a ``dstar`` result file, the one format every command writes
    (issue 48): indented by one space, paths inside the checkout relative to it
    (:func:`gen.paths.relative_paths`), a non-finite figure (NaN, infinity) written as ``null``,
    other objects (paths) as their text."""
    from dstar_rtl.gen.paths import relative_paths
    return json.dumps(relative_paths(_finite(obj)), indent=1, allow_nan=False, default=str) \
        + "\n"


def data_json(obj, **options) -> str:
    """``obj`` as the JSON of a job file, a cache entry or a key (what a testbench or a later
    run reads back, not a result): ``json.dumps`` with ``options``, in one place."""
    return json.dumps(obj, **options)


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def read_json(path, what: str):
    """The JSON in ``path``, an input of a command: a file that cannot be read or is not JSON is
    :class:`UserError` (one line, naming ``what`` and the file)."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise UserError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UserError(f"{what}: {path} is not JSON: {exc}") from None


def save_png(fig, out, dpi=100):
    """A ``matplotlib.figure.Figure`` as PNG to ``out`` (a path or a binary file) at ``dpi``
    (``"figure"``: the figure's own), then cleared (a figure is drawn once)."""
    try:
        fig.savefig(out, format="png", dpi=dpi)
    finally:
        fig.clear()


def png_writer(fig, dpi=100):
    """A :func:`write_together` writer of ``fig`` as PNG (:func:`save_png`; ``None``: no
    figure)."""
    return None if fig is None else (lambda f: save_png(fig, f, dpi))


def _existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of ``path`` (itself excluded) that exists, as an absolute path."""
    p = Path(os.path.abspath(path)).parent
    while not os.path.lexists(p):
        p = p.parent
    return p


def _check_folder(path, target: Path):
    """Refuse ``target`` (an output, or a folder to create) when the folder it goes into cannot
    be made or written; ``path`` is what the user named, for the message."""
    anc = _existing_ancestor(target)
    if not anc.is_dir():
        raise UserError(f"cannot write {path}: {anc} is a file, not a directory")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {path}: no permission to write in {anc}")


def check_outputs(*paths, inputs=()) -> list:
    """Refuse, before any work, output files that the command could not write.

    Parameters
    ----------
    *paths : str or os.PathLike or None
        The command's output files (``None``: an output not asked for).
    inputs : iterable of str or os.PathLike or None
        The command's input files: no output may be one of them.

    Returns
    -------
    list of Path
        The outputs that were named, in order.

    Raises
    ------
    gen.errors.UserError
        One line naming the output and the reason: it is a directory, its folder cannot be
        created or written, two outputs are the same file, or it is an input.
    """
    named = [Path(p) for p in paths if p is not None]
    seen = {}
    ins = {os.path.realpath(i): Path(i) for i in inputs if i is not None}
    for p in named:
        if p.is_dir():
            raise UserError(f"cannot write {p}: it is a directory")
        _check_folder(p, p)
        real = os.path.realpath(p)
        if real in seen:
            raise UserError(f"cannot write {p}: two outputs of this command are the same file"
                            if str(seen[real]) == str(p) else
                            f"cannot write {p}: it is the same file as the output {seen[real]}")
        if real in ins:
            raise UserError(f"cannot write {p}: it is the input {ins[real]}")
        seen[real] = p
    return named


def check_output_dir(path) -> Path:
    """Refuse, before any work, an output folder the command could not create or write into.

    Parameters
    ----------
    path : str or os.PathLike
        The folder; it need not exist (it is created when the outputs are written).

    Returns
    -------
    Path

    Raises
    ------
    gen.errors.UserError
        ``path`` is an existing file, an ancestor is a file, or the folder that would hold it
        is not writable.
    """
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise UserError(f"cannot write into {p}: it is a file, not a directory")
        if not os.access(p, os.W_OK | os.X_OK):
            raise UserError(f"cannot write into {p}: no permission")
        return p
    _check_folder(p, p)
    return p


def _file_mode() -> int:
    """Permissions of a newly created file under the current umask (``mkstemp`` makes 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _make_folders(folder: Path, created: list):
    """Create ``folder`` and its missing ancestors, appending each one made to ``created``."""
    missing = []
    p = folder
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        os.mkdir(d)
        created.append(d)


def _emit(f, content):
    if callable(content):
        content(f)
    elif isinstance(content, str):
        f.write(content.encode())
    else:
        f.write(content)


def write_together(files: dict, record_command: bool = True) -> list:
    """Write every output of one command, all or none.

    Parameters
    ----------
    files : dict
        ``{path: content}``; ``content`` is ``str`` (written as UTF-8), ``bytes``, or a
        function that writes to the binary file object it is given (e.g. ``savefig``). An entry
        whose path or content is ``None`` is skipped.
    record_command : bool
        Add the recorded command line to each JSON object written as ``str`` to a ``.json``
        path (module docstring).

    Returns
    -------
    list of Path
        The paths written, in order.

    Raises
    ------
    gen.errors.WorkError
        An OS error while writing (one line naming the file). Any other exception of a writer
        propagates; in both cases no output and no temporary file is left, and folders this
        call created are removed.

    Notes
    -----
    The renames come last, once every temporary file is complete beside its destination; on
    one file system they do not fail short of a folder being removed meanwhile.
    """
    items = [(Path(p), _with_command(c) if record_command and isinstance(c, str)
              and str(p).endswith(".json") else c)
             for p, c in files.items() if p is not None and c is not None]
    reals = [os.path.realpath(p) for p, _ in items]
    if len(set(reals)) != len(reals):
        raise ValueError(f"write_together: two outputs name the same file: {files}")
    created, temps, done = [], [], False
    current = None
    try:
        for path, content in items:
            current = path
            _make_folders(Path(os.path.abspath(path)).parent, created)
            fd, tmp = tempfile.mkstemp(prefix=".dstar-", suffix=".tmp",
                                       dir=os.path.dirname(os.path.abspath(path)))
            temps.append(tmp)
            with os.fdopen(fd, "wb") as f:
                _emit(f, content)
            os.chmod(tmp, _file_mode())
        for (path, _), tmp in zip(items, temps):
            current = path
            os.replace(tmp, path)
        done = True
    except OSError as exc:
        raise WorkError(f"cannot write {current}: {exc.strerror or exc}") from None
    finally:
        if not done:
            for tmp in temps:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
            for d in reversed(created):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
    return [p for p, _ in items]
