"""A rough training-memory estimate for an image folder's run, checked before training.

An image folder fixes the image size, and with it the model (ResNet-50 above 32 pixels
a side) and the activations every training sample holds for the backward pass: those
grow with height x width, and a CIFAR-style ResNet-50 (no down-sampling stem) at
300x200 holds about 2 GiB per sample.  Before such a run loads its parties, the config
estimates what training needs and refuses it in one line when this machine cannot give
it, instead of the kernel killing the run with no message.

The estimate, for a run that trains on the CPU (a GPU's own memory is not read here):

* activations: the model's layer outputs for one training sample (counted on torch's
  ``meta`` device: shapes only, nothing computed or allocated), x 4 bytes, x the batch,
  x the parties that train at once (packed execution: up to ``pack_width``, 4 on a CPU;
  sequential: one);
* weights: 4 copies (weights, gradients, momentum, the global model) per party at once;
* the data set's uint8 tensors.

Counting every layer's output over-counts what autograd keeps (in-place activations,
views), so the estimate errs high, within about a factor of two; a run refused by it
would have needed most of the machine.
"""

from __future__ import annotations

import functools
from typing import Any

from federated.data.catalog import DatasetSpec
from federated.params import ConfigError
from federated.runtime.machine_memory import available_memory, gib

CPU_PACK_WIDTH = 4  # federated.execution.packed's default on a CPU
WEIGHT_COPIES = 4  # weights, gradients, momentum, global model


@functools.cache
def per_sample_bytes(model: str, spec: DatasetSpec) -> tuple[int, int] | None:
    """(activation bytes per training sample, parameter bytes) of ``model`` for ``spec``,
    or None when the model cannot be built on the meta device (a user's factory that
    computes on real tensors: no estimate, no refusal)."""
    import torch

    from federated.models import build_model

    total = 0

    def count(_module: Any, _inputs: Any, output: Any) -> None:
        nonlocal total
        if isinstance(output, torch.Tensor):
            total += output.numel() * output.element_size()

    try:
        with torch.device("meta"), torch.random.fork_rng(devices=[]):
            net = build_model(model, spec)
            hooks = [
                m.register_forward_hook(count) for m in net.modules() if not list(m.children())
            ]
            net.train()
            net(torch.empty(1, spec.channels, spec.height, spec.width))
            for hook in hooks:
                hook.remove()
    except Exception:  # any failure here only means "cannot estimate", never a refusal
        return None
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    return total, params


def trains_on_cpu(device: str) -> bool:
    if device == "cpu":
        return True
    if device != "auto":
        return False
    import torch

    return not torch.cuda.is_available()


def check_training_memory(c: Any, spec: DatasetSpec) -> None:
    """Refuse (``ConfigError`` on ``image_size``) an image-folder run on the CPU whose
    estimated training memory exceeds what the machine has available."""
    if not trains_on_cpu(c.device):
        return
    model = c.model or spec.default_model
    sizes = per_sample_bytes(model, spec)
    available = available_memory()
    if sizes is None or available is None:
        return
    activations, params = sizes
    drawn = max(1, round(c.n_parties * c.sample_fraction))
    at_once = 1 if c.execution in ("sequential", "reference", "fast") else drawn
    at_once = min(at_once, c.pack_width or CPU_PACK_WIDTH)
    n_train = max(1, round(spec.train_size * c.data_fraction))
    batch = min(c.batch_size, n_train)
    data = (spec.train_size + spec.test_size) * spec.channels * spec.height * spec.width
    needed = at_once * (batch * activations + WEIGHT_COPIES * params) + data
    if needed > available:
        raise ConfigError(
            "image_size",
            f"{spec.height}x{spec.width}",
            f"a size whose training fits: {model} at {spec.height}x{spec.width} needs about "
            f"{gib(needed)} ({at_once} parties at once x batch {batch} x "
            f"{gib(activations)} of activations per image) and this machine has "
            f"{gib(available)} available; pass a smaller --image-size, --batch-size or "
            "--pack-width, or a smaller --model",
        )
