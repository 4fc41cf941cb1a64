"""unified_model serving a stream with dynamic stacking (issue 52; docs/measurement.md,
"Streams"): a job that arrives while a bucket of its structure runs joins it at the next
step boundary and trains exactly as it would alone (the parity contract's rule for its
path: seq's bits under ``kernels = "exact"`` on any CPU, the rounding bound under the
batched default); a job of another structure never joins, it starts a bucket of its own,
interleaved; a job the checks refuse trains eagerly in its own bucket, recorded; while
nothing runs the cell waits for the next arrival; ``max_parallel`` bounds the members
training at once.

Arrivals are put at chosen steps: the stream's clock (``StreamServe.clock``) is the number
of bucket steps taken so far (the executor's ``trace``), so a job "arrives" after exactly
that many steps whatever the host's speed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import engine.executors.unified.bucket_build as bucket_build_mod  # noqa: E402
import engine.train.loop as training_mod  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.executors.unified.contract import layer_reduction, rounding_bound  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from engine.executors.unified.optim import StackedOptimizer, torch_member_state  # noqa: E402
from engine.executors.unified.serve import StreamServe  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402
from tests.unit.engine.executors.unified.test_parity_column import (  # noqa: E402
    _data,
    _job,
    one_thread,  # noqa: F401 - the autouse fixture, for this module too
)
from tests.unit.engine.executors.unified.test_python_state import models  # noqa: E402, F401

#: mlp_bn of _job on _data: 16 inputs, hidden 16, 3 classes, batch 16; the batched
#: kernels differ from the solo ones in its three Linear layers and two BatchNorms
REDUCTION = (layer_reduction(16, 16, 16) * 2 + layer_reduction(16, 3, 16) + 2 * 16)


def _captured(monkeypatch):
    """job_id → module, where seq and unified_model build their models."""
    built: dict[str, dict] = {"seq": {}, "unified": {}}
    for label, module in (("seq", training_mod), ("unified", bucket_build_mod)):
        def build(*args, where="", _orig=module.build_model, _label=label, **kwargs):
            built[_label][where] = model = _orig(*args, where=where, **kwargs)
            return model

        monkeypatch.setattr(module, "build_model", build)
    return built


def _serve(monkeypatch, jobs, arrivals, data=None, *, waits=None, **options):
    """Serve ``jobs`` arriving ``arrivals`` bucket steps after the window opened; returns
    the context, the plan, the results and the trace of bucket steps."""
    data = data or _data()
    trace: list = []
    late = [0.0]  # time the fake wait skipped ahead
    monkeypatch.setattr(StreamServe, "clock", staticmethod(lambda: len(trace) + late[0]))

    def wait(deadline, job_id, until_s, emit):
        if waits is None:
            raise AssertionError(f"the cell waited for {job_id} while nothing ran")
        waits.append((job_id, until_s, len(trace)))
        late[0] = deadline - len(trace)

    monkeypatch.setattr(StreamServe, "wait", staticmethod(wait))
    ctx = SimpleNamespace(arrivals=list(arrivals), stream_origin=0.0, stream_marks={},
                          stream_joins={}, settings=TrainSettings(torch.device("cpu")),
                          datasets=lambda name: data, threads=1, seed=42,
                          emit=lambda type_, **f: None,
                          options={k: v for k, v in options.items() if k != "failures"},
                          features=None, max_parallel=options.pop("max_parallel", None),
                          group={}, outside_window=[])
    executor = UnifiedExecutor()
    executor.trace = trace
    results = executor.run(jobs, ctx)
    if not options.get("failures"):
        assert all(r.status == "ok" for r in results), [r.error for r in results]
    return ctx, ctx.group["executor_info"]["plan"], results, trace


def _seq(jobs, data):
    return SeqExecutor().run(jobs, SimpleNamespace(
        arrivals=None, settings=TrainSettings(torch.device("cpu")),
        datasets=lambda name: data, threads=1, seed=42, emit=lambda type_, **f: None,
        options={}, group={}))


@pytest.mark.parametrize("kernels", ["exact", "batched"])
def test_a_job_that_joined_a_running_stack_midway_trains_as_alone(monkeypatch, parity,
                                                                kernels):
    """j0 (two epochs of four steps) trains alone (eager) for 5 steps; j1 arrives and
    joins it in j0's last epoch (the lone member and the newcomer become a stack of two,
    j0's momentum and its training score so far copied in); j2 arrives 2 steps later and
    joins the running stack (a re-stack of three); j0, then j2, then j1 leave. Every job
    against its solo seq run: bit for bit under exact kernels (by construction on any
    CPU), within rounding_bound(T, n) under the batched default (its own T steps)."""
    built = _captured(monkeypatch)
    data = _data()
    jobs = [_job(0, epochs=2), _job(1, epochs=3, lr=0.02),
            _job(2, epochs=2, lr=0.03, optimizer_kwargs={"momentum": 0.5,
                                                         "weight_decay": 1e-3})]
    ctx, plan, results, trace = _serve(monkeypatch, jobs, [0, 5, 7], data, kernels=kernels)
    seq = _seq(jobs, data)
    # the joins happened mid-way, at the step boundaries the arrivals fell on
    assert trace[:5] == [(0, ("j0",))] * 5 and trace[5:7] == [(0, ("j0", "j1"))] * 2
    assert trace[7] == (0, ("j0", "j1", "j2")) and trace[8] == (0, ("j1", "j2"))
    assert set(ctx.stream_joins) == {"j1", "j2"}
    [bucket] = plan
    assert bucket["jobs"] == ["j0", "j1", "j2"] and bucket["route"] == "vectorised"
    assert [(j["job"], j["stack"], j["check"]) for j in bucket["joins"]] == [
        ("j1", 2, "verified"), ("j2", 3, "verified")]
    assert bucket["restacks"][:2] == [2, 3]  # then the leavers' re-stacks
    want_contract = "exact" if kernels == "exact" else "bound:rounding_bound(T,n)"
    assert ctx.group["parity_contract"] == want_contract
    assert ctx.outside_window == []  # no parity probe in a stream cell
    for s, u in zip(seq, results, strict=True):
        steps = s.samples // s.job.batch_size
        bound = rounding_bound(steps, REDUCTION)
        want = built["seq"][s.job.job_id].state_dict()
        for name, value in built["unified"][u.job.job_id].state_dict().items():
            where = f"{s.job.job_id} {name}"
            if kernels == "exact" or not value.is_floating_point():
                parity.same(where, value, want[name])
            else:
                parity.within(where, value, want[name], bound)
        if kernels == "exact":
            parity.same(f"{s.job.job_id} train loss", u.final_train_loss, s.final_train_loss)
            parity.same(f"{s.job.job_id} val loss", u.final_val_loss, s.final_val_loss)
        assert u.final_train_acc == s.final_train_acc or kernels == "batched"
        assert (u.samples, u.epochs_run) == (s.samples, s.epochs_run)


def test_jobs_of_two_structures_never_share_a_stack(monkeypatch):
    """Two structures (hidden 16 and hidden 8) arriving in turn: each joins the running
    bucket of its own structure and never the other's; the two buckets interleave."""
    small = {"hidden": 8, "dropout": 0.2}
    jobs = [_job(0), _job(1, model_kwargs=small), _job(2), _job(3, model_kwargs=small),
            _job(4, epochs=2)]
    ctx, plan, _, trace = _serve(monkeypatch, jobs, [0, 1, 2, 3, 4])
    structure = {j.job_id: j.model_kwargs["hidden"] for j in jobs}
    assert [(b["jobs"], b["route"]) for b in plan] == [
        (["j0", "j2", "j4"], "vectorised"), (["j1", "j3"], "vectorised")]
    assert set(ctx.stream_joins) == {"j2", "j3", "j4"}
    for bucket, members in trace:  # every stacked step: one structure, its own bucket's
        assert len({structure[j] for j in members}) == 1
        assert set(members) <= set(plan[bucket]["jobs"])
    steps = [b for b, _ in trace]
    assert steps[:3] == [0, 0, 1]  # j1 arrived after one step: from then on, interleaved
    assert steps.index(1) < len(steps) - 1 - steps[::-1].index(0)
    assert ctx.group["eager_buckets"] == "0/2"


