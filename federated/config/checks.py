"""Every check of a :class:`~federated.config.run_config.RunConfig`'s run-level fields as values,
in one place: the allowed values and limits of its fields and :func:`validate`, which
resolution (:meth:`~federated.config.run_config.RunConfig.resolved`) runs, reading no file and
building no model, and which raises :class:`ConfigError` with one line naming the field,
the value and what is allowed.  The methods' parameters are checked by their own
``Params`` classes (:meth:`~federated.params.MethodParams.check`).  What the data or the
model decide (party counts against images, the task the data hold, a model that builds,
a layer rule against its state names) is checked once the data are loaded, in
:mod:`federated.config.data_checks`.

The config reaches these functions as a plain object (``Any``): this module sits below
:mod:`federated.config.run_config`, which imports it, and imports nothing of it back."""

from __future__ import annotations

import re
import warnings
from dataclasses import fields
from typing import Any

from federated.config.privacy_fields import check_privacy
from federated.params import (
    ConfigError,
    at_least,
    at_most,
    check_type,
    fraction,
    non_negative,
    one_of,
    positive,
    type_hints,
    unit_interval,
)
from federated.privacy_accountant import SAMPLINGS
from federated.registry import load_method
from federated.runtime.precision_names import PRECISIONS

PARTITIONS = ("dirichlet", "iid", "labels", "quantity", "natural")
# what happens to BatchNorm running statistics (federated/algorithms/batchnorm_rule.py)
BATCHNORM_RULES = ("averaged", "local")
EXECUTIONS = ("packed", "sequential", "reference")
FEATURE_SKEWS = ("none", "noise", "rotation")
STRAGGLER_POLICIES = ("partial", "drop")
VAL_SPLITS = ("party", "server")
# Largest noise std (0..1 pixel scale) and rotation (degrees) a feature skew accepts:
# a std of 1 already buries every pixel (its whole range) in noise; beyond it the
# images carry nothing (NIID-Bench's largest is 0.1, the feature_skew study's 1).
MAX_NOISE_LEVEL = 1.0
MAX_ROTATION_DEGREES = 180.0
# execution names of earlier versions, still read from their results and checkpoints
EXECUTION_ALIASES = {"fast": "sequential"}


class ExecutionAliasWarning(FutureWarning):
    """A config names an execution path by its former name (``fast``); the command lines
    say so in their own notice line (federated/config/protocol_notices.py) and silence
    this one, which is for Python callers of :class:`RunConfig`."""


def execution_named(execution: str) -> str:
    """The execution path ``execution`` names, warning (:class:`ExecutionAliasWarning`)
    where it is a former name rather than renaming the caller's value silently."""
    if execution in EXECUTION_ALIASES:
        warnings.warn(
            f"execution={execution!r} is the former name of "
            f"execution={EXECUTION_ALIASES[execution]!r}: parties train one at a time",
            ExecutionAliasWarning,
            stacklevel=4,
        )
    return EXECUTION_ALIASES.get(execution, execution)


# The floor every Dirichlet or quantity-skew party gets (redrawn as the reference code
# does, else constructed: federated/heterogeneity/partition.py); n_parties <= n_train //
# MIN_PARTY_SAMPLES is exactly what the partition can meet, so validation refuses more.
MIN_PARTY_SAMPLES = 10
# Sizes beyond any real run (the paper's longest is 500 rounds, batches of 64): a larger
# value is a typo or a unit mistake, refused at once rather than discovered as an
# out-of-memory kill or a run that never ends.
MAX_ROUNDS = 100_000
MAX_BATCH_SIZE = 65_536  # local and evaluation batches: 2**16 images
MAX_THREADS = 1024  # torch threads: beyond the largest machines' cores (more only thrash)
# Counts that size a run's memory (the batch plan is drawn in full, epochs x samples; the
# projection head is out_dim wide): far beyond any paper's (E <= 20, out_dim 256).
MAX_LOCAL_EPOCHS = 1_000
MAX_OUT_DIM = 65_536
# A round's batch plan holds, per drawn sample and epoch, its row (int64) and augmentation
# parameters (two int64 offsets, a flip, an angle; federated/execution/batch_plan.py):
# about PLAN_BYTES_PER_ROW bytes.  At most MAX_PLAN_ROWS rows (~1.9 GB): 67 times the
# papers' largest round (all 50,000 CIFAR images x 20 epochs), so only a typo reaches it.
PLAN_BYTES_PER_ROW = 8 + 8 + 8 + 1 + 4
MAX_PLAN_ROWS = 2**26
# Smallest learning rate: below it a step changes float32 weights (|w| ~ 0.01..1, machine
# epsilon 1.2e-7) by less than their rounding for gradients of order 1, so training
# silently does nothing; the papers' smallest is 1e-4.
MIN_LR = 1e-8


