"""Many copies of one model as one network: the parties of a round trained together.

:func:`pack_model` turns a :class:`~federated.models.FedConModel` into a network that
holds ``slots`` independent copies of it (HFTA's horizontal fusion, Wang et al., MLSys
2021).  Activations carry the copies side by side in the channel (or feature)
dimension: an image batch is ``(B, slots·C, H, W)`` — copy ``s`` reads channels
``[s·C, (s+1)·C)`` — and a feature batch ``(B, slots·f)``.  Every layer with weights
becomes its grouped form:

* ``Conv2d(C, O)`` -> one convolution with ``groups = slots·g`` and weight
  ``(slots·O, C/g, kh, kw)``;
* ``Linear(f, o)`` -> one batched matrix multiply with weight ``(slots, o, f)``;
* ``BatchNorm2d(C)`` -> one batch norm over ``slots·C`` channels (statistics per copy,
  because channels are per copy).

Element-wise layers, pooling and ``flatten`` already keep the copies apart in this
layout, so the model's own ``forward`` runs unchanged.  Each copy sees only its own
batch, and gradients of a sum of per-copy losses are each copy's own gradients.

A packed network may run on a *prefix* of its slots: given ``(B, k·C, H, W)`` the
layers use their first ``k`` copies only, so parties that have finished their local
training (the engine orders slots by step count, longest first) drop out of the
arithmetic instead of being masked.

Whether a model packs is decided by :func:`packing_obstacle`: every module holding
tensors must be one of the three above, every other leaf one this layout keeps apart
(element-wise, pooling, flatten), any container — whatever its class — passes on to a
numerical check that compares the packed forward with the copies' own.

A copy's model (:meth:`PackedModel.copy_model`, a party's ``job.model`` under packed
execution) aliases its slot's weights; it cannot train by its own forward pass (the
gradients would land on the alias, not on the packed network), so it refuses one while
autograd records (:class:`PackedCopyForwardError`); evaluation under ``no_grad`` runs.  The
CPU layout is channels-last: grouped convolutions in NCHW run at 0.7–0.9× of the
copies one by one, in channels-last at ~1.5× (README, "Speed").
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from federated.models import FedConModel, ModelOutput
from federated.models.pooling import MaxPool2x2

# Modules without parameters whose output channel / feature s depends only on input
# channel / feature s (or on nothing): they keep packed copies apart as they are.
_PASS_THROUGH: tuple[type[nn.Module], ...] = (
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.ELU,
    nn.GELU,
    nn.SiLU,
    nn.Sigmoid,
    nn.Tanh,
    nn.Identity,
    nn.Flatten,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool2d,
    MaxPool2x2,
)
# Relative tolerance of the packing check (float32; summation order differs).
CHECK_TOLERANCE = 1e-4


class PackedConv2d(nn.Module):
    """``slots`` copies of one ``Conv2d`` as one grouped convolution."""

    def __init__(self, conv: nn.Conv2d, slots: int) -> None:
        super().__init__()
        self.per_in, self.per_out, self.groups = conv.in_channels, conv.out_channels, conv.groups
        self.stride, self.padding, self.dilation = conv.stride, conv.padding, conv.dilation
        self.slots = slots
        self.weight = nn.Parameter(conv.weight.detach().repeat(slots, 1, 1, 1))
        self.bias = None if conv.bias is None else nn.Parameter(conv.bias.detach().repeat(slots))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        copies = x.shape[1] // self.per_in
        weight, bias = self.weight, self.bias
        if copies < self.slots:
            weight = weight[: copies * self.per_out]
            bias = None if bias is None else bias[: copies * self.per_out]
        return F.conv2d(
            x, weight, bias, self.stride, self.padding, self.dilation, self.groups * copies
        )


class PackedLinear(nn.Module):
    """``slots`` copies of one ``Linear`` as one batched matrix multiply over
    ``(..., slots·in)`` inputs."""

    def __init__(self, linear: nn.Linear, slots: int) -> None:
        super().__init__()
        self.per_in, self.per_out, self.slots = linear.in_features, linear.out_features, slots
        self.weight = nn.Parameter(linear.weight.detach().repeat(slots, 1, 1))
        self.bias = (
            None if linear.bias is None else nn.Parameter(linear.bias.detach().repeat(slots, 1))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        copies = x.shape[-1] // self.per_in
        rows = x.reshape(-1, copies, self.per_in).transpose(0, 1)  # (copies, N, in), a view
        weight = self.weight[:copies].transpose(1, 2)
        if self.bias is None:
            out = torch.bmm(rows, weight)
        else:
            out = torch.baddbmm(self.bias[:copies].unsqueeze(1), rows, weight)
        return out.transpose(0, 1).reshape(*lead, copies * self.per_out)


class PackedBatchNorm2d(nn.BatchNorm2d):
    """``slots`` copies of one ``BatchNorm2d``: one batch norm over ``slots·C`` channels,
    run on the first ``k·C`` of them when the input holds ``k`` copies."""

    def __init__(self, norm: nn.BatchNorm2d, slots: int) -> None:
        super().__init__(
            norm.num_features * slots,
            norm.eps,
            norm.momentum,
            norm.affine,
            norm.track_running_stats,
            device=norm.weight.device if norm.affine else None,
        )
        self.per_channels = norm.num_features
        with torch.no_grad():
            if norm.affine:
                self.weight.copy_(norm.weight.repeat(slots))
                self.bias.copy_(norm.bias.repeat(slots))
            if norm.track_running_stats:
                self.running_mean.copy_(norm.running_mean.repeat(slots))
                self.running_var.copy_(norm.running_var.repeat(slots))
                # one step counter per copy (copies that finish early stop counting)
                self.num_batches_tracked = norm.num_batches_tracked.repeat(slots)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        # momentum=None (a cumulative average) is refused by packing_obstacle
        factor = self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked[: n // self.per_channels].add_(1)

        def first(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[:n]

        return F.batch_norm(
            x,
            first(self.running_mean),
            first(self.running_var),
            first(self.weight),
            first(self.bias),
            self.training or not self.track_running_stats,
            factor,
            self.eps,
        )


_PACKED: dict[type[nn.Module], type[nn.Module]] = {
    nn.Conv2d: PackedConv2d,
    nn.Linear: PackedLinear,
    nn.BatchNorm2d: PackedBatchNorm2d,
}


def _module_obstacle(model: nn.Module) -> str | None:
    """Why the module tree cannot be packed layer by layer, or None."""
    for name, module in model.named_modules():
        kind = type(module)
        where = name or "the model"
        if isinstance(module, nn.Conv2d) and module.padding_mode != "zeros":
            return f"{where} pads with {module.padding_mode!r}"
        if isinstance(module, nn.BatchNorm2d) and module.momentum is None:
            return f"{where} averages its statistics cumulatively (momentum=None)"
        if kind in _PACKED or isinstance(module, _PASS_THROUGH):
            continue
        owns_tensors = any(True for _ in module.parameters(recurse=False)) or any(
            True for _ in module.buffers(recurse=False)
        )
        if not owns_tensors and any(True for _ in module.children()):
            # a container (the user's own class too): its forward routes tensors between
            # children; whether it keeps the copies apart is the numerical check's call
            continue
        return f"{where} is a {kind.__name__}, which packed execution has no grouped form of"
    return None


def _replace_layers(module: nn.Module, slots: int) -> None:
    for name, child in module.named_children():
        packed = _PACKED.get(type(child))
        if packed is not None:
            setattr(module, name, packed(child, slots))
        else:
            _replace_layers(child, slots)


class PackedCopyForwardError(RuntimeError):
    """A method ran a packed party's ``job.model`` forward while training."""


