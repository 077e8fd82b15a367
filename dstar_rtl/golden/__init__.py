"""The numerics reference: configuration and presets, FMDQ quantization and its statistics, the
group schedule and bitonic order, the differential layers, SAR, the VPU's arithmetic, the
integer DiT block and the test vectors of the units. Imports nothing else of the project."""
