"""Checksums of the vector sets that must not change: writes tests/golden/vector_checksums.json.

    .venv/bin/python tests/golden/make_checksums.py            # rewrite the JSON
    .venv/bin/python tests/golden/make_checksums.py --check    # compare only (exit 1 on a difference)

tests/test_golden_vectors.py regenerates the same sets with the functions of this file and
compares them with the JSON, file by file. This script is the one command that rewrites it; it
writes the demo sets once per ATen CPU capability this CPU can run (see below) and refuses to
write a JSON if they differ.

WHEN THIS MAY BE RERUN: only when a change of arithmetic or of a file format is intended (a
kernel's rounding, a manifest field, the .hex layout...), in the commit that makes that
change, saying so in its message. Never to make the test pass: a refactoring (issue 27's
redesign included) must reproduce every byte of every set, and a difference here is a bug
in that refactoring.

What is covered (every file of every set, one sha256 each):

- ``demo/<block path>``: the traced sets that ``hwvit demo`` (``make demo``) writes to
  vectors/digits, made here by the library calls of hwvit/cli/demo.py steps 1-3 without its
  simulation, report and core-run steps: the shipped digits model, calibrated on 256
  training images with the default QuantConfig, held-out test image 0 (``--image``'s
  default) traced, ``write_sets(..., seed=0, source_sha256=..., model_config={model, quant,
  image}, provenance=...)``. The float-vs-int comparison the demo runs between calibration and
  trace changes nothing in the integer model.
- ``demo-core``: the compiled RTL-core directory the demo writes to out/core (step 6 writes it
  before it simulates; here it is only written).
- ``random/<kind>/<variant>``: ``hwvit vectors-random`` through click's CliRunner, for every
  kind the command accepts: at its defaults with seeds 0 and 1, and variants that move the
  options changing content (--cases, --row-len, --channels, --k, --n, --in-bits, --out-bits,
  --entries, --a-signed/--a-unsigned, --set KEY=VALUE; --lut and --block-config only
  supply the same parameters from a file and are not exercised).

One set of checksums for every machine: the demo's calibration runs in float64 and rounds its
ranges to a grid (hwvit/quant/calibrate.py), so the float kernels a CPU picks cannot move an
integer. ``EMULATION`` makes this CPU run another CPU's kernels, one fresh interpreter each
(torch reads ATEN_CPU_CAPABILITY once, at import): ATen's at ``default``, ``avx2`` or ``avx512``,
and with them MKL's and oneDNN's instruction sets and numpy's dispatched SIMD lowered to match.
The random sets do not calibrate; they were checked identical under ATen AVX2, numpy without its
AVX-512 dispatch, MKL at AVX2, one thread, PYTHONHASHSEED and TZ.

manifest.yaml: both kinds of manifest record ``hwvit_version``, the one field that changes
without the arithmetic or the format changing. Each manifest is hashed with exactly that one
top-level line (``hwvit_version: ...``) removed, every other byte as written; the tensor
files are hashed as written. No manifest holds a timestamp, an absolute path or anything of the
machine (the block ``path`` field is the block's name in the model, e.g. ``layers.0.attn.qkv``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CHECKSUMS = HERE / "vector_checksums.json"

VERSION_LINE = re.compile(rb"^hwvit_version: [^\n]*\n", re.MULTILINE)

# hwvit vectors-random: variant name -> arguments after the kind (--out and -q are added).
# Every kind at its defaults with two seeds; then option variants (the shapes of the Makefile's
# coverage target among them).
RANDOM_VARIANTS: dict[str, dict[str, list[str]]] = {
    "requant": {
        "out-bits-4": ["--out-bits", "4", "--cases", "100"],
        "out-bits-16-seed3": ["--out-bits", "16", "--cases", "200", "--seed", "3"],
    },
    "gemm": {
        "unsigned-k20-n7-out12": ["--a-unsigned", "--k", "20", "--n", "7", "--out-bits", "12", "--cases", "9"],
        "k1-n11": ["--cases", "13", "--k", "1", "--n", "11"],
        "signed-k300-n5": ["--a-signed", "--k", "300", "--n", "5", "--cases", "4", "--seed", "2"],
    },
    "gelu": {
        "in4-out6": ["--in-bits", "4", "--out-bits", "6", "--cases", "40"],
        "scales": ["--set", "scale_in=0.05", "--set", "scale_out=0.02", "--cases", "300"],
    },
    "softmax": {
        "row1": ["--cases", "4", "--row-len", "1"],
        "row197-entries100": ["--cases", "6", "--row-len", "197", "--entries", "100"],
        "in12-out16": ["--cases", "5", "--row-len", "33", "--in-bits", "12", "--out-bits", "16"],
        "scale-in": ["--cases", "3", "--set", "scale_in=0.1"],
    },
    "layernorm": {
        "c1": ["--cases", "9", "--channels", "1"],
        "c768-out12": ["--cases", "4", "--channels", "768", "--out-bits", "12"],
        "eps-scales": ["--cases", "5", "--set", "eps=1e-5", "--set", "scale_in=0.1", "--set", "scale_out=0.02"],
    },
    "residual_add": {
        "ties": ["--set", "mult_a=1073741824", "--set", "mult_b=1073741824", "--set", "shift=31"],
        "out-bits-12": ["--out-bits", "12", "--cases", "100"],
    },
    "divu": {
        "48-32-25": ["--cases", "40", "--set", "n_bits=48", "--set", "d_bits=32", "--set", "q_bits=25"],
    },
    "isqrt": {
        "in16": ["--in-bits", "16", "--cases", "100"],
    },
}
for _variants in RANDOM_VARIANTS.values():
    _variants["defaults-seed0"] = []
    _variants["defaults-seed1"] = ["--seed", "1"]


def random_set_names() -> list[str]:
    return [f"random/{kind}/{name}" for kind, variants in RANDOM_VARIANTS.items() for name in variants]


# ---------------------------------------------------------------------------------------------
# Writing the sets


def demo_model() -> dict[str, Any]:
    """The demo's steps 1-2: the shipped digits model, its held-out split, the integer model
    calibrated on 256 training images, and those images."""
    from hwvit import pipeline
    from hwvit.quant import QuantConfig, quantize_model

    source = pipeline.load_source("digits")
    x_test, _ = pipeline.eval_inputs(source)
    calib = pipeline.calibration_inputs(source, 256)
    int_model = quantize_model(source.model, calib, QuantConfig())
    return {"source": source, "x_test": x_test, "calib": calib, "int_model": int_model}


def write_demo_sets(model: dict[str, Any], root: Path, *, core: bool = True) -> None:
    """The demo's step 3 (traced sets of test image 0) into ``root/demo``, and the core directory of
    its step 6 into ``root/demo-core``, with the arguments hwvit/cli/demo.py passes."""
    from hwvit import vectors
    from hwvit.intvit import trace_model
    from hwvit.quant import QuantConfig
    from hwvit.vectors.provenance import provenance

    source, x_test, int_model = model["source"], model["x_test"], model["int_model"]
    image = 0
    traced = x_test[image : image + 1]
    _, records, _ = trace_model(int_model, traced.numpy())
    model_config = {"model": source.model.cfg.to_dict(), "quant": QuantConfig().to_dict(), "image": image}
    vectors.write_sets(
        records,
        root / "demo",
        seed=0,
        source_sha256=source.sha256,
        model_config=model_config,
        provenance=provenance(source.model, model["calib"], traced, model_config),
    )
    if core:
        from hwvit.core.compile import compile_model
        from hwvit.core.coredir import write_core_dir

        spec = {
            "preset": "digits",
            "checkpoint": None,
            "family": None,
            "config": None,
            "heads": None,
            "quant": QuantConfig().to_dict(),
            "calib_images": 256,
            "seed": 0,
        }
        write_core_dir(compile_model(int_model), root / "demo-core", spec)


def write_random_set(kind: str, variant: str, root: Path) -> Path:
    """``hwvit vectors-random KIND ARGS --out root/random/KIND/VARIANT -q`` through CliRunner."""
    from click.testing import CliRunner

    from hwvit.cli import main

    out = root / "random" / kind / variant
    args = ["vectors-random", kind, *RANDOM_VARIANTS[kind][variant], "--out", str(out), "-q"]
    result = CliRunner().invoke(main, args)
    if result.exit_code != 0:
        detail = result.output.strip() or repr(result.exception)
        raise RuntimeError(f"hwvit {' '.join(args)}: exit {result.exit_code}: {detail}")
    return out


def write_random_sets(root: Path) -> None:
    for kind, variants in RANDOM_VARIANTS.items():
        for variant in variants:
            write_random_set(kind, variant, root)


# ---------------------------------------------------------------------------------------------
# Hashing and comparing


def normalized_manifest(data: bytes, where: str) -> bytes:
    """A manifest's bytes without its one ``hwvit_version:`` line (ValueError unless exactly one)."""
    out, count = VERSION_LINE.subn(b"", data)
    if count != 1:
        raise ValueError(f"{where}: expected one top-level `hwvit_version:` line, found {count}")
    return out


