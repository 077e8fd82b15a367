"""Amaranth shapes of the stream records, built from :mod:`golden.layouts` (the single source).

A golden field ``(name, width, dims, signed)`` becomes a member of a ``data.StructLayout``; array
dimensions become nested ``data.ArrayLayout`` with the first index outermost, so bit positions are
exactly those of :func:`golden.layouts.pack`.
"""

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from dstar_rtl.golden import layouts as gl

__all__ = ["to_layout", "group_layout", "drain_layout", "weight_load_layout",
           "baseline_group_layout", "gmem_layout"]


def _shape(width, dims, is_signed):
    shape = signed(width) if is_signed else unsigned(width)
    for n in reversed(dims):
        shape = data.ArrayLayout(shape, n)
    return shape


def to_layout(fields) -> data.StructLayout:
    return data.StructLayout({name: _shape(w, d, s) for name, w, d, s in fields})


def group_layout(cfg):
    return to_layout(gl.group_layout(cfg))


def baseline_group_layout(cfg):
    return to_layout(gl.baseline_group_layout(cfg))


def gmem_layout(cfg):
    """The core's GMEM row for ``cfg``'s datapath (:func:`golden.layouts.gmem_layout`)."""
    return to_layout(gl.gmem_layout(cfg))


def drain_layout(cfg, baseline=False):
    return to_layout(gl.drain_layout(cfg, baseline))


def weight_load_layout(cfg):
    return to_layout(gl.weight_load_layout(cfg))
