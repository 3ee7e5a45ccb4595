"""Checksums of the vector sets that must not change: writes tests/golden/vector_checksums.json.

    .venv/bin/python tests/golden/make_checksums.py            # rewrite the JSON
    .venv/bin/python tests/golden/make_checksums.py --check    # compare only (exit 1 on a difference)

tests/test_golden_vectors.py regenerates the same sets with the functions of this file and
compares them with the JSON, file by file. Rewriting it needs a CPU with AVX-512 (see below).

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
  image})``. The float-vs-int comparison the demo runs between calibration and trace
  changes nothing in the integer model (checked: the sets of a real ``hwvit demo --force``
  run were byte-identical to these).
- ``demo-core``: the compiled RTL-core directory the demo writes to out/core (step 6 writes it
  before it simulates; here it is only written).
- ``random/<kind>/<variant>``: ``hwvit vectors-random`` through click's CliRunner, for every
  kind the command accepts: at its defaults with seeds 0 and 1, and variants that move the
  options changing content (--cases, --row-len, --channels, --k, --n, --in-bits, --out-bits,
  --entries, --a-signed/--a-unsigned, --set KEY=VALUE; --lut and --block-config only
  supply the same parameters from a file and are not exercised).

The demo's sets depend on the float calibration's last bits (found while taking these checksums):
the float model's ``scores.softmax`` (ATen's vectorized exp) gives results one float32 ulp apart
under ATen's AVX-512 and AVX2 kernels, and the same AVX-512 capability on an Intel Xeon (family 6
model 207) gave a head maximum an ulp away from a Zen 4's; calibration then finds activation maxima
an ulp apart, and some multipliers and softmax exp tables (and the core's prm/prog images) come out
different. The demo checksums are therefore kept per ATen CPU capability, each taken in a
subprocess with ``ATEN_CPU_CAPABILITY`` set (``AVX512`` on the Zen 4, ``AVX2`` as an AVX2-only CPU
runs it), and the test does not calibrate: it quantizes from the ranges pinned in
demo_calibration.json (``--pin-calibration``, taken under ATen AVX2; rerun it on the machine that
rewrites the JSON), whose sets are the ``AVX2`` entry on every CPU. The random sets do not depend
on the CPU (checked: identical under ATen AVX2, numpy without its AVX-512 dispatch, MKL at AVX2,
one thread, PYTHONHASHSEED, TZ; and on the Intel Xeon).

manifest.yaml: both kinds of manifest record ``hwvit_version``, the one field that changes
without the arithmetic or the format changing. Each manifest is hashed with exactly that one
top-level line (``hwvit_version: ...``) removed, every other byte as written; the tensor
files are hashed as written. No manifest holds a timestamp or an absolute path (the block
``path`` field is the block's name in the model, e.g. ``layers.0.attn.qkv``).
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


DEMO_CALIBRATION = HERE / "demo_calibration.json"
PINNED_CAPABILITY = "AVX2"  # the ATen capability demo_calibration.json was taken under


def demo_ranges(source) -> dict[str, float]:
    """The demo's calibration (min/max over 256 training images) as the float model gives it on
    this CPU: float32 sums whose last bits follow the CPU's vector kernels."""
    from hwvit import pipeline
    from hwvit.quant import QuantConfig
    from hwvit.quant.calibrate import calibrate

    qc = QuantConfig()
    return calibrate(source.model, pipeline.calibration_inputs(source, 256), qc.calibration, qc.percentile)


def load_demo_calibration() -> dict[str, float]:
    """The calibration pinned in demo_calibration.json (JSON floats round-trip exactly)."""
    doc = json.loads(DEMO_CALIBRATION.read_text())
    return {path: float(value) for path, value in doc["ranges"].items()}


def demo_model(pinned: bool = True) -> dict[str, Any]:
    """The demo's steps 1-2: the shipped digits model, its held-out split, the integer model.

    ``pinned``: quantize from the ranges of demo_calibration.json instead of calibrating here. The
    float calibration's last bits differ between CPUs (ATen's AVX-512 and AVX2 exp; the same
    capability on an AMD Zen 4 and an Intel Xeon gave a head maximum an ulp apart), so only a
    pinned calibration makes the integer sets the same on every machine; everything after it is
    integer arithmetic and must not move by a bit.
    """
    from hwvit import pipeline
    from hwvit.quant import QuantConfig, quantize_model
    from hwvit.quant.convert import calibration_key

    source = pipeline.load_source("digits")
    x_test, _ = pipeline.eval_inputs(source)
    qc = QuantConfig()
    key = calibration_key(qc.calibration, qc.percentile, qc.act_bits)
    cache = {key: load_demo_calibration()} if pinned else None
    int_model = quantize_model(source.model, pipeline.calibration_inputs(source, 256), qc, calibration_cache=cache)
    return {"source": source, "x_test": x_test, "int_model": int_model}