@pytest.mark.usefixtures("models")
def test_a_joiner_the_checks_refuse_trains_eager_in_its_own_bucket(monkeypatch, parity):
    """A model whose forward counts its calls (Python state a stack cannot carry): the
    second job is checked against the running one like a bucket member (here the
    fingerprint already sees the running member's counter), refused, and trains eagerly
    in a bucket of its own, the verdict in the plan; both as seq."""
    built = _captured(monkeypatch)
    data = _data()
    jobs = [_job(i, model="py_scheduled", model_kwargs={}, optimizer_kwargs={}, epochs=2)
            for i in range(2)]
    ctx, plan, _, trace = _serve(monkeypatch, jobs, [0, 2], data)
    _seq(jobs, data)
    assert ctx.stream_joins == {}
    assert [(b["jobs"], b["route"], b["check"]) for b in plan] == [
        (["j0"], "eager", "single"), (["j1"], "eager", "disagreed")]
    # the running member's counter has moved: the structure differs from a fresh one's
    assert plan[1]["reason"].startswith("did not join bucket 0: structure: member 1 differs "
                                        "at '(root)' (Scheduled): steps = 0 vs "), plan[1]
    assert ctx.group["eager_buckets"].startswith("2/2: ")
    assert ctx.group["parity_contract"] == "exact"
    assert (1, ("j1",)) in trace
    for job in jobs:
        ours, seqs = built["unified"][job.job_id], built["seq"][job.job_id]
        assert ours.steps == seqs.steps > 0
        want = seqs.state_dict()
        for name, value in ours.state_dict().items():
            parity.same(f"{job.job_id} {name}", value, want[name])


