"""Optimizers by name: ``sgd``, ``adam``, ``adamw`` (``torch.optim``), torch-free at import.

Each ``OptimizerSpec.build(params, lr, **kwargs)`` returns the torch optimizer with torch's
own defaults for everything not given (so ``adamw`` means weight decay 0.01, the harness's
"torch's default weight decay"). ``kwargs`` lists the keyword names a catalogue's
``optimizer_kwargs`` may use; anything else is refused by name before torch sees it.
``stacked_target`` names each one's stacked form for the unified model
(``engine.executors.unified.optim``: per-member lr, momentum, betas, eps, weight decay).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.errors import ConfigError, known, nearest
from engine.registry import OPTIMIZERS, OptimizerSpec, register_optimizer

_SGD_KWARGS = ("momentum", "dampening", "weight_decay", "nesterov", "maximize")
_ADAM_KWARGS = ("betas", "eps", "weight_decay", "amsgrad", "maximize")


def _sgd(params: Iterable[Any], lr: float, **kwargs: Any) -> Any:
    import torch

    return torch.optim.SGD(params, lr=lr, **kwargs)


def _adam(params: Iterable[Any], lr: float, **kwargs: Any) -> Any:
    import torch

    return torch.optim.Adam(params, lr=lr, **kwargs)


def _adamw(params: Iterable[Any], lr: float, **kwargs: Any) -> Any:
    import torch

    return torch.optim.AdamW(params, lr=lr, **kwargs)


# Stacked forms (the unified model): per-member hyperparameters over (K, ...) tensors.
register_optimizer(OptimizerSpec("sgd", _sgd, _SGD_KWARGS,
                                 stacked_target="engine.executors.unified.optim:stacked_sgd"))
register_optimizer(OptimizerSpec("adam", _adam, _ADAM_KWARGS,
                                 stacked_target="engine.executors.unified.optim:stacked_adam"))
register_optimizer(OptimizerSpec("adamw", _adamw, _ADAM_KWARGS,
                                 stacked_target="engine.executors.unified.optim:stacked_adamw"))


def check_optimizer(name: str, kwargs: Mapping[str, Any] | None = None,
                    where: str = "") -> tuple[OptimizerSpec, dict[str, Any]]:
    """Validate ``name`` and ``kwargs`` without torch; return the spec and normalised kwargs.

    Normalising turns a TOML list ``betas = [0.9, 0.99]`` into the tuple torch expects.

    Raises:
        ConfigError: unknown optimizer, or a keyword the optimizer does not accept (with the
            nearest valid name), or ``betas`` that is not two numbers.
    """
    spec = OPTIMIZERS.get(name, where)
    prefix = f"{where}: " if where else ""
    out: dict[str, Any] = {}
    for key, value in dict(kwargs or {}).items():
        if key not in spec.kwargs:
            raise ConfigError(f"{prefix}optimizer '{name}' has no keyword '{key}'"
                              f"{nearest(key, spec.kwargs)}; {known(spec.kwargs)}")
        if key == "betas":
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise ConfigError(f"{prefix}optimizer '{name}': 'betas' must be two numbers, "
                                  f"got {value!r}")
            value = (float(value[0]), float(value[1]))
        out[key] = value
    return spec, out


def build_optimizer(name: str, params: Iterable[Any], lr: float,
                    kwargs: Mapping[str, Any] | None = None, where: str = "") -> Any:
    """Build the torch optimizer ``name`` over ``params`` with learning rate ``lr``.

    Raises:
        ConfigError: as :func:`check_optimizer`, or a value torch rejects (e.g. a negative
            momentum), reported on one line with ``where``.
    """
    spec, clean = check_optimizer(name, kwargs, where)
    try:
        return spec.build(params, float(lr), **clean)
    except (ValueError, TypeError) as exc:
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}optimizer '{name}': {exc}") from None