def write_demo_sets(model: dict[str, Any], root: Path, *, core: bool = True) -> None:
    """The demo's step 3 (traced sets of test image 0) into ``root/demo``, and the core directory of
    its step 6 into ``root/demo-core``, with the arguments hwvit/cli/demo.py passes."""
    from hwvit import vectors
    from hwvit.intvit import trace_model
    from hwvit.quant import QuantConfig

    source, x_test, int_model = model["source"], model["x_test"], model["int_model"]
    image = 0
    _, records, _ = trace_model(int_model, x_test[image : image + 1].numpy())
    vectors.write_sets(
        records,
        root / "demo",
        seed=0,
        source_sha256=source.sha256,
        model_config={"model": source.model.cfg.to_dict(), "quant": QuantConfig().to_dict(), "image": image},
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
    """``{"random": {set: {file: sha256}}, "demo": {capability: {set: {file: sha256}}}}``."""
    doc = json.loads(Path(path).read_text())
    return {"random": doc["random"], "demo": doc["demo"]}


def cpu_capability() -> str:
    """ATen's CPU capability in this process (``AVX512``, ``AVX2``...; ATEN_CPU_CAPABILITY lowers it)."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def _under_capability(capability: str, flag: str, out: Path, *extra: str) -> dict[str, Any]:
    """Run this script with ``flag out`` in a fresh interpreter with ``ATEN_CPU_CAPABILITY=capability``
    (read once at torch's import: it cannot change in a running process); the JSON it wrote, whose
    ``capability`` must be the one asked for."""
    import os
    import subprocess

    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    cmd = [sys.executable, str(Path(__file__).resolve()), flag, str(out), *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} (ATEN_CPU_CAPABILITY={capability}): exit {proc.returncode}\n{proc.stderr}")
    doc = json.loads(out.read_text())
    if doc["capability"] != capability.upper():
        raise RuntimeError(
            f"ATEN_CPU_CAPABILITY={capability} ran ATen's {doc['capability']} kernels: this CPU cannot take the "
            f"{capability.upper()} checksums (rewriting the JSON needs a CPU with AVX-512)"
        )
    return doc


def demo_checksums_in_subprocess(capability: str, root: Path) -> dict[str, dict[str, str]]:
    """The demo sets' checksums from a fresh interpreter at ATen ``capability``; sets under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    return _under_capability(
        capability, "--demo-json", root / f"demo-{capability}.json", "--keep", str(root / capability)
    )["sets"]


DEMO_CAPABILITIES = ("avx2", "avx512")


def generate(root: Path) -> dict[str, Any]:
    """Write every covered set under ``root`` and return their checksums (see load_checksums)."""
    demo = {cap.upper(): demo_checksums_in_subprocess(cap, root / "demo-by-capability") for cap in DEMO_CAPABILITIES}
    write_random_sets(root / "sets")
    return {"random": tree_checksums(root / "sets"), "demo": demo}


def _demo_json(out: Path, keep: Path | None) -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hwvit-golden-") as tmp:
        root = keep or Path(tmp)
        write_demo_sets(demo_model(pinned=False), root)
        doc = {"capability": cpu_capability(), "sets": tree_checksums(root)}
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


def _pin_calibration() -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hwvit-golden-") as tmp:
        doc = _under_capability(PINNED_CAPABILITY.lower(), "--ranges-json", Path(tmp) / "ranges.json")
    doc["about"] = (
        "the digits demo's calibration ranges (min/max, 256 training images), taken under ATen "
        f"{PINNED_CAPABILITY}; tests/test_golden_vectors.py quantizes from them, see make_checksums.demo_model"
    )
    DEMO_CALIBRATION.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(doc['ranges'])} ranges -> {DEMO_CALIBRATION}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import tempfile

    from hwvit import __version__

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the JSON instead of writing it")
    parser.add_argument("--keep", type=Path, help="write the sets here (a new directory) instead of a temporary one")
    parser.add_argument("--demo-json", type=Path, help=argparse.SUPPRESS)  # one capability's demo sets (subprocess)
    parser.add_argument(
        "--pin-calibration",
        action="store_true",
        help=f"rewrite {DEMO_CALIBRATION.name} from a calibration under ATen {PINNED_CAPABILITY}",
    )
    parser.add_argument("--ranges-json", type=Path, help=argparse.SUPPRESS)  # this process's calibration (subprocess)
    args = parser.parse_args(argv)
    if args.demo_json is not None:
        return _demo_json(args.demo_json, args.keep)
    if args.ranges_json is not None:
        from hwvit import pipeline

        ranges = demo_ranges(pipeline.load_source("digits"))
        args.ranges_json.write_text(json.dumps({"capability": cpu_capability(), "ranges": ranges}, indent=1) + "\n")
        return 0
    if args.pin_calibration:
        return _pin_calibration()
    if args.keep is not None:
        sums = generate(args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="hwvit-golden-") as tmp:
            sums = generate(Path(tmp))
    if args.check:
        old = load_checksums()
        diffs = differences(old["random"], sums["random"])
        for cap in sorted(set(old["demo"]) | set(sums["demo"])):
            diffs += [f"{cap}: {d}" for d in differences(old["demo"].get(cap, {}), sums["demo"].get(cap, {}))]
        for line in diffs:
            print(line)
        print(f"{len(diffs)} differences")
        return 1 if diffs else 0
    doc = {
        "about": "sha256 of every file of the vector sets of tests/golden/make_checksums.py "
        "(manifest.yaml without its hwvit_version line); demo sets per ATen CPU capability; rerun only "
        "for an intended change of arithmetic or format, see that file's docstring",
        "taken_with_hwvit_version": __version__,
        **sums,
    }
    CHECKSUMS.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    count = len(sums["random"]) + sum(len(v) for v in sums["demo"].values())
    print(f"{count} sets -> {CHECKSUMS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
