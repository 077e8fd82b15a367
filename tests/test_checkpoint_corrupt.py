"""Damaged checkpoints given to ``dstar sample --weights`` (models/checkpoint.py): every truncated
or structurally corrupted copy of a real checkpoint, in each supported format, is one line
naming the file and what is wrong, exit status 2, nothing written. A corrupt ``.safetensors``
used to end in a traceback from Rust (``SafetensorError: ... header too large``) and an
``.npz`` that is no zip archive in NumPy's advice to load it with ``allow_pickle``; an
``.npz`` cut short, in a ``BadZipFile`` or ``EOFError`` traceback.

The checkpoint is the tiny random-weight DiT exported by the project's own writer
(:func:`models.checkpoint.export_checkpoint`). A bit flip may leave a valid file with other
numbers (the zip's CRC covers every ``.npz`` member's bytes, not its directory's slack; a
``.safetensors`` file has no checksum): such a file is accepted (or refused by a later check
of the numbers, such as a weight too large for the configuration). To keep the test fast the
sampling itself is replaced by a sentinel: reaching it means the checks passed.
"""

import numpy as np
import pytest

import dstar_rtl.app.cli
import dstar_rtl.bench.sample
from dstar_rtl.models.checkpoint import export_checkpoint
from dstar_rtl.models.dit import DIT_MODELS, init_params

SPEC = DIT_MODELS["tiny"]


class Loaded(Exception):
    """The command's checks accepted the file and the sampling would start."""


def _formats():
    out = [".npz", ".safetensors"]
    try:
        import torch  # noqa: F401  (the .pt format needs the `torch` extra)
        out.append(".pt")
    except ImportError:
        pass
    return out


@pytest.fixture(params=_formats())
def checkpoint(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / f"tiny{request.param}"
    export_checkpoint(SPEC, init_params(SPEC, 0), path)
    return path


@pytest.fixture(autouse=True)
def no_sampling(monkeypatch):
    def loaded(*a, **k):
        raise Loaded()
    monkeypatch.setattr(dstar_rtl.bench.sample, "run_samples", loaded)


def _sample(capsys, path, out):
    """``dstar sample --weights path``: (exit status, stderr), or (None, stderr) when the
    checks passed."""
    argv = ["sample", "--backend", "float", "--weights", str(path), "--heads", str(SPEC.heads),
            "--preset", "tiny", "--steps", "1", "--labels", "0", "--out", str(out)]
    try:
        rc = dstar_rtl.app.cli.main(argv)
    except Loaded:
        rc = None
    cap = capsys.readouterr()
    assert cap.out == ""
    return rc, cap.err


def _refused(rc, err, path, out):
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith(f"dstar: error: --weights: {path}: "), err
    assert "allow_pickle" not in err and "Traceback" not in err
    assert not out.exists()


def test_the_intact_checkpoint_is_accepted(checkpoint, tmp_path, capsys):
    rc, err = _sample(capsys, checkpoint, tmp_path / "out")
    assert rc is None, err


def test_every_truncation_is_one_line(checkpoint, tmp_path, capsys):
    data = checkpoint.read_bytes()
    n = len(data)
    for cut in sorted({0, 1, 2, 4, 7, 8, 9, 16, 64, 200, n // 3, n // 2, n - 200, n - 22, n - 1}):
        path = tmp_path / f"cut{cut}{checkpoint.suffix}"
        path.write_bytes(data[:cut])
        out = tmp_path / f"out{cut}"
        rc, err = _sample(capsys, path, out)
        _refused(rc, err, path, out)


def test_a_bit_flip_is_accepted_or_one_line(checkpoint, tmp_path, capsys):
    """Single-bit flips over the whole file, the headers (first and last 300 bytes) densely:
    each gives a file that loads (other numbers) or the one line; most break the structure."""
    data = checkpoint.read_bytes()
    n = len(data)
    rng = np.random.default_rng(25)
    where = sorted({*range(0, min(n, 300), 7), *range(max(0, n - 300), n, 7),
                    *rng.integers(0, n, 40).tolist()})
    refused = 0
    for k, pos in enumerate(where):
        b = bytearray(data)
        b[pos] ^= 1 << int(rng.integers(8))
        path = tmp_path / f"flip{pos}{checkpoint.suffix}"
        path.write_bytes(bytes(b))
        out = tmp_path / f"out{k}"
        rc, err = _sample(capsys, path, out)
        if rc is None or not err.startswith("dstar: error: --weights: "):
            # A still-valid file with other numbers: the sampling would start, or a later check
            # refuses them (a weight too large for the configuration), in one line.
            assert rc is None or (rc == 2 and err.count("\n") == 1), err
            assert not out.exists()
            continue
        _refused(rc, err, path, out)
        refused += 1
    assert refused >= len(where) // 4, (refused, len(where))


def test_a_file_of_another_format_is_one_line(tmp_path, capsys):
    """An .npy, a text file and a pickle, each named .npz: one line, nothing unpickled."""
    import pickle

    cases = {"array.npz": lambda f: np.save(f, np.zeros(3)),
             "text.npz": lambda f: f.write(b"blocks.0.attn.qkv.weight = 1\n"),
             "pickle.npz": lambda f: pickle.dump({"x": np.zeros(3)}, f)}
    for name, write in cases.items():
        path = tmp_path / name
        with open(path, "wb") as f:
            write(f)
        rc, err = _sample(capsys, path, tmp_path / "out")
        _refused(rc, err, path, tmp_path / "out")
        assert "not a NumPy .npz archive" in err