def set_checksums(set_dir: Path) -> dict[str, str]:
    """sha256 of every file under ``set_dir`` (relative POSIX name -> hex), manifests normalized."""
    sums = {}
    for path in sorted(p for p in set_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(set_dir).as_posix()
        data = path.read_bytes()
        if path.name == "manifest.yaml":
            data = normalized_manifest(data, str(path))
        sums[rel] = hashlib.sha256(data).hexdigest()
    return sums


def tree_checksums(root: Path) -> dict[str, dict[str, str]]:
    """Every set under ``root`` (a directory holding manifest.yaml), by its path relative to ``root``."""
    root = Path(root)
    return {m.parent.relative_to(root).as_posix(): set_checksums(m.parent) for m in sorted(root.rglob("manifest.yaml"))}


def _file_order(name: str) -> tuple[bool, str]:
    return (name == "manifest.yaml", name)  # tensor files first: a changed tensor changes its manifest too


def differences(expected: dict[str, dict[str, str]], got: dict[str, dict[str, str]]) -> list[str]:
    """Every difference between two checksum maps, one line each: sets in name order, in each set
    the tensor files by name, then manifest.yaml."""
    lines = []
    for name in sorted(set(expected) | set(got)):
        if name not in got:
            lines.append(f"set {name}: missing (expected {len(expected[name])} files)")
            continue
        if name not in expected:
            lines.append(f"set {name}: not in the golden checksums")
            continue
        want, have = expected[name], got[name]
        for file in sorted(set(want) | set(have), key=_file_order):
            if file not in have:
                lines.append(f"set {name}, file {file}: missing")
            elif file not in want:
                lines.append(f"set {name}, file {file}: not in the golden checksums")
            elif want[file] != have[file]:
                lines.append(f"set {name}, file {file}: sha256 {have[file][:16]}..., expected {want[file][:16]}...")
    return lines


def load_checksums(path: Path = CHECKSUMS) -> dict[str, Any]:
    """``{"random": {set: {file: sha256}}, "demo": {set: {file: sha256}}}``."""
    doc = json.loads(Path(path).read_text())
    return {"random": doc["random"], "demo": doc["demo"]}


# ---------------------------------------------------------------------------------------------
# Other CPUs' float kernels on this one

# ATen CPU capability -> the environment that makes a fresh interpreter run the float kernels a
# CPU of that level runs: ATen's own (ATEN_CPU_CAPABILITY), MKL's BLAS, oneDNN's convolutions and
# numpy's dispatched SIMD (its float64 exp differs between AVX-512 and AVX2 in the last bit).
EMULATION: dict[str, dict[str, str]] = {
    "default": {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    },
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    },
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512"},
}


