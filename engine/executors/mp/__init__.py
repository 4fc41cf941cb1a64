"""The ``mp`` strategy: one process per job sharing the GPU through a private CUDA MPS
daemon (``mps``) that the executor owns, after the read-only checks of ``mps_checks``.
"""
