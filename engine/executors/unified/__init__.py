"""Stacked (vectorised) training of K structurally identical models: the unified model's
machinery. Imported only inside cell processes (the modules import torch).

* ``stack``: K members as one vectorised module (``torch.func.stack_module_state`` +
  ``functional_call`` under ``vmap(randomness="different")``), per-member BatchNorm
  buffers, per-member dropout generators, write-back to the member modules;
* ``optim``: stacked SGD / Adam / AdamW with per-member hyperparameters ([K] tensors) and
  an exact freeze of finished members;
* ``losses``: per-member task losses and scores over stacked outputs;
* ``verify``: structural fingerprint and a one-step probe of both routes on a copy;
* ``plan``: buckets (which jobs may stack) and the printed/stored plan;
* ``loop``: the bucket training loop (vectorised or eager) that reproduces
  ``engine.train.loop.train_job``'s contract per member, several buckets interleaved per
  step (``Interleave``), finished members removed, compile probed, CUDA streams;
* ``features``: the effective features of (requested, device, compile mode, probe result).

Rules and their tests: ``../shared/reference/unified-model-pitfalls.md``.
"""