def validate(c: Any) -> None:
    """Raise :class:`ConfigError` naming the first run-level field of ``c`` whose value
    is not allowed (types, names, ranges, what the machine allows); reads no file.

    The checks run in this order, so a config with several bad values is refused on the
    same one every time: types; the names (methods, partition, dataset fields, execution
    path, precision); counts and sizes; fractions and rates; heterogeneity; held-out data;
    differential privacy; the device.  Where the parties are the data's own and not yet
    counted (``n_parties`` None under ``partition=natural`` on a folder or an ``hf:``
    column), the checks that need their count wait for it:
    :func:`federated.config.data_checks.check_against_spec` runs this again once it is known."""
    from federated.config.data_fields import check_dataset_fields

    check_types(c)
    load_method("algorithm", c.algorithm)
    one_of("partition", c.partition, PARTITIONS)
    one_of("party_sampling", c.party_sampling, SAMPLINGS)
    check_dataset_fields(c)
    load_method("server_optimizer", c.server_optimizer)
    one_of("execution", EXECUTION_ALIASES.get(c.execution, c.execution), EXECUTIONS)
    one_of("precision", c.precision, PRECISIONS)
    _check_batchnorm(c)
    _check_counts(c)
    _check_fractions_and_rates(c)
    _validate_heterogeneity(c)
    _validate_evaluation(c)
    if c.n_parties is not None:
        check_privacy(c)  # the dp_* fields (federated/config/privacy_fields.py)
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", c.device):
        raise ConfigError("device", c.device, "auto, cpu, cuda or cuda:N")


def _check_batchnorm(c: Any) -> None:
    """The BatchNorm rule is one of :data:`BATCHNORM_RULES` and one the method allows
    (FedBN keeps its BatchNorm layers at each party: ``local`` only)."""
    one_of("batchnorm", c.batchnorm, BATCHNORM_RULES)
    allowed = load_method("algorithm", c.algorithm).own_state.batchnorm_rules
    if c.batchnorm not in allowed:
        raise ConfigError(
            "batchnorm",
            c.batchnorm,
            f"{' or '.join(allowed)} under algorithm {c.algorithm} (it keeps its BatchNorm "
            "layers, statistics included, at each party)",
        )