def test_a_joiner_over_shared_state_leaves_both_buckets_promising_nothing(monkeypatch):
    """A class-level counter moved by forward (state every member shares): the joiner's
    checks see it move and refuse; both buckets train eagerly, interleaved over the one
    count, so neither promises anything against seq (never ``exact``)."""
    from engine.registry import MODELS, register_model
    from tests.unit.engine.executors.unified.test_python_state import SharedSchedule

    register_model("py_shared_stream", description="test: shared state")(
        lambda in_shape, n_outputs, **kw: SharedSchedule(in_shape, n_outputs))
    try:
        jobs = [_job(i, model="py_shared_stream", model_kwargs={}, optimizer_kwargs={},
                     epochs=2) for i in range(2)]
        ctx, plan, _, _ = _serve(monkeypatch, jobs, [0, 2])
    finally:
        MODELS.items.pop("py_shared_stream", None)
    assert [(b["route"], b["check"]) for b in plan] == [("eager", "single"),
                                                        ("eager", "disagreed")]
    assert "forward changes shared state: SharedSchedule.steps" in plan[1]["reason"]
    assert [b["parity_contract"] for b in plan] == [None, None]
    assert ctx.group["parity_contract"] is None


def test_the_cell_waits_while_nothing_runs_and_max_parallel_holds_arrivals(monkeypatch):
    """j1 arrives while j0 trains but max_parallel = 1: it is admitted when j0 has left
    (no join); j2 arrives long after: the cell waits for it (the waiting heartbeat's
    call), then starts it alone."""
    waits: list = []
    jobs = [_job(0), _job(1), _job(2)]
    ctx, plan, _, trace = _serve(monkeypatch, jobs, [0, 1, 1000], waits=waits,
                                 max_parallel=1)
    assert all(len(members) == 1 for _, members in trace)
    assert [b["jobs"] for b in plan] == [["j0"], ["j1"], ["j2"]]
    assert ctx.stream_joins == {}
    steps = sum(1 for _, m in trace if m == ("j0",))
    assert trace[steps] == (1, ("j1",))  # j1 right after j0's last step
    assert [(job_id, until) for job_id, until, _ in waits] == [("j2", 1000)]
    assert waits[0][2] == len(trace) - sum(1 for _, m in trace if m == ("j2",))
    assert ctx.group["max_parallel"] == 1


