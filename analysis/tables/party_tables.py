"""Per-party outcomes in the report: the table, the distribution figure, data/parties.csv.

A trial's rows carry, per scored round, its parties' accuracy over their own class mixes
(``party_acc_mean``, ``party_acc_worst10`` ...: federated/evaluation/party_scores.py
defines them); its ``parties.csv`` the per-party numbers (federated/engine/run_files.py).
The model scored is the global one, or each party's own where the method evaluates
parties with their own (personalised methods, SOLO): the rows record which
(:data:`OWN_MODEL_SPREAD`) and the tables' titles say it (:func:`evaluated_model_words`).

- :func:`per_party_table`: per method/setting, the final scored round's mean over
  parties and mean of the worst 10% of parties, mean ± std over seeds, each with its
  paired Δ to the table's baseline and 95% interval (:mod:`analysis.stats.comparisons`, the
  same rules as every accuracy table).
  Trials with local test splits (``party_test_fraction``) add a third row, the
  fairness block's sample-weighted accuracy over the parties' own test samples
  (``party_test_acc``).
- :func:`fairness_table`: the fairness block over the parties' own test splits (mean,
  worst decile, std over parties), beside the per-party table.
- :func:`party_frame`: every trial's per-party accuracies (``data/parties.csv``).
- :func:`party_distribution_figure`: per method/setting, the final round's per-party
  accuracies (all seeds' parties pooled): box and points.

Every column is read by its declared family (:mod:`federated.contract.columns`), for
every task alike: a metric's table reads the rows' ``party_<stem>_mean`` and
``party_<stem>_worst10`` where its rows hold them (the task's per-party metric), else
its parties.csv's ``party_test_<stem>`` (or ``party_<stem>``) values (a score task's
SRCC, scored on each party's own local test split), and the worst 10% are the worst in
the metric's direction (the highest MAE).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # headless, before pyplot is imported

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from analysis.folder_task import TASK_SPEC
from analysis.primary_metric import ACCURACY, Metric
from analysis.reading.loading import COMPLETED, Results
from analysis.reading.summary import excluded_trials
from analysis.reading.trial_files import DamagedFileError, read_parties
from analysis.stats.seed_plan import DEFAULT_TARGET
from analysis.tables.privacy import EPSILON
from analysis.tables.table import Table, accuracy_table, key_order, row_label
from federated.contract.columns import (
    OWN_TEST_MEAN,
    OWN_TEST_STD,
    OWN_TEST_WEIGHTED,
    OWN_TEST_WORST,
    PARTY_FILE_OWN_TEST,
    PARTY_FILE_SCORE,
    PARTY_MEAN,
    PARTY_WORST,
)
from federated.contract.results import INTERRUPTED, PARTIES, RUNNING, STATUSES

PARTIES_FILE = PARTIES
METRIC_COLUMN = "party_metric"  # the table's column axis (analysis/naming.py: self-describing)
MEAN, WORST = "mean over parties", "worst 10% of parties"
NOT_COUNTED_NOTE = "Not counted:"  # how analysis.tables.table opens its note of left-out trials
#: a trial's final per-party outcomes, under these names whatever its metric: the row's
#: declared summaries (:data:`SUMMARIES`) where its rows hold them, else computed from
#: its parties.csv
SOURCES = {MEAN: "party_mean", WORST: "party_worst10"}
SUMMARIES = {MEAN: PARTY_MEAN, WORST: PARTY_WORST}
# the fairness block's sample-weighted mean over the parties' own local test splits
# (federated/evaluation/fairness.py): a third row where the trials have those splits
WEIGHTED = "sample-weighted over own test samples"
OWN_SPLIT_SOURCES = {WEIGHTED: OWN_TEST_WEIGHTED}
# the fairness block's spread and worst decile over the same splits: a small table beside
# the per-party table (:func:`fairness_table`), without a "best" (a low std is not a win)
FAIRNESS_SOURCES = {
    "mean over parties (own test splits)": OWN_TEST_MEAN,
    "worst 10% of parties (own test splits)": OWN_TEST_WORST,
    "std over parties (own test splits)": OWN_TEST_STD,
}
# Which model a trial evaluated its parties with is recorded in its rows: a round scored
# with each party's own model (personalised methods, SOLO, local BatchNorm) writes the
# spread of those models on the test set, ``test_<stem>_std``
# (federated/evaluation/round_evaluation.py); a round scored with the global model does not.
OWN_MODEL_SPREAD = "test_{stem}_std"
GLOBAL_MODEL, OWN_MODEL = "the global model", "each party's own model"


def final_party_columns(rounds: pd.DataFrame, stem: str) -> pd.DataFrame:
    """Per trial (``sweep``, ``trial``), the last scored round's declared per-party
    summaries of the metric ``stem`` (``party_<stem>_mean`` and ``_worst10`` as
    :data:`SOURCES`' names), the fairness block's ``party_test_<stem>*`` columns where
    the rows have them (under their own names), and that round (``party_round``);
    empty where the rows hold no such summary (a metric scored per party only in
    parties.csv: :func:`final_party_metric_columns`)."""
    summaries = {SUMMARIES[k].column(stem): v for k, v in SOURCES.items()}
    if rounds.empty or not set(summaries) <= set(rounds):
        return pd.DataFrame(columns=["sweep", "trial", "party_round", *SOURCES.values()])
    own_split = [f.column(stem) for f in (*OWN_SPLIT_SOURCES.values(), *FAIRNESS_SOURCES.values())]
    columns = [*summaries, *(c for c in own_split if c in rounds)]
    scored = rounds[["sweep", "trial", "round", *columns]].copy()
    for column in columns:
        scored[column] = pd.to_numeric(scored[column], errors="coerce")
    scored = scored[scored[next(iter(summaries))].notna()]
    last = scored.sort_values("round").groupby(["sweep", "trial"], sort=False).tail(1)
    last = last.rename(columns={"round": "party_round", **summaries})
    return last.reset_index(drop=True)


def party_metric_column(metric: Metric, parties: pd.DataFrame | None = None) -> str:
    """parties.csv's per-party column of ``metric``: the own-test-split
    ``party_test_<stem>`` where ``parties`` has it, else the scored value
    ``party_<stem>`` (the declared families, :mod:`federated.contract.columns`)."""
    own_test = PARTY_FILE_OWN_TEST.column(metric.stem)
    if parties is not None and own_test in parties:
        return own_test
    return PARTY_FILE_SCORE.column(metric.stem)


def final_party_metric_columns(parties: pd.DataFrame, metric: Metric) -> pd.DataFrame:
    """Per trial (``sweep``, ``trial``), from parties.csv rows (:func:`party_frame`): the
    last round with a finite :func:`party_metric_column` value (``party_round``), its
    mean over parties and the mean of its ceil(N/10) worst parties in ``metric``'s
    direction, under :data:`SOURCES`' column names."""
    column = party_metric_column(metric, parties)
    out_columns = ["sweep", "trial", "party_round", *SOURCES.values()]
    if parties.empty or column not in parties:
        return pd.DataFrame(columns=out_columns)
    values = parties[["sweep", "trial", "round", column]].copy()
    values[column] = pd.to_numeric(values[column], errors="coerce")
    values = values[values[column].notna()]
    rows = []
    for (sweep, trial), own in values.groupby(["sweep", "trial"], sort=False):
        last = own[own["round"] == own["round"].max()][column].to_numpy(dtype=float)
        worst = sorted(last, key=lambda v: metric.sign * v)[: math.ceil(len(last) / 10)]
        rows.append(
            {
                "sweep": sweep,
                "trial": trial,
                "party_round": int(own["round"].max()),
                SOURCES[MEAN]: float(last.mean()),
                SOURCES[WORST]: float(sum(worst) / len(worst)),
            }
        )
    return pd.DataFrame(rows, columns=out_columns)


def evaluated_models(trials: pd.DataFrame, rounds: pd.DataFrame, stem: str) -> pd.Series:
    """Per trial of ``trials`` (same index): which model its parties were evaluated with,
    :data:`OWN_MODEL` where any of its rounds recorded the own models' spread
    (:data:`OWN_MODEL_SPREAD`), else :data:`GLOBAL_MODEL`."""
    column = OWN_MODEL_SPREAD.format(stem=stem)
    own: set[tuple[str, str]] = set()
    if not rounds.empty and column in rounds:
        spread = pd.to_numeric(rounds[column], errors="coerce")
        own = set(map(tuple, rounds.loc[spread.notna(), ["sweep", "trial"]].to_numpy()))
    keys = zip(trials["sweep"], trials["trial"])
    return pd.Series(
        [OWN_MODEL if key in own else GLOBAL_MODEL for key in keys], index=trials.index
    )


def evaluated_model_words(
    trials: pd.DataFrame, rounds: pd.DataFrame, rows: Sequence[str], stem: str
) -> tuple[str, str | None]:
    """The title's words for the evaluated model of ``trials`` and, when the table mixes
    both kinds, a note naming each row's (by ``rows`` label).  Fine-tuned trials
    (``finetune_epochs`` > 0) are evaluated with each party's fine-tuned copy."""
    models = evaluated_models(trials, rounds, stem)
    tuned = (
        pd.to_numeric(
            trials.get("finetune_epochs", pd.Series(0, index=trials.index)), errors="coerce"
        ).fillna(0)
        > 0
    )
    words = models.where(~tuned, models + ", fine-tuned on its own data")
    kinds = list(dict.fromkeys(words))
    if len(kinds) == 1:
        return kinds[0], None
    labelled = trials.assign(_model=words)
    parts = []
    for kind in kinds:
        mine = labelled[labelled["_model"] == kind]
        keys = key_order(mine, rows)
        parts.append(f"{kind}: {', '.join(row_label(rows, k) for k in keys)}")
    return "each party's own or the global model", "Evaluated model — " + "; ".join(parts) + "."


def party_split_words(trials: pd.DataFrame, metric: Metric) -> str:
    """What each party's value was measured on, from what the trials ran: "own test
    split" where every trial held one out (``party_test_fraction`` > 0), "class mix"
    (the pooled test set re-weighted to the party's classes) where none did; a group
    that mixes both says so.  A metric without classes has only own splits."""
    if not metric.chance:
        return "own test split"
    held_out = trials.get("party_test_fraction", 0.0)
    own = pd.to_numeric(pd.Series(held_out, index=trials.index), errors="coerce").fillna(0) > 0
    if own.all():
        return "own test split"
    if not own.any():
        return "class mix"
    return "own test split (trials with party_test_fraction > 0) or class mix (the others)"


def per_party_table(
    trials: pd.DataFrame,
    rounds: pd.DataFrame,
    *,
    rows: Sequence[str],
    columns: Sequence[str] = (),
    name: str,
    reference: tuple | None = None,
    classes: Mapping[str, int] | None = None,
    metric: Metric = ACCURACY,
    parties: pd.DataFrame | None = None,
) -> Table | None:
    """Mean over parties and worst 10% of parties per ``rows`` (× ``columns``) cell, or
    None when no trial has per-party scores.  ``metric``'s declared per-party summaries
    in the rows where they hold them (:func:`final_party_columns`), else computed from
    ``parties`` (:func:`party_frame`); the own-split block where some trial measured it."""
    final = final_party_columns(rounds, metric.stem)
    if final.empty:
        own = parties if parties is not None else pd.DataFrame()
        final = final_party_metric_columns(own, metric)
    if final.empty:
        return None
    merged = trials.merge(final, on=["sweep", "trial"], how="inner")
    if merged.empty:
        return None
    sources = dict(SOURCES)
    for label, family in OWN_SPLIT_SOURCES.items():
        column = family.column(metric.stem)
        if column in merged and merged[column].notna().any():
            sources[label] = column
    long = pd.concat(
        [
            merged.assign(**{METRIC_COLUMN: label, "party_value": merged[src]})
            for label, src in sources.items()
        ],
        ignore_index=True,
    )
    mix = party_split_words(merged, metric)
    evaluated, which = evaluated_model_words(merged, rounds, rows, metric.stem)
    table = accuracy_table(
        long,
        rows=list(rows),
        columns=[*columns, METRIC_COLUMN],
        value="party_value",
        name=name,
        title=f"Per-party {metric.name}{metric.unit} of {evaluated} on each party's {mix}",
        metric_text=f"final scored round's per-party {metric.name}{metric.unit}",
        reference=reference,
        classes=classes,
        metric=metric,
        resolve_target=metric.target(DEFAULT_TARGET),
        dp_words=False,
    )
    # ``long`` holds each trial once per metric: count the trials left out once each
    table.notes = [n for n in table.notes if not n.startswith(NOT_COUNTED_NOTE)]
    left_out = excluded_trials(merged)
    if not left_out.empty:
        counts = left_out["status"].value_counts()
        words = ", ".join(f"{counts[s]} {s}" for s in STATUSES if s in counts.index)
        table.notes.append(
            f"{NOT_COUNTED_NOTE} {len(left_out)} trial(s) ({words}); listed in report.md."
        )
    table.notes.append(
        party_accuracy_note(merged) if metric.chance else _score_note(metric, merged)
    )
    table.notes += outside_the_guarantee(merged)
    if which is not None:
        table.notes.append(which)
    warning = own_split_warning(parties, merged, table.data, metric)
    if warning is not None:
        table.notes.append(warning)
    return table


#: an own test split of at most this many images makes each image worth at least
#: 100 / SMALL_SPLIT points of a party's accuracy: the warning below is given
SMALL_SPLIT = 50
#: 95% normal quantile, for the images a stated difference needs
Z95 = 1.959964


def own_split_warning(
    parties: pd.DataFrame | None,
    trials: pd.DataFrame,
    data: pd.DataFrame,
    metric: Metric,
    target: float | None = None,
) -> str | None:
    """A warning, with its numbers, where the parties' own test splits are too small for
    the table's intervals to mean anything: the smallest and largest split (images) and
    what one image is worth of a party's value, the widest Δ interval where it is wider
    than the metric's whole range, and, for a metric its task declares a per-image
    outcome (:attr:`~analysis.primary_metric.Metric.per_image_outcome`: accuracy, not
    mIoU), what one image is worth and the ``party_test_fraction`` that would let the
    mean over parties tell ``target`` (display units; default the report's resolve
    target) at 95% — a binomial worst case (p = 1/2) with the variance of a difference
    counted twice.  None where the splits are not small (more than :data:`SMALL_SPLIT`
    images each and no interval past the range) or parties.csv records no split sizes."""
    if parties is None or parties.empty or "party_test_samples" not in parties:
        return None
    mine = parties.merge(trials[["sweep", "trial"]], on=["sweep", "trial"])
    if mine.empty:
        return None
    last = mine[mine["round"] == mine.groupby(["sweep", "trial"])["round"].transform("max")]
    sizes = pd.to_numeric(last["party_test_samples"], errors="coerce")
    sizes = sizes[sizes > 0]
    if sizes.empty:
        return None
    small, large = int(sizes.min()), int(sizes.max())
    unit = "_pct" if metric.percent else ""
    low_col, high_col = f"delta_low{unit}", f"delta_high{unit}"
    widest = None
    low_bound, high_bound = metric.bounds
    span = metric.units(high_bound - low_bound) if math.isfinite(high_bound - low_bound) else None
    if span is not None and low_col in data and high_col in data:
        widths = (data[high_col] - data[low_col]).dropna()
        if not widths.empty and widths.max() > span:
            at = widths.idxmax()
            widest = (float(data.loc[at, low_col]), float(data.loc[at, high_col]))
    if small > SMALL_SPLIT and widest is None:
        return None
    lines = [
        f"⚠ Own test splits too small to resolve much: each party's own test split holds "
        f"{small}–{large} images"
    ]
    if metric.per_image_outcome:
        lines[0] += (
            f" (one image = {metric.scale / large:.1f}–{metric.scale / small:.1f} points of "
            "its value)"
        )
    else:
        lines[0] += (
            f" ({metric.name} is no share of images each right or wrong: its error is not "
            "counted image by image here)"
        )
    if widest is not None:
        lines.append(
            f"the widest Δ interval here, [{widest[0]:+.1f}, {widest[1]:+.1f}] "
            f"{metric.diff_unit}, is wider than the metric's whole range ({span:g})"
        )
    target = metric.target(DEFAULT_TARGET) if target is None else target
    if metric.per_image_outcome:
        lines += _images_needed(last, metric, target)
    return "; ".join(lines) + "."


def _images_needed(last: pd.DataFrame, metric: Metric, target: float) -> list[str]:
    """The own test images telling ``target`` (display units) in the mean over parties
    needs at 95%, and the ``party_test_fraction`` that holds them, for a per-image
    outcome (``last``: parties.csv's rows of each trial's last round)."""
    n_parties = int(last.groupby(["sweep", "trial"])["party"].nunique().max())
    difference = target / metric.scale
    if difference <= 0 or n_parties <= 0:
        return []
    images = math.ceil(2 * Z95**2 * 0.25 / difference**2)
    per_party = math.ceil(images / n_parties)
    held = sum(
        pd.to_numeric(last[c], errors="coerce").fillna(0)
        for c in ("party_samples", "party_val_samples", "party_test_samples")
        if c in last
    )
    smallest = int(held[held > 0].min()) if (held > 0).any() else 0
    if smallest:
        fraction = per_party / smallest
        needed = (
            f"party_test_fraction ≥ {fraction:.2f} of the smallest party's {smallest} images"
            if fraction < 1
            else f"more than the smallest party's {smallest} images: no party_test_fraction can"
        )
    else:
        needed = "a larger party_test_fraction"
    return [
        f"telling {metric.amount(target)} in the mean over {n_parties} parties at 95% "
        f"needs about {images} own test images in all, {per_party} per party "
        f"({needed}; binomial worst case p = 1/2, a difference's variance counted twice)"
    ]


def fairness_table(
    trials: pd.DataFrame,
    rounds: pd.DataFrame,
    *,
    rows: Sequence[str],
    columns: Sequence[str] = (),
    name: str,
    classes: Mapping[str, int] | None = None,
    metric: Metric = ACCURACY,
) -> Table | None:
    """The fairness block over the parties' own local test splits
    (federated/evaluation/fairness.py) per ``rows`` (x ``columns``) cell at the final
    scored round: the mean over parties, the worst decile and the std over parties
    (``metric``'s units), mean ± std over seeds, no "best"; None when no trial recorded it."""
    final = final_party_columns(rounds, metric.stem)
    merged = trials.merge(final, on=["sweep", "trial"], how="inner")
    named = {label: family.column(metric.stem) for label, family in FAIRNESS_SOURCES.items()}
    sources = {
        label: c
        for label, c in named.items()
        if c in merged and pd.to_numeric(merged[c], errors="coerce").notna().any()
    }
    if merged.empty or not sources:
        return None
    long = pd.concat(
        [
            merged.assign(
                **{METRIC_COLUMN: label, "party_value": pd.to_numeric(merged[src], errors="coerce")}
            )
            for label, src in sources.items()
        ],
        ignore_index=True,
    )
    evaluated, which = evaluated_model_words(merged, rounds, rows, metric.stem)
    mean = OWN_TEST_MEAN.column(metric.stem)
    worst = "highest" if not metric.higher_is_better else "lowest"
    table = accuracy_table(
        long,
        rows=list(rows),
        columns=[*columns, METRIC_COLUMN],
        value="party_value",
        name=name,
        title=(
            f"Fairness over the parties' own test splits: {evaluated}, {metric.name}{metric.unit}"
        ),
        metric_text=f"final scored round's fairness block ({mean}, _worst10, _std)",
        best=None,
        classes=classes,
        metric=metric,
        resolve_target=metric.target(DEFAULT_TARGET),
        dp_words=False,
    )
    table.notes = [n for n in table.notes if not n.startswith(NOT_COUNTED_NOTE)]
    table.notes.append(
        f"Each party's {metric.name} on its own local test split (party_test_fraction); "
        f"worst 10% = mean of the ceil(N/10) {worst} parties{_worst_count(merged, worst)}; "
        "std = the spread over parties (population std), lower is more even."
    )
    if which is not None:
        table.notes.append(which)
    return table


def _score_note(metric: Metric, trials: pd.DataFrame) -> str:
    """What a per-party metric without a class mix (a score, detection or segmentation
    task's) was measured on, and how many parties its worst decile is."""
    worst = "highest" if not metric.higher_is_better else "lowest"
    return (
        f"Per-party {metric.name}: the model the title names on each party's "
        "own held-out local test split (party_test_fraction), its own images; worst 10% = "
        f"mean of the ceil(N/10) parties with the {worst} {metric.name}"
        f"{_worst_count(trials, worst)}."
    )


def _worst_count(trials: pd.DataFrame, worst: str = "lowest") -> str:
    """`` (here the 1 lowest of 10: one party)`` from the trials' ``n_parties``: how many
    parties the worst decile is (``worst``: the metric's word, ``highest`` for an error),
    for every task and table that names the worst decile."""
    if "n_parties" not in trials:  # a table of trials that do not say
        return ""
    counts = pd.to_numeric(trials["n_parties"], errors="coerce").dropna().astype(int)
    if counts.empty:
        return ""
    parts = []
    for n in sorted(set(counts)):
        k = math.ceil(n / 10)
        parts.append(f"the {k} {worst} of {n}" + (": one party" if k == 1 else ""))
    return " (here " + "; ".join(parts) + ")"


def party_accuracy_note(trials: pd.DataFrame) -> str:
    """What the per-party accuracies of ``trials`` were measured on: each party's own
    local test split (``party_test_fraction`` > 0, docs/validation.md) or, the fallback,
    the pooled test set re-weighted by the party's class mix."""
    share = trials.get("party_test_fraction")
    own = share is not None and bool((pd.to_numeric(share, errors="coerce") > 0).any())
    mixed = own and not bool((pd.to_numeric(share, errors="coerce") > 0).all())
    worst = "worst 10% = mean of the ceil(N/10) lowest parties" + _worst_count(trials) + "."
    if own and not mixed:
        return (
            "Per-party accuracy: the model the title names on each party's "
            "own held-out local test split (party_test_fraction), its own images: input shift "
            f"(natural parties, feature skew) is seen; {worst}"
        )
    text = (
        "Per-party accuracy: the test set re-weighted by each party's training class mix, "
        f"the model the title names; {worst} Class re-weighting does not capture input "
        "shift (natural parties, feature skew); party_test_fraction > 0 scores each party on "
        "its own images instead."
    )
    if mixed:
        text += " Trials with party_test_fraction > 0 were scored on their own local test splits."
    return text


def party_frame(results: Results, not_counted: list[str] | None = None) -> pd.DataFrame:
    """Every trial's ``parties.csv`` with its ``sweep``, ``trial``, ``status``, reading
    order and config columns: one row per (trial, scored round, party).

    Each file goes through :func:`analysis.reading.trial_files.read_parties`; a damaged one is
    left out and named in ``not_counted`` (path and reason), the trial's other results
    still count.  So are the parts of a file that are not counted: a running or
    interrupted trial's incomplete last append (its cut line and round) and the rounds
    ``result.json`` scored per party that the file lacks."""
    frames = []
    paths = {sweep.name: sweep.path for sweep in results.sweeps}
    named = ["sweep", "trial", "status", "order", "sweep_started", *results.config_columns]
    scored = scored_rounds(results.rounds)
    for _, trial in results.trials.iterrows():
        path = paths[trial["sweep"]] / trial["trial"] / PARTIES_FILE
        partial: list[str] = []
        try:
            rows = read_parties(
                path,
                trial.get("task"),
                specs=_declared_metrics(trial),
                # a trial still writing, or stopped mid-write, may end in a cut append
                appending=trial["status"] in (RUNNING, INTERRUPTED),
                problems=partial,
                scored_rounds=scored.get((trial["sweep"], trial["trial"]), ()),
            )
        except FileNotFoundError:
            continue  # the trial scored no party
        except DamagedFileError as err:
            if not_counted is not None:
                not_counted.append(
                    f"{err}: this trial's per-party accuracies are left out of the per-party "
                    "figure and data/parties.csv"
                )
            continue
        if not_counted is not None:
            not_counted.extend(partial)
        labels = {k: trial[k] for k in named}
        frames.append(pd.DataFrame(rows).assign(**labels))
    if not frames:
        return pd.DataFrame(columns=["sweep", "trial", "round", "party"])
    return pd.concat(frames, ignore_index=True)


def scored_rounds(rounds: pd.DataFrame) -> dict[tuple[str, str], list[int]]:
    """Per trial (``sweep``, ``trial``), the rounds whose ``result.json`` row holds a
    per-party summary (a number in a ``party_<metric>_mean`` column): the rounds its
    ``parties.csv`` must hold."""
    means = [
        c
        for c in rounds.columns
        if isinstance(c, str)
        and c.startswith("party_")
        and c.endswith("_mean")
        and not c.startswith(("party_val_", "party_test_"))
    ]
    if rounds.empty or not means or "round" not in rounds:
        return {}
    values = rounds[means].apply(pd.to_numeric, errors="coerce")
    done = rounds[values.notna().any(axis=1)]
    return {
        (str(sweep), str(trial)): sorted(int(r) for r in group["round"])
        for (sweep, trial), group in done.groupby(["sweep", "trial"])
    }


def party_distribution_figure(
    parties: pd.DataFrame, keys: Sequence[str], *, title: str = "", metric: Metric = ACCURACY
) -> plt.Figure | None:
    """Per ``keys`` value (methods), the final scored round's per-party accuracies (%)
    (``metric``'s :func:`party_metric_column`) of its completed trials, all seeds'
    parties pooled: a box (quartiles) and the points."""
    column = party_metric_column(metric, parties)
    if "status" not in parties:  # no trial wrote a parties.csv (party_frame's empty frame)
        return None
    done = parties[parties["status"] == COMPLETED]
    if column not in done:
        return None
    # scored rounds only (a validated round holds NaN there)
    done = done[pd.to_numeric(done[column], errors="coerce").notna()]
    if done.empty:
        return None
    last = done.groupby(["sweep", "trial"])["round"].transform("max")
    final = done[done["round"] == last].copy()
    order = key_order(final, keys)
    final["cell"] = [row_label(keys, tuple(v)) for v in final[list(keys)].itertuples(index=False)]
    labels = [row_label(keys, k) for k in order]
    # the values are each party's own split's or class mix's, never the pooled test set's
    y = f"per-party {metric.value_label}"
    final[y] = metric.units(pd.to_numeric(final[column], errors="coerce").astype(float))
    # constrained: room for the y label's wide ticks and the legend outside the axes
    width = max(4.4, 1.3 * len(labels) + 1.5)
    fig, ax = plt.subplots(figsize=(width, 3.6), layout="constrained")
    sns.boxplot(final, x="cell", y=y, order=labels, color="0.85", ax=ax, showfliers=False)
    sns.stripplot(
        final,
        x="cell",
        y=y,
        order=labels,
        hue="seed",
        ax=ax,
        size=3.5,
        jitter=0.25,
        palette="deep",
    )
    ax.set_xlabel("")
    # outside the axes: inside ("best") it covered a party's point in a segmentation study
    ax.legend(
        title="seed", fontsize=7, title_fontsize=7, loc="upper left",
        bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
    )  # fmt: skip
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def _declared_metrics(trial: pd.Series) -> tuple:
    """The metrics of ``trial``'s task as its sweep declared them (None: none declared)."""
    task = trial.get(TASK_SPEC)
    return task.metrics if hasattr(task, "metrics") else ()


def outside_the_guarantee(trials: pd.DataFrame) -> list[str]:
    """The note a per-party table of DP trials carries instead of an ε: a party's score
    is outside the client-level guarantee (nothing about its evaluation is noised)."""
    epsilon = pd.to_numeric(trials.get(EPSILON), errors="coerce") if EPSILON in trials else None
    if epsilon is None or epsilon.dropna().empty:
        return []
    levels = set(trials["dp_level"].dropna()) if "dp_level" in trials else set()
    if levels == {"record"}:  # DP-SGD inside each party: each record of its training set
        covers = "record-level (ε, δ) guarantee, which covers each party's training records"
    else:
        covers = "client-level (ε, δ) guarantee, which covers the updates the parties send"
    return [
        f"Differential privacy: these per-party scores are outside the {covers}, not the "
        "evaluation of each party; the run's ε is in the comparison table's caption."
    ]