def _refuse_training_forward(module: nn.Module, args: tuple) -> None:
    if torch.is_grad_enabled():
        raise PackedCopyForwardError(
            "job.model of a packed party is a view of its slot's weights and cannot run "
            "a training forward pass: use the output the engine hands to loss(), and "
            "job.frozen for frozen models (docs/writing-a-method.md, packed execution)"
        )


class PackedModel:
    """``slots`` copies of a model as one network (:attr:`net`), with each copy's
    weights reachable as a model of its own (:meth:`copy_model`)."""

    def __init__(self, template: FedConModel, slots: int) -> None:
        self.slots = slots
        self.template = template
        net = copy.deepcopy(template)
        _replace_layers(net, slots)
        self.net = net.to(memory_format=torch.channels_last)
        template_state = template.state_dict()
        # state key -> the packed tensor viewed as (slots, *one copy's shape)
        self._views: dict[str, torch.Tensor] = {}
        packed_state = self.net.state_dict(keep_vars=True)
        for key, value in template_state.items():
            packed = packed_state[key]
            if packed.dim() == value.dim() + 1:
                self._views[key] = packed  # already (slots, ...)
            else:
                self._views[key] = packed.view(slots, *value.shape)
        self._copy_models: dict[int, FedConModel] = {}

        self.parameters = list(self.net.parameters())
        # each packed parameter's shape as (slots, *one copy's shape), same order
        names = [name for name, _ in self.net.named_parameters()]
        self.slot_shapes = [tuple(self._views[name].shape) for name in names]

    def copy_view(self, key: str, slot: int) -> torch.Tensor:
        """Copy ``slot``'s entry ``key`` of the state: a view into the packed tensor."""
        return self._views[key][slot]

    def load(self, slot: int, state: Mapping[str, torch.Tensor]) -> None:
        """Set copy ``slot``'s weights and buffers to ``state`` (a model state dict)."""
        with torch.no_grad():
            for key in self._views:
                self.copy_view(key, slot).copy_(state[key])

    def copy_model(self, slot: int) -> FedConModel:
        """A model whose parameters and buffers *are* copy ``slot``'s (aliases of the
        packed storage): what a method's per-party hooks see as ``job.model``."""
        model = self._copy_models.get(slot)
        if model is None:
            model = copy.deepcopy(self.template)
            for key in self._views:
                owner_name, _, leaf = key.rpartition(".")
                owner = model.get_submodule(owner_name)
                view = self.copy_view(key, slot)
                if leaf in owner._parameters:
                    owner._parameters[leaf] = nn.Parameter(view.detach(), requires_grad=True)
                else:
                    owner._buffers[leaf] = view.detach()
            for module in model.modules():
                module.register_forward_pre_hook(_refuse_training_forward)
            self._copy_models[slot] = model
        return model

    def link_gradients(self, slots: Iterable[int]) -> None:
        """Point each listed copy's ``p.grad`` at its slice of the packed gradients (after
        a backward pass), so that per-party hooks read and change them in place."""
        grads = [
            None if p.grad is None else p.grad.view(shape)
            for p, shape in zip(self.parameters, self.slot_shapes)
        ]
        for slot in slots:
            for param, grad in zip(self.copy_model(slot).parameters(), grads):
                param.grad = None if grad is None else grad[slot]


