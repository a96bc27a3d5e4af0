"""Model families: the kind of network a task trains, its built-in names, how it is built.

A task says which family its models belong to (:attr:`federated.tasks.base.Task.model_family`,
an import path to a :class:`ModelFamily`): classification and score tasks train an
encoder and a head (:class:`~federated.models.fedcon.FedConModel`, named models or any
import-path encoder), detection a detector that computes its own loss
(:mod:`federated.tasks.detection.models`), segmentation a dense-prediction network
(:mod:`federated.tasks.segmentation.models`).  :func:`federated.models.build_model` builds the
name in the data's task's family, and the config refuses a name from another family in
one line listing the family's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torch import nn

from federated.data.catalog import DatasetSpec
from federated.models.import_path import ModelError

if TYPE_CHECKING:
    from federated.models.pretrained_start import StartMapping

#: (name, data spec, head width, MOON's out_dim, projection head on) -> a fresh model
FamilyBuilder = Callable[[str, DatasetSpec, int, int, bool], nn.Module]


@dataclass(frozen=True)
class ModelFamily:
    """One kind of network.

    Attributes:
        kind: the family in words, for messages ("a detector").
        names: its built-in model names (name -> the family's own per-model builder;
            only the keys are read here).
        builder: builds one of them (or an import path, where ``import_paths``).
        import_paths: whether ``package.module:factory`` and ``torchvision:NAME`` name
            models of this family (an encoder under a head).
        start: how a pretrained start maps onto its models (a detector's weight
            layout); None: as an encoder under a head.
    """

    kind: str
    names: Mapping[str, Any]
    builder: FamilyBuilder
    import_paths: bool = False
    start: StartMapping | None = None

    def allowed(self) -> str:
        """The names a model field may take, in words."""
        names = ", ".join(self.names)
        return f"{names} or an import path" if self.import_paths else names

    def build(
        self, name: str, spec: DatasetSpec, outputs: int, out_dim: int, projection_head: bool
    ) -> nn.Module:
        """A freshly initialised model ``name`` of this family (uses torch's RNG);
        :class:`ModelError` for a name of no model of it."""
        if name not in self.names and not self.import_paths:
            raise ModelError(name, f"is not {self.kind} (allowed: {self.allowed()})")
        return self.builder(name, spec, outputs, out_dim, projection_head)
