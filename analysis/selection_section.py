"""The report's selection section: for every sweep that chose a configuration, what it
chose on, what that choice is worth on test, and how robust it is to evaluation noise
(the numbers are :mod:`analysis.selection`'s; docs/validation.md reads them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.figures import save_figure
from analysis.loading import Results, Sweep
from analysis.naming import percent
from analysis.report_markdown import figure_block, unique_stem
from analysis.selection import (
    best_so_far,
    evaluation_noise,
    final_party_values,
    point_choice,
    rank_correlation,
    rerun_outcome,
    trial_outcomes,
)

#: evaluating-party counts the noise table shows (those below N)
NOISE_KS = (1, 2, 3, 5, 10, 20, 50)


def selecting_sweeps(results: Results) -> list[tuple[Sweep, Sweep | None]]:
    """(sweep that selected, its ``--rerun-best`` sweep or None): Optuna searches, ASHA
    sweeps and any sweep a loaded rerun names as ``rerun_of``."""
    reruns = {
        str(s.manifest.get("rerun_of")): s for s in results.sweeps if s.search == "rerun-best"
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
) -> list[str]:
    """Markdown lines (and figures, tables) of every selecting sweep in ``results``."""
    lines: list[str] = []
    for sweep, rerun in selecting_sweeps(results):
        lines += _one_sweep(results, parties, sweep, rerun, out, used, formats)
    return lines


def _one_sweep(
    results: Results,
    parties: pd.DataFrame,
    sweep: Sweep,
    rerun: Sweep | None,
    out: Path,
    used: set[str],
    formats: Sequence[str],
) -> list[str]:
    metric = str(sweep.manifest.get("metric") or "test_acc")
    trials = results.trials[results.trials["sweep"] == sweep.name]
    rounds = results.rounds[results.rounds["sweep"] == sweep.name]
    outcomes = trial_outcomes(rounds, trials, metric)
    lines = [f"## Selection: {sweep.name}", ""]
    if metric == "test_acc" or metric not in ("val_acc", "val_loss"):
        lines += [
            "**Selected on test**: this sweep ranked its trials by test accuracy (it predates "
            "the validation protocol or held out no validation data), so every number below "
            "that it chose is optimistic by construction; rerun with `--set val_fraction=0.1`.",
            "",
        ]
    else:
        lines += [
            f"Trials ranked by **{metric}** (size-weighted federated validation on the "
            "parties' held-out data); test accuracy is only reported, never used to choose.",
            "",
        ]
    if outcomes.empty:
        return [*lines, "No trial has results yet.", ""]
    outcomes["best_so_far"] = best_so_far(outcomes, metric).to_numpy()
    stem = unique_stem(f"selection_{sweep.path.name}", used)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    csv = out / "tables" / f"{stem}.csv"
    outcomes.to_csv(csv, index=False)
    choice = point_choice(outcomes, metric)
    rho = rank_correlation(outcomes)
    spent = outcomes[["rounds", "party_updates", "seconds"]].sum()
    lines += [
        f"- trials: {len(outcomes)}; spent {int(spent['rounds'])} rounds, "
        f"{int(spent['party_updates'])} party updates, {spent['seconds']:.0f} CPU/GPU seconds "
        "(training and evaluation)",
        f"- Spearman ρ of {metric} vs test accuracy over completed trials: "
        + ("n/a (fewer than 3)" if math.isnan(rho) else f"{rho:+.2f}"),
    ]
    if choice:
        lines += [
            f"- chosen on {metric}: **{choice['point']}** "
            f"({metric} {_metric(metric, choice['value'])}, "
            f"search-time test accuracy {percent(choice['test_acc'], 2)}%)",
            f"- best test accuracy in hindsight (not a choice any tuner could make): "
            f"{choice['hindsight_point']}, {percent(choice['hindsight_test_acc'], 2)}%; "
            f"regret of the choice (hindsight): {percent(choice['regret'], 2)} points",
        ]
    lines += ["", f"Files: [csv]({csv.relative_to(out).as_posix()})", ""]
    figure = _best_so_far_figure(outcomes, metric, sweep.path.name)
    paths = save_figure(figure, out / "figures" / f"fig_{stem}", formats)
    lines += figure_block(
        paths, out, f"best-so-far {metric} vs trials and vs party updates spent"
    )
    if rerun is not None:
        lines += _rerun_lines(results, rerun, sweep)
    lines += _noise_lines(outcomes, parties, sweep, metric, out, stem, formats)
    return lines


def _metric(metric: str, value: float) -> str:
    return f"{percent(value, 2)}%" if metric.endswith("acc") else f"{value:.4f}"


def _best_so_far_figure(outcomes: pd.DataFrame, metric: str, title: str) -> plt.Figure:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
    number = range(1, len(outcomes) + 1)
    cost = outcomes["party_updates"].cumsum()
    for ax, x, label in ((axes[0], number, "trials"), (axes[1], cost, "party updates spent")):
        ax.scatter(x, outcomes["value"], s=12, color="0.6", label=f"trial's {metric}")
        ax.step(x, outcomes["best_so_far"], where="post", color="C0", label="best so far")
        ax.set_xlabel(label)
    axes[0].set_ylabel(metric)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{title}: selection on {metric}", fontsize=10)
    fig.tight_layout()
    return fig


def _rerun_lines(results: Results, rerun: Sweep, search: Sweep) -> list[str]:
    selection = rerun.manifest.get("selection") or {}
    trials = results.trials[results.trials["sweep"] == rerun.name]
    done = trials[trials["status"] == "completed"]
    outcome = rerun_outcome(
        done["final_acc"].astype(float).tolist(), selection.get("search_test_acc") or []
    )
    seeds = sorted(int(s) for s in trials["seed"].dropna()) if "seed" in trials else []
    lines = [f"### Rerun on fresh seeds: {rerun.name}", ""]
    if not outcome:
        return [*lines, "The rerun has no completed trial yet.", ""]
    interval = (
        "" if math.isnan(outcome["low"]) else
        f" [{percent(outcome['low'], 2)}, {percent(outcome['high'], 2)}] (95% t-interval)"
    )
    lines += [
        f"The configuration chosen on {selection.get('metric', '?')} "
        f"({selection.get('point', '?')}) over {int(outcome['n'])} seeds "
        f"{', '.join(map(str, seeds))} that no searched trial used "
        f"(the search's: {selection.get('search_seeds')}):",
        "",
        "| | test accuracy (%) |",
        "| --- | ---: |",
        f"| rerun on fresh seeds (reported) | {percent(outcome['mean'], 2)}{interval} |",
        f"| what the search saw (selected trial(s)) | {percent(outcome['search_test_acc'], 2)} |",
        f"| optimism (search − rerun) | {percent(outcome['optimism'], 2)} points |",
        "",
    ]
    return lines


def _noise_lines(
    outcomes: pd.DataFrame,
    parties: pd.DataFrame,
    sweep: Sweep,
    metric: str,
    out: Path,
    stem: str,
    formats: Sequence[str],
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
    noise = evaluation_noise(outcomes, values, metric, ks)
    csv = out / "tables" / f"{stem}_noise.csv"
    noise.to_csv(csv, index=False)
    lines += [
        f"Each trial's last-round per-party {metric} re-drawn {200} times with k of its "
        f"{n} parties evaluating (each trial its own draw, seeded); k = {n} is the full "
        "evaluation the sweep chose with.",
        "",
        "| k | choice changed (%) | expected regret vs full evaluation (points) | "
        "expected regret, hindsight (points) |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for _, row in noise.iterrows():
        lines.append(
            f"| {int(row['k'])} | {100 * row['changed']:.0f} | {percent(row['regret'], 2)} | "
            f"{percent(row['regret_hindsight'], 2)} |"
        )
    lines += ["", f"Files: [csv]({csv.relative_to(out).as_posix()})", ""]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(noise["k"], 100 * noise["regret"], marker="o", label="regret vs full evaluation")
    ax.plot(noise["k"], 100 * noise["changed"], marker="s", label="choice changed (%)")
    ax.set_xlabel("parties evaluating (k)")
    ax.set_ylabel("points / %")
    ax.legend(fontsize=8)
    ax.set_title(f"{sweep.path.name}: evaluation noise", fontsize=10)
    fig.tight_layout()
    paths = save_figure(fig, out / "figures" / f"fig_{stem}_noise", formats)
    return lines + figure_block(paths, out, "selection under evaluation noise (k of N parties)")