def test_a_join_that_breaks_fails_its_bucket_and_the_stream_goes_on(monkeypatch):
    """The re-stack of a join raises: the running bucket's members and the newcomer fail,
    each saying why; the other structure's bucket and later jobs train on."""
    from engine.executors.unified.stack import Stack

    def broken(self, positions, member, generator):
        raise RuntimeError("injected: the re-stack ran out of memory")

    monkeypatch.setattr(Stack, "joined", broken)
    small = {"hidden": 8, "dropout": 0.2}
    jobs = [_job(0), _job(1), _job(2, model_kwargs=small), _job(3), _job(4, epochs=1)]
    ctx, plan, results, _ = _serve(monkeypatch, jobs, [0, 1, 2, 3, 30], waits=[],
                                   failures=True)
    status = {r.job.job_id: (r.status, r.error) for r in results}
    for job_id in ("j0", "j1", "j3"):  # j1 joined j0 (a stack of two); j3's join broke it
        assert status[job_id] == ("failed", "RuntimeError: injected: the re-stack ran out "
                                            "of memory"), status
    assert status["j2"][0] == status["j4"][0] == "ok"
    assert all(r.end is not None for r in results)
    assert [b["jobs"] for b in plan] == [["j0", "j1", "j3"], ["j2"], ["j4"]]


@pytest.mark.parametrize("kind,kwargs", [
    ("sgd", {"momentum": 0.9}), ("sgd", {"momentum": 0.9, "nesterov": True,
                                        "weight_decay": 0.01}),
    ("adam", {}), ("adamw", {"amsgrad": True})])
def test_optimizer_state_moves_into_a_new_stack_exactly(kind, kwargs, parity):
    """A member from a stacked optimizer, one from its own torch optimizer and a fresh one
    in a new stacked optimizer: each steps exactly as its solo torch optimizer (per-member
    gradients from solo forwards, so only the optimizer is compared)."""
    from torch import nn
    from torch.func import functional_call, stack_module_state

    make = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind]
    torch.manual_seed(0)
    sources = [nn.Linear(5, 3) for _ in range(3)]
    lrs = [0.1, 0.2, 0.3]
    x = torch.randn(6, 4, 5)

    def step(params, opt, xs, template):
        opt.zero_grad()
        sum(functional_call(template, {n: p[k] for n, p in params.items()}, (xs[k],))
            .pow(2).sum() for k in range(xs.shape[0])).backward()
        opt.step()

    solos = []
    for i, src in enumerate(sources):
        m = nn.Linear(5, 3)
        m.load_state_dict(src.state_dict())
        opt = make(m.parameters(), lr=lrs[i], **kwargs)
        for t in range(6 if i < 2 else 4):
            opt.zero_grad()
            m(x[t]).pow(2).sum().backward()
            opt.step()
        solos.append(m)
    a, b, c = (nn.Linear(5, 3) for _ in range(3))
    for m, src in zip((a, b, c), sources, strict=True):
        m.load_state_dict(src.state_dict())
    solo_b = make(b.parameters(), lr=lrs[1], **kwargs)
    stacked_a, _ = stack_module_state([a])
    opt_a = StackedOptimizer(kind, stacked_a, lrs[:1], [kwargs])
    for t in range(2):  # a in a stack of one, b alone
        step(stacked_a, opt_a, x[t:t + 1], a)
        solo_b.zero_grad()
        b(x[t]).pow(2).sum().backward()
        solo_b.step()
    with torch.no_grad():
        for n, p in a.named_parameters():
            p.copy_(stacked_a[n][0])
    params, _ = stack_module_state([a, b, c])
    opt = StackedOptimizer(kind, params, lrs, [kwargs] * 3)
    opt.load_member(0, *opt_a.member_state(0))
    opt.load_member(1, *torch_member_state(solo_b, b, 2))
    for t in range(2, 6):  # c joined fresh: its batches from its own start
        step(params, opt, torch.stack([x[t], x[t], x[t - 2]]), a)
    for k, solo in enumerate(solos):
        for n, p in solo.named_parameters():
            parity.same(f"member {k} {n}", params[n][k], p)
