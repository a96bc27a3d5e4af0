"""The fast path's building blocks give exactly the numbers of the plain torch ops.

The end-to-end fast-vs-reference test cannot see these: both execution paths use the
same pooling and optimizer, so each is pinned to its plain torch counterpart here.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from federated.data import dataset_spec
from federated.engine.round_loop import run_rounds
from federated.execution.sequential import SequentialTrainer
from federated.models import build_model
from federated.models.pooling import max_pool2x2
from federated.sgd_rule import SgdRule
from tests.conftest import tiny


@pytest.mark.parametrize("shape", [(4, 3, 8, 8), (2, 5, 7, 9), (3, 1, 28, 28), (1, 2, 2, 3)])
def test_max_pool2x2_equals_max_pool2d_values_and_gradients_with_ties(shape):
    gen = torch.Generator().manual_seed(0)
    # integers in 0..3: most windows hold ties, where the gradient's choice matters
    x = torch.randint(0, 4, shape, generator=gen).float()
    upstream = torch.randn(shape[0], shape[1], shape[2] // 2, shape[3] // 2, generator=gen)
    fast_in, plain_in = x.clone().requires_grad_(), x.clone().requires_grad_()
    fast, plain = max_pool2x2(fast_in), F.max_pool2d(plain_in, 2)
    assert torch.equal(fast, plain)
    fast.backward(upstream)
    plain.backward(upstream)
    assert torch.equal(fast_in.grad, plain_in.grad)


def test_the_engines_sgd_rule_applies_torchs_sgd_update_up_to_rounding():
    """The engine's update (:class:`SgdRule`: the fused kernel, zero-initialised
    momentum) rounds differently from torch's default foreach ``torch.optim.SGD`` (seen:
    parameters part in the last float bit after 8 steps of batch 64), but it is the same
    update: over 30 steps the two stay within 1e-6 of each other; and it equals
    ``torch.optim.SGD(fused=True)`` (lazily created momentum) exactly."""
    torch.manual_seed(0)
    rule_model = build_model("simple-cnn", dataset_spec("fmnist"), 32, True)
    plain_model, fused_model = copy.deepcopy(rule_model), copy.deepcopy(rule_model)
    options = dict(lr=0.01, momentum=0.9, weight_decay=1e-5)
    rule = SgdRule(**options)
    params = list(rule_model.parameters())
    momenta = rule.new_momenta(params)
    plain = torch.optim.SGD(plain_model.parameters(), **options)
    fused = torch.optim.SGD(fused_model.parameters(), fused=True, **options)
    gen = torch.Generator().manual_seed(1)
    for _ in range(30):
        x, y = torch.randn(64, 1, 28, 28, generator=gen), torch.randint(0, 10, (64,), generator=gen)
        for model, opt in ((plain_model, plain), (fused_model, fused)):
            opt.zero_grad()
            F.cross_entropy(model(x).logits, y).backward()
            opt.step()
        for p in params:
            p.grad = None
        F.cross_entropy(rule_model(x).logits, y).backward()
        rule.step(params, [p.grad for p in params], momenta)
    for a, b in zip(rule_model.parameters(), fused_model.parameters()):
        assert torch.equal(a, b)
    fused_model = rule_model
    pairs = list(zip(fused_model.parameters(), plain_model.parameters()))
    largest = max((a - b).abs().max().item() for a, b in pairs)
    assert largest < 1e-6


def test_chunked_augmentation_matches_batch_by_batch_across_chunk_edges(synthetic, monkeypatch):
    # parties of 214 to 290 samples: 4 or 5 batches of 64, so chunks of 3 end in a partial one
    monkeypatch.setattr(SequentialTrainer, "chunk_batches", 3)
    sequential = tiny(algorithm="moon", rounds=2, execution="sequential")
    chunked = list(run_rounds(sequential, synthetic))
    plain = list(run_rounds(tiny(algorithm="moon", rounds=2, execution="reference"), synthetic))
    for key in ("test_acc", "test_loss", "train_loss", "con_loss"):
        # repr: round 0's con_loss is NaN (no previous model yet), and NaN != NaN
        assert [repr(r[key]) for r in chunked] == [repr(r[key]) for r in plain], key
