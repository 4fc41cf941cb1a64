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
* ``routes``: one training step of a bucket's members, vectorised (``VectorRoute``) or
  eager (``EagerRoute``), each with its compile probe;
* ``bucket_build``: a bucket's members built (job seed before each build) and its route
  decided (structure, verification, data order, dropout-mask source);
* ``bucket``: one bucket's training loop (``BucketRun``), which reproduces
  ``engine.train.loop.train_job``'s contract per member: epochs, validation, events,
  finished members removed, compile probed;
* ``interleave``: the buckets of one chunk stepped together round-robin per step
  (``Interleave``), in segments between epoch ends, one CUDA stream per bucket;
* ``features``: the effective features of (requested, device, compile mode, probe result).

Rules and their tests: ``docs/unified-model-pitfalls.md``.
"""
