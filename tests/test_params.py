"""Every component of rtl/ takes its parameters after ``cfg`` (or its first, defining one) by
keyword only, and refuses an impossible value at construction with a message that names the
parameter and what it allows (rtl/params.py)."""

import gc

import pytest
from amaranth.hdl import unsigned

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.vpu import vpu_tables
from dstar_rtl.program.isa import core_for
from dstar_rtl.rtl.array import ArrayUnit, SystolicArray
from dstar_rtl.rtl.chunker import ChunkAssembler, descriptor_layout
from dstar_rtl.rtl.core import Core
from dstar_rtl.rtl.core_abuf import SkewedBuffer
from dstar_rtl.rtl.core_dispatch import Dispatcher
from dstar_rtl.rtl.core_layouts import MemRead, MemWrite
from dstar_rtl.rtl.core_matrix import MatrixEngine
from dstar_rtl.rtl.core_quant import QuantEngine
from dstar_rtl.rtl.core_vector import VectorEngine
from dstar_rtl.rtl.mpu import MPU
from dstar_rtl.rtl.packer import Packer
from dstar_rtl.rtl.pe import Int8PE, OutputStationaryPE, SlicePE, slice_col_layout, slice_row_layout
from dstar_rtl.rtl.sorter import BitonicSorter
from dstar_rtl.rtl.stream_queue import StreamQueue
from dstar_rtl.rtl.uart_core import UartCore
from dstar_rtl.rtl.vpu import VPU
from dstar_rtl.rtl.vpu_lane import VPULane
from dstar_rtl.rtl.vpu_scalar import LayerNormRsqrt, SoftmaxRecip

pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

CFG = preset("tiny")
CORE = core_for(CFG)
T = vpu_tables(CFG)


@pytest.fixture(autouse=True)
def _collect():
    yield
    gc.collect()      # refused objects warn "created but never used" now, under the filter


def _chunk():
    return BitonicSorter(CFG.sort_n, key_width=CFG.exp_width + 1,
                         payload_shape=descriptor_layout(CFG)).chunk_layout


POSITIONAL = [
    lambda: SlicePE(CFG, True),
    lambda: Int8PE(CFG, True, True),
    lambda: OutputStationaryPE(CFG, slice_row_layout(CFG), slice_col_layout(CFG), 20, False),
    lambda: MPU(CFG, 64),
    lambda: SystolicArray(CFG, SlicePE, slice_row_layout(CFG), slice_col_layout(CFG)),
    lambda: ArrayUnit(CFG, [], SlicePE, slice_row_layout(CFG), slice_col_layout(CFG), 1),
    lambda: BitonicSorter(8, 4, unsigned(3)),
    lambda: ChunkAssembler(CFG, _chunk()),
    lambda: Packer(CFG, _chunk(), range(2)),
    lambda: Core(CFG, CORE),
    lambda: UartCore(CFG, CORE),
    lambda: Dispatcher(CFG, CORE),
    lambda: QuantEngine(CFG, CORE),
    lambda: MatrixEngine(CFG, CORE),
    lambda: VectorEngine(CFG, CORE),
    lambda: SkewedBuffer(4, 8, 16),
    lambda: VPU(CFG, T),
    lambda: VPULane(CFG, T),
    lambda: SoftmaxRecip(CFG, T),
    lambda: LayerNormRsqrt(CFG, T, 8, 8, 8),
    lambda: StreamQueue(8, 4),
]


@pytest.mark.parametrize("make", POSITIONAL)
def test_parameters_after_cfg_are_keyword_only(make):
    with pytest.raises(TypeError, match="positional argument"):
        make()


