"""The DSTAR application: the ``dstar`` command line, the benches, the sweeps and every report
writer. It sits on top of the layers (``golden`` ← ``rtl`` ← ``gen`` ← {``fpga``, ``sim``} ←
``tb``) and may import any of them; none of them imports it (``tests/test_layers.py``)."""
