"""``python -m analysis.report RESULTS_DIR... [--out DIR]``: the paper's tables and figures.

    python -m analysis.report results/moon_mu-fmnist-laptop-20261121-181954
    python -m analysis.report results --out report            # every sweep in ./results
    python -m analysis.report results --baseline fedprox --target mean --statistic best
    python -m analysis.report results --statistic last:5 --resolve-target 1

RESULTS_DIR is a sweep directory (it holds ``fedsweep_sweep.json``) or a folder of them;
several may be given and their sweeps combine (two datasets of the same study become
two columns).  A sweep that is still running is read as far as it is complete.

Writes into ``--out`` (default ``./report``)::

    report.md        every table and figure, the runs (datasets, budgets, seeds), the
                     trials not counted (errors, divergences, unfinished), the files
                     not counted (damaged: path, reason, what was left out) and what of
                     the paper this reproduces
    tables/          <name>.md, <name>.tex, <name>.csv per table
    figures/         <name>.png and <name>.pdf per figure
    data/            rounds.csv (one row per trial and round), trials.csv (one per trial)

A score task's sweeps (image assessment) report their primary metric (``test_srcc`` by
default) where classification reports accuracy, and their tables once more on the rest
of SRCC and MAE (:mod:`analysis.primary_metric`; docs/reports.md).  Sweeps whose trials
record different primary metrics in one table are refused in one line (exit status 2).

The report is written into a fresh folder beside ``--out`` and moved in only when
complete: a report that fails leaves ``--out`` as it was (exit status 1, one line).
Exit status 2, with one line on stderr, for a path without a sweep or a bad option.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from analysis.reading.grouping import study_groups
from analysis.reading.loading import NoResultsError, Results, load_results, status_counts
from analysis.report_options import build_parser, check_options
from analysis.sections.data_files import data_files_section, write_data_files
from analysis.sections.feature_skew import feature_examples_section
from analysis.sections.files_not_counted import files_not_counted_section
from analysis.sections.opening import opening_section
from analysis.sections.partitions import partition_section
from analysis.sections.reading_problems import reading_problems_section
from analysis.sections.reproduction import reproduction_section
from analysis.sections.runs import runs_section
from analysis.sections.study_group import study_group_section
from analysis.sections.trials_not_counted import trials_not_counted_section
from analysis.tables.study_tables import TableOptions, primary_of
from analysis.tracker_upload import TrackerUploadError, check_report_trackers, upload_report
from federated.cli.error_reason import error_reason
from federated.cli.input_checks import InputError, UsageError, check_output_folder


def write_report(
    results: Results,
    out: str | Path,
    options: TableOptions | None = None,
    *,
    sources: Sequence[str] = (),
    formats: Sequence[str] = ("png", "pdf"),
) -> Path:
    """Write every table and figure and ``report.md`` into ``out``; returns report.md.

    Everything is written into a fresh folder beside ``out`` first and moved into
    ``out`` only once complete (:func:`_move_into`): a report that fails half-way leaves
    ``out`` as it was, never half a report."""
    out = Path(out)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        _write_report_files(results, staging, options or TableOptions(), sources, formats)
        _move_into(staging, out)
    except BaseException:
        if created:  # leave no empty folder behind either
            shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out / "report.md"


# what a report consists of in its folder (everything else there is left alone)
REPORT_ENTRIES = ("tables", "figures", "data", "report.md")


def _move_into(staging: Path, out: Path) -> None:
    """Replace the report entries of ``out`` by ``staging``'s: the folders first, the
    report.md last (so a report.md never links to files of another run)."""
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    try:
        for name in REPORT_ENTRIES:
            new, old = staging / name, out / name
            if old.exists() or old.is_symlink():
                os.replace(old, retired / name)
            if new.exists():
                os.replace(new, old)
    finally:
        shutil.rmtree(retired, ignore_errors=True)


def _write_report_files(
    results: Results,
    out: Path,
    options: TableOptions,
    sources: Sequence[str],
    formats: Sequence[str],
) -> None:
    """Every table, figure and data file and report.md, into the (empty) folder ``out``:
    the sections of :mod:`analysis.sections`, in the report's order."""
    # imported late, as the figures are: these load Matplotlib
    from analysis.sections.selection import selection_section
    from analysis.tables.party_tables import party_frame

    used: set[str] = set()  # file stems taken, across every section
    groups = study_groups(results)
    primaries = [primary_of(group) for group in groups]
    not_counted: list[str] = []  # damaged files whose part is left out (path: reason)
    party_rows = party_frame(results, not_counted)

    body = opening_section(sources, options.statistic, primaries)
    body += runs_section(results, primaries)
    for group in groups:
        body += study_group_section(
            group, options, results, party_rows, out, used, formats, not_counted
        )
    body += selection_section(results, party_rows, out, used, formats, not_counted)
    body += partition_section(results.sweeps, out, used, formats)
    body += feature_examples_section(results.sweeps, out, used, formats, not_counted)
    body += trials_not_counted_section(results)
    body += files_not_counted_section(not_counted)
    body += reading_problems_section(results.problems)
    body += reproduction_section(groups)
    body += data_files_section(primaries)

    write_data_files(results, party_rows, out)
    (out / "report.md").write_text("\n".join(body))


def main(argv: list[str] | None = None) -> int:
    """``python -m analysis.report``: 0 written, 1 the report failed (nothing written), 2 a
    bad path or option (one line each)."""
    args = build_parser().parse_args(argv)
    try:
        out = check_output_folder(args.out, "--out")
        check_report_trackers(args.track)
        results = load_results(args.results)
        options = check_options(args, results)
    except (NoResultsError, UsageError, TrackerUploadError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    formats = ("png",) if args.no_pdf else ("png", "pdf")
    try:
        report = write_report(results, out, options, sources=args.results, formats=formats)
    except OSError as err:  # the disk filled, a folder vanished: one line, not a traceback
        print(
            f"error: could not write the report into {out}: {err}; nothing of it was written",
            file=sys.stderr,
        )
        return 1
    except Exception as err:  # a table or figure failed: one line, and nothing half-done
        first = error_reason(err, default="")
        print(
            f"error: the report failed ({type(err).__name__}: {first}); nothing of it was "
            f"written into {out}",
            file=sys.stderr,
        )
        return 1
    if not args.quiet:
        for sweep in results.sweeps:
            trials = results.trials[results.trials["sweep"] == sweep.name]
            counts = ", ".join(f"{n} {s}" for s, n in status_counts(trials).items())
            print(f"{sweep.name}: {sweep.status}; trials: {counts or 'none yet'}")
    print(f"report: {report}")
    if args.track:
        sweeps = [(sweep.name, sweep.path, sweep.manifest) for sweep in results.sweeps]
        for line in upload_report(report.parent, sweeps, args.track):
            print(line)
    return 0


if __name__ == "__main__":
    from federated.runtime.process_exit import exit_process

    exit_process(main())
