"""The report's selection section: for every sweep that chose a configuration, what it
chose on, what that choice is worth on test, and how robust it is to evaluation noise
(the numbers are :mod:`analysis.stats.selection`'s; docs/validation.md reads them).  "Test
accuracy" is the sweep's primary metric on test (:mod:`analysis.primary_metric`: a score
sweep's ``test_srcc``, ``test_mae`` ...), shown in its units."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from analysis.figures.plots import save_figure
from analysis.naming import percent
from analysis.primary_metric import Metric, metrics_of, sweep_metric
from analysis.reading.loading import Results, Sweep
from analysis.reading.trial_files import RerunRecord, read_rerun_record
from analysis.sections.markdown import figure_block, unique_stem
from analysis.stats.selection import (
    best_so_far,
    compared,
    evaluation_noise,
    final_party_values,
    full_evaluation_choice,
    left_out,
    point_choice,
    rank_correlation,
    ranked_trials,
    rerun_outcome,
    trial_outcomes,
)
from analysis.stats.trial_statistic import final_values
from federated.contract.results import MANIFEST

#: evaluating-party counts the noise table shows (those below N)
NOISE_KS = (1, 2, 3, 5, 10, 20, 50)


def rerun_records(results: Results) -> dict[str, RerunRecord]:
    """Each ``--rerun-best`` sweep's link to its search and record of the choice,
    checked (:func:`analysis.reading.trial_files.read_rerun_record`), by sweep name."""
    return {
        s.name: read_rerun_record(s.manifest, s.path / MANIFEST)
        for s in results.sweeps
        if s.search == "rerun-best"
    }


def selecting_sweeps(
    results: Results, records: dict[str, RerunRecord] | None = None
) -> list[tuple[Sweep, Sweep | None]]:
    """(sweep that selected, its ``--rerun-best`` sweep or None): Optuna searches, ASHA
    sweeps and any sweep a loaded rerun names as ``rerun_of`` (``records``, default
    read here: a rerun whose link is damaged names none)."""
    records = rerun_records(results) if records is None else records
    reruns = {
        records[s.name].rerun_of: s
        for s in results.sweeps
        if s.search == "rerun-best" and records[s.name].rerun_of
    }
    out = []
    for sweep in results.sweeps:
        if sweep.search == "rerun-best":
            continue
        name = sweep.path.name
        if sweep.search == "optuna" or sweep.manifest.get("scheduler") == "asha" or name in reruns:
            out.append((sweep, reruns.get(name)))
    return out


def selection_section(
    results: Results,
    parties: pd.DataFrame,
    out: Path,
    used: set[str],
    formats: Sequence[str],
    not_counted: list[str] | None = None,
) -> list[str]:
    """Markdown lines (and figures, tables) of every selecting sweep in ``results``, and
    of every rerun whose search is not among them (a damaged link or record goes to
    ``not_counted``: the manifest's path and what is left out)."""
    records = rerun_records(results)
    if not_counted is not None:
        for record in records.values():
            not_counted.extend(record.problems)
    lines: list[str] = []
    shown: set[str] = set()
    for sweep, rerun in selecting_sweeps(results, records):
        record = records[rerun.name] if rerun is not None else None
        lines += _one_sweep(results, parties, sweep, (rerun, record), out, used, formats)
        if rerun is not None:
            shown.add(rerun.name)
    for rerun in results.sweeps:
        if rerun.name in records and rerun.name not in shown:
            lines += _rerun_alone(results, rerun, records[rerun.name])
    return lines


def _rerun_alone(results: Results, rerun: Sweep, record: RerunRecord) -> list[str]:
    """A rerun whose search is not among the results (not loaded, or not named): its
    own numbers, and why they are not compared with the search's choices."""
    trials = results.trials[results.trials["sweep"] == rerun.name]
    test = sweep_metric(trials, f"sweep {rerun.name}")
    if record.rerun_of is None:
        why = (
            "Its manifest does not name the search it reruns a choice of (see *Files not "
            "counted*): it is shown alone."
        )
    else:
        why = (
            f"Its search `{record.rerun_of}` is not among the results read: report both "
            "folders together to see the search's choice beside it."
        )
    return [f"## Selection: {rerun.name}", "", why, "", *_rerun_lines(results, rerun, test, record)]


def _one_sweep(
    results: Results,
    parties: pd.DataFrame,
    sweep: Sweep,
    rerun: tuple[Sweep | None, RerunRecord | None],
    out: Path,
    used: set[str],
    formats: Sequence[str],
) -> list[str]:
    """One selecting sweep's part: what it ranked on, its choice and best so far, its
    rerun (``rerun``: the rerun sweep and its checked record, or Nones) and the
    evaluation noise."""
    metric = str(sweep.manifest.get("metric") or "test_acc")
    trials = results.trials[results.trials["sweep"] == sweep.name]
    rounds = results.rounds[results.rounds["sweep"] == sweep.name]
    test = sweep_metric(trials, f"sweep {sweep.name}")
    outcomes = trial_outcomes(rounds, trials, metric, test)
    lines = [f"## Selection: {sweep.name}", ""]
    if not metric.startswith("val_"):
        lines += [
            f"**Selected on test**: this sweep ranked its trials by {_ranked_on(metric, test)} "
            "(it predates the validation protocol or held out no validation data), so every "
            "number below that it chose is optimistic by construction; rerun with "
            "`--set val_fraction=0.1`.",
            "",
        ]
    else:
        lines += [
            f"Trials ranked by **{metric}** (size-weighted federated validation on the "
            f"parties' held-out data); test {test.name} is only reported, never used to "
            "choose.",
            "",
        ]
    if outcomes.empty:
        return [*lines, "No trial has results yet.", ""]
    outcomes["best_so_far"] = best_so_far(outcomes, metric, test).to_numpy()
    stem = unique_stem(f"selection_{sweep.path.name}", used)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    csv = out / "tables" / f"{stem}.csv"
    outcomes.to_csv(csv, index=False)
    choice = point_choice(outcomes, metric, test)
    rho = rank_correlation(outcomes, test=test)
    spent = outcomes[["rounds", "party_updates", "seconds"]].sum()
    lines += [
        f"- trials: {len(outcomes)}; spent {int(spent['rounds'])} rounds, "
        f"{int(spent['party_updates'])} party updates, {spent['seconds']:.0f} CPU/GPU seconds "
        "(training and evaluation)",
        f"- Spearman ρ of {metric} vs test {test.name} over completed trials: "
        + _rho_words(rho, len(ranked_trials(outcomes, test=test)), metric, test),
    ]
    if choice:
        lines += [
            f"- chosen on {metric}: **{choice['point']}** "
            f"({metric} {_metric(metric, choice['value'], test)}, "
            f"search-time test {test.name} {_value(test, choice['test'])})",
            f"- best test {test.name} in hindsight (not a choice any tuner could make): "
            f"{choice['hindsight_point']}, {_value(test, choice['hindsight_test'])}; "
            f"regret of the choice (hindsight): {_difference(test, choice['regret'])}",
        ]
    lines.append(f"- {_compared_words(outcomes)}")
    lines += ["", f"Files: [csv]({csv.relative_to(out).as_posix()})", ""]
    figure = _best_so_far_figure(outcomes, metric, sweep.path.name)
    paths = save_figure(figure, out / "figures" / f"fig_{stem}", formats)
    caption = (
        f"best-so-far {metric} vs trials and vs party updates spent "
        f"({_compared_words(outcomes, short=True)})"
    )
    lines += figure_block(paths, out, caption)
    rerun_sweep, record = rerun
    if rerun_sweep is not None and record is not None:
        lines += _rerun_lines(results, rerun_sweep, test, record)
    lines += _noise_lines(outcomes, parties, sweep, metric, out, stem, formats, test)
    return lines


def _compared_words(outcomes: pd.DataFrame, *, short: bool = False) -> str:
    """What the choice and the best so far compared, and what they left out: ``ranked
    and best so far over the 6 trials that ran all their rounds; left out: 2 stopped
    early (fewer rounds than planned: an earlier round's value), 1 diverged``
    (``short``: the counts only, for a caption)."""
    n = int(compared(outcomes).sum())
    words = f"ranked and best so far over the {n} trial{'s' if n != 1 else ''} that ran all "
    words += "their rounds"
    meaning = {
        "stopped early": "stopped early (fewer rounds than planned: an earlier round's value)",
        "diverged": "diverged (no trained model)",
        "no value": "without a finite value",
    }
    left = left_out(outcomes)
    if not left:
        return words
    parts = [
        f"{k} {reason if short else meaning.get(reason, reason)}" for reason, k in left.items()
    ]
    return f"{words}; left out: {', '.join(parts)}"


def _ranked_on(metric: str, test: Metric) -> str:
    """The ranking metric of a sweep that selected on test, in words: ``test accuracy``,
    ``test SRCC``; another test column as recorded."""
    return f"test {test.name}" if metric == test.column else f"`{metric}`"


def _metric(metric: str, value: float, test: Metric) -> str:
    """A value of the ranking column ``metric`` (``val_<stem>`` of ``test``'s task): a
    percentage with two decimals where its metric is declared one, else four decimals
    (a loss, a correlation, an error)."""
    stem = metric.split("_", 1)[1] if metric.startswith(("val_", "test_")) else metric
    declared = metrics_of(test.task_spec) if test.task_spec else {test.stem: test}
    ranked = declared.get(stem)
    return f"{percent(value, 2)}%" if ranked and ranked.percent else f"{value:.4f}"


def _number(test: Metric, value: float) -> str:
    """A test value (or difference) with one more decimal than tables: ``61.25``,
    ``0.8123``."""
    return test.show(value, test.digits + 1)


def _value(test: Metric, value: float) -> str:
    """A test value as the section shows it: ``61.25%``, ``0.8123``."""
    return _number(test, value) + ("%" if test.percent else "")


def _difference(test: Metric, value: float) -> str:
    """A difference of test values with its unit: ``1.25 points``, ``0.0123 SRCC``."""
    return f"{_number(test, value)} {test.diff_unit}"


def _best_so_far_figure(outcomes: pd.DataFrame, metric: str, title: str) -> plt.Figure:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
    number = range(1, len(outcomes) + 1)
    cost = outcomes["party_updates"].cumsum()
    counted = compared(outcomes).to_numpy()
    for ax, x, label in ((axes[0], number, "trials"), (axes[1], cost, "party updates spent")):
        x = np.asarray(x)
        ax.scatter(
            x[counted], outcomes["value"][counted], s=12, color="0.6", label=f"trial's {metric}"
        )
        if not counted.all():
            ax.scatter(
                x[~counted],
                outcomes["value"][~counted],
                s=14,
                marker="x",
                color="C3",
                label="not compared (stopped early, diverged)",
            )
        ax.step(x, outcomes["best_so_far"], where="post", color="C0", label="best so far")
        ax.set_xlabel(label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole trials, updates
    axes[0].set_ylabel(metric)
    # below the panels: inside, it covered the last trial's point
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle(f"{title}: selection on {metric}", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def _rerun_lines(results: Results, rerun: Sweep, test: Metric, record: RerunRecord) -> list[str]:
    """The rerun's test value over its fresh seeds against what the search saw (the
    record's ``search_test_acc``; ``search_test_srcc`` ... for a score sweep); without a
    readable record of the choice, the rerun's value alone."""
    selection = record.selection
    trials = results.trials[results.trials["sweep"] == rerun.name]
    done = trials[trials["status"] == "completed"]
    rounds = results.rounds[results.rounds["sweep"] == rerun.name]
    seen = (selection or {}).get(f"search_{test.column}") or []
    outcome = rerun_outcome(final_values(done, rounds, test), seen, test=test)
    seeds = sorted(int(s) for s in trials["seed"].dropna()) if "seed" in trials else []
    lines = [f"### Rerun on fresh seeds: {rerun.name}", ""]
    if not outcome:
        return [*lines, "The rerun has no completed trial yet.", ""]
    interval = (
        ""
        if math.isnan(outcome["low"])
        else f" [{_number(test, outcome['low'])}, {_number(test, outcome['high'])}] "
        f"(95% t-interval of the mean over the {int(outcome['n'])} seeds of each trial's "
        f"last-round test {test.name})"
    )
    if selection is None:
        return [
            *lines,
            f"The configuration this sweep reruns, over {int(outcome['n'])} seeds "
            f"{', '.join(map(str, seeds))}; its record of the choice is damaged (see *Files "
            "not counted*), so what the search saw and the optimism are left out:",
            "",
            f"| | test {test.name}{test.unit} |",
            "| --- | ---: |",
            f"| rerun on fresh seeds (reported) | {_number(test, outcome['mean'])}{interval} |",
            "",
        ]
    lines += [
        f"The configuration chosen on {selection['metric']} "
        f"({selection['point']}) over {int(outcome['n'])} seeds "
        f"{', '.join(map(str, seeds))} that no searched trial used "
        f"(the search's: {selection.get('search_seeds')}):",
        "",
        f"| | test {test.name}{test.unit} |",
        "| --- | ---: |",
        f"| rerun on fresh seeds (reported) | {_number(test, outcome['mean'])}{interval} |",
        f"| what the search saw (selected trial(s)) | {_number(test, outcome['search_test'])} |",
        f"| optimism (search − rerun{_in_direction(test)}) | "
        f"{_difference(test, outcome['optimism'])} |",
        "",
    ]
    return lines


def _rho_words(rho: float, ranked: int, metric: str, test: Metric) -> str:
    """The rank correlation, or why there is none: fewer than 3 trials to rank, or
    ``ranked`` trials whose values tie on one side (trials that learned nothing alike)."""
    if not math.isnan(rho):
        return f"{rho:+.2f}"
    if ranked < 3:
        return f"n/a ({ranked} trial(s) to rank, fewer than 3)"
    values = f"{metric} or test {test.name} values"
    return f"n/a (the {ranked} trials' {values} are all equal: no ranking)"


def _in_direction(test: Metric) -> str:
    """Words for a difference taken in a lower-is-better metric's direction."""
    return "" if test.higher_is_better else f", lower {test.name} better"


def _noise_lines(
    outcomes: pd.DataFrame,
    parties: pd.DataFrame,
    sweep: Sweep,
    metric: str,
    out: Path,
    stem: str,
    formats: Sequence[str],
    test: Metric,
) -> list[str]:
    own = parties[parties["sweep"] == sweep.name] if "sweep" in parties else parties
    values = final_party_values(own, metric)
    lines = ["### Evaluation noise: selection with k of N parties evaluating", ""]
    if not values:
        return [
            *lines,
            "Not computed: the trials logged no per-party validation values (val_split="
            "party writes them to parties.csv).",
            "",
        ]
    n = max(len(v[0]) for v in values.values())
    ks = [k for k in NOISE_KS if k < n] + [n]
    noise = evaluation_noise(outcomes, values, metric, ks, test=test)
    csv = out / "tables" / f"{stem}_noise.csv"
    noise.to_csv(csv, index=False)
    reference = full_evaluation_choice(outcomes, values, metric, test)
    chose = point_choice(outcomes, metric, test)
    lines += [
        f"Each trial's last-round per-party {metric} re-drawn {200} times with k of its "
        f"{n} parties evaluating (each trial its own draw, seeded); the reference, k = {n}, "
        f"is the size-weighted mean over all {n} parties' values, which chooses "
        f"**{reference.get('point', '–')}**"
        + (
            "."
            if reference.get("point") == chose.get("point")
            else f" (the sweep chose {chose.get('point', '–')} on the rows' pooled {metric}, "
            "which for a metric that is no mean over samples is not the mean over parties)."
        ),
        "",
        f"| k | choice changed (%) | expected regret vs full evaluation ({test.diff_unit}) | "
        f"expected regret, hindsight ({test.diff_unit}) |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for _, row in noise.iterrows():
        lines.append(
            f"| {int(row['k'])} | {100 * row['changed']:.0f} | {_number(test, row['regret'])} | "
            f"{_number(test, row['regret_hindsight'])} |"
        )
    lines += ["", f"Files: [csv]({csv.relative_to(out).as_posix()})", ""]
    fig = _noise_figure(noise, test, f"{sweep.path.name}: evaluation noise")
    paths = save_figure(fig, out / "figures" / f"fig_{stem}_noise", formats)
    caption = (
        "selection under evaluation noise (k of N parties): expected regret in "
        f"{test.diff_words} (left), share of draws whose choice changed, % (right)"
    )
    return lines + figure_block(paths, out, caption)


def _noise_figure(noise: pd.DataFrame, test: Metric, title: str) -> plt.Figure:
    """Regret (the test metric's difference units) and the changed choices (%), each
    on its own axis: one axis for both would read a regret of 0.05 as 0."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2))
    ks = noise["k"].astype(int)
    left.plot(ks, test.scale * noise["regret"], marker="o", label="vs full evaluation")
    # dashed: equal regrets (the choice also best in hindsight) left one line hidden
    left.plot(
        ks, test.scale * noise["regret_hindsight"], marker="^", linestyle="--", label="vs hindsight"
    )
    left.set_ylabel(f"expected regret ({test.diff_words})")
    left.legend(fontsize=8)
    right.plot(ks, 100 * noise["changed"], marker="s", color="C2")
    right.set_ylabel("choice changed (%)")
    right.set_ylim(-5, 105)
    for ax in (left, right):
        ax.set_xlabel("parties evaluating (k)")
        ax.set_xticks(sorted(set(ks)))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
