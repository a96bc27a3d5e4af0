"""Feature skew: the same labels, different-looking inputs per party.

Two forms (``RunConfig.feature_skew``), both applied to training batches only — the
test set stays clean — on the run's device, a whole batch at a time:

* ``noise`` — NIID-Bench's noise-based feature imbalance (Li et al., ICDE 2022): party
  ``i`` of ``N`` (0-based, so party 0 is clean) adds Gaussian noise of standard
  deviation ``level · i / N`` on the 0..1 pixel scale to every training image it sees,
  fresh noise at every step.  The noise of party ``i``'s step ``t`` in round ``r`` comes
  from a generator keyed by ``(seed, r, i, t)``: the same numbers whichever execution
  path or pack trains the party, no state to checkpoint, and no draw from any other
  stream (the batches, the partition and the initialisation are those of the run
  without skew).
* ``rotation`` — rotated domains: party ``i`` rotates all its training images by its own
  angle, drawn once per run uniformly in ``[-level, level]`` degrees from the run's
  ``features`` stream.  The angle joins each sample's augmentation parameters in the
  batch plan (added to CIFAR-100's own random rotation), so both execution paths rotate
  in the augmentation they already do (nearest-neighbour, zeros outside).
"""

from __future__ import annotations

import numpy as np
import torch

from federated.data.augment import rotate_nearest
from federated.runtime.seeding import STREAMS, numpy_stream

# Runs' party noise is drawn on the CPU (the numbers do not depend on the device) and
# moved to the device with the batch, keyed under the "features" stream's index.
_NOISE_KEY = STREAMS["features"]


class FeatureSkew:
    """A run's per-party feature skew: noise levels or rotation angles per party."""

    def __init__(self, kind: str, level: float, n_parties: int, seed: int) -> None:
        self.kind = kind
        self.level = float(level)
        self.seed = seed
        self.n_parties = n_parties
        self.noise_std = np.zeros(n_parties)
        self.angles = np.zeros(n_parties)
        if kind == "noise":
            self.noise_std = self.level * np.arange(n_parties) / n_parties
        elif kind == "rotation":
            rng = numpy_stream(seed, "features")
            self.angles = rng.uniform(-self.level, self.level, size=n_parties)

    @classmethod
    def from_config(cls, config) -> FeatureSkew | None:
        """The config's skew, or None when it changes no image."""
        if config.feature_skew == "none" or config.feature_skew_level == 0:
            return None
        return cls(config.feature_skew, config.feature_skew_level, config.n_parties, config.seed)

    @property
    def adds_noise(self) -> bool:
        return self.kind == "noise"

    def angle(self, party: int) -> float:
        """Party ``party``'s rotation, degrees (0 unless ``rotation``)."""
        return float(self.angles[party])

    def per_party(self) -> list[dict[str, float]]:
        """Each party's level, for ``partitions.json`` and the manifest."""
        if self.kind == "noise":
            return [{"party": i, "noise_std": float(s)} for i, s in enumerate(self.noise_std)]
        return [{"party": i, "angle_deg": float(a)} for i, a in enumerate(self.angles)]

    def example_images(
        self, images: torch.Tensor, parties: list[int], partition: list[np.ndarray], per_party: int
    ) -> np.ndarray:
        """What ``parties`` see: ``per_party`` of each one's uint8 training images
        (``images``, indexed by ``partition``) under its skew, on the 0..1 scale, as
        ``(len(parties), per_party, C, H, W)`` float32 (noise from a fixed generator:
        an illustration, not the run's own draws)."""
        generator = torch.Generator().manual_seed(self.seed)
        out = []
        for party in parties:
            held = partition[party]  # spread over the party's samples: its classes, not one
            picks = np.linspace(0, len(held) - 1, per_party).round().astype(int)
            rows = torch.as_tensor(held[picks], dtype=torch.long)
            x = images.index_select(0, rows).float()
            if self.kind == "rotation":
                angle = torch.full((x.shape[0],), self.angle(party))
                x = rotate_nearest(x, angle)
            x = x / 255.0
            if self.kind == "noise":
                x = x + float(self.noise_std[party]) * torch.randn(x.shape, generator=generator)
            out.append(x.clamp(0.0, 1.0))
        return torch.stack(out).numpy().astype(np.float32)

    def noise(
        self,
        party: int,
        round_index: int,
        first_step: int,
        steps: int,
        batch_shape: tuple[int, ...],
        scale: torch.Tensor,
    ) -> torch.Tensor | None:
        """Noise for ``steps`` consecutive steps of ``party`` from ``first_step``, in
        normalised units (``scale``: the augmenter's per-channel 1/(255·std), so that the
        std is ``noise_std`` on the 0..1 pixel scale): ``(steps·B, C, H, W)`` on the
        scale's device, or None for a clean party."""
        std = float(self.noise_std[party])
        if std == 0.0:
            return None
        chunks = []
        for step in range(first_step, first_step + steps):
            key = np.random.SeedSequence([self.seed, _NOISE_KEY, round_index, party, step])
            generator = torch.Generator().manual_seed(int(key.generate_state(1)[0]))
            chunks.append(torch.randn(batch_shape, generator=generator))
        noise = torch.cat(chunks).to(scale.device, non_blocking=True)
        # std on the 0..1 scale is 255·std on the 0..255 scale the augmenter's scale maps
        return noise.mul_(scale * (255.0 * std))
