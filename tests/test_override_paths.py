"""Paths given with --set are made absolute in the driver, so every trial on every
node reads the same files."""

from __future__ import annotations

from study.sweep import parse_overrides


def test_set_paths_are_made_absolute_in_the_driver(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_overrides(["data_root=data"])["data_root"] == str(tmp_path / "data")
