"""``hf:`` data sets (federated/data/hub_dataset.py) on a local stand-in for FEMNIST: real
Fashion-MNIST images saved with ``datasets`` (``save_to_disk``, one ``train`` split, FEMNIST's
column names ``image``, ``character``, ``writer_id``), grouped unevenly by a made-up writer
column.  The code path is the one ``hf:flwrlabs/femnist`` takes after its download."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from federated.config.data_checks import with_data_checked
from federated.config.run_config import ConfigError, RunConfig
from federated.data import hub_dataset, memory_cache
from federated.data.hub_dataset import HubColumns, load_hub
from federated.heterogeneity.partition import natural_party_names, partition_for_run

N_IMAGES = 300
# writers' image counts, uneven; w06 has MIN_PARTY_IMAGES: a hold-out leaves it under, out
WRITER_SIZES = (100, 70, 50, 35, 20, 15, 10)
HOLDOUT = 0.2


def _writers(seed: int = 0) -> list[str]:
    names = np.repeat([f"w{i:02d}" for i in range(len(WRITER_SIZES))], WRITER_SIZES)
    np.random.default_rng(seed).shuffle(names)
    return names.tolist()


def save_stand_in(fmnist, path: Path, n: int = N_IMAGES, **columns) -> Path:
    """``n`` Fashion-MNIST training images as a ``save_to_disk`` folder (one train split)."""
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Image, Value

    image, label = columns.get("image", "image"), columns.get("label", "character")
    features = Features(
        {
            image: Image(),
            label: ClassLabel(names=[f"class{k}" for k in range(10)]),
            "writer_id": Value("string"),
        }
    )
    rows = {
        image: [fmnist.train_x[i, 0].numpy() for i in range(n)],
        label: fmnist.train_y[:n].tolist(),
        "writer_id": _writers()[:n],
    }
    DatasetDict({"train": Dataset.from_dict(rows, features=features)}).save_to_disk(str(path))
    return path


@pytest.fixture(scope="module")
def stand_in(fmnist, tmp_path_factory) -> Path:
    return save_stand_in(fmnist, tmp_path_factory.mktemp("hub") / "femnist-like")


@pytest.fixture(autouse=True)
def _hf_cache(tmp_path, monkeypatch):
    """Whatever ``datasets`` caches goes under the test's folder, never the home's."""
    import datasets

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets")
    memory_cache.forget()


def _config(stand_in: Path, tmp_path: Path, **fields) -> RunConfig:
    base = dict(
        dataset=f"hf:{stand_in}",
        partition="natural",
        partition_by="writer_id",
        holdout_fraction=HOLDOUT,
        data_root=str(tmp_path / "root"),
        rounds=1,
        local_epochs=1,
    )
    return with_data_checked(RunConfig(**{**base, **fields}))


def test_columns_detected_and_writers_become_parties(stand_in, tmp_path):
    config = _config(stand_in, tmp_path)
    spec = config.spec
    assert (spec.n_classes, spec.shape, spec.task) == (10, (1, 28, 28), "classification")
    assert spec.train_size + spec.test_size == N_IMAGES
    assert spec.party_names == tuple(f"w{i:02d}" for i in range(6))  # w06: under 10 left
    assert config.n_parties == 6 and config.model == "simple-cnn"
    data = load_hub(config.dataset, None, HOLDOUT, config.data_root, HubColumns.of(config))
    parts = partition_for_run(data.train_y.numpy(), config, data.train_parties.numpy())
    sizes = [len(p) for p in parts]
    assert len(sizes) == 6 and max(sizes) > 4 * min(sizes)  # uneven, as the writers are
    assert sum(sizes) == int((data.train_parties >= 0).sum())
    assert 0 < int((data.train_parties < 0).sum()) < 10  # w06's training images, in no party


def test_decoded_once_then_read_from_the_disk_cache(stand_in, tmp_path, monkeypatch):
    config = _config(stand_in, tmp_path)
    columns = HubColumns.of(config)
    first = load_hub(config.dataset, None, HOLDOUT, config.data_root, columns)
    (cache,) = (tmp_path / "root" / "hub-cache").glob("*.pt")
    memory_cache.forget()

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded again")

    monkeypatch.setattr(hub_dataset, "_decode", no_decoding)
    again = load_hub(config.dataset, None, HOLDOUT, config.data_root, columns)
    assert torch.equal(first.train_x, again.train_x) and torch.equal(first.test_y, again.test_y)
    assert first.spec == again.spec and cache.is_file()
    # another partition column is another key: decoded, not read
    with pytest.raises(AssertionError, match="decoded again"):
        load_hub(config.dataset, None, HOLDOUT, config.data_root, HubColumns(None, None, None))


def test_a_cap_on_parties_is_a_seeded_draw(stand_in, tmp_path):
    config = _config(stand_in, tmp_path, n_parties=3)
    data = load_hub(config.dataset, None, HOLDOUT, config.data_root, HubColumns.of(config))
    names = natural_party_names(data.spec.party_names, config)
    assert len(names) == 3 and names == natural_party_names(data.spec.party_names, config)
    parts = partition_for_run(data.train_y.numpy(), config, data.train_parties.numpy())
    party_of = np.asarray(data.spec.party_names)[data.train_parties.numpy()]
    assert [sorted(set(party_of[p])) for p in parts] == [[n] for n in names]
    with pytest.raises(ConfigError, match=r"n_parties=7 \(allowed: 2 to 6"):
        _config(stand_in, tmp_path, n_parties=7)


def test_one_split_is_tested_on_the_union_of_the_parties_own_splits(stand_in, tmp_path):
    """FEMNIST's rule (LEAF): a source with one split has no test set of its own; each
    party's local test split (party_test_fraction) is its own test data and the run's test
    set is their union.  A holdout_fraction the user writes is honoured instead."""
    from federated.engine.party_data import PartyData
    from federated.engine.round_loop import run_rounds
    from federated.evaluation.holdout import hold_out

    with pytest.raises(ConfigError) as err:  # no test set at all: refused, naming the field
        _config(stand_in, tmp_path, holdout_fraction=None)
    assert str(err.value).startswith("invalid config: party_test_fraction=0.0 (allowed: a")
    assert "one split" in str(err.value) and "\n" not in str(err.value)

    config = _config(stand_in, tmp_path, holdout_fraction=None, party_test_fraction=0.2)
    spec = config.spec
    assert spec.test_from_parties and (spec.train_size, spec.test_size) == (N_IMAGES, 0)
    data = load_hub(config.dataset, None, None, config.data_root, HubColumns.of(config))
    laid_out = PartyData(data, config, torch.device("cpu"))
    labels = data.train_y.numpy()
    drawn = partition_for_run(labels, config, data.train_parties.numpy())
    held = hold_out(drawn, labels, config.seed, 0.0, "party", 0.2)
    union = np.concatenate(held.local_test)
    assert [len(t) for t in held.local_test] == [round(0.2 * len(p)) for p in drawn]
    # the test set is the parties' own splits, party by party; never a training image
    assert torch.equal(laid_out.test_x, data.train_x[union])
    assert torch.equal(laid_out.test_y, laid_out.local_test.y)
    assert np.intersect1d(union, np.concatenate(laid_out.partition)).size == 0
    assert sum(laid_out.party_sizes) + len(union) == sum(len(p) for p in drawn)
    # the budget's test_fraction takes its share of the union
    half = PartyData(data, config.replace(test_fraction=0.5), torch.device("cpu"))
    assert len(half.test_y) == round(0.5 * len(union))
    (row,) = run_rounds(config)
    assert 0.0 <= row["test_acc"] <= 1.0 and np.isfinite(row["test_loss"])

    written = _config(stand_in, tmp_path, holdout_fraction=0.2, party_test_fraction=0.2).spec
    assert not written.test_from_parties and written.test_size == round(0.2 * N_IMAGES)


def test_the_report_names_the_partition_column_and_a_union_test_set():
    """The runs table's budget names an hf: partition's column (a folder's natural
    partition keeps its words); a sweep on a one-split set says what its test set is."""
    import pandas as pd

    from analysis.sections.runs import _budget_words, global_test_set_words

    trials = pd.DataFrame(
        {
            "partition": ["natural", "natural", "natural"],
            "partition_by": ["writer_id", "writer_id", None],
            "party_test_fraction": [0.1, 0.1, 0.1],
            "rounds": [5, 5, 5],
        }
    )
    assert _budget_words(trials).endswith(
        ", natural (one folder per party), natural (by writer_id) partition"
    )
    manifest = {"dataset": "hf:flwrlabs/femnist", "dataset_identity": {"test_set": "parties"}}
    words = global_test_set_words("writers", manifest, trials)
    assert words.startswith(
        "`writers`: hf:flwrlabs/femnist has one split, so the global test set is the union "
        "of the parties' local test splits (party_test_fraction=0.1 of each party's images)"
    )
    manifest["dataset_identity"]["test_set"] = "split"
    assert global_test_set_words("writers", manifest, trials) == ""


def test_named_columns_and_one_line_refusals(fmnist, tmp_path):
    source = save_stand_in(fmnist, tmp_path / "named", n=60, image="img", label="digit")
    iid = dict(label_column="digit", partition="iid", partition_by=None)
    config = _config(source, tmp_path, n_parties=4, **iid)
    assert config.spec.n_classes == 10 and config.spec.train_size == 48
    # the parties of a drawn partition follow the image folders' rule: >= 10 images each
    with pytest.raises(ConfigError, match=r"n_parties=5 \(allowed: at most 4 for 48"):
        _config(source, tmp_path, n_parties=5, **iid)
    cases = {
        "label_column": ("nope", "no column 'nope' for label_column"),
        "partition_by": ("author", "no column 'author' for partition_by"),
        "image_column": ("digit", "column 'digit' holds"),
    }
    for field, (value, words) in cases.items():
        fields = {"label_column": "digit", field: value}
        with pytest.raises(ConfigError) as err:
            _config(source, tmp_path, **fields)
        assert words in str(err.value) and "\n" not in str(err.value), field
    with pytest.raises(ConfigError, match="only with dataset=hf:SOURCE"):
        with_data_checked(RunConfig(partition_by="writer_id"))
    with pytest.raises(ConfigError, match="partition=natural together with partition_by"):
        _config(source, tmp_path, label_column="digit", partition_by=None)


def test_an_undecodable_image_is_named_in_one_line(tmp_path):
    from datasets import Dataset, Features, Image, Value

    rows = [{"bytes": b"not an image", "path": None}] * 12
    Dataset.from_dict(
        {"image": rows, "label": [0, 1] * 6},
        features=Features({"image": Image(), "label": Value("int64")}),
    ).save_to_disk(str(tmp_path / "broken"))
    with pytest.raises(ConfigError) as err:
        _config(tmp_path / "broken", tmp_path, partition="iid", partition_by=None, n_parties=2)
    assert "row 0, column 'image': not a readable image" in str(err.value)
    assert "\n" not in str(err.value)


def _first_file(folder: Path, pattern: str) -> Path:
    return next(iter(sorted(folder.rglob(pattern))))


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        ("info-json", "one of its JSON files (dataset_info.json, state.json ...) is damaged"),
        ("arrow-cut", "an Arrow data file is truncated (Expected to be able to read"),
        ("text-only", "no data files in it (allowed: a saved data set, parquet files, or an"),
    ],
)
def test_a_damaged_hub_source_is_named_in_the_users_words(fmnist, tmp_path, damage, words):
    """A damaged local ``hf:`` source says what is wrong with it (issue 67), not only the
    library's exception: a JSON file, a cut Arrow file, no data files."""
    source = tmp_path / "source"
    if damage in ("info-json", "arrow-cut"):
        save_stand_in(fmnist, source, n=24)
        if damage == "info-json":
            _first_file(source, "dataset_info.json").write_text('{"bro')
        else:
            arrow = _first_file(source, "*.arrow")
            arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    else:
        source.mkdir()
        (source / "notes.txt").write_text("not a data set\n")
    fields = dict(partition="iid", partition_by=None, n_parties=2)
    with pytest.raises(ConfigError) as err:
        _config(source, tmp_path, **fields)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_parquet_files_and_an_imagefolder_tree_load_alike(fmnist, tmp_path):
    from datasets import load_from_disk
    from PIL import Image as PILImage

    source = save_stand_in(fmnist, tmp_path / "saved", n=40)
    load_from_disk(str(source))["train"].to_parquet(str(tmp_path / "pq" / "train.parquet"))
    tree = tmp_path / "tree"
    for i in range(40):
        label = int(fmnist.train_y[i])
        (tree / "train" / f"class{label}").mkdir(parents=True, exist_ok=True)
        PILImage.fromarray(fmnist.train_x[i, 0].numpy()).save(
            tree / "train" / f"class{label}" / f"{i}.png"
        )
    fields = dict(partition="iid", partition_by=None, n_parties=2)
    from_parquet = _config(tmp_path / "pq", tmp_path, **fields).spec
    from_tree = _config(tree, tmp_path, **fields).spec
    assert from_parquet.train_size == from_tree.train_size
    assert from_parquet.shape == from_tree.shape == (1, 28, 28)
    assert from_tree.class_names == tuple(sorted({f"class{int(y)}" for y in fmnist.train_y[:40]}))


