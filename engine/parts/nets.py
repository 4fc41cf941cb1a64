"""The built-in small networks (imports torch at top: only imported from model builders).

Shapes: inputs are (B, *in_shape); every network returns (B, n_outputs) logits or
regression outputs.
"""

from __future__ import annotations

import math

from torch import nn


def _flat(in_shape: tuple[int, ...]) -> int:
    return int(math.prod(in_shape))


def mlp(in_shape: tuple[int, ...], n_outputs: int, hidden: int = 128) -> nn.Sequential:
    """flatten → Linear(hidden) → ReLU → Linear(hidden) → ReLU → Linear(n_outputs)."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(_flat(in_shape), hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, n_outputs),
    )


def mlp_bn(in_shape: tuple[int, ...], n_outputs: int, hidden: int = 128,
           dropout: float = 0.2) -> nn.Sequential:
    """flatten → [Linear → BatchNorm1d → ReLU → Dropout] x 2 → Linear(n_outputs).

    Training needs batches of more than one sample (BatchNorm1d's batch statistics).
    """
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(_flat(in_shape), hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(dropout),
        nn.Linear(hidden, n_outputs),
    )


def _image_shape(name: str, in_shape: tuple[int, ...]) -> tuple[int, int, int]:
    if len(in_shape) != 3:
        raise ValueError(f"model '{name}' needs image inputs (C, H, W), got in_shape {in_shape}")
    c, h, w = (int(v) for v in in_shape)
    return c, h, w


def simplecnn(in_shape: tuple[int, ...], n_outputs: int) -> nn.Sequential:
    """conv3x3(C→32)-ReLU-conv3x3(32→64)-ReLU-MaxPool2-AdaptiveAvgPool(4x4)-1024→128→n.

    On 32x32 inputs (CIFAR) the feature map is (64, 16, 16) after pooling and (64, 4, 4)
    after the adaptive pool, so the classifier is Linear(1024, 128) → Linear(128, n) as
    in E14's simplecnn; on 8x8 digits the adaptive pool is the identity (64, 4, 4).
    Any input of at least 2x2 works.
    """
    c, h, w = _image_shape("simplecnn", in_shape)
    if h < 2 or w < 2:
        raise ValueError(f"model 'simplecnn' needs inputs of at least 2x2, got {h}x{w}")
    return nn.Sequential(
        nn.Conv2d(c, 32, kernel_size=3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, kernel_size=3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d((4, 4)),
        nn.Flatten(),
        nn.Linear(64 * 16, 128), nn.ReLU(),
        nn.Linear(128, n_outputs),
    )


def lenet(in_shape: tuple[int, ...], n_outputs: int) -> nn.Sequential:
    """LeNet-5 with ReLU and max pooling: conv 6@5x5 → pool → conv 16@5x5 → pool →
    AdaptiveAvgPool(5x5) → 400 → 120 → 84 → n_outputs.

    The first conv pads by 2 for inputs under 32x32 (MNIST's 28x28 → 28 → 14 → 10 → 5, the
    classic arrangement); 32x32 and larger are unpadded (32 → 28 → 14 → 10 → 5). The second
    conv pads by 2 only when its input would otherwise be too small (under 6x6), and the
    adaptive pool brings any remaining size to 5x5, so any input of at least 4x4 works.
    """
    c, h, w = _image_shape("lenet", in_shape)
    if h < 4 or w < 4:
        raise ValueError(f"model 'lenet' needs inputs of at least 4x4, got {h}x{w}")
    pad1 = 2 if min(h, w) < 32 else 0
    side = (min(h, w) + 2 * pad1 - 4) // 2  # after conv1 and the first pool
    pad2 = 0 if side >= 6 else 2
    return nn.Sequential(
        nn.Conv2d(c, 6, kernel_size=5, padding=pad1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, kernel_size=5, padding=pad2), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d((5, 5)),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, n_outputs),
    )


def replace_first_conv(model: nn.Module, in_channels: int) -> nn.Module:
    """Swap the first ``nn.Conv2d`` for one taking ``in_channels``, other arguments kept.

    torchvision's classifiers expect RGB; a grey-scale dataset (MNIST, digits) needs a
    1-channel stem. The new conv is freshly initialised by torch's default init (the
    models are built without weights anyway).
    """
    # named_modules() is pre-order in registration order: the first Conv2d is the stem.
    for qualname, child in model.named_modules():
        if not isinstance(child, nn.Conv2d):
            continue
        if child.in_channels == in_channels:
            return model
        parent_name, _, attr = qualname.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        groups = 1 if child.groups == 1 else math.gcd(in_channels, child.out_channels)
        new = nn.Conv2d(in_channels, child.out_channels, kernel_size=child.kernel_size,
                        stride=child.stride, padding=child.padding, dilation=child.dilation,
                        groups=groups, bias=child.bias is not None,
                        padding_mode=child.padding_mode)
        setattr(parent, attr, new)
        return model
    raise ValueError("model has no Conv2d to adapt to the input channels")


def torchvision_classifier(name: str, in_shape: tuple[int, ...], n_outputs: int,
                           **kwargs: object) -> nn.Module:
    """``torchvision.models.<name>(weights=None, num_classes=n_outputs, **kwargs)``,
    with the stem adapted when the input does not have 3 channels."""
    import torchvision

    c, _, _ = _image_shape(name, in_shape)
    model = getattr(torchvision.models, name)(weights=None, num_classes=n_outputs, **kwargs)
    if c != 3:
        replace_first_conv(model, c)
    return model


__all__ = ["lenet", "mlp", "mlp_bn", "replace_first_conv", "simplecnn",
           "torchvision_classifier"]
