"""The layers of hwvit point one way (issue 27): the model, then analysis, then presentation.

hwvit.ops (the integer kernels) is the bottom: it imports none of the integer model
(hwvit.intvit), its quantization (hwvit.quant), the engine that runs it fast (hwvit.engine) or the
analysis; the golden model and its quantization never import the engine. The model and the analysis
(hwvit.analysis: compare, sweep, sensitivity) never reach up into presentation (hwvit.report)
or the command line (hwvit.cli). The check runs on the import graph of tests/test_import_graph.py
(every import statement, top level or inside a function) and follows it transitively, so a
detour through a third module counts as well; a failure prints the chain of imports.
"""

from __future__ import annotations

from test_import_graph import edges, modules

# (lower layer, what it must never reach): a module is "under" a package when it is the package
# or one of its submodules.
RULES = [
    (("hwvit.ops", "hwvit.intvit", "hwvit.quant", "hwvit.analysis"), ("hwvit.report", "hwvit.cli")),
    (("hwvit.ops",), ("hwvit.intvit", "hwvit.quant", "hwvit.analysis", "hwvit.engine")),
    # the golden model never reaches the engine that runs it fast (the engine takes a model)
    (("hwvit.intvit", "hwvit.quant"), ("hwvit.engine",)),
    (("hwvit.ops", "hwvit.intvit", "hwvit.quant"), ("hwvit.analysis",)),  # analysis depends on the model
    # the simulator driver by job: build, then run (launch) and read results, then batches of runs
    (("hwvit.simulate.build", "hwvit.simulate.results"), ("hwvit.simulate.launch", "hwvit.simulate.batch")),
    (("hwvit.simulate.launch",), ("hwvit.simulate.batch",)),
]


def _under(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _chain(graph: dict[str, set[str]], start: str, banned: tuple[str, ...]) -> list[str] | None:
    """The shortest import chain from ``start`` to a module under ``banned`` (breadth first), or None."""
    parent: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        here = queue.pop(0)
        for there in sorted(graph[here]):
            if there in parent:
                continue
            parent[there] = here
            if _under(there, banned):
                chain = [there]
                while parent[chain[-1]] is not None:
                    chain.append(parent[chain[-1]])
                return chain[::-1]
            queue.append(there)
    return None


def violations(graph: dict[str, set[str]], rules=RULES) -> list[str]:
    out = []
    for lower, banned in rules:
        for module in sorted(graph):
            if _under(module, lower):
                chain = _chain(graph, module, banned)
                if chain:
                    out.append(" -> ".join(chain))
    return out


def test_the_check_sees_a_reach_up():
    # a direct import and one through a module outside both layers are both caught, with their chains
    graph = {
        "hwvit.ops.gemm": {"hwvit.pipeline"},
        "hwvit.pipeline": {"hwvit.report.write"},
        "hwvit.analysis.compare": {"hwvit.intvit", "hwvit.cli.compare"},
        "hwvit.intvit": {"hwvit.ops.gemm"},
        "hwvit.report.write": {"hwvit.analysis.compare"},
        "hwvit.cli.compare": set(),
    }
    found = violations(graph)
    assert "hwvit.analysis.compare -> hwvit.cli.compare" in found
    assert "hwvit.ops.gemm -> hwvit.pipeline -> hwvit.report.write" in found
    assert "hwvit.intvit -> hwvit.ops.gemm -> hwvit.pipeline -> hwvit.report.write" in found
    # presentation importing analysis, and analysis importing the model, are the allowed direction
    assert not any(v.startswith("hwvit.report") for v in found)
    fixed = {**graph, "hwvit.ops.gemm": set(), "hwvit.analysis.compare": {"hwvit.intvit"}}
    assert violations(fixed) == []


def test_the_layers_exist_and_point_down():
    # the rules are not vacuous: the packages they name are there, with the edges of their layering
    graph = edges(modules())
    for lower, banned in RULES:
        for package in lower + banned:
            assert any(_under(m, (package,)) for m in graph), f"no module under {package}"
    assert "hwvit.intvit" in graph["hwvit.analysis.compare"]
    assert "hwvit.analysis.compare" in graph["hwvit.analysis.sensitivity"]
    assert "hwvit.analysis.compare" in graph["hwvit.report.write"]
    assert "hwvit.analysis.sweep" in graph["hwvit.report.sweep_write"]
    assert "hwvit.simulate.build" in graph["hwvit.simulate.launch"]
    assert "hwvit.simulate.launch" in graph["hwvit.simulate.batch"]


def test_no_layer_reaches_up():
    assert violations(edges(modules())) == []
