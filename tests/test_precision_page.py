"""docs/results/precision.md: the sweeps its parity rests on plan what the page says —
each fp32 sweep and its bf16-mixed twin plan the same trials (the same grid points, seeds
and every other setting), differing in ``precision`` alone, so that its per-trial pairs
are pairs.  The page's commands are read from the page itself and planned as the sweep's
command line would plan them (nothing is run)."""

from __future__ import annotations

import shlex
from pathlib import Path

from study.sweep import plan_from_flags
from study.sweep_args import build_parser
from tests.test_segmentation import write_folder

PAGE = Path(__file__).resolve().parent.parent / "docs" / "results" / "precision.md"
SWEEP = "python -m study.sweep "
#: the segmentation tree the page builds; the test plans on a small folder of its own
PAGE_TREE = "folder:trees/fmnist-seg"


def page_sweeps() -> dict[str, list[str]]:
    """The page's ``python -m study.sweep`` commands (continued lines joined), by --name."""
    text = PAGE.read_text().replace("\\\n", " ")
    sweeps = {}
    for line in text.splitlines():
        if line.startswith(SWEEP):
            argv = shlex.split(line[len(SWEEP) :], comments=True)
            sweeps[argv[argv.index("--name") + 1]] = argv
    return sweeps


def test_each_fp32_sweep_and_its_bf16_twin_differ_in_precision_alone(tmp_path):
    tree = write_folder(tmp_path / "seg")
    sweeps = page_sweeps()
    twins = sorted(name.removesuffix("-fp32") for name in sweeps if name.endswith("-fp32"))
    assert twins == ["moon_mu-laptop", "moon_mu-smoke", "seg-laptop"]
    counts = {}
    for twin in twins:
        planned = {}
        for precision in ("fp32", "bf16"):
            argv = [a.replace(PAGE_TREE, f"folder:{tree}") for a in sweeps[f"{twin}-{precision}"]]
            plan, _ = plan_from_flags(build_parser().parse_args(argv))
            planned[precision] = [(t.point, t.seed, t.config) for t in plan.trials()]
        fp32, bf16 = planned["fp32"], planned["bf16"]
        assert [(p, s) for p, s, _ in fp32] == [(p, s) for p, s, _ in bf16]
        assert {s for _, s, _ in fp32} == {0, 1, 2}
        for (_, _, a), (_, _, b) in zip(fp32, bf16, strict=True):
            assert (a["precision"], b["precision"]) == ("fp32", "bf16-mixed")
            differing = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
            # an ad hoc (--vary) study is named by --name: a label, not a setting
            assert differing - {"study"} == {"precision"}
        counts[twin] = len(fp32)
    assert counts == {"moon_mu-laptop": 15, "moon_mu-smoke": 15, "seg-laptop": 3}
