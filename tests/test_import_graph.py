"""No import circle in hwvit/ and the testbenches in sim/ (issue 26).

The graph: one node per module of hwvit/ (a package is its __init__) and per sim/*.py; an edge
for every import statement of ours anywhere in a module, at the top or inside a function (an
import a function runs is a run-time import: hwvit.simulate loading a testbench that imports
hwvit.simulate back is as much a circle as two top-level imports), except under
``if TYPE_CHECKING:``. ``import a.b.c`` and ``from a.b import c`` point at the module they name
(``a.b.c``, or ``a.b`` when ``c`` is not a module). Imports that a name does not show are added by
hand: hwvit.simulate.build.tb_module loads sim/test_<kind>.py by path (the testbench modules, those
that declare TOPLEVEL), hwvit.cli loads its command modules by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules() -> dict[str, Path]:
    """Module name -> file: hwvit.* from hwvit/, and sim/*.py by their plain names (sim/ is on
    the testbenches' sys.path)."""
    out = {}
    for path in sorted((ROOT / "hwvit").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    for path in sorted((ROOT / "sim").glob("*.py")):
        out[path.stem] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Import nodes anywhere in ``tree``, outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        stack.extend(ast.iter_child_nodes(node))


def edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the module's package
                    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (node.level - 1)]
                    base = ".".join(pkg + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            graph[name] |= {t for t in targets if t in mods and t != name}
    # Imports no import statement shows:
    testbenches = {m for m, p in mods.items() if m.startswith("test_") and "\nTOPLEVEL = " in p.read_text()}
    graph["hwvit.simulate.build"] |= testbenches  # tb_module loads sim/test_<kind>.py by path
    graph["hwvit.cli"] |= {m for m in mods if m.startswith("hwvit.cli.")}  # _Group: importlib by name
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_walker_sees_a_circle():
    # the walker itself: a two-module circle through a function-level import, and a relative one
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    tree = ast.parse("from .x import y\nif TYPE_CHECKING:\n    import q\ndef f():\n    import z\n")
    assert sorted(getattr(n, "module", None) or n.names[0].name for n in _imports(tree)) == ["x", "z"]


def test_the_graph_has_the_known_edges():
    graph = edges(modules())
    assert "hwvit.toolchain" in graph["hwvit.simulate.build"]  # a top-level import
    assert "hwvit.vectors" in graph["hwvit.simulate.launch"]  # an import inside a function
    assert "tbutil" in graph["test_requant"] and "test_requant" in graph["hwvit.simulate.build"]
    assert "hwvit.simulate.launch" in graph["hwvit.simulate"]  # a package's __init__
    assert "hwvit.ops.gemm" in graph["hwvit.ops"]  # a relative or package import


def test_no_import_circle():
    assert circles(edges(modules())) == []


def test_simulator_side_reads_no_torch(tmp_path):
    """What a simulator process imports to read a set and its derived parameters (hwvit.vectors,
    hwvit.quant.params, the stream bench's kinds) must not pull in torch: inside Icarus and
    Verilator its import took 5.4 s per run (0.9 s in a plain interpreter)."""
    import subprocess
    import sys

    from hwvit import vectors

    set_dir = vectors.write_set(vectors.random_record("layernorm_ivit", cases=2, seed=1), tmp_path / "set")
    code = (
        "import sys\n"
        "import hwvit.quant.params, hwvit.byo.kinds\n"
        "from hwvit import vectors\n"
        f"v = vectors.read({str(set_dir)!r}); v.params; v['y']\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