def _check_counts(c: Any) -> None:
    """Counts, sizes and periods: each within its limits (a value beyond any real run
    is a typo, refused at once)."""
    at_least("rounds", c.rounds, 1)
    at_most("rounds", c.rounds, MAX_ROUNDS)
    at_most("batch_size", c.batch_size, MAX_BATCH_SIZE)
    at_most("eval_batch_size", c.eval_batch_size, MAX_BATCH_SIZE)
    if c.n_parties is not None:
        at_least("n_parties", c.n_parties, 1)
    at_least("local_epochs", c.local_epochs, 1)
    at_most("local_epochs", c.local_epochs, MAX_LOCAL_EPOCHS)
    at_least("batch_size", c.batch_size, 1)
    at_least("out_dim", c.out_dim, 1)
    at_most("out_dim", c.out_dim, MAX_OUT_DIM)
    at_least("seed", c.seed, 0)
    at_least("eval_batch_size", c.eval_batch_size, 1)
    at_least("checkpoint_every", c.checkpoint_every, 0)
    if c.threads is not None:
        at_least("threads", c.threads, 1)
        # a fixed bound, not this machine's cores: a config is valid wherever it runs
        # (a Ray worker may have more cores than the driver); federated.run warns
        # about threads beyond the machine's cores.
        at_most("threads", c.threads, MAX_THREADS)
    if c.pack_width is not None:
        at_least("pack_width", c.pack_width, 1)
    if c.fail_at_round is not None:
        at_least("fail_at_round", c.fail_at_round, 1)
    if c.party_scores_every is not None:
        at_least("party_scores_every", c.party_scores_every, 0)
    if c.party_memory_mib is not None:
        at_least("party_memory_mib", c.party_memory_mib, 1)
    at_least("personal_test_every", c.personal_test_every, 1)
    at_least("finetune_epochs", c.finetune_epochs, 0)
    at_most("finetune_epochs", c.finetune_epochs, MAX_LOCAL_EPOCHS)
    parse_rounds(c.representations_at, c.rounds)


def _check_fractions_and_rates(c: Any) -> None:
    """The shares (parties per round, data, test set) and the optimiser's rates."""
    fraction("sample_fraction", c.sample_fraction)
    if c.n_parties is not None and round(c.n_parties * c.sample_fraction) == 0:
        # parties_per_round would round this to zero and quietly draw one party anyway
        raise ConfigError(
            "sample_fraction",
            c.sample_fraction,
            f"a fraction > {0.5 / c.n_parties:.4g} for n_parties={c.n_parties}; "
            f"round({c.n_parties} * sample_fraction) parties are drawn each round, and this "
            "draws none",
        )
    fraction("data_fraction", c.data_fraction)
    fraction("test_fraction", c.test_fraction)
    positive("beta", c.beta)
    positive("lr", c.lr)
    if c.lr < MIN_LR:
        raise ConfigError(
            "lr", c.lr, f"a learning rate >= {MIN_LR:g} (a smaller step changes no float32 weight)"
        )
    non_negative("weight_decay", c.weight_decay)
    unit_interval("momentum", c.momentum)


def _validate_heterogeneity(c: Any) -> None:
    one_of("feature_skew", c.feature_skew, FEATURE_SKEWS)
    one_of("straggler_policy", c.straggler_policy, STRAGGLER_POLICIES)
    non_negative("feature_skew_level", c.feature_skew_level)
    if c.feature_skew == "noise" and c.feature_skew_level > MAX_NOISE_LEVEL:
        raise ConfigError(
            "feature_skew_level",
            c.feature_skew_level,
            f"a noise std in [0, {MAX_NOISE_LEVEL:g}] on the 0..1 pixel scale",
        )
    if c.feature_skew == "rotation" and c.feature_skew_level > MAX_ROTATION_DEGREES:
        raise ConfigError(
            "feature_skew_level",
            c.feature_skew_level,
            f"a largest angle in [0, {MAX_ROTATION_DEGREES:g}] degrees",
        )
    if not 0.0 <= c.straggler_fraction <= 1.0:
        raise ConfigError("straggler_fraction", c.straggler_fraction, "a number in [0, 1]")
    drawn = c.parties_per_round if c.n_parties is not None else 0
    if drawn and c.straggler_policy == "drop" and round(drawn * c.straggler_fraction) >= drawn:
        # every drawn party is a straggler, and dropped: no round would train anything
        raise ConfigError(
            "straggler_fraction",
            c.straggler_fraction,
            f"with straggler_policy=drop, a fraction leaving some of the {drawn} parties "
            f"drawn each round to report, round({drawn} * straggler_fraction) < {drawn} "
            "(this drops them all, every round: nothing would train)",
        )
    if not 0.0 <= c.dropout < 1.0:
        raise ConfigError("dropout", c.dropout, "a probability in [0, 1)")
    if c.local_epochs_min is not None and not 1 <= c.local_epochs_min <= c.local_epochs:
        raise ConfigError(
            "local_epochs_min",
            c.local_epochs_min,
            f"an integer in [1, local_epochs={c.local_epochs}]",
        )