def test_an_imagefolder_metadata_column_partitions_naturally(fmnist, tmp_path):
    """An image folder's per-file metadata (metadata.csv: file name, class, writer) through
    ``hf:PATH``: its writer column is a natural partition like FEMNIST's."""
    from PIL import Image as PILImage

    train = tmp_path / "tree" / "train"
    train.mkdir(parents=True)
    lines = ["file_name,label,writer_id"]
    for i, writer in enumerate(_writers()[:120]):
        PILImage.fromarray(fmnist.train_x[i, 0].numpy()).save(train / f"{i}.png")
        lines.append(f"{i}.png,class{int(fmnist.train_y[i])},{writer}")
    (train / "metadata.csv").write_text("\n".join(lines) + "\n")
    config = _config(tmp_path / "tree", tmp_path)
    counts = {w: n for w, n in zip(*np.unique(_writers()[:120], return_counts=True))}
    names = set(config.spec.party_names)  # sorted; writers too small after the hold-out left
    assert (
        {w for w, n in counts.items() if n >= 20}
        <= names
        <= {w for w, n in counts.items() if n >= 10}
    )
    assert list(config.spec.party_names) == sorted(names) and config.n_parties == len(names)
    assert config.spec.n_classes == len({int(y) for y in fmnist.train_y[:120]})


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HOME": str(tmp_path / "hf"), **extra}


