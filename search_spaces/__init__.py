"""The studies: one named definition per paper experiment, budgets, and trial resolution."""

from search_spaces.budgets import BUDGETS, DEFAULT_BUDGET, USER_DEFAULT_BUDGET, Budget
from search_spaces.catalog import STUDIES
from search_spaces.resolve import (
    budget_keeps,
    check_overrides,
    seed_list,
    trial_fields,
    trial_fields_and_changes,
    with_axis_values,
)
from search_spaces.study import Axis, OptunaRange, Study, point_label

__all__ = [
    "BUDGETS",
    "DEFAULT_BUDGET",
    "STUDIES",
    "USER_DEFAULT_BUDGET",
    "Axis",
    "Budget",
    "OptunaRange",
    "Study",
    "budget_keeps",
    "check_overrides",
    "point_label",
    "seed_list",
    "trial_fields",
    "trial_fields_and_changes",
    "with_axis_values",
]
