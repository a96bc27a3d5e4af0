"""The studies: one named definition per paper experiment, budgets, and trial resolution."""

from search_spaces.budgets import BUDGETS, DEFAULT_BUDGET, Budget
from search_spaces.catalog import STUDIES
from search_spaces.resolve import check_overrides, seed_list, trial_fields, with_axis_values
from search_spaces.study import Axis, OptunaRange, Study, point_label

__all__ = [
    "BUDGETS",
    "DEFAULT_BUDGET",
    "STUDIES",
    "Axis",
    "Budget",
    "OptunaRange",
    "Study",
    "check_overrides",
    "point_label",
    "seed_list",
    "trial_fields",
    "with_axis_values",
]
