"""The Flower client of the side-by-side benchmark's round (:mod:`benchmarks.flower_round`
runs it): one party's local training, the plain PyTorch loop a Flower user writes
without a DataLoader.  A module of its own so that Ray's actors import it by name.

Per round the party's rows of fedsweep's batch plan (the plan file) are gathered and
normalised once with fedsweep's normalisation, then per batch of the plan: forward,
cross-entropy on the logits, backward and ``torch.optim.SGD`` (fresh each round,
fedsweep's lr, momentum and weight decay).  Imports ``flwr``; no test imports it.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from federated.data import load_dataset
from federated.data.augment import Augmenter

client_app = ClientApp()


@functools.lru_cache(maxsize=1)
def _plan(path: str) -> dict[str, Any]:
    """The plan file and the data set it names, loaded once per Ray actor."""
    plan = torch.load(path, weights_only=False)
    data = load_dataset(plan["dataset"])
    plan["images"], plan["labels"] = data.train_x, data.train_y
    plan["augmenter"] = Augmenter(data.spec, torch.device("cpu"))
    return plan


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    """One party's local training of a round (module docstring)."""
    began = time.process_time()  # this actor's CPU seconds: the party's own work
    config = msg.content["config"]
    plan = _plan(str(config["plan"]))
    torch.set_num_threads(int(config["threads"]))
    party = int(context.node_config["partition-id"])
    rows = plan["rounds"][int(config["server-round"]) - 1][party]
    model = plan["model"]
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    model.requires_grad_(True).train()
    sgd = plan["sgd"]
    optimizer = torch.optim.SGD(model.parameters(), **sgd)
    # fedsweep's normalisation (elementwise, so gathering a round's rows at once gives
    # the numbers batch by batch would)
    xs = plan["augmenter"].normalize(plan["images"].index_select(0, rows))
    ys = plan["labels"][rows]
    batch = plan["batch"]
    for first in range(0, len(rows), batch):
        out = model(xs[first : first + batch])
        loss = F.cross_entropy(out.logits, ys[first : first + batch])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    reply = RecordDict(
        {
            "arrays": ArrayRecord(model.state_dict()),
            "metrics": MetricRecord(
                {
                    "num-examples": int(plan["sizes"][party]),
                    "cpu-s": time.process_time() - began,
                }
            ),
        }
    )
    return Message(content=reply, reply_to=msg)
