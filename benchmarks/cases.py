"""What one measurement runs: a federated setting, kept small enough to pass as JSON.

Every measurement of the benchmark (fedsweep's round loop, the straightforward loop,
the scaling table) is described by one :class:`Case`; the fixed parts of the setting
(simple-cnn, Dir(0.5), batch 64, the paper's SGD) are the issue's and live here.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Any

from federated.config.run_config import RunConfig
from federated.data import ImageData, load_dataset

MODEL = "simple-cnn"
BATCH_SIZE = 64
BETA = 0.5


#: the fields of a Case that every benchmark command line sets by a flag of the same name
SHARED_FLAGS = (
    "local_epochs", "warmup_rounds", "data_fraction", "test_fraction", "threads", "device"
)  # fmt: skip


@dataclass(frozen=True)
class Case:
    """One federated setting to time.

    ``rounds`` are the measured rounds; ``warmup_rounds`` run first and are not reported
    (MOON's first round has no previous model, hence no contrastive term, and first
    calls pay one-off costs).  Fractions are of the training and test sets.
    """

    algorithm: str
    dataset: str
    n_parties: int = 10
    sample_fraction: float = 1.0
    local_epochs: int = 1
    rounds: int = 3
    warmup_rounds: int = 1
    data_fraction: float = 1.0
    test_fraction: float = 1.0
    threads: int = 1
    device: str = "cpu"
    seed: int = 0
    mu: float | None = None  # None: fedsweep's default for the algorithm and dataset
    execution: str = "packed"  # packed (parties together) or sequential (one by one)

    def run_config(self) -> RunConfig:
        """The fedsweep configuration of this case (resolved; mu and tau: fedsweep's
        defaults, unless the case sets mu)."""
        mu = {} if self.mu is None else {"mu": self.mu}
        return RunConfig.from_dict(
            dict(
                algorithm=self.algorithm,
                dataset=self.dataset,
                model=MODEL,
                rounds=self.warmup_rounds + self.rounds,
                n_parties=self.n_parties,
                sample_fraction=self.sample_fraction,
                beta=BETA,
                local_epochs=self.local_epochs,
                batch_size=BATCH_SIZE,
                data_fraction=self.data_fraction,
                test_fraction=self.test_fraction,
                device=self.device,
                threads=self.threads,
                seed=self.seed,
                execution=self.execution,
                checkpoint_every=0,
                **mu,
            )
        ).resolved()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Case:
        return cls(**values)

    @classmethod
    def from_flags(cls, flags: Any, algorithm: str, dataset: str, rounds: int, **more: Any) -> Case:
        """The case of ``algorithm`` on ``dataset`` for ``rounds`` timed rounds, set by the
        flags the benchmarks' command lines share (``flags.parties`` and those named as the
        case's own fields: local epochs, warm-up rounds, data and test fractions, threads,
        device); ``more`` sets any other field."""
        shared = {name: getattr(flags, name) for name in SHARED_FLAGS}
        return cls(algorithm, dataset, n_parties=flags.parties, rounds=rounds, **shared, **more)


@functools.lru_cache(maxsize=4)
def dataset(name: str) -> ImageData:
    """The dataset, loaded once per process (generating ``synthetic`` takes about 1 s)."""
    return load_dataset(name)