def cpu_capability() -> str:
    """ATen's CPU capability in this process (``AVX512``, ``AVX2``...; ATEN_CPU_CAPABILITY lowers it)."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def capabilities_here() -> list[str]:
    """The ATen capabilities this CPU can run, lowest first (an unknown one, e.g. an ARM CPU's:
    only ``default``)."""
    order = list(EMULATION)
    best = cpu_capability().lower()
    return order[: order.index(best) + 1] if best in order else ["default"]


def _under_capability(capability: str, flag: str, out: Path, *extra: str):
    """Start this script with ``flag out`` in a fresh interpreter under ``EMULATION[capability]``;
    a function that waits for it and returns the JSON it wrote, whose ``capability`` must be the
    one asked for."""
    import os
    import subprocess

    # one thread each: two of these run side by side, and OpenMP's spinning threads slowed each
    # twenty-fold on a loaded 2-core machine; the sets do not depend on the thread count
    env = {
        **os.environ,
        **EMULATION[capability],
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMBA_NUM_THREADS": "1",
    }
    cmd = [sys.executable, str(Path(__file__).resolve()), flag, str(out), *extra]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait() -> dict[str, Any]:
        _, stderr = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} (ATEN_CPU_CAPABILITY={capability}): exit {proc.returncode}\n{stderr}")
        doc = json.loads(out.read_text())
        if doc["capability"] != capability.upper():
            raise RuntimeError(
                f"ATEN_CPU_CAPABILITY={capability} ran ATen's {doc['capability']} kernels: this CPU cannot run them"
            )
        return doc

    return wait


def demo_under_capabilities(capabilities: list[str], root: Path) -> dict[str, dict[str, Any]]:
    """Write the demo sets under each ATen ``capability`` (fresh interpreters, two at a time) into
    ``root/<capability>``: per capability ``{"sets": checksums, "float32": ...}``, where ``float32``
    is what a float32 calibration of the same model finds there (every range, as hex floats)."""
    root.mkdir(parents=True, exist_ok=True)
    docs = {}
    for i in range(0, len(capabilities), 2):
        waits = {
            cap: _under_capability(cap, "--demo-json", root / f"demo-{cap}.json", "--keep", str(root / cap))
            for cap in capabilities[i : i + 2]
        }
        docs.update({cap: wait() for cap, wait in waits.items()})
    return docs


def float32_ranges(source, calib) -> dict[str, str]:
    """max |x| per record point of a float32 forward on ``calib`` (hex floats): what calibration
    found before it ran in float64, and what a CPU's kernels move."""
    import torch

    found: dict[str, float] = {}

    def record(path: str, t) -> None:
        found[path] = max(found.get(path, 0.0), float(t.abs().max()))

    with torch.no_grad():
        for start in range(0, len(calib), 64):
            source.model(calib[start : start + 64], record=record)
    return {path: v.hex() for path, v in found.items()}


