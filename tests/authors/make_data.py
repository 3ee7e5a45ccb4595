"""Run the published integer arithmetics' released code on integer inputs and keep what it computes.

    .venv/bin/python tests/authors/make_data.py --ivit ~/src/I-ViT --fqvit ~/src/FQ-ViT \\
        --ita ~/src/ITA --gemmlowp ~/src/gemmlowp

Each option names a checkout of the authors' repository (``git clone`` of the GitHub address in
``SOURCES``; the commit the data was made from is recorded, and the script says when a checkout
is at another one). Only the options given are run; each writes one or more ``tests/authors/*.npz``
(atomically) holding, per group of rows, the integer inputs, the scales and the released code's
integer outputs (and some of its intermediates), with a ``provenance`` entry: repository, commit,
file, function and this command. tests/test_variants_authors.py holds hwvit's variants to them,
element for element.

How the released code is run:

- the modules are imported from the checkout (their code never enters this tree); I-ViT's calls
  ``.cuda()`` on constants, which here returns the tensor itself (no GPU; the arithmetic is the
  same);
- every tensor is float64 (the modules converted with ``.double()``): their float32 default is not
  exact integer arithmetic (sums past 2^24, products past 2^24), float64 is for every value below
  2^53, which the groups respect;
- the scales are float32 numbers (the authors' models hold float32 scales), so ``x_int * s`` is
  exact in float64 and the modules' own ``x / s`` gives back exactly the integers fed;
- gemmlowp is C++: a small driver written here is compiled against the checkout's headers and
  runs gemmlowp's own output stage on each (accumulator, multiplier, exponent).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

SOURCES = {
    "ivit": ("https://github.com/zkkli/I-ViT", "380ba99144e7dedf428477826a6b3060bf9b85d2"),
    "fqvit": ("https://github.com/megvii-research/FQ-ViT", "5daf5915c715dc21d6afcd64e661652030e640ab"),
    "ita": ("https://github.com/pulp-platform/ITA", "ba96519becce195d64e85eb9a5302e8a1d5487e7"),
    "gemmlowp": ("https://github.com/google/gemmlowp", "16e8662c34917be0065110bfcd9cc27d30f52fdf"),
}


def f32(v) -> np.ndarray | float:
    """The float32 number nearest ``v``, as float64 (the scales and weights the authors' models hold)."""
    out = np.asarray(v, dtype=np.float32).astype(np.float64)
    return float(out) if out.ndim == 0 else out


def _commit(path: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _provenance(source: str, path: Path, file: str, function: str, notes: str) -> str:
    url, pinned = SOURCES[source]
    commit = _commit(path)
    if commit != pinned:
        print(f"note: {path} is at {commit}, the data in the tree was made at {pinned}", file=sys.stderr)
    command = f".venv/bin/python tests/authors/make_data.py --{source} <checkout of {url}>"
    return json.dumps(
        {"repository": url, "commit": commit, "file": file, "function": function, "command": command, "notes": notes}
    )


def _save(name: str, provenance: str, groups: list[dict]) -> None:
    """``groups``: dicts of int/float scalars (kept in the JSON) and numpy arrays (kept as ``<i>.<key>``)."""
    from hwvit.atomic import atomic_file

    arrays, meta = {}, []
    for i, g in enumerate(groups):
        scalars = {}
        for key, value in g.items():
            if isinstance(value, np.ndarray):
                arrays[f"{i}.{key}"] = value
            else:
                scalars[key] = value
        meta.append(scalars)
    with atomic_file(HERE / f"{name}.npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, provenance=np.array(provenance), groups=np.array(json.dumps(meta)), **arrays)
    count = sum(int(np.asarray(v).size) for k, v in arrays.items() if k.endswith((".x", ".acc")))
    print(f"{name}.npz: {len(groups)} groups, {count} input elements, {(HERE / f'{name}.npz').stat().st_size} bytes")


def _narrow(a: np.ndarray) -> np.ndarray:
    """Integers in the smallest signed dtype that holds them (the files stay small)."""
    a = np.asarray(a)
    assert np.all(a == np.round(a)), "not integers"
    a = np.round(a).astype(np.int64)
    for dt in (np.int8, np.int16, np.int32):
        if a.size == 0 or (a.min() >= np.iinfo(dt).min and a.max() <= np.iinfo(dt).max):
            return a.astype(dt)
    return a


def _exact_ints(t, what: str) -> np.ndarray:
    """A float64 tensor that must hold integers: its values as int64 (AssertionError otherwise)."""
    a = t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)
    r = np.round(a)
    assert np.all(np.abs(a - r) == 0), f"{what}: the released code's values are not integers"
    return r.astype(np.int64)


def _recover(value, scale, what: str) -> np.ndarray:
    """The integers ``q`` of ``value = q * scale`` (a module's float output): within 1e-6 of an integer."""
    q = (value / scale).detach().numpy()
    r = np.round(q)
    bad = ~(np.abs(q - r) < 1e-6)
    assert not bad.any(), (
        f"{what}: output not an integer multiple of its scale at {np.argwhere(bad)[:5].tolist()}: {q[bad][:5]}"
    )
    return r.astype(np.int64)


# ------------------------------------------------------------------------------------- rows


def _score_rows(rng, rows: int, n: int, s: float, bits: int = 8) -> np.ndarray:
    """Half uniform over the code range, half attention-like logits N(mu, sigma) quantized at ``s``."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    a = rng.integers(lo, hi + 1, (rows - rows // 2, n))
    sigma = rng.uniform(0.3, 4.0, (rows // 2, 1))
    mu = rng.uniform(-2.0, 2.0, (rows // 2, 1))
    b = np.clip(np.round(rng.normal(mu, sigma, (rows // 2, n)) / s), lo, hi)
    return np.concatenate([a, b]).astype(np.int64)


def _edge_rows(n: int, bits: int = 8) -> np.ndarray:
    """Rails, zero, alternating, one hot, a ramp: the rows every group adds."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    one_hot = np.full(n, lo)
    one_hot[n // 2] = hi
    rows = [np.full(n, hi), np.full(n, lo), np.zeros(n), np.where(np.arange(n) % 2 == 0, lo, hi), one_hot]
    rows.append(np.linspace(lo, hi, n).round())
    return np.stack(rows).astype(np.int64)


# ------------------------------------------------------------------------------------- I-ViT


def _ivit_modules(path: Path):
    import torch

    torch.Tensor.cuda = lambda self, *a, **k: self  # no GPU here; their constants stay on the CPU
    sys.path.insert(0, str(path / "models"))
    import quantization_utils.quant_modules as qm
    from quantization_utils.quant_utils import fixedpoint_mul

    return torch, qm, fixedpoint_mul


def ivit(path: Path) -> None:
    torch, qm, fixedpoint_mul = _ivit_modules(path)
    file = "models/quantization_utils/quant_modules.py"
    rng = np.random.default_rng(56)

    # Shiftmax: IntSoftmax(output_bit) on 8-bit scores (I-ViT's ViT: IntSoftmax(16) after an 8-bit
    # QuantAct); scales from I_0 = 1 to 2^16, rows from 1 to 197, the sum clamp at 2^31 - 1.
    groups = []
    scales = [f32(v) for v in (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 2.0**-8, 2.0**-16, 0.0371)]
    for i, s in enumerate(scales):
        for n, rows in ((1, 8), (7, 24), (64, 16), (197, 12)):
            out_bits = 16 if (i + n) % 2 == 0 else 8
            x = _score_rows(rng, rows, n, s)
            if n > 1:
                x = np.concatenate([x, _edge_rows(n)])
            m = qm.IntSoftmax(out_bits).double()
            t = torch.from_numpy(x * s)[None]  # (1, rows, n)
            sf = torch.tensor(s, dtype=torch.float64)
            y, y_scale = m(t, sf)
            exp, _ = m.int_exp_shift(t / sf - (t / sf).max(dim=-1, keepdim=True)[0], sf)
            groups.append(
                {
                    "s_in": s,
                    "in_bits": 8,
                    "out_bits": out_bits,
                    "x": _narrow(x),
                    "exp": _narrow(_exact_ints(exp[0], "exp")),
                    "y": _narrow(_recover(y[0], y_scale, "IntSoftmax")),
                }
            )
    notes = "IntSoftmax(output_bit).forward(x_int * s, s); exp from its int_exp_shift(x - max, s); float64"
    _save(
        "ivit_softmax", _provenance("ivit", path, file, "IntSoftmax.forward, IntSoftmax.int_exp_shift", notes), groups
    )

    # ShiftGELU: IntGELU() (its 8-bit sigmoid) on rows of an MLP's hidden features (the sigmoid is
    # taken on the row's maximum), then the 8-bit QuantAct that follows it (fixedpoint_mul).
    groups = []
    for s, s_out, n, rows in (
        (0.02, 0.01, 768, 4),
        (0.05, 0.03, 768, 4),
        (0.1, 0.05, 3072, 2),
        (0.3, 0.2, 768, 3),
        (1.0, 0.6, 64, 8),
        (0.0625, 0.0625, 16, 32),
        (0.004, 0.002, 197, 6),
    ):
        s, s_out = f32(s), f32(s_out)
        hidden = rng.normal(rng.uniform(-1.5, 0.5, (rows, 1)), rng.uniform(0.3, 2.0, (rows, 1)), (rows, n))
        x = np.clip(np.round(hidden / (s * 40 if s < 0.01 else s)), -128, 127).astype(np.int64)
        edges = _edge_rows(n)
        negative = -np.arange(1, n + 1) % 128 - 1  # every element negative: the sigmoid's e^-max is large
        x = np.concatenate([x, edges, negative[None], np.ones((1, n), np.int64)])
        t = torch.from_numpy(x * s)[None]
        g = qm.IntGELU().double()
        prod, prod_scale = g(t, torch.tensor(s, dtype=torch.float64))
        out = {}
        for out_bits in (8, 16, 4):
            q = fixedpoint_mul.apply(prod, prod_scale, out_bits, "symmetric", torch.tensor(s_out, dtype=torch.float64))
            out[out_bits] = _narrow(_exact_ints(q[0].double(), "QuantAct"))
        groups.append(
            {
                "s_in": s,
                "s_out": s_out,
                "in_bits": 8,
                "x": _narrow(x),
                "t": _narrow(_recover(prod[0], prod_scale, "IntGELU")),
                "y8": out[8],
                "y16": out[16],
                "y4": out[4],
            }
        )
    notes = (
        "IntGELU().forward(x_int * s, s) (x * sigmoid, sigmoid at 2^-7), then quant_utils.fixedpoint_mul"
        "(t * s_t, s_t, out_bits, 'symmetric', s_out) as QuantAct.forward calls it; float64"
    )
    _save("ivit_gelu", _provenance("ivit", path, file, "IntGELU.forward; quant_utils.fixedpoint_mul", notes), groups)

    # I-LayerNorm: IntLayerNorm on 16-bit rows (I-ViT's residual stream is a 16-bit QuantAct), then
    # the 8-bit QuantAct that follows it; C = 192, 384, 768 (DeiT-T, DeiT-S, ViT-B) and small rows.
    groups = []
    for c, rows, spread in (
        (768, 12, 3000.0),
        (384, 12, 200.0),
        (192, 16, 20000.0),
        (192, 8, 3.0),
        (16, 24, 40.0),
        (1, 8, 100.0),
    ):
        s_in = f32(rng.uniform(0.001, 0.01))
        s_out = f32(rng.uniform(0.02, 0.08))
        gamma = f32(rng.normal(1.0, 0.4, c))
        gamma[gamma == 0] = 1.0
        gamma[: min(c, 3)] = f32([2.5, -0.75, 0.015625][: min(c, 3)])
        beta = f32(rng.normal(0.0, 0.5, c))
        x = rng.normal(rng.uniform(-spread, spread, (rows, 1)), spread, (rows, c))
        x = np.clip(np.round(x), -32768, 32767).astype(np.int64)
        edges = [np.full(c, 32767), np.zeros(c), np.where(np.arange(c) % 2 == 0, -32768, 32767), np.full(c, -5)]
        spike = np.zeros(c)
        spike[0] = 32767
        x = np.concatenate([x, np.stack(edges + [spike]).astype(np.int64)])
        ln = qm.IntLayerNorm(c).double()
        with torch.no_grad():
            ln.weight.copy_(torch.from_numpy(gamma))
            ln.bias.copy_(torch.from_numpy(beta))
        t = torch.from_numpy(x * s_in)[None]
        v, v_scale = ln(t, torch.tensor(s_in, dtype=torch.float64))
        out = {}
        for out_bits in (8, 16):
            q = fixedpoint_mul.apply(v, v_scale, out_bits, "symmetric", torch.tensor(s_out, dtype=torch.float64))
            out[out_bits] = _narrow(_exact_ints(q[0].double(), "QuantAct"))
        groups.append(
            {
                "s_in": s_in,
                "s_out": s_out,
                "in_bits": 16,
                "gamma": gamma,
                "beta": beta,
                "x": _narrow(x),
                "z": _narrow(np.round((v / v_scale).detach().numpy()[0]).astype(np.int64)),
                "y8": out[8],
                "y16": out[16],
            }
        )
    notes = (
        "IntLayerNorm(C) with weight gamma, bias beta: forward(x_int * s_in, s_in) = z * s_z (z = y_int + "
        "bias_int), then quant_utils.fixedpoint_mul(z * s_z, s_z, out_bits, 'symmetric', s_out) as QuantAct "
        "calls it; float64"
    )
    prov = _provenance("ivit", path, file, "IntLayerNorm.forward; quant_utils.fixedpoint_mul", notes)
    _save("ivit_layernorm", prov, groups)


# ------------------------------------------------------------------------------------- FQ-ViT


def _fqvit_ptq(path: Path):
    """FQ-ViT's models/ptq package, imported on its own (models/__init__.py builds whole ViTs)."""
    root = path / "models" / "ptq"
    pkg = types.ModuleType("fqvit_ptq")
    pkg.__path__ = [str(root)]
    sys.modules["fqvit_ptq"] = pkg
    out = {}
    for name in ("bit_type", "observer", "quantizer", "layers"):
        sub = root / name
        target = sub / "__init__.py" if sub.is_dir() else root / f"{name}.py"
        kw = {"submodule_search_locations": [str(sub)]} if sub.is_dir() else {}
        spec = importlib.util.spec_from_file_location(f"fqvit_ptq.{name}", target, **kw)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        out[name] = mod
    return out


def fqvit(path: Path) -> None:
    import torch

    ptq = _fqvit_ptq(path)
    rng = np.random.default_rng(57)
    ns = types.SimpleNamespace

    # QIntLayerNorm in 'int' mode: codes x_q of 9 bits (FQ-ViT's uint8 minus its zero point) and of
    # 8, channel c at s * 2^alpha_c, the output's 8-bit scale.
    groups = []
    for c, rows, bits, amin in (
        (768, 8, 9, 0),
        (192, 24, 9, 0),
        (192, 16, 8, 1),
        (384, 12, 8, 0),
        (64, 24, 9, 2),
        (2, 40, 8, 0),
    ):
        s = f32(rng.uniform(0.005, 0.05))
        s_out = f32(rng.uniform(0.02, 0.08))
        alpha = rng.integers(amin, 4, c)
        gamma = f32(rng.normal(1.0, 0.4, c))
        gamma[: min(c, 2)] = f32([0.0, -1.5][: min(c, 2)])
        beta = f32(rng.normal(0.0, 0.5, c))
        lo, hi = -(1 << (bits - 1)) + (1 if bits == 9 else 0), (1 << (bits - 1)) - 1
        x = rng.integers(lo, hi + 1, (rows, c))
        x[: rows // 2] = np.clip(np.round(rng.normal(0, rng.uniform(1, 60), (rows // 2, c))), lo, hi)
        edges = np.stack([np.where(np.arange(c) % 2 == 0, lo, hi), np.where(np.arange(c) == 0, hi, 0)])
        x = np.concatenate([x, edges]).astype(np.int64)
        z = x << (alpha - alpha.min())
        x = x[(z != z[:, :1]).any(axis=1)]  # a constant row divides by a zero std: NaN, no integer
        ln = ptq["layers"].QIntLayerNorm(c).double()
        ln.mode = "int"
        with torch.no_grad():
            ln.weight.copy_(torch.from_numpy(gamma))
            ln.bias.copy_(torch.from_numpy(beta))
        in_scale = torch.from_numpy(s * np.exp2(alpha))
        out_q = ns(scale=torch.tensor(s_out, dtype=torch.float64))
        v = ln(torch.from_numpy(x * (s * np.exp2(alpha)))[None], ns(scale=in_scale), out_q)
        groups.append(
            {
                "s": s,
                "s_out": s_out,
                "in_bits": bits,
                "alpha": _narrow(alpha),
                "gamma": gamma,
                "beta": beta,
                "x": _narrow(x),
                "y": _narrow(_recover(v[0], out_q.scale, "QIntLayerNorm")),
            }
        )
    notes = (
        "QIntLayerNorm(C) mode 'int', weight gamma, bias beta: forward(x_q * s 2^alpha, in_quantizer.scale = "
        "s 2^alpha, out_quantizer.scale = s_out) = y * s_out; float64"
    )
    prov = _provenance("fqvit", path, "models/ptq/layers.py", "QIntLayerNorm.forward", notes)
    _save("fqvit_layernorm", prov, groups)

    # The PTF observer: per-channel max/min over calibration batches, then the power-of-two factor
    # per channel by the least squared error on the last batch (uint8 with a zero point, FQ-ViT's
    # activations; and int8).
    groups = []
    for case in range(32):
        c = 768 if case % 4 == 0 else 192
        bit = "uint8" if case % 3 else "int8"
        spread = np.exp(rng.uniform(0, np.log(12), c))  # channel ranges up to 12x apart
        spread[rng.integers(0, c, 2)] *= 20  # a few outlier channels
        mean = rng.normal(0.0, 0.3, c) * spread
        batches = [f32(rng.normal(mean, spread, (1, 8, c))) for _ in range(3)]
        obs = ptq["observer"].build_observer("ptf", "activation", ptq["bit_type"].BIT_TYPE_DICT[bit], "channel_wise")
        for b in batches:
            obs.update(torch.from_numpy(b))
        scale, zero_point = obs.get_quantization_params(torch.from_numpy(batches[-1]))
        scale = scale.numpy()
        groups.append(
            {
                "bits": 8,
                "signed": bit == "int8",
                "zero_point": float(zero_point),
                "max_val": obs.max_val.numpy().astype(np.float64),
                "min_val": obs.min_val.numpy().astype(np.float64),
                "x": batches[-1].astype(np.float32),
                "scale": scale,
            }
        )
    notes = (
        "observer.build_observer('ptf', 'activation', BIT_TYPE_DICT[bits], 'channel_wise'): update() on three "
        "batches (1, 8, C), then get_quantization_params(last batch) -> (scale per channel, zero point); float64"
    )
    prov = _provenance(
        "fqvit", path, "models/ptq/observer/ptf.py", "PtfObserver.update, get_quantization_params", notes
    )
    _save("fqvit_ptf", prov, groups)

    # Log-Int-Softmax: QIntSoftmax(log_i_softmax=True, bit_type=uint4) on score rows: the 4-bit
    # log2 codes (16: FQ-ViT's mask, probability 0) and round(sum / exp) they come from.
    groups = []
    sm = ptq["layers"].QIntSoftmax(log_i_softmax=True, bit_type=ptq["bit_type"].BIT_TYPE_DICT["uint4"])
    for s in (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 0.0371, 1.5):
        s = f32(s)
        for n, rows in ((1, 6), (16, 24), (197, 12)):
            x = _score_rows(rng, rows, n, s)
            if n > 1:
                x = np.concatenate([x, _edge_rows(n)])
            t = torch.from_numpy(x * s)[None]
            sf = torch.tensor(s, dtype=torch.float64)
            deq = sm(t, sf)[0].numpy()
            codes = np.where(deq == 0, 16, -np.log2(np.where(deq == 0, 1.0, deq)))
            exp_int, exp_sum = sm.int_softmax(t, sf)
            groups.append(
                {
                    "s_in": s,
                    "in_bits": 8,
                    "x": _narrow(x),
                    "exp": _narrow(_exact_ints(exp_int[0], "exp")),
                    "ratio": _narrow(_exact_ints(torch.round(exp_sum / exp_int)[0], "round(sum / exp)")),
                    "code": _narrow(codes),
                }
            )
    notes = (
        "QIntSoftmax(log_i_softmax=True, bit_type=BIT_TYPE_DICT['uint4']).forward(x_int * s, s) = 2^-code "
        "(0 where masked: code 16 here); exp and round(sum / exp) from its int_softmax; float64"
    )
    prov = _provenance("fqvit", path, "models/ptq/layers.py", "QIntSoftmax.forward, QIntSoftmax.int_softmax", notes)
    _save("fqvit_log2", prov, groups)


# ------------------------------------------------------------------------------------- ITA


def ita(path: Path) -> None:
    spec = importlib.util.spec_from_file_location("pyita_softmax", path / "PyITA" / "softmax.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rng = np.random.default_rng(58)
    groups = []
    for seq, heads, kind in ((64, 2, "uniform"), (64, 2, "logits"), (32, 4, "narrow"), (16, 4, "edges")):
        if kind == "uniform":
            x = rng.integers(-128, 128, (heads, seq, seq))
        elif kind == "logits":
            x = np.clip(
                np.round(
                    rng.normal(
                        rng.uniform(-40, 40, (heads, seq, 1)), rng.uniform(1, 30, (heads, seq, 1)), (heads, seq, seq)
                    )
                ),
                -128,
                127,
            )
        elif kind == "narrow":
            x = 127 - rng.integers(0, 9, (heads, seq, seq))
        else:
            e = _edge_rows(seq)
            x = np.stack([np.resize(np.concatenate([e, e[::-1]]), (seq, seq)) for _ in range(heads)])
            x[0, 0] = np.arange(seq) * 8 - 128  # the max grows chunk after chunk
        x = x.astype(np.int8)
        y = mod.streamingPartialSoftmax(x.copy())
        groups.append({"in_bits": 8, "out_bits": 8, "x": x.reshape(-1, seq), "y": _narrow(y.reshape(-1, seq))})
    notes = "PyITA softmax.streamingPartialSoftmax(x) on int8 (heads, S, S): ITA's scale 1/log2(e) (range_scale 32)"
    prov = _provenance("ita", path, "PyITA/softmax.py", "streamingPartialSoftmax", notes)
    _save("ita_softmax", prov, groups)


# ------------------------------------------------------------------------------------- gemmlowp

DRIVER = r"""
// Reads (accumulator, multiplier, exponent) triples; prints gemmlowp's output stage of each.
#include <cstdint>
#include <cstdio>
#include "public/map.h"
#include "public/output_stages.h"
#include "internal/output.h"

int main() {
  long long acc, mult, exponent;
  while (std::scanf("%lld %lld %lld", &acc, &mult, &exponent) == 3) {
    gemmlowp::OutputStageScaleInt32ByFixedPointAndExponent stage;
    stage.result_fixedpoint_multiplier = static_cast<std::int32_t>(mult);
    stage.result_exponent = static_cast<std::int32_t>(exponent);
    stage.result_offset_after_shift = 0;
    gemmlowp::OutputStageEvalBufferImpl<gemmlowp::OutputStageScaleInt32ByFixedPointAndExponent,
                                        gemmlowp::RegisterBuffer<std::int32_t, 1>> eval(stage);
    gemmlowp::RegisterBuffer<std::int32_t, 1> in;
    in.reg[0] = static_cast<std::int32_t>(acc);
    std::printf("%d\n", eval.Eval(in).reg[0]);
  }
  return 0;
}
"""


def gemmlowp(path: Path) -> None:
    rng = np.random.default_rng(59)
    n = 12000
    acc = rng.integers(-(1 << 31), 1 << 31, n)
    acc[: n // 3] = rng.integers(-(1 << 16), 1 << 16, n // 3)
    mult = rng.integers(1 << 30, 1 << 31, n)
    exponent = -rng.integers(0, 32, n)  # right shifts 0..31
    left = rng.random(n) < 0.1
    exponent[left] = rng.integers(1, 31, int(left.sum()))
    # a left shift is defined where acc << left fits int32 (C++ overflow is undefined: gemmlowp's
    # ShiftLeft multiplies): acc drawn below 2^(31 - left) there
    bound = np.left_shift(np.int64(1), 31 - exponent[left])
    acc[left] = rng.integers(-bound, bound)
    edges = [
        (-(1 << 31), -(1 << 31), 0),  # the one product SaturatingRoundingDoublingHighMul saturates
        ((1 << 31) - 1, (1 << 31) - 1, 0),
        (-(1 << 31), (1 << 31) - 1, -31),
        (1, 1 << 30, -1),  # a tie, positive
        (-1, 1 << 30, -1),  # a tie, negative: away from zero
        (3, 1 << 30, -2),
        (-3, 1 << 30, -2),
        (0, 0, 0),
        (12345, 0, -5),
        (1, (1 << 31) - 1, 30),
        (-1, (1 << 31) - 1, 30),
    ]
    acc = np.concatenate([acc, [e[0] for e in edges]]).astype(np.int64)
    mult = np.concatenate([mult, [e[1] for e in edges]]).astype(np.int64)
    exponent = np.concatenate([exponent, [e[2] for e in edges]]).astype(np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "driver.cc"
        src.write_text(DRIVER)
        exe = Path(tmp) / "driver"
        subprocess.run(["g++", "-O1", "-std=c++11", "-I", str(path), str(src), "-o", str(exe)], check=True)
        lines = "\n".join(f"{a} {m} {e}" for a, m, e in zip(acc, mult, exponent)) + "\n"
        got = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout.split()
    y = np.array([int(v) for v in got], dtype=np.int64)
    assert y.size == acc.size
    groups = [
        {
            "acc": acc.astype(np.int32),
            "multiplier": mult.astype(np.int64),
            "exponent": _narrow(exponent),
            "y": y.astype(np.int32),
        }
    ]
    notes = (
        "gemmlowp's OutputStageEvalBufferImpl<OutputStageScaleInt32ByFixedPointAndExponent> (ShiftLeft, "
        "SaturatingRoundingDoublingHighMul, RoundingDivideByPOT: TFLite's MultiplyByQuantizedMultiplier), offset 0, "
        "compiled with g++ -O1 -std=c++11 from a driver in this script"
    )
    prov = _provenance(
        "gemmlowp", path, "internal/output.h, fixedpoint/fixedpoint.h", "OutputStageEvalBufferImpl::Eval", notes
    )
    _save("gemmlowp_requant", prov, groups)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for key in SOURCES:
        ap.add_argument(f"--{key}", type=Path, help=f"a checkout of {SOURCES[key][0]}")
    args = ap.parse_args(argv)
    runs = {"ivit": ivit, "fqvit": fqvit, "ita": ita, "gemmlowp": gemmlowp}
    chosen = [k for k in runs if getattr(args, k) is not None]
    if not chosen:
        ap.error("name at least one checkout: " + ", ".join(f"--{k}" for k in runs))
    for key in chosen:
        path = getattr(args, key).expanduser().resolve()
        if not path.is_dir():
            ap.error(f"--{key} {shlex.quote(str(path))}: not a directory")
        runs[key](path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
