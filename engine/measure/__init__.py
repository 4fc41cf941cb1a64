"""Measurement: the monitor sidecar (NVML, host CPU and memory, energy over the window),
the training spans and the machine provenance. Torch-free.
"""