def test_federated_run_trains_on_the_stand_in_by_writer(stand_in, tmp_path):
    cmd = [
        sys.executable, "-m", "federated.run",
        "--dataset", f"hf:{stand_in}",
        "--partition", "natural", "--partition-by", "writer_id", "--n-parties", "4",
        "--holdout-fraction", str(HOLDOUT), "--data-root", str(tmp_path / "root"),
        "--rounds", "2", "--local-epochs", "1", "--out", str(tmp_path / "rows.csv"),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 parties, natural partition (by column writer_id)" in proc.stdout
    assert len((tmp_path / "rows.csv").read_text().splitlines()) == 3  # header, 2 rounds


HEAVY_MODULES = ("torch", "torchvision", "datasets", "pyarrow")


def test_offline_hub_name_fails_in_one_line_before_torch_and_writes_nothing(tmp_path, monkeypatch):
    """The done-when's offline case: one line, exit status 2, nothing written, and refused
    before torch, torchvision or datasets is imported (-X importtime lists every import;
    those take seconds, tens on a loaded machine)."""
    work = tmp_path / "work"
    work.mkdir()
    cmd = [
        sys.executable, "-X", "importtime", "-m", "federated.run",
        "--dataset", "hf:flwrlabs/femnist", "--partition", "natural",
        "--partition-by", "writer_id", "--data-root", str(tmp_path / "root"),
    ]  # fmt: skip
    env = _env(tmp_path, HF_HUB_OFFLINE="1")
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    imported = {line.split("|")[-1].strip() for line in lines if line.startswith("import time:")}
    (line,) = [line for line in lines if not line.startswith("import time:")]
    assert line.startswith("error: invalid config: dataset='hf:flwrlabs/femnist' (allowed: a")
    assert "'hf:flwrlabs/femnist': HF_HUB_OFFLINE is set and no cached copy" in line
    assert str(tmp_path / "hf" / "hub" / "datasets--flwrlabs--femnist") in line
    assert "federated.cli.hub_source" in imported
    assert not imported & set(HEAVY_MODULES), sorted(imported & set(HEAVY_MODULES))
    assert [p for p in tmp_path.rglob("*") if p != work] == []  # nothing written anywhere
    # the Python API gives the same line, from the config check, and writes nothing either
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as err:
        with_data_checked(RunConfig(dataset="hf:flwrlabs/femnist", party_test_fraction=0.1))
    assert f"error: {err.value}" == line
    assert [p for p in tmp_path.rglob("*") if p != work] == []


def _cache_as_the_hub_leaves_it(fmnist, repo: str, hf_home: Path, n: int = 120) -> None:
    """A prepared-Arrow copy of ``repo`` in ``datasets``' cache, where ``load_dataset(repo)``
    leaves one after a download (``<HF_HOME>/datasets/<owner>___<name>/default/0.0.0/<hash>``),
    written by ``datasets``' own parquet builder from ``n`` real Fashion-MNIST images with
    FEMNIST's columns: the copy an offline machine finds after an earlier online run."""
    from datasets import load_from_disk
    from datasets.packaged_modules.parquet.parquet import Parquet

    saved = save_stand_in(fmnist, hf_home / "download" / "saved", n=n)
    parquet = hf_home / "download" / "train.parquet"
    load_from_disk(str(saved))["train"].to_parquet(str(parquet))
    owner, name = repo.split("/")
    prepared = hf_home / "datasets"
    builder = Parquet(
        cache_dir=str(prepared),
        dataset_name=name,
        config_name="default",
        config_id="default",
        hash="0123456789abcdef",  # a Hub download's commit
        data_files={"train": str(parquet)},
    )
    builder.download_and_prepare()
    (prepared / name).rename(prepared / f"{owner}___{name}")  # the Hub name's folder


def test_a_cached_hub_copy_is_used_offline(fmnist, tmp_path, monkeypatch):
    """HF_HUB_OFFLINE with a cached copy of a Hub name: no refusal (early or late), and the
    cached rows are what the run gets, FEMNIST's one-split rule included."""
    import datasets
    import huggingface_hub.constants

    from federated.cli.hub_source import early_hub_refusal

    repo = "flwrlabs/femnist"  # a stand-in's copy under this test's HF_HOME, never the home's
    argv = ["--dataset", f"hf:{repo}", "--partition", "natural", "--partition-by", "writer_id"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert early_hub_refusal(argv).startswith("error: invalid config: dataset=")  # not cached
    _cache_as_the_hub_leaves_it(fmnist, repo, tmp_path / "hf")
    assert early_hub_refusal(argv) is None
    config = with_data_checked(
        RunConfig(
            dataset=f"hf:{repo}",
            partition="natural",
            partition_by="writer_id",
            party_test_fraction=0.2,
            data_root=str(tmp_path / "root"),
            rounds=1,
        )
    )
    data = load_hub(config.dataset, None, None, config.data_root, HubColumns.of(config))
    assert data.spec.test_from_parties and data.spec.train_size == 120
    assert torch.equal(data.train_x, fmnist.train_x[:120])
    assert torch.equal(data.train_y, fmnist.train_y[:120])
    counts = Counter(_writers()[:120])
    assert data.spec.party_names == tuple(sorted(w for w, n in counts.items() if n >= 10))
    assert config.n_parties == len(data.spec.party_names) >= 2


@pytest.mark.slow
def test_femnist_study_sweeps_the_stand_in_and_reports(stand_in, tmp_path):
    """The built-in FEMNIST-by-writer study, test-sized and offline: the stand-in in place
    of hf:flwrlabs/femnist (one split, as FEMNIST: the study's party_test_fraction gives
    each writer its test split), its 7 writers of 10 images or more, FedAvg at the three
    participation rates, the smoke budget; the report names the column and says what the
    test set is."""
    import json

    cmd = [
        sys.executable, "-m", "study.sweep", "femnist_writers", "--budget", "smoke",
        "--set", f"dataset=hf:{stand_in}", "--set", "n_parties=7",
        "--set", "algorithm=fedavg",
        "--set", "data_fraction=1", "--set", f"data_root={tmp_path / 'root'}",
        "--storage-path", "results", "--name", "writers", "--quiet",
        "--max-concurrent", "1",  # one trial process, reused: less CPU
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=_env(tmp_path)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep_dir = tmp_path / "results" / "writers"
    (partition,) = json.loads((sweep_dir / "partitions.json").read_text())
    assert partition["partition"] == "natural" and partition["n_parties"] == 7
    assert partition["party_names"] == [f"w{i:02d}" for i in range(7)]
    identity = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())["dataset_identity"]
    assert identity["source"] == f"hf:{stand_in}" and len(identity["fingerprint"]) == 64
    assert identity["columns"] == {"image": "image", "label": "character", "party": "writer_id"}
    assert identity["parties"] == partition["party_names"]
    assert (identity["test_set"], identity["test_images"]) == ("parties", 0)
    trials = [p for p in sweep_dir.iterdir() if (p / "params.json").is_file()]
    assert len(trials) == 3  # the three participation rates
    config = json.loads((trials[0] / "params.json").read_text())
    assert config["partition_by"] == "writer_id" and config["dataset"] == f"hf:{stand_in}"
    out = str(tmp_path / "rep")
    report = subprocess.run(
        [sys.executable, "-m", "analysis.report", str(sweep_dir), "--out", out, "--no-pdf"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(tmp_path),
    )
    assert report.returncode == 0, report.stderr[-3000:]
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "natural (by writer_id) partition" in text and "one folder per party" not in text
    assert (
        "`writers`: femnist-like (Hugging Face folder) has one split, so the global test set "
        "is the union of the parties' local test splits (party_test_fraction=0.1 of each "
        "party's images)"
    ) in " ".join(text.split())
