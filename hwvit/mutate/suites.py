"""Which suite judges which Verilog file: the block kinds' own files and parts, the modules several
kinds share (the row engine), the core, and the tests a mutant runs first."""

from __future__ import annotations

from pathlib import Path

from hwvit import toolchain

# The accelerator core is no block kind: its suite is the digits model compiled and run on it.
CORE = "vit_core"
CORE_PARTS = ("vit_core_agu.v", "vit_core_gemm.v", "vit_core_ram.v", "vit_core_stream.v")
CORE_SUITE = "tests/test_core_digits.py"
# the core's parameters for an imported model (rounding, zero points, probability width) and the
# instructions of its parts: the core at its defaults leaves them unread
CORE_IMPORTED_SUITE = "tests/test_core_rounding.py"
# a one-layer random model on Icarus first: far cheaper than the digits image after it
CORE_FIRST = (
    "test_tiny_model_with_attention_wider_than_dim_icarus_bit_exact",
    "test_tiny_model_loaded_through_the_host_port_icarus_bit_exact",
    "test_stream_over_four_loop_levels_icarus",
)


def first_tests() -> dict[str, list[str]]:
    """Kind -> the tests a mutant runs first, by name prefix: pytest -x stops at the first failure, so
    a killed mutant costs one cheap test that pushes real data through the block instead of the
    whole suite; survivors still run every test. Each kind declares them (``mutate_first``); a
    shared module (``shared()``) runs its users' first tests and, when a variant kind uses it, that
    kind's random sets."""
    from hwvit import blocks

    first = {k: list(v.mutate_first) for k, v in blocks.kinds().items() if v.mutate_first}
    for module, users in shared().items():
        names = [t for u in users for t in blocks.get(u).mutate_first]
        if any(blocks.get(u).variant for u in users):
            names.append("test_variant_random_sets_bit_exact")
        first[module] = list(dict.fromkeys(names))
    return {**first, CORE: list(CORE_FIRST)}


def parts() -> dict[str, tuple[str, ...]]:
    """Kind -> the other source files it instantiates, which `--source` may mutate instead of its own
    (each kind's ``mutate_parts``)."""
    from hwvit import blocks

    return {k: v.mutate_parts for k, v in blocks.kinds().items() if v.mutate_parts}


def shared() -> dict[str, list[str]]:
    """The Verilog modules several blocks are built on that no kind owns (the row engine
    rtl/row_stream.v and the statistics of the softmax and LayerNorm blocks): module -> the kinds
    whose ``rtl`` lists it. Each is a target of its own, judged by all those kinds' suites, since a
    feature one arithmetic alone uses (ITA's segments) is seen only by that arithmetic's tests.
    Files a kind names as its parts (round_sat.v) stay under that kind's suite."""
    from hwvit import blocks

    specs = blocks.kinds()
    owned = {spec.top for spec in specs.values()} | {Path(p).stem for s in specs.values() for p in s.mutate_parts}
    out: dict[str, list[str]] = {}
    for name, spec in specs.items():
        for path in spec.rtl:
            stem = Path(path).stem
            if Path(path).parent.name == "rtl" and stem not in owned:
                out.setdefault(stem, []).append(name)
    return out


def _users(block: str) -> list[str]:
    """The kinds whose tests judge the mutants of rtl/<block>.v: a shared module's users; a kind and
    every variant kind that is a parameter of its block (layernorm_ptf: rtl/layernorm.v, PTF = 1)."""
    from hwvit import blocks

    if block in shared():
        return shared()[block]
    specs = blocks.kinds()
    return [block, *(k for k, s in specs.items() if s.top == block and k != block and s.variant and s.rtl)]


