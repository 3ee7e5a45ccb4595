"""The pytest plugin a mutant's suite runs under (`pytest -p hwvit.mutate.order`): the tests named in
$HWVIT_MUTATE_FIRST first, so that a killed mutant costs one cheap test."""

from __future__ import annotations

import os

ORDER_ENV = "HWVIT_MUTATE_FIRST"


def pytest_collection_modifyitems(config, items):  # pytest hook
    """Run the tests named in $HWVIT_MUTATE_FIRST first, in that order: a name with its parameters
    (``test_x[icarus-8]``) picks that one test, a bare prefix every test whose function it begins."""
    first = [p for p in os.environ.get(ORDER_ENV, "").split(",") if p]

    def rank(item) -> int:
        name = item.name.split("[")[0]
        return next(
            (i for i, p in enumerate(first) if (item.name == p if "[" in p else name.startswith(p))), len(first)
        )

    items.sort(key=rank)  # stable: file order within a rank
