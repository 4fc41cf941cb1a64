"""Built-in models, registered by name (torch-free at import).

Every builder is ``build(in_shape, n_outputs, **model_kwargs) -> torch.nn.Module`` with
``in_shape`` one sample's shape without the batch dimension and ``n_outputs`` the number
of classes (or regression targets). The networks live in ``engine.parts.nets``, which imports
torch and is only imported from inside the builders.

=====================  =============================================  =================
name                   structure                                      model_kwargs
=====================  =============================================  =================
mlp                    flatten, 2 hidden ReLU layers                  hidden=128
mlp_bn                 flatten, 2 x (Linear, BatchNorm1d, ReLU,       hidden=128,
                       Dropout)                                       dropout=0.2
simplecnn              2 conv3x3, max-pool, adaptive 4x4, 1024→128→n  —
lenet                  LeNet-5 (ReLU, max-pool), adaptive 5x5         —
resnet18, resnet50,    torchvision.models.<name>(weights=None,        passed to
mobilenet_v3_small     num_classes=n); stem adapted to C != 3         torchvision
=====================  =============================================  =================

Models with BatchNorm (mlp_bn, the torchvision ones) cannot train on a batch of one:
ResNets and MobileNetV3 reduce 32x32 inputs to 1x1 feature maps, so a final batch of a
single sample raises "Expected more than 1 value per channel when training".
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
from collections.abc import Iterator, Mapping
from typing import Any

from engine.bounds import Bound, count, finite_problem
from engine.errors import ConfigError, known, nearest
from engine.registry import MODELS, register_model

_VISION_HINT = "pip install 'fugue-tui[vision]'"
#: model_kwargs bounds of the MLPs (engine.bounds): a Linear of 65536 x 65536 is already
#: 16 GiB of float32 weights; dropout 1 would zero every activation.
_HIDDEN = count(1, 65536, "units per hidden layer")
_DROPOUT = Bound(0, 1, high_open=True, why="the probability of zeroing an activation")


@register_model("mlp", description="MLP: flatten → 2 x (Linear, ReLU) → Linear; hidden=128",
                kwarg_bounds={"hidden": _HIDDEN})
def build_mlp(in_shape: tuple[int, ...], n_outputs: int, *, hidden: int = 128) -> Any:
    from engine.parts import nets as _nets

    return _nets.mlp(in_shape, n_outputs, hidden=hidden)


@register_model("mlp_bn", description="MLP with BatchNorm1d and Dropout; hidden=128, "
                                      "dropout=0.2",
                kwarg_bounds={"hidden": _HIDDEN, "dropout": _DROPOUT})
def build_mlp_bn(in_shape: tuple[int, ...], n_outputs: int, *, hidden: int = 128,
                 dropout: float = 0.2) -> Any:
    from engine.parts import nets as _nets

    return _nets.mlp_bn(in_shape, n_outputs, hidden=hidden, dropout=dropout)


@register_model("simplecnn", description="2 conv3x3 + max-pool + adaptive 4x4 + 2 linear "
                                         "(the harness's E14 CNN)")
def build_simplecnn(in_shape: tuple[int, ...], n_outputs: int) -> Any:
    from engine.parts import nets as _nets

    return _nets.simplecnn(in_shape, n_outputs)


@register_model("lenet", description="LeNet-5 (ReLU, max-pool), adaptive 5x5 before the "
                                     "classifier")
def build_lenet(in_shape: tuple[int, ...], n_outputs: int) -> Any:
    from engine.parts import nets as _nets

    return _nets.lenet(in_shape, n_outputs)


def _torchvision_builder(name: str) -> None:
    def build(in_shape: tuple[int, ...], n_outputs: int, **kwargs: Any) -> Any:
        from engine.parts import nets as _nets

        return _nets.torchvision_classifier(name, in_shape, n_outputs, **kwargs)

    build.__name__ = f"build_{name}"
    register_model(name, requires="torchvision",
                   description=f"torchvision.models.{name}, random init")(build)


for _name in ("resnet18", "resnet50", "mobilenet_v3_small"):
    _torchvision_builder(_name)
del _name


def model_available(name: str, where: str = "") -> tuple[bool, str]:
    """``(True, "")`` or ``(False, reason)``: is the model's required module installed?

    Checked with ``importlib.util.find_spec``: nothing is imported.

    Raises:
        ConfigError: unknown model (nearest valid name).
    """
    spec = MODELS.get(name, where)
    if spec.requires and importlib.util.find_spec(spec.requires) is None:
        hint = _VISION_HINT if spec.requires == "torchvision" else f"pip install {spec.requires}"
        return False, f"model '{name}' needs {spec.requires}: {hint}"
    return True, ""


def check_kwargs(name: str, build: Any, kwargs: Mapping[str, Any], where: str,
                 bounds: Mapping[str, Bound] | None = None) -> None:
    """Refuse model_kwargs the builder does not declare (builders with ``**kwargs`` pass
    theirs on, and the callee's ``TypeError`` is reported instead), a value outside the
    model's declared ``bounds`` (:attr:`engine.registry.ModelSpec.kwarg_bounds`), and any
    number that is not finite.

    Raises:
        ConfigError: ``"<where>: model 'mlp' model_kwargs key 'hidden' must be >= 1, got
            -5"``, or the unknown key with the nearest valid one.
    """
    prefix = f"{where}: " if where else ""
    params = inspect.signature(build).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        valid = list(params)[2:]  # after in_shape, n_outputs
        for key in kwargs:
            if key not in valid:
                accepted = known(valid) if valid else "it takes none"
                raise ConfigError(f"{prefix}model '{name}' has no model_kwargs key '{key}'"
                                  f"{nearest(key, valid)}; {accepted}")
    for key, value in kwargs.items():
        bound = (bounds or {}).get(key)
        problem = bound.problem(value) if bound is not None else finite_problem(value)
        if problem:
            raise ConfigError(f"{prefix}model '{name}' model_kwargs key '{key}' {problem}")


def build_model(name: str, in_shape: tuple[int, ...], n_outputs: int,
                model_kwargs: Mapping[str, Any] | None = None, where: str = "") -> Any:
    """Build model ``name`` for samples of ``in_shape`` and ``n_outputs`` outputs.

    The parameters are initialised from torch's global generator: seed before calling.

    Raises:
        ConfigError: unknown model (with the nearest name), a missing required module
            (``model 'resnet18' needs torchvision: pip install 'fugue-tui[vision]'``),
            an unknown model_kwargs key, or an input shape the model cannot take.
    """
    spec = MODELS.get(name, where)
    ok, reason = model_available(name)
    prefix = f"{where}: " if where else ""
    if not ok:
        raise ConfigError(prefix + reason)
    kwargs = dict(model_kwargs or {})
    check_kwargs(name, spec.build, kwargs, where, spec.kwarg_bounds)
    try:
        model = spec.build(tuple(in_shape), int(n_outputs), **kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{prefix}model '{name}' for input {tuple(in_shape)}: {exc}") from None
    for seen in _WATCHERS:
        seen[where] = model
    return model


#: The open :func:`built_models` scopes (innermost last).
_WATCHERS: list[dict[str, Any]] = []


@contextlib.contextmanager
def built_models() -> Iterator[dict[str, Any]]:
    """Every model :func:`build_model` builds inside the ``with`` block, by its ``where``
    (a job id): ``{job_id: module}``, the module the executor then trains.

    Why: the parity checks (``fugue-tui selfcheck``, the parity tests) compare what seq and
    unified_model trained, and neither executor returns its modules; each builds through
    here (the stacked model writes the members' trained values back into them)."""
    seen: dict[str, Any] = {}
    _WATCHERS.append(seen)
    try:
        yield seen
    finally:
        _WATCHERS.remove(seen)
