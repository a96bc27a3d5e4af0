"""The live view's content and pacing, from trial records like Tune's (id, status,
config, last result)."""

from __future__ import annotations

import io
from types import SimpleNamespace

from study.tune.live_view import LiveView


def trial(i: int, status: str, round_=None, acc=None):
    result = {} if round_ is None else {"round": round_, "test_acc": acc}
    return SimpleNamespace(
        trial_id=f"t{i}", status=status, config={"mu": i / 10, "seed": 0}, last_result=result
    )


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_summary_and_one_line_per_running_trial():
    view = LiveView("moon_mu", total_trials=6, rounds_per_trial=10, label_keys=["mu", "seed"])
    trials = [
        trial(0, "TERMINATED", 10, 0.61),
        trial(1, "ERROR", 3, 0.2),
        trial(2, "RUNNING", 5, 0.55),
        trial(3, "RUNNING"),
    ]
    lines = view.lines(trials, elapsed_s=100.0)
    assert lines[0] == (
        "moon_mu 0:01:40 | 6 trials: 1 done, 2 running, 2 pending, 1 errored | "
        "best test_acc 0.6100 | ~0:02:20 left"  # 25 of 60 rounds in 100 s: 35 left
    )
    assert lines[1] == "  mu=0.2 seed=0                  round   5/10  test_acc 0.5500"
    assert lines[2] == "  mu=0.3 seed=0                  starting"
    assert len(lines) == 3


def test_a_file_gets_a_block_on_state_changes_or_every_30_seconds():
    out = io.StringIO()
    view = LiveView("s", 2, 5, ["mu"], stream=out, file_period_s=30)
    running = [trial(0, "RUNNING", 1, 0.1), trial(1, "PENDING")]
    assert view.should_report(running)
    view.report(running, done=False)
    running[0].last_result = {"round": 2, "test_acc": 0.2}  # progress is no state change
    assert not view.should_report(running)
    view._last_print -= 31
    assert view.should_report(running)
    ended = [trial(0, "TERMINATED", 5, 0.3), trial(1, "RUNNING")]
    assert view.should_report(ended)
    view.report(ended, done=True)
    view.report(ended, done=True)  # Tune's second end-of-run report prints nothing
    assert "\x1b[" not in out.getvalue()
    assert out.getvalue().count("\n") == 2 + 2


def test_a_terminal_is_redrawn_in_place():
    out = Tty()
    view = LiveView("s", 2, 5, ["mu"], stream=out)
    view.report([trial(0, "RUNNING", 1, 0.1), trial(1, "RUNNING", 1, 0.1)], done=False)
    view.report([trial(0, "TERMINATED", 5, 0.3), trial(1, "RUNNING", 2, 0.2)], done=False)
    assert out.getvalue().count("\x1b[3F\x1b[J") == 1  # back over the first 3-line block


def test_a_view_pickled_before_it_knew_its_metric_resumes_showing_test_accuracy():
    """--resume unpickles the view a sweep started with; one saved by an older fedsweep
    has no ``metric`` and must still draw (it stopped a resumed sweep with AttributeError)."""
    import pickle

    view = LiveView("s", 2, 5, ["mu"], metric="val_acc")
    assert pickle.loads(pickle.dumps(view)).metric == "val_acc"
    state = view.__getstate__()
    del state["metric"]
    old = LiveView.__new__(LiveView)
    old.__setstate__(state)
    lines = old.lines([trial(0, "TERMINATED", 5, 0.3)], elapsed_s=10)
    assert "best test_acc 0.3000" in lines[0]


def test_a_personalised_trial_shows_its_own_split_accuracy():
    """A personalised trial's pooled test_acc is NaN between its scored rounds: the line
    shows the mean of the parties' own-split accuracy it is judged by, and the pooled
    value where that round scored it."""
    view = LiveView("fedper", total_trials=1, rounds_per_trial=10, label_keys=["mu", "seed"])
    nan = float("nan")
    running = trial(0, "RUNNING", 4, nan)
    running.last_result["party_test_acc_mean"] = 0.8123
    assert view.lines([running], 10.0)[1].endswith("round   4/10  party_test_acc_mean 0.8123")
    running.last_result.update(round=5, test_acc=0.41)
    assert view.lines([running], 10.0)[1].endswith(
        "round   5/10  party_test_acc_mean 0.8123  test_acc 0.4100"
    )
