"""Compatibility for plugins: the workload API moved to :mod:`engine.define.workloads`.

``engine.workloads.register_workload`` (and ``make_job``, ``base_fields``, ``SplitSpec``,
``JobSpec``, ``WORKLOADS``, ``expand``) keep working for plugins written against the old path.
"""

from engine.define.workloads import (  # noqa: F401
    WORKLOADS,
    JobSpec,
    SplitSpec,
    WorkloadSpec,
    base_fields,
    expand,
    make_job,
    register_workload,
    train_size,
)
