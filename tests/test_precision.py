"""bfloat16 mixed precision (``precision=bf16-mixed``, federated/runtime/precision.py): the
setting is validated, refused in one line on a processor without bfloat16 (a processor
simulated by an injected probe or a ``/proc/cpuinfo`` of its own, torch left as it is),
repeatable, exact across a resume, float32 wherever state persists, and recorded."""

from __future__ import annotations

import warnings

import pytest
import torch

from federated.config.run_config import RunConfig
from federated.engine.party_store import PartyArchive
from federated.engine.path_calibration import calibration_key
from federated.engine.round_loop import FederatedRun, run_rounds
from federated.params import ConfigError
from federated.runtime import cpu_name
from federated.runtime.precision import (
    EMULATED,
    NATIVE,
    NONE,
    Bf16Support,
    EmulatedPrecisionWarning,
    PrecisionUnsupportedError,
    cpu_bf16_support,
    precision_for_run,
)
from federated.trainable import load_run_state, save_run_state
from tests.conftest import tiny
from tests.test_round_loop import results

CPU = torch.device("cpu")
BF16 = "bf16-mixed"


def bf16_here() -> bool:
    """Whether this machine's CPU runs bfloat16 (the default probe does not refuse it)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            precision_for_run(BF16, CPU)
    except PrecisionUnsupportedError:
        return False
    return True


needs_bf16 = pytest.mark.skipif(not bf16_here(), reason="this CPU has no bfloat16")


def test_the_setting_is_one_of_two_values_named_in_the_refusal():
    assert RunConfig().precision == "fp32"
    assert RunConfig(precision=BF16).resolved().precision == BF16
    with pytest.raises(ConfigError) as err:
        RunConfig(precision="bf16").resolved()  # Lightning's older spelling: not rewritten
    assert str(err.value) == "invalid config: precision='bf16' (allowed: one of fp32, bf16-mixed)"


@pytest.mark.parametrize(
    ("flags", "torch_says", "level"),
    [
        ({"avx2", "avx512f", "avx512bw", "avx512_bf16"}, False, NATIVE),  # Zen 4
        ({"avx2", "amx_bf16", "amx_tile"}, False, NATIVE),  # Sapphire Rapids
        ({"fp", "asimd", "bf16"}, False, NATIVE),  # Arm Neoverse V1
        ({"avx2", "avx512f", "avx512bw"}, True, EMULATED),  # Zen 3-era AVX-512 / Skylake-X
        ({"sse4_2", "avx2"}, True, NONE),  # the flags say none: torch is not asked
        (set(), True, EMULATED),  # no /proc/cpuinfo: torch's oneDNN has kernels
        (set(), False, NONE),
    ],
)
def test_cpu_support_is_read_from_the_flags(flags, torch_says, level):
    assert cpu_bf16_support(frozenset(flags), torch_says).level == level


def test_a_processor_without_bf16_is_refused_in_one_line():
    def no_bf16(device: torch.device) -> Bf16Support:
        return cpu_bf16_support(frozenset({"sse4_2", "avx2"}), torch_says=False)

    with pytest.raises(PrecisionUnsupportedError) as err:
        precision_for_run(BF16, CPU, probe=no_bf16)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("precision='bf16-mixed' but this processor (")
    assert "has no bfloat16 support (/proc/cpuinfo lists none of avx512_bf16, amx_bf16, bf16)" in (
        message
    )
    assert message.endswith("use precision=fp32")


def test_fp32_never_asks_and_emulation_is_warned():
    def unreachable(device: torch.device) -> Bf16Support:
        raise AssertionError("fp32 asks no probe")

    assert precision_for_run("fp32", CPU, probe=unreachable).mixed is False

    def emulated(device: torch.device) -> Bf16Support:
        return cpu_bf16_support(frozenset({"avx512f", "avx512bw"}), torch_says=True)

    with pytest.warns(EmulatedPrecisionWarning, match="runs bfloat16 emulated"):
        assert precision_for_run(BF16, CPU, probe=emulated).mixed is True


def test_a_run_is_refused_before_its_data_load(tmp_path, monkeypatch):
    """The run's own probe reads /proc/cpuinfo: one of a CPU without bfloat16 refuses the
    run before it looks for its data (a data folder that does not exist is never read)."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Old CPU\nflags\t\t: fpu sse4_2 avx2\n\n")
    monkeypatch.setattr(cpu_name, "CPUINFO", cpuinfo)
    config = RunConfig(dataset="fmnist", data_root=str(tmp_path / "none"), precision=BF16)
    with pytest.raises(PrecisionUnsupportedError, match=r"this processor \(Old CPU\)"):
        FederatedRun(config)