def suite_of(block: str) -> tuple[tuple[str, ...], str | None]:
    """The pytest files that judge ``block``'s mutants and a ``-k`` filter within them: the kind's
    testbench ``sim/test_<block>.py``; for a variant kind with Verilog and no such file, its tests in
    every ``sim/test_variants*.py``; for a block several kinds use (``_users``), all of theirs; for the
    core, ``tests/test_core_digits.py`` and ``tests/test_core_rounding.py``."""
    if block == CORE:
        return (CORE_SUITE, CORE_IMPORTED_SUITE), None
    from hwvit import blocks

    root = toolchain.repo().root
    variant_files = tuple(f"sim/{p.name}" for p in sorted((root / "sim").glob("test_variants*.py")))
    files: list[str] = []
    terms: list[str] = []
    for user in _users(block):
        spec = blocks.get(user) if user in blocks.kinds() else None
        if spec is not None and spec.variant and spec.rtl and not (root / "sim" / f"test_{user}.py").exists():
            files += variant_files
            terms.append(user)
        else:
            files.append(f"sim/test_{user}.py")
            terms.append(f"test_{user}.py")
    if len(terms) == 1:
        return tuple(files), None if files[0] == f"sim/test_{block}.py" else terms[0]
    return tuple(dict.fromkeys(files)), " or ".join(terms)


def own_file(block: str) -> tuple[str, str]:
    """(file name in rtl/, module) of ``block``'s own Verilog: rtl/<block>.v with module <block>, or
    the file and toplevel a kind declares (``softmax_shiftmax_exact``: rtl/softmax_shiftmax.v)."""
    from hwvit import blocks

    spec = blocks.get(block) if block in blocks.kinds() else None
    if spec is not None and spec.rtl:
        return Path(spec.rtl[0]).name, spec.top
    return f"{block}.v", block


def has_suite(block: str) -> bool:
    """The block's own file and every file of its suite exist."""
    root = toolchain.repo().root
    files, _ = suite_of(block)
    return (root / "rtl" / own_file(block)[0]).exists() and bool(files) and all((root / f).exists() for f in files)


def parts_of(block: str) -> tuple[str, ...]:
    """The other Verilog files of ``block`` that `--source` may mutate under its suite."""
    if block == CORE:
        return CORE_PARTS
    from hwvit import blocks

    return tuple(blocks.get(block).mutate_parts) if block in blocks.kinds() else ()


def source_of(block: str, source: str | None) -> str:
    """The file a run mutates, as ``rtl/<name>``: rtl/<block>.v, or ``source`` if it is one of the
    block's PARTS (ValueError otherwise, naming the choices)."""
    own = own_file(block)[0]
    if source is None or source in (own, f"rtl/{own}"):
        return f"rtl/{own}"
    name = source.removeprefix("rtl/")
    parts = parts_of(block)
    if name not in parts:
        choices = ", ".join((own, *parts))
        raise ValueError(f"--source {source}: block {block} is built from {choices}")
    return f"rtl/{name}"


def markers_of(block: str) -> str:
    """The pytest marker expression a mutant's suite runs under: the variants' Verilator runs, opt-in
    in make test, are in (their marker is not excluded); slow tests are out, except the core's (its
    digits image on Icarus, kept out of make test's budget, is the core's strongest Icarus test)."""
    return "not gpu and not slurm" + ("" if block == CORE else " and not slow")


def targets(include_core: bool = True) -> list[tuple[str, str]]:
    """Every (block, file) of a full run: each block's own file and its parts, each file once, under
    the suite of the first block that names it (round_sat.v under requant's), then each shared
    module under its users' suites (``shared``), then the core's files."""
    from hwvit import blocks

    root = toolchain.repo().root
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    names = [k for k, spec in blocks.kinds().items() if spec.rtl and not spec.source.startswith(str(root / "examples"))]
    names += sorted(shared())
    if include_core:
        names.append(CORE)
    for block in names:
        if not has_suite(block):
            continue
        for name in (own_file(block)[0], *parts_of(block)):
            if name not in seen:
                seen.add(name)
                out.append((block, f"rtl/{name}"))
    return out
