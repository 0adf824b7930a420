"""GPU semantics for the trace: simulated CUDA on any machine, host-device syncs and copy hazards.

`shims` (build/cache/load of the C++ shims) imports no torch: the worker uses it before torch is
imported. Everything else in this package imports torch.
"""
