"""Test order for `make test` (pytest -n 2 --dist loadgroup).

xdist hands out work in collection order, and testpaths collect tests/ before sim/, so the two
traced-set runs (about 2-3 min each on the 2-core machine) used to start last and leave one
worker idle for minutes at the end. The longest files go first; everything else keeps its order.
"""

from __future__ import annotations

# Longest first (seconds on the 2-core EPYC, make test of 2026-11-23): sim/test_traced.py 172-177
# per simulator, tests/test_wheel.py 85, tests/test_rtl_static.py ~150 in one xdist group,
# tests/test_core_digits.py ~60, tests/test_cluster.py ~90.
HEAVY_FIRST = (
    "sim/test_traced.py",
    "tests/test_rtl_static.py",
    "tests/test_wheel.py",
    "tests/test_cluster.py",
    "tests/test_core_digits.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return HEAVY_FIRST.index(path) if path in HEAVY_FIRST else len(HEAVY_FIRST)

    items.sort(key=rank)  # stable: the order within each rank stays pytest's
