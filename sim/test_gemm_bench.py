"""The GEMM engine's utilization on a ViT-B/16 projection (sim/bench_gemm.py), as a slow test.

Apart from sim/test_gemm.py because bench_gemm runs the testbench through hwvit.simulate, which
loads sim/test_gemm.py: a testbench module importing it would close an import circle
(tests/test_import_graph.py).
"""

from __future__ import annotations

import bench_gemm
import pytest
from test_gemm import no_stall_cycles


@pytest.mark.slow
def test_gemm_utilization_vit_qkv():
    """197x768 . 768x2304 on an 8 x 8 array (Verilator): >= 90% of MAC slots used, all outputs exact."""
    u = bench_gemm.bench_gemm(8, 8, speed_shape=None)["utilization"]
    m, k, n = bench_gemm.UTIL_SHAPE
    assert u["elements_checked"] == 2 * m * n
    assert u["cycles"] == no_stall_cycles(m, k, n, 8, 8)
    assert u["utilization"] >= 0.90, u
