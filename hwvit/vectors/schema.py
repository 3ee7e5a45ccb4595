"""The manifest schema: what a vector set's manifest.yaml must say, checked before any file is read.

The per-kind contract (parameters, tensors, their roles, shapes and formats) is
``hwvit.record.CONTRACT``/``PARAMS``; this module checks a manifest against it. Widths follow
docs/arithmetic.md (e.g. requant multipliers are declared 32-bit unsigned; their values are
M in [0, 2^31-1]).
"""

from __future__ import annotations

import re
from typing import Any

from hwvit.formats import IntFormat, Rounding
from hwvit import blocks
from hwvit.record import ROLES
from hwvit.vectors.format import FORMAT_VERSION, NAME_RE, PATH_RE, VectorSetError

SHA_RE = re.compile(r"^[0-9a-f]{64}$")

TOP_KEYS = {
    "format",
    "hwvit_version",
    "kind",
    "path",
    "params",
    "seed",
    "config_hash",
    "source_sha256",
    "lut_file",
    "tensors",
    "recipe",
    "provenance",
}
# recipe: the quantization recipe of the run (hwvit.quant.recipe); provenance: what made a traced
# set (hwvit.vectors.provenance)
OPTIONAL_KEYS = {"lut_file", "recipe", "provenance"}
TENSOR_KEYS = {"name", "role", "shape", "bits", "signed", "layout", "scale", "dtype", "files", "sha256"}
FILE_KEYS = {"hex", "npy"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_variant(key: str, family: str, name: Any) -> None:
    """A parameter naming an arithmetic variant (hwvit.variants): a known one, or a team's
    ``package.module:function``."""
    from hwvit import variants

    if family not in variants.FAMILIES:
        raise VectorSetError(f"manifest: param {key}={name!r}: block {family} has no variants")
    if not isinstance(name, str) or (":" not in name and name not in variants.names(family)):
        known = ", ".join(repr(n) for n in variants.names(family))
        raise VectorSetError(f"manifest: param {key}={name!r}, expected {known} or a team's package.module:function")


def check_params(kind: str, params: Any) -> None:
    """The parameters of a ``kind`` block: every contract key, typed and in range, plus rounding."""
    if not isinstance(params, dict):
        raise VectorSetError("manifest: params is not a mapping")
    spec = blocks.get(kind)
    for key, (typ, bounds) in spec.params.items():
        if key not in params:
            raise VectorSetError(f"manifest: {kind} params lack {key!r}")
        value = params[key]
        if typ is bool and not isinstance(value, bool) or typ is int and not _is_int(value):
            raise VectorSetError(f"manifest: param {key}={value!r} is not {typ.__name__}")
        if bounds and not bounds[0] <= value <= bounds[1]:
            raise VectorSetError(f"manifest: param {key}={value} outside [{bounds[0]}, {bounds[1]}]")
    rounding = params.get("rounding")
    if not (kind == "residual_add" and rounding == "onnxruntime_u8"):  # onnxruntime's QLinearAdd on uint8 codes
        _check_variant("rounding", "requant", rounding)
    if "variant" in params:
        _check_variant("variant", spec.family or kind, params["variant"])
    for key, value in params.items():
        if not isinstance(key, str) or not (value is None or isinstance(value, (int, str, bool))):
            raise VectorSetError(f"manifest: param {key!r} is not a scalar int, bool or string")
    fault = spec.check_params(params) if spec.check_params else None
    if fault:
        raise VectorSetError(f"manifest: {fault}")


def expected_tensors(
    kind: str, params: dict[str, Any], shapes: dict[str, list[int]]
) -> dict[str, tuple[str, list[int], int, bool]]:
    """Contract (role, shape, bits, signed) of each tensor, free symbols bound from ``shapes``."""
    free: dict[str, int] = {}
    out = {}
    for name, spec in blocks.get(kind).contract.items():
        shape = []
        for i, dim in enumerate(spec.shape):
            if callable(dim):
                shape.append(dim(params))
            elif isinstance(dim, int):
                shape.append(dim)
            elif dim in params:
                shape.append(params[dim])
            else:  # free symbol: take it from the first tensor that has it
                given = shapes.get(name)
                if dim not in free and given is not None and len(given) == len(spec.shape):
                    free[dim] = given[i]
                shape.append(free.get(dim, -1))
        fmt = spec.fmt(params)
        out[name] = (spec.role, shape, fmt.bits, fmt.signed)
    return out


def __getattr__(name: str):
    """``CONTRACT``, ``PARAMS`` and ``LUT_TENSOR``: the registry's, by kind (hwvit.record)."""
    if name in ("CONTRACT", "PARAMS", "LUT_TENSOR"):
        import hwvit.record

        return getattr(hwvit.record, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_manifest(manifest: Any) -> None:
    """Everything about a manifest that does not need the files; VectorSetError on the first fault."""
    if not isinstance(manifest, dict):
        raise VectorSetError("manifest: not a mapping")
    missing = sorted(TOP_KEYS - OPTIONAL_KEYS - manifest.keys())
    if missing:
        raise VectorSetError(f"manifest: missing key {missing[0]!r}")
    unknown = sorted(str(k) for k in manifest.keys() - TOP_KEYS)
    if unknown:
        raise VectorSetError(f"manifest: unknown key {unknown[0]!r}")
    if "recipe" in manifest and not isinstance(manifest["recipe"], dict):
        raise VectorSetError("manifest: recipe is not a mapping")
    if "provenance" in manifest:
        check_provenance(manifest["provenance"])
    if manifest["format"] != FORMAT_VERSION:
        raise VectorSetError(f"manifest: format {manifest['format']!r}, this hwvit reads {FORMAT_VERSION}")
    if not isinstance(manifest["hwvit_version"], str):
        raise VectorSetError("manifest: hwvit_version is not a string")
    kind = manifest["kind"]
    if kind not in blocks.kinds():
        raise VectorSetError(f"manifest: kind {kind!r} not one of {', '.join(blocks.names())}")
    path = manifest["path"]
    if not isinstance(path, str) or not PATH_RE.match(path):
        raise VectorSetError(f"manifest: path {path!r} is not a dotted block path")
    seed = manifest["seed"]
    if seed is not None and not _is_int(seed):
        raise VectorSetError(f"manifest: seed {seed!r} is not an integer")
    if not isinstance(manifest["config_hash"], str) or not SHA_RE.match(manifest["config_hash"]):
        raise VectorSetError("manifest: config_hash is not a sha256 hex digest")
    source = manifest["source_sha256"]
    if source is not None and (not isinstance(source, str) or not SHA_RE.match(source)):
        raise VectorSetError("manifest: source_sha256 is not a sha256 hex digest")
    params = manifest["params"]
    check_params(kind, params)
    entries = manifest["tensors"]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise VectorSetError("manifest: tensors is not a list of mappings")
    names = [e.get("name") for e in entries]
    for entry in entries:
        check_tensor_entry(entry)
    if len(set(names)) != len(names):
        raise VectorSetError("manifest: a tensor name appears twice")
    files = [f for e in entries for f in e["files"].values()]
    if len(set(files)) != len(files) or "manifest.yaml" in files:
        raise VectorSetError("manifest: two tensors share a file name")
    contract = expected_tensors(kind, params, {e["name"]: e["shape"] for e in entries})
    if set(names) != set(contract):
        extra, lack = sorted(set(names) - set(contract)), sorted(set(contract) - set(names))
        what = f"unexpected tensor {extra[0]!r}" if extra else f"missing tensor {lack[0]!r}"
        raise VectorSetError(f"manifest: {kind}: {what} (expected {', '.join(contract)})")
    for entry in entries:
        role, shape, bits, signed = contract[entry["name"]]
        got = (entry["role"], list(entry["shape"]), entry["bits"], entry["signed"])
        if got != (role, shape, bits, signed):
            raise VectorSetError(
                f"manifest: {kind} tensor {entry['name']}: role/shape/bits/signed {got}, "
                f"contract says {(role, shape, bits, signed)}"
            )
    lut = blocks.get(kind).lut
    if lut is not None:
        want = next(e["files"]["hex"] for e in entries if e["name"] == lut)
        if manifest.get("lut_file") != want:
            raise VectorSetError(f"manifest: lut_file {manifest.get('lut_file')!r}, expected {want!r}")
    elif manifest.get("lut_file") is not None:
        raise VectorSetError(f"manifest: {kind} has no LUT but lut_file is set")


def check_provenance(prov: Any) -> None:
    """The ``provenance`` mapping: exactly its keys, each digest a sha256 or null, options a mapping or null."""
    from hwvit.vectors.provenance import KEYS

    if not isinstance(prov, dict) or set(prov) != set(KEYS):
        raise VectorSetError(f"manifest: provenance must map exactly {', '.join(KEYS)}")
    for key in KEYS[:-1]:
        value = prov[key]
        if value is not None and (not isinstance(value, str) or not SHA_RE.match(value)):
            raise VectorSetError(f"manifest: provenance {key} is not a sha256 hex digest")
    if prov["options"] is not None and not isinstance(prov["options"], dict):
        raise VectorSetError("manifest: provenance options is not a mapping")


def check_tensor_entry(entry: dict[str, Any]) -> None:
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise VectorSetError(f"manifest: tensor name {name!r} is not an identifier")
    where = f"manifest: tensor {name}"
    missing = sorted(TENSOR_KEYS - entry.keys())
    if missing:
        raise VectorSetError(f"{where}: missing key {missing[0]!r}")
    unknown = sorted(str(k) for k in entry.keys() - TENSOR_KEYS)
    if unknown:
        raise VectorSetError(f"{where}: unknown key {unknown[0]!r}")
    if entry["role"] not in ROLES:
        raise VectorSetError(f"{where}: role {entry['role']!r} not one of {', '.join(ROLES)}")
    shape = entry["shape"]
    if not isinstance(shape, list) or not shape or not all(_is_int(d) and d >= 1 for d in shape):
        raise VectorSetError(f"{where}: shape {shape!r} is not a list of positive integers")
    bits, signed = entry["bits"], entry["signed"]
    if not isinstance(signed, bool):
        raise VectorSetError(f"{where}: signed {signed!r} is not a bool")
    if not _is_int(bits) or not 1 <= bits <= (64 if signed else 63):
        raise VectorSetError(f"{where}: bits {bits!r} outside [1, {64 if signed else 63}]")
    dtype = IntFormat(bits, signed).dtype.name
    if not isinstance(entry["layout"], str) or not entry["layout"]:
        raise VectorSetError(f"{where}: layout is not a string")
    scale = entry["scale"]
    if scale is not None and (not isinstance(scale, float) or not 0 < scale < float("inf")):
        raise VectorSetError(f"{where}: scale {scale!r} is not a positive finite float or null")
    if entry["dtype"] != dtype:
        raise VectorSetError(f"{where}: dtype {entry['dtype']!r}, expected {dtype!r}")
    for key in ("files", "sha256"):
        value = entry[key]
        if not isinstance(value, dict) or set(value) != FILE_KEYS:
            raise VectorSetError(f"{where}: {key} must map exactly hex and npy")
    for ext, fname in entry["files"].items():
        check_file_name(fname, where)
        if not fname.endswith(f".{ext}"):
            raise VectorSetError(f"{where}: {ext} file {fname!r} does not end in .{ext}")
        if not isinstance(entry["sha256"][ext], str) or not SHA_RE.match(entry["sha256"][ext]):
            raise VectorSetError(f"{where}: sha256 of {ext} is not a hex digest")


def check_file_name(fname: Any, where: str) -> None:
    """A manifest file name must stay inside the set's directory: a plain name, no '/', no '..'."""
    if not isinstance(fname, str) or not fname:
        raise VectorSetError(f"{where}: file name {fname!r} is not a string")
    if "/" in fname or "\\" in fname or fname in (".", "..") or fname.startswith(".") or "\0" in fname:
        raise VectorSetError(f"{where}: file path {fname!r} leaves the set directory")
