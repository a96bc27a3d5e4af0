"""Encoders named by import path: ``package.module:factory`` and ``torchvision:NAME``.

The contract of a factory (the README's "Your own data and models" shows a complete one)::

    def factory(spec: ModelSpec) -> torch.nn.Module

``spec`` gives the input shape (``spec.channels``, ``spec.height``, ``spec.width``) and
``spec.n_classes`` (the output layer's width: a score task's target count).  The
returned module is the *encoder*: it maps a float batch
(B, C, H, W) (normalised images) to features (B, F).  fedsweep measures F on one dummy
batch, then adds the projection head (F -> F -> out_dim) and the output layer
(out_dim -> n_classes), or only the output layer with ``projection_head=False``, as for
its own models.  The factory is called once per run after ``torch.manual_seed`` of the
run's init stream, so its random initialisation is seeded.  Its module must be importable
wherever the run happens (every Ray node): installed, or on ``PYTHONPATH``.

``torchvision:NAME`` is any classification model of ``torchvision.models`` (``resnet18``,
``mobilenet_v3_small``, ...) built without pretrained weights (nothing is downloaded) and
adapted: its last ``Linear`` layer (the ImageNet classifier) is removed so the rest is
the encoder, its first convolution takes the data's channel count, and a ResNet on
images of at most 64 pixels a side gets the CIFAR stem (3x3 stride-1 first convolution,
no max-pool), as fedsweep's ``resnet50``.  Its ImageNet weights are a start, applied
after the model is built: ``init=torchvision:IMAGENET1K_V1``
(:mod:`federated.models.pretrained_start`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from federated.cli.error_reason import error_reason

TORCHVISION_PREFIX = "torchvision:"
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
SMALL_INPUT = 64  # pixels a side up to which a torchvision ResNet gets the CIFAR stem
DUMMY_BATCH = 2


class ModelError(ValueError):
    """A model named by import path cannot be used; ``problem`` says why, in one line."""

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem
        super().__init__(f"model {name!r}: {problem}")


@dataclass(frozen=True)
class ModelSpec:
    """What a model factory is told: the input shape and the output layer's width (the
    number of classes; a score task's targets)."""

    channels: int
    height: int
    width: int
    n_classes: int

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of one image."""
        return (self.channels, self.height, self.width)


def is_import_path(name: str) -> bool:
    """``package.module:factory`` or ``torchvision:NAME``."""
    return isinstance(name, str) and bool(_IMPORT_PATH.fullmatch(name))


def torchvision_names() -> list[str]:
    import torchvision.models

    return sorted(torchvision.models.list_models(module=torchvision.models))


def resolve_factory(name: str) -> Callable[[ModelSpec], nn.Module]:
    """The factory that ``name`` points at; :class:`ModelError` if it does not import."""
    if name.startswith(TORCHVISION_PREFIX):
        arch = name[len(TORCHVISION_PREFIX) :]
        if arch not in torchvision_names():
            raise ModelError(
                name, "not a torchvision classification model (e.g. resnet18, mobilenet_v3_small)"
            )
        return lambda spec: torchvision_encoder(arch, spec)
    module_name, attribute = name.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # any failure inside the user's module is reported alike
        reason = str(err).splitlines()[0] if str(err) else ""
        raise ModelError(
            name, f"import of {module_name!r} failed ({type(err).__name__}: {reason})"
        ) from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise ModelError(name, f"module {module_name!r} has no callable {attribute!r}")
    return factory


def build_encoder(name: str, spec: ModelSpec) -> tuple[nn.Module, int]:
    """Call ``name``'s factory and measure the encoder's feature width on a dummy batch.

    The dummy forward runs in eval mode (no BatchNorm statistics change) under a forked
    torch RNG, so checking a model changes neither it nor the run's random streams."""
    factory = resolve_factory(name)
    try:
        encoder = factory(spec)
    except Exception as err:
        raise ModelError(
            name, f"the factory raised {type(err).__name__}: {error_reason(err)}"
        ) from None
    if not isinstance(encoder, nn.Module):
        raise ModelError(
            name, f"the factory returned {type(encoder).__name__}, not a torch.nn.Module"
        )
    return encoder, feature_width(name, encoder, spec)


def feature_width(name: str, encoder: nn.Module, spec: ModelSpec) -> int:
    """F of the encoder's (B, F) output for a dummy batch; :class:`ModelError` otherwise."""
    shape = (DUMMY_BATCH, *spec.input_shape)
    was_training = encoder.training
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            encoder.eval()
            out = encoder(torch.zeros(shape))
    except Exception as err:
        raise ModelError(
            name,
            f"forward of a dummy batch {tuple(shape)} failed "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"[:240],
        ) from None
    finally:
        encoder.train(was_training)
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != DUMMY_BATCH:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ModelError(
            name,
            f"the encoder's output for a dummy batch {tuple(shape)} is {got} "
            f"(allowed: a ({DUMMY_BATCH}, features) tensor; pool or flatten in the encoder)",
        )
    if not out.is_floating_point() or out.shape[1] < 1:
        raise ModelError(
            name, f"the encoder's output {tuple(out.shape)} {out.dtype} has no float features"
        )
    return int(out.shape[1])


# -------------------------------------------------------------------- torchvision
def torchvision_encoder(arch: str, spec: ModelSpec) -> nn.Module:
    """torchvision model ``arch`` (no weights) without its classifier, adapted to ``spec``."""
    import torchvision.models

    model = torchvision.models.get_model(arch, weights=None)
    last_linear = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not last_linear:
        raise ModelError(
            TORCHVISION_PREFIX + arch, "has no Linear classifier to replace (not supported)"
        )
    model.set_submodule(last_linear[-1], nn.Identity())
    convs = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    small = max(spec.height, spec.width) <= SMALL_INPUT
    if isinstance(model, torchvision.models.ResNet) and small:
        model.conv1 = _conv_like(model.conv1, spec.channels, kernel=3, stride=1, padding=1)
        model.maxpool = nn.Identity()
    elif convs and convs[0][1].in_channels != spec.channels:
        name, first = convs[0]
        model.set_submodule(name, _conv_like(first, spec.channels))
    return model


def _conv_like(
    conv: nn.Conv2d,
    in_channels: int,
    *,
    kernel: int | None = None,
    stride: int | None = None,
    padding: int | None = None,
) -> nn.Conv2d:
    """A freshly initialised convolution like ``conv`` with other input channels/geometry."""
    new = nn.Conv2d(
        in_channels,
        conv.out_channels,
        kernel_size=kernel or conv.kernel_size,
        stride=stride or conv.stride,
        padding=padding if padding is not None else conv.padding,
        bias=conv.bias is not None,
    )
    nn.init.kaiming_normal_(new.weight, mode="fan_out", nonlinearity="relu")
    return new