def generate(root: Path) -> dict[str, Any]:
    """Write every covered set under ``root`` and return their checksums (see load_checksums);
    RuntimeError if the demo sets differ between this CPU's ATen capabilities."""
    docs = demo_under_capabilities(capabilities_here(), root / "demo-by-capability")
    first, *others = docs
    for cap in others:
        diffs = differences(docs[first]["sets"], docs[cap]["sets"])
        if diffs:
            raise RuntimeError(
                f"the demo sets differ between ATen {first} and {cap} ({len(diffs)} files; first: {diffs[0]}): "
                "calibration depends on the CPU again; not writing checksums"
            )
    write_random_sets(root / "sets")
    return {"random": tree_checksums(root / "sets"), "demo": docs[first]["sets"]}


def _demo_json(out: Path, keep: Path | None) -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hwvit-golden-") as tmp:
        root = keep or Path(tmp)
        model = demo_model()
        write_demo_sets(model, root)
        doc = {
            "capability": cpu_capability(),
            "sets": tree_checksums(root),
            "float32": float32_ranges(model["source"], model["calib"]),
        }
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    import tempfile

    from hwvit import __version__

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the JSON instead of writing it")
    parser.add_argument("--keep", type=Path, help="write the sets here (a new directory) instead of a temporary one")
    parser.add_argument("--demo-json", type=Path, help=argparse.SUPPRESS)  # one capability's demo sets (subprocess)
    args = parser.parse_args(argv)
    if args.demo_json is not None:
        return _demo_json(args.demo_json, args.keep)
    if args.keep is not None:
        sums = generate(args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="hwvit-golden-") as tmp:
            sums = generate(Path(tmp))
    if args.check:
        old = load_checksums()
        diffs = differences(old["random"], sums["random"]) + differences(old["demo"], sums["demo"])
        for line in diffs:
            print(line)
        print(f"{len(diffs)} differences")
        return 1 if diffs else 0
    doc = {
        "about": "sha256 of every file of the vector sets of tests/golden/make_checksums.py "
        "(manifest.yaml without its hwvit_version line), the same on every CPU; rerun only for an "
        "intended change of arithmetic or format, see that file's docstring",
        "taken_with_hwvit_version": __version__,
        **sums,
    }
    CHECKSUMS.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    count = len(sums["random"]) + len(sums["demo"])
    print(f"{count} sets -> {CHECKSUMS} (demo sets identical under ATen {', '.join(capabilities_here())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
