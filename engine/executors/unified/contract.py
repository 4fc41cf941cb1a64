"""The parity contract: for every training path, whether it trains what ``seq`` trains bit
for bit **by construction** or only within a bound derived from float rounding.

"By construction" means both sides call the same kernel on the same shapes and values in
the same order, so no BLAS, ISA or vendor can make them differ. Everything else (vmap's
batched matmul against the solo ``addmm``, grouped convolutions, BatchNorm's batching rule,
another operand layout) agrees only where the BLAS happens to pick kernels that round
alike: on one CPU it may be bit for bit, on another it is not (an Intel AVX-512 host and an
AMD EPYC host running the same MKL disagree). Those paths promise :func:`rounding_bound`.

The table is data so that the documentation (docs/fidelity.md, "The parity contract",
rendered by :func:`render_table` and pinned by ``tests/unit/engine/executors/unified/test_parity_contract.py``), the
tests and the self-check read one source. Torch-free: it is imported by code that must not
import torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Unit roundoff u (half the distance from 1 to the next float) per dtype.
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float64": 2.0 ** -53}

#: Confidence multiplier of the probabilistic rounding model (see :func:`rounding_bound`).
LAMBDA = 3.0

#: The ceiling the issue that introduced the contract set for fp32 after 10 steps on the
#: tests' MLPs: a bound looser than this would hide a real defect.
FP32_CEILING_10_STEPS = 1e-5


def _u(dtype: str) -> float:
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"no unit roundoff for dtype {dtype!r}: one of {sorted(UNIT_ROUNDOFF)}")
    return UNIT_ROUNDOFF[dtype]


def layer_reduction(fan_in: int, fan_out: int, batch: int) -> int:
    """The longest reduction of one layer's forward and backward: fan-in (its output),
    batch size (its weight gradient), fan-out (its input gradient)."""
    return max(fan_in, fan_out, batch)


def rounding_bound(steps: int, reduction: int, dtype: str = "float32") -> float:
    """Relative bound on how far two computations of the same **training** may drift apart
    in their first ``steps`` steps when they sum the same products in different orders
    (another GEMM, blocking, layout, batching rule).

    Returns ``LAMBDA * sqrt(steps * reduction) * u``, read against the compared tensor's
    largest magnitude: ``max|a - b| <= bound * max|b|`` (parameters, buffers, losses).

    Derivation (Higham & Mary's probabilistic rounding-error model, SIAM J. Sci. Comput.
    41(5), 2019): a reduction of length ``n`` evaluated in two orders differs by a sum of
    about ``n`` independent, zero-mean rounding errors of at most ``u`` relative, so by about
    ``sqrt(n) * u``; the layers whose kernels differ add independent terms, ``reduction``
    of them per step (the sum over those layers of :func:`layer_reduction`), and over the
    first steps the terms of every step add up without amplification (the update's
    Jacobian ``I - lr H`` is close to the identity): ``steps * reduction`` terms in all.
    ``LAMBDA = 3`` is a safety factor, not a probability over a whole tensor: per element a
    sum of independent bounded terms exceeds ``3 sqrt(m) u`` with probability <= 2e^-4.5
    (Hoeffding), but the tests take the maximum over thousands of elements (a union bound
    would need ~6), and momentum weights a step's gradient difference by up to
    ``1 / (1 - mu)`` (it enters as ``lr * g``, small beside the parameter's own per-step
    rounding). What backs the bound is measurement: >= 14x headroom over what every
    setting of the kernel-dispatch matrix shows (docs/fidelity.md). Beyond a few tens of
    steps training
    amplifies differences chaotically and comparisons become statistical (the accuracy
    band, docs/fidelity.md). SGD-family updates only: Adam's step is scale-invariant
    (:func:`adam_bound`).

    Args:
        steps: optimizer steps both sides ran (>= 1).
        reduction: the summed longest reductions of the layers whose kernels differ.
        dtype: ``"float32"`` or ``"float64"``.

    Raises:
        ValueError: a count below 1 or an unknown dtype.
    """
    if min(steps, reduction) < 1:
        raise ValueError(f"steps and reduction must be >= 1: {steps}, {reduction}")
    return LAMBDA * math.sqrt(steps * reduction) * _u(dtype)


def pass_bound(n: int, layers: int = 1, dtype: str = "float32") -> float:
    """Relative bound between two evaluations of **one pass** (a forward, its backward, a
    reduction of losses) that sum the same terms in different orders: ``layers`` chained
    reductions of length at most ``n``, each side within ``gamma_n`` of the exact value.

    Returns ``2 * layers * gamma_n``, ``gamma_n = n u / (1 - n u)``, read against the
    largest magnitude of the compared quantity (gradients: over the whole model).

    From the deterministic summation bound (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., §3.1 and §4.2: any order of summing ``n`` terms is within
    ``gamma_n * sum|x_i|`` of the exact sum; two orders within twice that; each layer of a
    chain adds its own, to first order, later layers' weights taken as O(1)). Rigorous
    relative to ``sum|x_i|``; read against the largest magnitude of the result, it holds
    where the terms do not cancel much: exactly for non-negative losses, as a heuristic
    for gradients taken normwise over the model (measured: >= 67x headroom). One pass does not
    accumulate over steps, so the worst case stays small where the probabilistic
    :func:`rounding_bound` would leave too little headroom over what a single reduction
    typically shows (~3 u at n = 32 to 64).

    Raises:
        ValueError: ``n`` or ``layers`` below 1, an unknown dtype, or ``n u >= 1``.
    """
    if min(n, layers) < 1:
        raise ValueError(f"n and layers must be >= 1: {n}, {layers}")
    nu = n * _u(dtype)
    if nu >= 1:
        raise ValueError(f"n = {n} is too long for {dtype}: n u >= 1")
    return 2 * layers * nu / (1 - nu)


def adam_bound(steps: int, lr: float, betas: tuple[float, float] = (0.9, 0.999)) -> float:
    """Absolute bound on how far Adam/AdamW (amsgrad too) may move one parameter apart in
    two runs whose gradients differ by rounding, after ``steps`` steps (every parameter:
    :func:`rounding_bound` holds for SGD, not here).

    Returns ``2 * steps * lr * max(1, (1 - beta1) / sqrt(1 - beta2))``.

    Why a bound of its own: Adam's step ``lr * m / (sqrt(v) + eps)`` is invariant to the
    gradient's scale, so a gradient element's *relative* rounding error becomes the step's,
    and that error has no limit where the element's terms cancel — for a parameter whose
    gradient is zero in exact arithmetic (a bias just before BatchNorm, which the
    normalisation cancels) the gradient is rounding noise, and two summation orders give
    noise of other signs. What is bounded is the step's size (Kingma & Ba 2015, §2.1: at
    most ``lr * (1 - beta1) / sqrt(1 - beta2)`` when that exceeds ``lr``, else ``lr``):
    each run steps up to that size in its own direction, twice it apart per step. What integrates such a parameter (BatchNorm's running mean,
    eval-mode outputs) follows statistically.

    Raises:
        ValueError: ``steps < 1``, ``lr <= 0`` or a beta outside [0, 1).
    """
    b1, b2 = betas
    if steps < 1 or not lr > 0 or not (0 <= b1 < 1 and 0 <= b2 < 1):
        raise ValueError(f"need steps >= 1, lr > 0, betas in [0, 1): {steps}, {lr}, {betas}")
    return 2 * steps * lr * max(1.0, (1 - b1) / math.sqrt(1 - b2))


#: The bound of each half precision, absolute on the parameters (max |Δ| after one step,
#: after one epoch of 10 steps), SGD: a few quanta of the format at the weights' scale.
HALF_PRECISION_BOUNDS = {
    "amp-fp16": (2.0 ** -10, 2.0 ** -6),
    "amp-bf16": (2.0 ** -8, 2.0 ** -5),
    "bf16": (2.0 ** -8, 2.0 ** -5),
}


@dataclass(frozen=True)
class Path:
    """One row of the contract.

    Attributes:
        name: the path as a user names it.
        holds: ``"construction"`` (bit for bit on any host), ``"bound"`` (within
            ``bound``) or ``"statistical"`` (no per-value bound: the accuracy band).
        why: the kernels on each side: why it is by construction, or which kernels differ.
        bound: the bound as written in the table ("" for construction).
        tests: the tests that assert it (module names under tests/unit).
    """

    name: str
    holds: str
    why: str
    bound: str
    tests: str


_R = "training: rounding_bound(T, n); one pass: pass_bound(n, L)"

PATHS: tuple[Path, ...] = (
    Path("seq, mp, ray (one job per model)", "construction",
         "the same solo kernels on the same shapes, at the same torch thread count (set per "
         "job); another process changes nothing", "",
         "e2e/test_ray_reuse (ray against seq, the final loss's last bit)"),
    Path("unified_model, kernels = \"exact\"", "construction",
         "Linear, convolutions, BatchNorm, LayerNorm and GroupNorm run per member with their "
         "native kernel on the member's slice (engine.executors.unified.exact), at seq's "
         "thread count; any other layer with parameters keeps vmap's rule and is named in "
         "the plan (exact_kernels_skipped): within the batched bound", "",
         "test_exact_kernels, test_stacked_stack, test_unified_fused_backward, "
         "test_precision_training, test_hpo_unified_schedulers"),
    Path("unified_model, eager route (a bucket of one, vf:0, a bucket verification sent "
         "eager)", "construction",
         "each member's own module, the task's criterion and the registry's torch "
         "optimizer, stepped alone: the solo kernels on the solo shapes, seq's arithmetic",
         "", "test_parity_column (float32, against seq with torch.equal)"),
    Path("unified_model stream cell: a member joining or leaving a running stack "
         "(dynamic stacking)", "construction",
         "a join re-stacks exact copies of every member's parameters, buffers, optimizer "
         "state (a lone eager member's torch.optim state copied into its stacked slot), "
         "dropout generator and batch position; the newcomer starts from torch's fresh "
         "state. What each member computes afterwards is its path's row: kernels = "
         "\"exact\" by construction, batched within the bound", "",
         "test_unified_stream (exact bit for bit, batched within rounding_bound), "
         "test_stream_unified (weights digests equal seq's after a kill and resume)"),
    Path("unified_model, kernels = \"batched\" (default): Linear", "bound",
         "vmap's batched matmul (MKL sgemm_batch) against the solo addmm: other blocking; "
         "the solo addmm adds the bias before later blocks of a long contraction; "
         "matrix-vector products at batch 1", _R,
         "test_unified_fused_backward, test_precision_training; float64: test_unified_parity"),
    Path("batched: convolutions", "bound",
         "one grouped convolution (oneDNN) against K solo convolutions", _R,
         "float64: test_unified_parity (cv folds, simplecnn)"),
    Path("batched: BatchNorm", "bound",
         "vmap's BatchNorm batching rule (one reduction over the stacked batch) against the "
         "solo kernel", _R, "test_stack_layout; float64: test_unified_parity"),
    Path("gradient layout (relaid Linear weights)", "bound",
         "another operand layout may pick another GEMM (NN against NT; MKL rounds them "
         "otherwise on AMD EPYC, alike on Intel AVX-512). kernels = \"batched\": adopted "
         "when the probe's forward is within pass_bound(fan-in, moved layers) of the plain "
         "layout's; kernels = \"exact\": the per-member kernels' gradients come in the "
         "parameters' own layout, nothing moves, and any move needs the forward bit for bit",
         _R, "test_stack_layout"),
    Path("exact-path loss (fl:0): gradients and reported values", "construction",
         "one cross-entropy/MSE over K*B then a per-member mean whose backward hands every "
         "element the solo 1/B; reported values: the solo log-softmax rows and ATen's "
         "nll_loss cascade reproduced add for add (losses.nll_mean)", "",
         "test_unified_fused_backward"),
    Path("batched, Adam/AdamW", "bound",
         "Adam's step turns a gradient element's relative rounding error into the step's: "
         "unbounded relative to the gradient where its terms cancel (a bias just before "
         "BatchNorm has zero gradient in exact arithmetic: all rounding), while the step's "
         "size is bounded; BatchNorm running statistics and eval-mode outputs, which "
         "integrate it, follow statistically. The bound holds for any two Adam runs at that "
         "lr, so it catches no defect: the route and the stacked optimizer are the same code "
         "under both kernels, and a defect there fails the exact variant bit for bit",
         "adam_bound(T, lr, betas) per element (absolute)",
         "test_precision_training (batched and exact), test_stacked_optim"),
    Path("fused loss (fl:1): reported values", "bound",
         "one vectorised reduction of the K losses: another summation order than the "
         "solo criterion's cascade (its gradients are the exact path's)",
         "pass_bound(B)", "test_unified_fused_backward"),
    Path("stacked optimizers (SGD, momentum, nesterov, weight decay, Adam, AdamW, "
         "amsgrad), per-member values", "construction",
         "torch's own scalar kernels (add_, mul_, addcmul_, lerp_, sqrt) once per run of "
         "members sharing a value: elementwise, each element computed alone (the matrix's "
         "ATen ISA setting moves the vector body/tail split)", "",
         "test_stacked_optim"),
    Path("per-member GradScaler (amp-fp16 stacked)", "construction",
         "the same elementwise unscale, inf check and scale update as torch.amp.GradScaler, "
         "per member", "", "test_unified_amp_scaler"),
    Path("nn.Dropout masks on the CPU", "construction",
         "per-member generators continuing from the member's build seed: the same "
         "bernoulli_ draws on the same shapes (Dropout1d/2d/3d and AlphaDropout would draw "
         "through vmap's randomness: such a bucket is refused and trains eagerly)", "",
         "test_stacked_stack (exact kernels, mlp_bn with dropout: outputs bit for bit)"),
    Path("nn.Dropout masks on CUDA", "statistical",
         "differ from seq's by design (recorded in the plan's dropout_masks): no bitwise "
         "or rounding bound", "final metrics within the accuracy band (0.05)",
         "tests/gpu (needs a GPU)"),
    Path("precision fp32, tf32 (fp32 on a CPU)", "bound",
         "follows the kernels: exact is by construction, batched within the bound",
         _R, "test_precision_training"),
    Path("precision amp-fp16", "bound",
         "autocast around the vmapped call rounds a batched matmul's result otherwise",
         "2^-10 one step, 2^-6 one epoch (absolute)", "test_precision_training"),
    Path("precision amp-bf16, bf16", "bound",
         "one float32 ulp can round a bfloat16 result the other way",
         "2^-8 one step, 2^-5 one epoch (absolute)", "test_precision_training"),
    Path("compiled buckets", "bound",
         "inductor fuses and reorders; checked on the probe batch only", "1e-4 relative "
         "(probe)", "test_compile_probe"),
)


def path(name: str) -> Path:
    """The contract row called ``name``.

    Raises:
        KeyError: no such path, with the known names.
    """
    for p in PATHS:
        if p.name == name:
            return p
    raise KeyError(f"no parity path {name!r}: {[p.name for p in PATHS]}")


def render_table() -> str:
    """The contract as the Markdown table docs/fidelity.md carries (pinned by a test)."""
    lines = ["| path | holds | kernels (why) | bound (relative to max\\|ref\\|) | asserted by |",
             "|---|---|---|---|---|"]
    for p in PATHS:
        holds = {"construction": "by construction", "bound": "within a bound",
                 "statistical": "statistically"}[p.holds]
        lines.append(f"| {p.name} | {holds} | {p.why} | {p.bound or '—'} | {p.tests} |")
    return "\n".join(lines)