def _validate_evaluation(c: Any) -> None:
    """The held-out shares: each a fraction of a party's samples, with room left to
    train (a party left with no training sample is refused when the partition is
    drawn, federated/evaluation/holdout.py, where its size is known)."""
    one_of("val_split", c.val_split, VAL_SPLITS)
    for name in ("val_fraction", "party_test_fraction"):
        value = getattr(c, name)
        if value != 0.0 and not 0.0 < value < 1.0:
            raise ConfigError(name, value, "0 (off) or a fraction in (0, 1)")
    if c.val_fraction + c.party_test_fraction >= 1.0:
        raise ConfigError(
            "party_test_fraction",
            c.party_test_fraction,
            f"a fraction < 1 - val_fraction={c.val_fraction:g}: the parties need samples "
            "left to train on",
        )
    if not 0.0 < c.eval_fraction <= 1.0:
        raise ConfigError("eval_fraction", c.eval_fraction, "a fraction in (0, 1]")
    _check_validation_settings(c)


def _check_validation_settings(c: Any) -> None:
    """Validation settings that would do nothing, or something else than written, are
    refused rather than ignored (a value a user wrote is never changed silently):
    ``val_split=server`` without a ``val_fraction`` to hold out, ``eval_fraction`` < 1
    without party validation to draw from, and one that rounds to no party (the run
    would evaluate one anyway, as ``sample_fraction``'s rule refuses)."""
    if c.val_split == "server" and c.val_fraction == 0.0:
        raise ConfigError(
            "val_split",
            c.val_split,
            "server only with val_fraction in (0, 1): val_fraction=0 holds no server slice out",
        )
    if c.eval_fraction == 1.0:
        return
    if c.val_fraction == 0.0:
        raise ConfigError(
            "eval_fraction",
            c.eval_fraction,
            "1 without validation (val_fraction=0: no party holds validation data to draw "
            "evaluators from), or set val_fraction",
        )
    if c.val_split == "server":
        raise ConfigError(
            "eval_fraction",
            c.eval_fraction,
            "1 with val_split=server (the server's slice is evaluated whole; only "
            "val_split=party draws evaluating parties)",
        )
    if c.n_parties is not None and round(c.n_parties * c.eval_fraction) == 0:
        raise ConfigError(
            "eval_fraction",
            c.eval_fraction,
            f"a fraction > {0.5 / c.n_parties:.4g} for n_parties={c.n_parties}; "
            f"round({c.n_parties} * eval_fraction) parties evaluate each round, and this "
            "draws none",
        )


def check_types(c: Any) -> None:
    """Raise :class:`ConfigError` naming the first run-level field of ``c`` whose value
    is not of its annotated type."""
    hints = type_hints(type(c))
    for f in fields(c):
        if f.name not in (
            "method_options",
            "algorithm_params",
            "server_params",
            "task_params",
            "data_spec",
        ):
            check_type(f.name, hints[f.name], getattr(c, f.name))


def parse_rounds(text: str | None, rounds: int) -> tuple[int, ...]:
    """``"1,10"`` -> (1, 10): distinct 1-based rounds in [1, rounds], ascending; raises
    :class:`ConfigError` on anything else (one line naming ``representations_at``)."""
    if text is None:
        return ()
    allowed = f"comma-separated rounds in [1, rounds={rounds}], e.g. '3' or '1,{rounds}'"
    try:
        values = [int(part) for part in text.replace(" ", "").split(",")]
    except ValueError:
        raise ConfigError("representations_at", text, allowed) from None
    if not values or any(not 1 <= v <= rounds for v in values):
        raise ConfigError("representations_at", text, allowed)
    return tuple(sorted(set(values)))
