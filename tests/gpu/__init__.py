"""GPU tests: files that ``bench/gpu_check.py`` runs on a lent GPU machine (one part each,
registered there with ``gpu_tests``). They import only what such a machine has
(``bench.gpu_check.GPU_MACHINE_PACKAGES``: no pytest, Textual, Ray, plotext or tomli-w),
take no fixture but ``tmp_path``, and skip with ``unittest.SkipTest``. pytest collects them
too; ``tests/conftest.py`` marks them ``gpu`` (skipped where NVML sees no GPU)."""