REFUSED = [
    (lambda: SlicePE(CFG, register_w=1), ValueError,
     r"register_w must be a bool \(True or False\), not 1"),
    (lambda: Int8PE(CFG, register_a=None), ValueError, "register_a must be a bool"),
    (lambda: OutputStationaryPE(CFG, row_shape=slice_row_layout(CFG),
                                col_shape=slice_col_layout(CFG), acc_width=1,
                                overflow_detect=False),
     ValueError, "acc_width must be an integer >= 2, not 1"),
    (lambda: OutputStationaryPE(CFG, row_shape=0, col_shape=slice_col_layout(CFG), acc_width=20,
                                overflow_detect=False),
     ValueError, "row_shape must be a shape of width >= 1"),
    (lambda: OutputStationaryPE(CFG, row_shape=slice_row_layout(CFG),
                                col_shape=slice_col_layout(CFG), acc_width=20,
                                overflow_detect="yes"),
     ValueError, "overflow_detect must be a bool"),
    (lambda: MPU(CFG, weight_depth=CFG.max_reduction - 1), ValueError,
     rf"weight_depth must be an integer >= {CFG.max_reduction} \(None or at least max_reduction"),
    (lambda: MPU(CFG, weight_depth=2048.0), ValueError, "weight_depth must be an integer"),
    (lambda: SystolicArray(CFG, pe_factory=3, row_shape=8, col_shape=8), ValueError,
     r"pe_factory must be callable \(a PE class\), not 3"),
    (lambda: SystolicArray(CFG, pe_factory=SlicePE, row_shape=8, col_shape=8, baseline=0),
     ValueError, "baseline must be a bool"),
    (lambda: BitonicSorter(6, key_width=4, payload_shape=3), ValueError,
     "n must be a power of two >= 2, not 6"),
    (lambda: BitonicSorter(8, key_width=0, payload_shape=3), ValueError,
     "key_width must be an integer >= 1, not 0"),
    (lambda: BitonicSorter(8, key_width=4, payload_shape=3, stages_per_register=0), ValueError,
     "stages_per_register must be an integer >= 1, not 0"),
    (lambda: BitonicSorter(8, key_width=4, payload_shape="x"), ValueError,
     "payload_shape must be a shape of width >= 1"),
    (lambda: ChunkAssembler(CFG, chunk_layout=unsigned(8)), ValueError,
     rf"chunk_layout must be a data.StructLayout {{entries: {CFG.sort_n} \(sort_n\) entries"),
    (lambda: Packer(CFG, chunk_layout=_chunk(), slot_shape=0), ValueError,
     "slot_shape must be a shape of width >= 1"),
    (lambda: Core(CFG, core={"abuf_rows": 4}), TypeError,
     "core must be a program.isa.CoreConfig"),
    (lambda: UartCore(CFG, core=None), TypeError, "core must be a program.isa.CoreConfig"),
    (lambda: Dispatcher(CFG, core=3), TypeError, "core must be a program.isa.CoreConfig"),
    (lambda: QuantEngine(None, core=CORE), TypeError, "cfg must be a golden.config.Config"),
    (lambda: MatrixEngine(CFG, core="tiny"), TypeError, "core must be"),
    (lambda: VectorEngine(CFG, core=None), TypeError, "core must be"),
    (lambda: SkewedBuffer(3, width=8, depth=16), ValueError,
     "the tile size T must be a power of two >= 2, not 3"),
    (lambda: SkewedBuffer(4, width=0, depth=16), ValueError, "width must be an integer >= 1"),
    (lambda: SkewedBuffer(4, width=8, depth=16, read_ports=0), ValueError,
     "read_ports must be an integer >= 1, not 0"),
    (lambda: VPU(CFG, tables={}), TypeError, "tables must be a golden.vpu.VPUTables"),
    (lambda: VPULane(CFG, tables=None), TypeError, "tables must be a golden.vpu.VPUTables"),
    (lambda: SoftmaxRecip(CFG, tables=1), TypeError, "tables must be"),
    (lambda: LayerNormRsqrt(CFG, tables=T, ny1_width=0, s1y1_width=8, eps_width=8),
     ValueError, "ny1_width must be an integer >= 1, not 0"),
    (lambda: MemRead(0, 8), ValueError, "depth must be an integer >= 1, not 0"),
    (lambda: MemWrite(16, -1), ValueError, "shape must be a shape of width >= 1"),
    (lambda: StreamQueue(8, depth=1), ValueError, "depth must be an integer >= 2"),
    (lambda: UartCore(CFG, core=CORE, cycles_per_bit=3), ValueError,
     "cycles_per_bit must be an integer >= 4"),
]


@pytest.mark.parametrize("make, exc, message", REFUSED)
def test_impossible_values_are_refused_at_construction(make, exc, message):
    with pytest.raises(exc, match=message):
        make()


def test_accepted_values_construct():
    """The checks let every legal value through (the units are built, never elaborated)."""
    objs = [SlicePE(CFG, register_w=False, register_a=True), MPU(CFG, weight_depth=2048),
            BitonicSorter(8, key_width=4, payload_shape=unsigned(3), stages_per_register=2),
            SkewedBuffer(4, width=8, depth=16, read_ports=1), StreamQueue(8, depth=2),
            VPU(CFG, tables=T), Core(CFG, core=CORE)]
    assert objs[1].weight_depth == 2048 and objs[2].latency == 3


def test_mem_ports_compare_by_depth_and_shape():
    assert MemRead(16, 8) == MemRead(16, 8) and MemRead(16, 8) != MemRead(32, 8)
    assert MemRead(16, 8) != MemWrite(16, 8)
    assert MemRead(16, 8).members["data"].flow.name == "In"
    assert MemWrite(16, 8).depth == 16 and repr(MemWrite(16, 8)) == "MemWrite(16, 8)"


def test_dispatcher_has_one_engine_port_per_engine():
    from dstar_rtl.rtl.core_dispatch import ENGINES, EnginePort
    dsp = Dispatcher(CFG, core=CORE)
    member = dsp.signature.members["engines"]
    assert member.signature == EnginePort() and member.dimensions == (len(ENGINES),)
    assert [dsp.engine(e) for e in ENGINES] == dsp.engines
    assert set(EnginePort().members) == {"cmd", "busy", "done", "signal", "stall"}
    assert EnginePort().members["busy"].flow.name == "In"