def test_the_calibration_never_shares_a_timing_across_precisions():
    fp32, bf16 = tiny(), tiny(precision=BF16)
    assert calibration_key(fp32)["precision"] == "fp32"
    assert calibration_key(bf16)["precision"] == BF16
    assert {k: v for k, v in calibration_key(bf16).items() if k != "precision"} == {
        k: v for k, v in calibration_key(fp32).items() if k != "precision"
    }


@needs_bf16
@pytest.mark.parametrize("execution", ["packed", "sequential"])
def test_a_bf16_run_repeats_records_its_precision_and_differs_from_fp32(execution, synthetic):
    config = tiny(algorithm="moon", rounds=2, execution=execution)
    first = results(run_rounds(config.replace(precision=BF16), synthetic))
    again = results(run_rounds(config.replace(precision=BF16), synthetic))
    fp32 = results(run_rounds(config, synthetic))
    assert first == again
    assert {r["precision"] for r in first} == {BF16}
    assert {r["precision"] for r in fp32} == {"fp32"}
    # bfloat16 arithmetic did run: the losses move in their last digits, not more
    assert [r["train_loss"] for r in first] != [r["train_loss"] for r in fp32]
    for bf, fp in zip(first, fp32):
        assert bf["train_loss"] == pytest.approx(fp["train_loss"], rel=2e-2)


@needs_bf16
@pytest.mark.parametrize("algorithm", ["moon", "scaffold"])
def test_a_bf16_run_resumes_exactly(algorithm, synthetic, tmp_path):
    config = tiny(algorithm=algorithm, rounds=3, precision=BF16)
    run = FederatedRun(config, synthetic)
    head = results([run.run_round()])
    archive = PartyArchive(tmp_path / "party_states")
    save_run_state(run, tmp_path, archive)
    straight = head + results([run.run_round() for _ in range(2)])
    restored = FederatedRun(config, synthetic)
    restored.load_state_dict(load_run_state(tmp_path), archive)
    assert head + results([restored.run_round() for _ in range(2)]) == straight


def test_a_checkpoint_does_not_cross_precisions(synthetic, tmp_path):
    run = FederatedRun(tiny(rounds=2), synthetic)
    run.run_round()
    save_run_state(run, tmp_path)
    other = FederatedRun(tiny(rounds=2, precision=BF16), synthetic)
    with pytest.raises(ValueError, match="checkpoint was made with precision='fp32'"):
        other.load_state_dict(load_run_state(tmp_path))


def _dtypes(tree) -> set[torch.dtype]:
    if isinstance(tree, torch.Tensor):
        return {tree.dtype}
    if isinstance(tree, dict):
        return set().union(*(_dtypes(v) for v in tree.values()))
    if isinstance(tree, (list, tuple)):
        return set().union(*(_dtypes(v) for v in tree))
    return set()


@needs_bf16
@pytest.mark.parametrize(
    ("algorithm", "server_key", "party_key"),
    [("moon", None, "prev"), ("scaffold", "c", "c"), ("feddyn", "h", "g")],
)
def test_state_stays_float32_under_bf16(algorithm, server_key, party_key, synthetic):
    """The global model, the method's server state and each party's state (MOON's previous
    models, SCAFFOLD's control variates, FedDyn's h and g_i) are float32 after bf16 rounds."""
    options = {"method_options": {"alpha": 0.1}} if algorithm == "feddyn" else {}
    run = FederatedRun(tiny(algorithm=algorithm, precision=BF16, **options), synthetic)
    run.run_round()
    run.run_round()
    floating = {v.dtype for v in run.global_model.state_dict().values() if v.is_floating_point()}
    assert floating == {torch.float32}
    if server_key is not None:
        assert _dtypes(run.server_state[server_key]) == {torch.float32}
    kept = [run.party_states[i][party_key] for i in range(run.config.n_parties)]
    floats = _dtypes(kept) - {torch.int64}
    assert floats == {torch.float32}


