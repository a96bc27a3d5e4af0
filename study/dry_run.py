"""What ``python -m study.sweep ... --dry-run`` says of a plan's data and privacy before
anything is trained: the parties each distinct data setting would leave out under the
floor, and the epsilon each distinct DP setting would spend by its last round.

Both come from the code the run itself uses, once per distinct setting (never per seed
or trial): the parties from :func:`federated.data.planned_parties.planned_left_out`
(the data's index read, no image decoded, nothing written) worded by the run's own
:func:`~federated.data.party_field.left_out_words`; epsilon from the run's accountant,
:meth:`federated.server.privacy.PrivacySettings.epsilon_after`.  Record-level DP-SGD's
epsilon depends on each party's size (its batch sampling rate q = batch / n_i), which
only the loaded data give: its line says so (docs/privacy.md).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from federated.config.privacy_fields import record_level, run_accountant
from federated.config.run_config import RunConfig
from federated.data.folder_layout import MIN_PARTY_IMAGES
from federated.data.hub_dataset import HubColumns
from federated.data.party_field import left_out_words
from federated.data.planned_parties import planned_left_out
from federated.server.privacy import PrivacySettings
from study.plan import SweepPlan


def _distinct(configs: list[RunConfig], key: Callable[[RunConfig], Hashable]) -> list[RunConfig]:
    """The first config of each distinct ``key(config)``, in the trials' order."""
    first: dict[Hashable, RunConfig] = {}
    for config in configs:
        first.setdefault(key(config), config)
    return list(first.values())


def left_out_lines(plan: SweepPlan) -> list[str]:
    """One ``warning:`` line per distinct data setting whose party field leaves values
    out under the floor (the run's words, with the data set where the plan holds
    several), a ``note:`` where only reading the data tells (an ``hf:`` source on the
    Hub); nothing for data sets without a party field."""
    configs = [t.run_config for t in plan.trials()]
    settings = _distinct(
        configs,
        lambda c: (c.dataset, c.data_root, c.image_size, c.holdout_fraction, HubColumns.of(c)),
    )
    lines = []
    for c in (c for c in settings if c.partition_by):
        which = f" ({c.dataset})" if len({s.dataset for s in settings}) > 1 else ""
        left_out = planned_left_out(c)
        if left_out is None:
            lines.append(
                f"note: partition_by={c.partition_by}{which}: the values under the "
                f"{MIN_PARTY_IMAGES}-training-image floor of a party are known once the data "
                "are read (a source on the Hub is not downloaded by a dry run)"
            )
            continue
        words = left_out_words(c.partition_by, left_out)
        if words:
            lines.append(words + which)
    return lines


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
    for c in (t.run_config for t in plan.trials()):
        settings = PrivacySettings.from_config(c)
        if record_level(c):
            lines.append(_record_line(c))
        elif settings is not None:
            lines.append(_party_line(settings, c))
    return list(dict.fromkeys(lines))  # each distinct setting once, in the trials' order
