"""What ``python -m study.sweep ... --dry-run`` says of a plan's data and privacy before
anything is trained: the parties each distinct data setting leaves out under the floor,
and the epsilon each distinct DP setting will have spent by its last round.

Both come from what the run itself uses, once per distinct setting (never per seed or
trial): the parties from the trials' data spec (``left_out_parties``, which the loader
fills by the run's one rule, :func:`~federated.data.party_field.parties_by_value`; the
plan has loaded a folder's or an ``hf:`` data set's data to complete its trials, and a
built-in data set leaves no party out), worded by the run's own
:func:`~federated.data.party_field.left_out_words`; epsilon from the run's accountant,
:meth:`federated.server.privacy.PrivacySettings.epsilon_after`.  Record-level DP-SGD's
epsilon depends on each party's size (its batch sampling rate q = batch / n_i) and is
left to the run (docs/privacy.md).
"""

from __future__ import annotations

from federated.config.privacy_fields import record_level, run_accountant
from federated.config.run_config import RunConfig
from federated.data.party_field import left_out_words
from federated.server.privacy import PrivacySettings
from study.plan import SweepPlan


def left_out_lines(plan: SweepPlan) -> list[str]:
    """One ``warning:`` line per distinct data setting whose party field leaves values
    out under the floor, in the run's words (with the data set where the plan holds
    several); nothing where no party is left out.  Reads the trials' data specs, which
    the plan completed its trials with: no file is read here."""
    lines: dict[str, None] = {}
    configs = [t.run_config for t in plan.trials()]
    several = len({c.dataset for c in configs}) > 1
    for config in configs:
        words = left_out_words(config.partition_by or "", config.spec.left_out_parties)
        if words:  # each data setting's line once, in the trials' order
            lines[words + (f" ({config.dataset})" if several else "")] = None
    return list(lines)


def _record_line(c: RunConfig) -> str:
    """Record-level DP-SGD's line: its settings, and that epsilon needs the parties' sizes."""
    return (
        f"privacy: dp_level=record, sigma={c.dp_noise_multiplier:g}, "
        f"C={c.dp_clip_norm:g}, {c.rounds} rounds, batch_size={c.batch_size}, "
        f"{run_accountant(c)} accountant, delta={c.dp_delta:g}: each party's epsilon is "
        "known once the data are read (its batch sampling rate q = batch_size / its "
        "records); the rows give the worst party's each round"
    )


def _party_line(settings: PrivacySettings, c: RunConfig) -> str:
    """DP-FedAvg's line: its settings and the epsilon its last round will have spent."""
    s = settings
    clip = f"C={s.clip_norm:g}" + (" (adaptive, first round)" if s.adaptive else "")
    delta = "none" if s.delta is None else f"{s.delta:g}"
    return (
        f"privacy: sigma={s.noise_multiplier:.4g}, {clip}, {c.rounds} rounds, "
        f"{s.per_round} of {s.n_parties} parties per round ({s.sampling} sampling), "
        f"{s.accountant} accountant, delta={delta}: planned epsilon "
        f"{s.epsilon_after(c.rounds):.4g} ({s.accounting_of().neighbours} neighbours)"
    )


def epsilon_lines(plan: SweepPlan) -> list[str]:
    """One ``privacy:`` line per distinct DP setting of the plan's trials (sigma, C,
    rounds, parties per round and their sampling, accountant, delta): the epsilon the
    run's accountant gives its last round; nothing for a plan without DP."""
    lines = []
    accounted: set[tuple[PrivacySettings, int]] = set()
    for c in (t.run_config for t in plan.trials()):
        settings = PrivacySettings.from_config(c)
        if record_level(c):
            lines.append(_record_line(c))
        elif settings is not None and (settings, c.rounds) not in accounted:
            # the accountant is asked once per distinct setting, not once per seed
            accounted.add((settings, c.rounds))
            lines.append(_party_line(settings, c))
    return list(dict.fromkeys(lines))  # each distinct setting once, in the trials' order
