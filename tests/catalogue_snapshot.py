"""Snapshots of the built-in studies, taken before they became study files.

``plan_snapshot()`` is every built-in study's dry-run plan (trials, configs, seeds) for
each budget and search; ``report_snapshot()`` is the markdown of every table the report
builds for each built-in study on a hand-made results folder (:mod:`tests.analysis_fakes`).
``python -m tests.catalogue_snapshot`` rewrites the fixtures; the tests compare
today's plans and tables with them.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PLANS = FIXTURES / "builtin_plans.json"
TABLES = FIXTURES / "builtin_report_tables.json"
# The budgets the plan snapshot was taken with (``as-written`` came later: it scales
# nothing, so it adds no plan the snapshot needs to hold).
SNAPSHOT_BUDGETS = ("paper", "laptop", "smoke")


def offline_studies() -> list[str]:
    """The built-in studies whose data is built in.  A study on a Hugging Face data set
    (``hf:``, femnist_writers) needs its data to plan: tests/test_hub_datasets.py plans
    and runs it on a local stand-in; one on a folder the user builds (``folder:``, street)
    likewise: tests/test_detection_study.py builds a small tree and plans it."""
    from search_spaces import STUDIES

    return [name for name, s in STUDIES.items() if not s.dataset.startswith(("hf:", "folder:"))]


def plan_snapshot() -> dict[str, Any]:
    """``{study: {budget/search: {n_trials, seeds, trials: [[label, seed, config]], ranges}}}``."""
    from search_spaces import BUDGETS, STUDIES
    from study.plan import SweepPlan

    out: dict[str, Any] = {}
    for name in offline_studies():
        study = STUDIES[name]
        entry: dict[str, Any] = {
            "paper": study.paper,
            "description": study.description,
            "axes": [a.name for a in study.axes],
            "label_columns": study.label_columns,
        }
        for budget in SNAPSHOT_BUDGETS:
            for search in ("grid", "optuna"):
                plan = SweepPlan.build(study, BUDGETS[budget], search=search)
                entry[f"{budget}/{search}"] = {
                    "n_trials": plan.n_trials,
                    "seeds": plan.seeds,
                    "dataset": plan.dataset,
                    "ranges": {a.name: a.search_range.describe() for a in study.axes},
                    "trials": [[t.label, t.seed, t.config] for t in plan.trials()],
                }
        out[name] = entry
    return json.loads(json.dumps(out, default=str))


def report_snapshot(
    with_definition: bool = True, studies: list[str] | None = None
) -> dict[str, list[str]]:
    """``{study: [markdown of each table]}`` on a fake results folder of each study (of
    ``studies``, default every built-in one on built-in data); ``with_definition=False``
    writes manifests without the study's definition (as sweeps did before studies became
    files)."""
    from analysis.reading.grouping import study_groups
    from analysis.reading.loading import load_results
    from analysis.stats.trial_statistic import FINAL
    from analysis.tables.formats import to_markdown
    from analysis.tables.study_tables import TableOptions, study_tables
    from tests.analysis_fakes import curve, plan_configs, write_sweep

    out: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in offline_studies() if studies is None else studies:
            configs = plan_configs(name, seeds=2)
            trials = [
                (c, curve(0.3 + 0.013 * (i % 41) + 0.002 * c["seed"], c["rounds"]))
                for i, c in enumerate(configs)
            ]
            sweep = write_sweep(Path(tmp), f"{name}-fmnist-smoke", name, trials)
            if not with_definition:
                manifest = json.loads((sweep / "fedsweep_sweep.json").read_text())
                del manifest["definition"]
                (sweep / "fedsweep_sweep.json").write_text(json.dumps(manifest))
            results = load_results([str(Path(tmp) / f"{name}-fmnist-smoke")])
            out[name] = [
                to_markdown(table)
                for group in study_groups(results)
                # the final round, as when the snapshot was taken (the fakes set it)
                for table in study_tables(group, TableOptions(statistic=FINAL))
            ]
    return out


if __name__ == "__main__":
    FIXTURES.mkdir(exist_ok=True)
    PLANS.write_text(json.dumps(plan_snapshot(), sort_keys=True) + "\n")
    TABLES.write_text(json.dumps(report_snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PLANS} and {TABLES}")
