"""Every study of the MOON paper (README, "Sweeps"), one definition each, with its table.

Unless a study fixes it, ``mu`` resolves per (algorithm, dataset) to the paper's best
(MOON 5 / FedProx 0.01 on CIFAR-10, 1 / 0.001 on CIFAR-100 and Tiny-ImageNet, MOON 1
elsewhere) and ``tau`` to 0.5, so "best mu per dataset" needs no extra axis.
"""

from __future__ import annotations

from search_spaces.study import Axis, Study, categorical, joint, logint, loguniform

FEDERATED = ("moon", "fedavg", "fedprox", "scaffold")
WITH_SOLO = (*FEDERATED, "solo")

STUDIES_LIST: list[Study] = [
    Study(
        "comparison",
        "Table 1, Fig. 6",
        "every method at its best mu, over seeds; SOLO trains as many epochs as a party",
        (Axis("algorithm", ("fedavg", "fedprox", "moon", "scaffold", "solo")),),
    ),
    Study(
        "moon_mu",
        "Table 9",
        "MOON's contrastive weight mu (mu=0 is FedAvg)",
        (Axis("mu", (0.0, 0.1, 1.0, 5.0, 10.0), optuna=loguniform(0.01, 10.0)),),
        fixed={"algorithm": "moon"},
    ),
    Study(
        "fedprox_mu",
        "§4.2 (FedProx tuning)",
        "FedProx's proximal weight mu",
        (Axis("mu", (0.001, 0.01, 0.1, 1.0), optuna=loguniform(1e-4, 1.0)),),
        fixed={"algorithm": "fedprox"},
    ),
    Study(
        "temperature",
        "Fig. 11a",
        "MOON's temperature tau",
        (Axis("tau", (0.1, 0.5, 1.0), optuna=loguniform(0.05, 2.0)),),
        fixed={"algorithm": "moon"},
    ),
    Study(
        "out_dim",
        "Fig. 11b",
        "output dimension of MOON's projection head",
        (Axis("out_dim", (64, 128, 256), optuna=logint(16, 512)),),
        fixed={"algorithm": "moon"},
    ),
    Study(
        "local_epochs",
        "Fig. 7",
        "local epochs E per round, per method",
        (
            Axis("local_epochs", (1, 5, 10, 20, 40), optuna=logint(1, 40)),
            Axis("algorithm", FEDERATED),
        ),
    ),
    Study(
        "heterogeneity",
        "Table 4",
        "Dirichlet concentration beta (smaller: more skewed), per method",
        (
            Axis("beta", (0.1, 0.5, 5.0), optuna=loguniform(0.05, 10.0)),
            Axis("algorithm", WITH_SOLO),
        ),
        paper_datasets=("cifar100",),
    ),
    Study(
        "parties",
        "Table 3, Fig. 8",
        "number of parties (100 parties with 20% drawn per round), per method",
        (
            joint(
                "setting",
                {
                    "N=10": {"n_parties": 10, "sample_fraction": 1.0, "rounds": 100},
                    "N=50": {"n_parties": 50, "sample_fraction": 1.0, "rounds": 200},
                    "N=100, 20% per round": {
                        "n_parties": 100,
                        "sample_fraction": 0.2,
                        "rounds": 500,
                    },
                },
            ),
            joint(
                "method",
                {
                    "MOON (mu=1)": {"algorithm": "moon", "mu": 1.0},
                    "MOON (mu=10)": {"algorithm": "moon", "mu": 10.0},
                    "FedAvg": {"algorithm": "fedavg"},
                    "FedProx": {"algorithm": "fedprox"},
                    "SCAFFOLD": {"algorithm": "scaffold"},
                    "SOLO": {"algorithm": "solo"},
                },
            ),
        ),
        paper_datasets=("cifar100",),
    ),
    Study(
        "loss_ablation",
        "Table 5",
        "second term of the local loss: none (FedAvg), l2 on representations (mu tuned), MOON",
        (
            joint(
                "second_term",
                {
                    "none": {"algorithm": "fedavg"},
                    **{
                        f"l2 (mu={m:g})": {"algorithm": "l2rep", "mu": m}
                        for m in (0.001, 0.01, 0.1, 1.0, 5.0, 10.0)
                    },
                    "moon": {"algorithm": "moon"},
                },
            ),
        ),
    ),
    Study(
        "projection_head",
        "Table 7",
        "with and without the projection head, per method",
        (Axis("projection_head", (True, False)), Axis("algorithm", WITH_SOLO)),
        paper_datasets=("cifar10", "cifar100"),
    ),
    Study(
        "negatives",
        "Table 12",
        "MOON with k previous models as negatives (mu tuned per k)",
        (
            Axis("prev_models", (1, 2, 5, 100), optuna=categorical(1, 2, 3, 5, 10, 100)),
            Axis("mu", (0.1, 1.0, 5.0, 10.0), optuna=loguniform(0.1, 10.0)),
        ),
        fixed={"algorithm": "moon"},
        paper_datasets=("cifar10",),
    ),
    Study(
        "server_momentum",
        "Table 10",
        "FedAvg and MOON with plain averaging or FedAvgM (server momentum beta tuned)",
        (
            Axis("algorithm", ("fedavg", "moon")),
            joint(
                "server",
                {
                    "average": {"server_optimizer": "avg"},
                    **{
                        f"fedavgm (beta={b})": {"server_optimizer": "fedavgm", "server_momentum": b}
                        for b in (0.1, 0.7, 0.9)
                    },
                },
            ),
        ),
    ),
    Study(
        "iid",
        "Table 8",
        "MOON's mu under an IID partition (mu=0 is FedAvg)",
        (Axis("mu", (0.0, 0.1, 1.0, 5.0, 10.0), optuna=loguniform(0.01, 10.0)),),
        fixed={"algorithm": "moon", "partition": "iid"},
        paper_datasets=("cifar10",),
    ),
    Study(
        "annealed_tau",
        "annealing paper Table 2",
        "MOON with fixed or annealed temperature from tau0 (NEW-MOON)",
        (
            Axis("tau", (0.5, 1.0, 1.5, 2.0), optuna=loguniform(0.1, 2.0)),
            Axis("tau_schedule", ("fixed", "annealed")),
        ),
        fixed={"algorithm": "moon"},
        paper_datasets=("cifar10",),
    ),
]

STUDIES: dict[str, Study] = {s.name: s for s in STUDIES_LIST}
