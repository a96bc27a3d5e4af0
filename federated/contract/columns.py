"""The results contract's columns: what every metric column a run writes holds.

Each column of a round's row (``result.json``, the report's ``data/rounds.csv``) that
carries a task metric is declared once here, as a :class:`ColumnFamily`: which metric
(the ``{stem}`` of the task's :class:`~federated.contract.metrics.MetricSpec`, or the
loss), on which **split** (the pooled test set, the federated validation split, each
party's class mix of the test set, each party's own test or validation split), of which
**model** (the global model, the model each party is evaluated with, a fine-tuned copy)
and at which **cadence** (every round, every k-th round of a config field and the last,
the last round).  :func:`declared_columns` expands the families for one task's
declaration; a sweep records the result in its manifest (``columns``) and the report
writes it beside its data files (``data/columns.csv``), so that a reader of any column
knows what it measured without reading the engine.

A DP-FedAvg run's rows carry four more columns whatever its task, declared once in
:data:`PRIVACY_COLUMNS` (:class:`RunColumn`: one column each, no metric stem).

Only the words live here; the engine writes the columns
(:mod:`federated.evaluation.round_evaluation`, :mod:`federated.evaluation.fairness`,
:mod:`federated.server.privacy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from federated.contract.metrics import LOSS
from federated.contract.task_spec import TaskSpec

# the splits
TEST = "test set"
VALIDATION = "validation split (size-weighted over parties)"
CLASS_MIX = (
    "each party's own test split where party_test_fraction > 0, else its class mix of the "
    "test set (the test set re-weighted by its training classes)"
)
OWN_TEST = "each party's own test split"
OWN_VALIDATION = "each party's own validation split"
# the models
GLOBAL = "the global model"
OWN = "each party's own model (a personal-model method)"
FINE_TUNED = (
    "the model each party is evaluated with; on a party's own split, a copy fine-tuned on "
    "its own training data where finetune_epochs > 0"
)
# the cadences
EVERY_ROUND = "every round"
PERSONAL_ROUNDS = "every personal_test_every-th round and the last"
SCORED_ROUNDS = "every party_scores_every-th round and the last"
VALIDATED_ROUNDS = (
    "every party_scores_every-th round and the last, carried into the rows between "
    "(val_round says from which)"
)


@dataclass(frozen=True)
class ColumnFamily:
    """Columns of one kind, one per metric stem.

    Attributes:
        pattern: the column's name with ``{stem}`` for the metric (``test_{stem}``).
        split, model, cadence: what it was measured on, with which model, when (the
            module's words).
        statistic: what the value is over the parties ("value": one value of the split).
        metrics_only: True where the loss is never recorded in it (per-party values).
    """

    pattern: str
    split: str
    model: str
    cadence: str
    statistic: str = "value"
    metrics_only: bool = True

    def column(self, stem: str) -> str:
        return self.pattern.format(stem=stem)


#: the pooled test set's value: what a run is reported by unless it scores own splits
TEST_VALUE = ColumnFamily(
    "test_{stem}",
    TEST,
    "the global model; with own models, the mean over the parties' own models",
    "every round; with own models, " + PERSONAL_ROUNDS,
    metrics_only=False,
)
#: the mean over parties of each one's own test split: what a personalised run is judged by
OWN_TEST_MEAN = ColumnFamily(
    "party_test_{stem}_mean", OWN_TEST, FINE_TUNED, SCORED_ROUNDS, "mean over parties"
)
#: the per-party values' columns (``party_{stem}/<party>``): one per party, not a summary
PER_PARTY = ColumnFamily("party_{stem}/<party>", TEST, OWN, PERSONAL_ROUNDS, "one party's value")
#: the per-party outcomes' mean and worst decile (what the report's per-party table reads)
PARTY_MEAN = ColumnFamily(
    "party_{stem}_mean", CLASS_MIX, FINE_TUNED, SCORED_ROUNDS, "mean over parties"
)
PARTY_WORST = ColumnFamily(
    "party_{stem}_worst10",
    CLASS_MIX,
    FINE_TUNED,
    SCORED_ROUNDS,
    "mean of the worst ceil(N/10) parties",
)
#: the own test splits' fairness block (federated/evaluation/fairness.py)
OWN_TEST_WEIGHTED = ColumnFamily(
    "party_test_{stem}", OWN_TEST, FINE_TUNED, SCORED_ROUNDS, "size-weighted mean"
)
OWN_TEST_WORST = ColumnFamily(
    "party_test_{stem}_worst10",
    OWN_TEST,
    FINE_TUNED,
    SCORED_ROUNDS,
    "mean of the worst ceil(N/10) parties",
)
OWN_TEST_STD = ColumnFamily(
    "party_test_{stem}_std", OWN_TEST, FINE_TUNED, SCORED_ROUNDS, "std over parties (ddof 0)"
)

RUN_COLUMNS: tuple[ColumnFamily, ...] = (
    TEST_VALUE,
    ColumnFamily("test_{stem}_std", TEST, OWN, PERSONAL_ROUNDS, "std over parties (ddof 0)"),
    PER_PARTY,
    ColumnFamily("val_{stem}", VALIDATION, FINE_TUNED, VALIDATED_ROUNDS, metrics_only=False),
    PARTY_MEAN,
    ColumnFamily(
        "party_{stem}_std", CLASS_MIX, FINE_TUNED, SCORED_ROUNDS, "std over parties (ddof 0)"
    ),
    ColumnFamily("party_{stem}_min", CLASS_MIX, FINE_TUNED, SCORED_ROUNDS, "the worst party"),
    PARTY_WORST,
    OWN_TEST_WEIGHTED,
    OWN_TEST_MEAN,
    OWN_TEST_WORST,
    OWN_TEST_STD,
    ColumnFamily(
        "party_val_{stem}", OWN_VALIDATION, FINE_TUNED, VALIDATED_ROUNDS, "size-weighted mean"
    ),
    ColumnFamily(
        "party_val_{stem}_mean", OWN_VALIDATION, FINE_TUNED, VALIDATED_ROUNDS, "mean over parties"
    ),
    ColumnFamily(
        "party_val_{stem}_worst10",
        OWN_VALIDATION,
        FINE_TUNED,
        VALIDATED_ROUNDS,
        "mean of the worst ceil(N/10) parties",
    ),
    ColumnFamily(
        "party_val_{stem}_std",
        OWN_VALIDATION,
        FINE_TUNED,
        VALIDATED_ROUNDS,
        "std over parties (ddof 0)",
    ),
)
#: ``parties.csv``'s metric columns (one row per party and scored round,
#: federated/engine/run_files.py): the per-party metric on the split per-party outcomes
#: are scored on, every metric on each party's own validation split, every metric on
#: each party's own test split (the per-party metric too: ``party_test_miou`` beside
#: ``party_test_dice``, one name per split); the report reads them by the same families
PARTY_FILE_SCORE = ColumnFamily(
    "party_{stem}", CLASS_MIX, FINE_TUNED, SCORED_ROUNDS, "one party's value"
)
PARTY_FILE_VALIDATION = ColumnFamily(
    "party_val_{stem}",
    OWN_VALIDATION,
    FINE_TUNED,
    VALIDATED_ROUNDS,
    "one party's value",
    metrics_only=False,
)
PARTY_FILE_OWN_TEST = ColumnFamily(
    "party_test_{stem}", OWN_TEST, FINE_TUNED, SCORED_ROUNDS, "one party's value"
)


#: the fields of one declared column, in ``data/columns.csv``'s order
COLUMN_FIELDS = (
    "column",
    "metric",
    "unit",
    "higher_is_better",
    "split",
    "model",
    "cadence",
    "statistic",
)


@dataclass(frozen=True)
class RunColumn:
    """One column that is no task metric, with the words of :data:`COLUMN_FIELDS`
    (``higher_is_better`` None where neither direction is better); ``on_console``: the
    column is shown on a round's console line (a run's and a sweep's live view) where
    a row carries it."""

    column: str
    metric: str
    unit: str
    higher_is_better: bool | None
    split: str
    model: str
    cadence: str
    statistic: str
    on_console: bool = False

    def row(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in COLUMN_FIELDS}


DP_ROUNDS = (
    "every round of a DP-FedAvg run (dp_clip_norm, dp_noise_multiplier or dp_target_epsilon set)"
)
UPDATES = (
    "the round's reported updates (each reporting party's trained weights minus the "
    "round's global model)"
)
#: the columns DP-FedAvg adds to a round's row (federated/server/privacy.py, docs/privacy.md)
PRIVACY_COLUMNS: tuple[RunColumn, ...] = (
    RunColumn(
        "dp_epsilon",
        "epsilon spent",
        "epsilon at the run's dp_delta (inf without noise)",
        False,
        UPDATES,
        GLOBAL,
        DP_ROUNDS,
        "the accountant's epsilon after this round, all rounds so far composed (under "
        "dp_level=record the worst party's)",
        on_console=True,  # the privacy spent so far, beside the round's score
    ),
    RunColumn(
        "dp_epsilon_accountant",
        "accountant",
        "name: rdp (Renyi DP) or pld (privacy loss distributions)",
        None,
        UPDATES,
        GLOBAL,
        DP_ROUNDS,
        "the dp-accounting accountant dp_epsilon was computed by",
    ),
    RunColumn(
        "dp_epsilon_neighbours",
        "neighbouring relation",
        "name: replace-one or add-remove (party level), add-remove record (record level)",
        None,
        UPDATES,
        GLOBAL,
        DP_ROUNDS,
        "the neighbouring federations dp_epsilon's guarantee is stated for (one party's "
        "data replaced; one party's data added or removed)",
    ),
    RunColumn(
        "dp_epsilon_sampling",
        "party sampling",
        "name: fixed or poisson (party level), poisson batches (record level)",
        None,
        UPDATES,
        GLOBAL,
        DP_ROUNDS,
        "how each round's parties were drawn (party_sampling), or under dp_level=record "
        "how each party's batches were, which dp_epsilon accounts",
    ),
    RunColumn(
        "dp_round_clip_norm",
        "clip norm",
        "L2 norm, weight units",
        None,
        UPDATES,
        GLOBAL,
        DP_ROUNDS,
        "the round's C (moves only under adaptive clipping)",
    ),
    RunColumn(
        "dp_noise_std",
        "noise std",
        "weight units",
        None,
        UPDATES,
        GLOBAL,
        DP_ROUNDS,
        "std of the Gaussian noise on each entry of the averaged update (z·C/m)",
    ),
    RunColumn(
        "dp_clipped_fraction",
        "clipped fraction",
        "fraction",
        None,
        UPDATES,
        "each reporting party's locally trained model",
        DP_ROUNDS + "; NaN in a round where nobody reported",
        "share of the round's updates whose L2 norm exceeded the round's C (unnoised: "
        "a diagnostic of the simulation, outside the privacy guarantee)",
    ),
)


def console_words(row: dict[str, object]) -> str:
    """The declared columns shown on a round's console line (``on_console``) that
    ``row`` carries, as ``"  name value"`` each (4 significant digits; ``""`` for a row
    with none, a run without DP)."""
    shown = [c.column for c in PRIVACY_COLUMNS if c.on_console and c.column in row]
    return "".join(f"  {name} {float(row[name]):.4g}" for name in shown)


def declared_columns(task: TaskSpec) -> list[dict[str, object]]:
    """Every column of a run of ``task`` that a reader needs the words of (the per-party
    values' ``/<party>`` left as written), each as :data:`COLUMN_FIELDS`: the metric's
    name, its unit as recorded, its direction, the split, the model, the cadence and the
    statistic over parties; the task's metric columns, then :data:`PRIVACY_COLUMNS`
    (written by DP-FedAvg runs only)."""
    rows: list[dict[str, object]] = []
    for family in RUN_COLUMNS:
        for spec in task.metrics:
            rows.append(
                {
                    "column": family.column(spec.stem),
                    "metric": spec.name,
                    "unit": "fraction" if spec.percent else "as recorded",
                    "higher_is_better": spec.higher_is_better,
                    "split": family.split,
                    "model": family.model,
                    "cadence": family.cadence,
                    "statistic": family.statistic,
                }
            )
        if not family.metrics_only:
            rows.append(
                {
                    "column": family.column(LOSS),
                    "metric": "loss",
                    "unit": "as recorded",
                    "higher_is_better": False,
                    "split": family.split,
                    "model": family.model,
                    "cadence": family.cadence,
                    "statistic": family.statistic,
                }
            )
    rows.extend(column.row() for column in PRIVACY_COLUMNS)
    return rows


def summary_column_names(task: TaskSpec) -> frozenset[str]:
    """The names of every declared column of ``task`` that summarises a run (every family
    but :data:`PER_PARTY`): what a tracker's table of final metrics may hold."""
    names: set[str] = set()
    for family in RUN_COLUMNS:
        if family is PER_PARTY:
            continue
        stems = [spec.stem for spec in task.metrics] + ([] if family.metrics_only else [LOSS])
        names.update(family.column(stem) for stem in stems)
    return frozenset(names)