def fold_images(batches: torch.Tensor) -> torch.Tensor:
    """``(k, B, C, H, W)`` per-copy batches -> ``(B, k·C, H, W)``, channels-last."""
    k, b, c, h, w = batches.shape
    side_by_side = batches.permute(1, 3, 4, 0, 2).contiguous()  # (B, H, W, k, C)
    return side_by_side.view(b, h, w, k * c).permute(0, 3, 1, 2)


def unfold_output(out: ModelOutput, copies: int) -> list[ModelOutput]:
    """A packed network's output -> each copy's own (gradients flow back).  Copy-major
    and contiguous: per-copy losses on strided views cost more than the one copy."""
    parts = [t.view(t.shape[0], copies, -1).transpose(0, 1).contiguous().unbind(0) for t in out]
    return [ModelOutput(*fields) for fields in zip(*parts)]


# The packing check's verdict per model structure and image shape: a process that builds
# the same model again (a sweep's trial actor reused for the next trial, runs one after
# another in one process) is not charged the packed forwards again.
_VERDICTS: dict[tuple, str | None] = {}


def packing_obstacle(template: FedConModel, image_shape: tuple[int, int, int]) -> str | None:
    """Why ``template`` cannot be packed (one line), or None when it can.

    Beyond the module check, two copies with different weights are packed and run on
    two different batches, in training and in evaluation mode; their outputs must equal
    each copy's own forward within :data:`CHECK_TOLERANCE`.  Runs on the CPU, with the
    torch RNG forked (it changes no run's random numbers).  The verdict is kept for the
    model's structure (:func:`_structure`) and ``image_shape``.
    """
    key = (_structure(template), tuple(image_shape))
    if key not in _VERDICTS:
        _VERDICTS[key] = _checked_obstacle(template, image_shape)
    return _VERDICTS[key]


def _structure(model: nn.Module) -> tuple:
    """What the check's verdict depends on, not the weights' values: every module's class
    (the class itself: two plugins' classes of one name differ), its settings (its
    ``repr``, and each plain attribute, which a forward may branch on) and every
    parameter's and buffer's name, shape and dtype."""
    tensors = [*model.named_parameters(), *model.named_buffers()]
    return (
        tuple((type(m), _plain_attributes(m)) for m in model.modules()),
        repr(model),
        tuple((name, tuple(t.shape), t.dtype) for name, t in tensors),
    )


def _plain_attributes(module: nn.Module) -> tuple:
    plain = (bool, int, float, str, type(None))
    return tuple(
        sorted((k, v) for k, v in vars(module).items() if k != "training" and isinstance(v, plain))
    )


def _checked_obstacle(template: FedConModel, image_shape: tuple[int, int, int]) -> str | None:
    reason = _module_obstacle(template)
    if reason is not None:
        return reason
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        copies = [copy.deepcopy(template).cpu().float() for _ in range(2)]
        with torch.no_grad():
            for p in copies[1].parameters():
                p.add_(torch.randn_like(p) * 0.1)
        x = torch.randn(2, 3, *image_shape)
        try:
            for train in (True, False):
                packed = PackedModel(copies[0], 2)
                packed.load(1, copies[1].state_dict())
                packed.net.train(train)
                got = unfold_output(packed.net(fold_images(x)), 2)
                for slot, model in enumerate(copies):
                    reference = copy.deepcopy(model).train(train)(x[slot])
                    for a, b in zip(got[slot], reference):
                        scale = float(b.detach().abs().max()) + 1e-6
                        if float((a - b).detach().abs().max()) > CHECK_TOLERANCE * scale:
                            return "its packed forward does not equal its copies' own"
        except (RuntimeError, ValueError, TypeError) as err:
            return f"its forward fails on packed inputs ({str(err).splitlines()[0]})"
    return None