def test_a_sweep_sets_it_and_a_caption_names_it():
    """``--set precision=bf16-mixed`` reaches every trial's config (the manifest's and the
    dry run's source); a table of such trials names it in its caption, fp32 says nothing."""
    import pandas as pd

    from analysis.tables.table import precision_words
    from search_spaces import BUDGETS, STUDIES
    from study.plan import SweepPlan

    plan = SweepPlan.build(
        STUDIES["moon_mu"],
        BUDGETS["smoke"],
        dataset="fmnist",
        search="grid",
        seeds=[0],
        overrides={"precision": BF16},
    )
    assert {t.config["precision"] for t in plan.trials()} == {BF16}
    assert {t.run_config.precision for t in plan.trials()} == {BF16}
    assert precision_words(pd.DataFrame({"precision": [BF16, BF16]})) == " — bf16-mixed"
    assert precision_words(pd.DataFrame({"precision": ["fp32", BF16]})) == (
        " — bf16-mixed and fp32 (mixed precisions)"
    )
    assert precision_words(pd.DataFrame({"precision": ["fp32"]})) == ""


@needs_bf16
@pytest.mark.parametrize("algorithm", ["fedavg", "moon"])
def test_a_detector_trains_and_scores_under_bf16(algorithm, monkeypatch):
    """Detection (its own forward pass and loss, per-image boxes, COCO AP on float32
    outputs) runs under bf16-mixed: finite losses, an mAP in [0, 1]."""
    from tests.detection_synthetic import NAME, boxes_data, register

    data = boxes_data(train=36, test=12)
    register(monkeypatch, data)
    config = RunConfig(
        dataset=NAME,
        model="fcos-tiny",
        n_parties=3,
        partition="iid",
        rounds=2,
        batch_size=8,
        local_epochs=1,
        execution="sequential",
        threads=1,
        algorithm=algorithm,
        precision=BF16,
    )
    rows = list(run_rounds(config, data))
    assert all(r["precision"] == BF16 and not r["diverged"] for r in rows)
    assert 0.0 <= rows[-1]["test_map50"] <= 1.0


def test_the_command_line_refuses_it_in_one_line(tmp_path, monkeypatch, capsys):
    """``python -m federated.run --precision bf16-mixed`` on a CPU without bfloat16: one
    ``error:`` line, the bad-input exit status, nothing written."""
    from federated.cli import exit_codes
    from federated.run import main

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Old CPU\nflags\t\t: fpu avx2\n\n")
    monkeypatch.setattr(cpu_name, "CPUINFO", cpuinfo)
    out = tmp_path / "rows.csv"
    argv = ["--precision", BF16, "--rounds", "1", "--out", str(out)]
    assert main([*argv, "--data-root", str(tmp_path / "none")]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: precision='bf16-mixed' but this processor (Old CPU)")
    assert "\n" not in err
    assert not out.exists()


def test_the_benchmark_table_and_its_bad_flag():
    """benchmarks/precision.py: a row's medians, ratios and calibration in one table line;
    a case it does not know refused in one line, nothing measured."""
    from benchmarks.precision import describe, main

    row = {
        "case": "cifar-shaped",
        "algorithm": "moon",
        "path": "packed",
        "threads": 1,
        "median_s": {"fp32": 2.0, BF16: 1.0},
        "ratio": 2.0,
        "noise_s": 0.25,
        "cpu_median_s": {"fp32": 1.5, BF16: 1.0},
        "cpu_ratio": 1.5,
        "calibration": {
            "fp32": {"timings_s": {"packed": 0.5, "sequential": 0.75}, "chosen": "packed"},
            BF16: None,
        },
    }
    assert describe([row]).splitlines()[-1] == (
        "| cifar-shaped | moon | packed | 1 | 2.00 | 1.00 | 2.00× | 0.25 | 1.50 | 1.00 | 1.50× "
        "| packed (0.50/0.75) |  |"
    )
    with pytest.raises(SystemExit, match=r"--cases 'cifar' \(allowed: fmnist-laptop, "):
        main(["--cases", "cifar"])
