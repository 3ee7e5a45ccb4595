"""Run the float and the integer model side by side; measure the error at every traced point."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from hwvit.analysis.isolate import Forcer, aligned, point_range, quantize_at
from hwvit.analysis.metrics import sqnr_db
from hwvit.engine import Engine
from hwvit.intvit import IntViT, Trace

# The error histogram keeps the signed errors of at most this many elements per point (the first
# ones, in batch order); the tables' figures are over all elements.
HIST_SAMPLES = 200_000


class _Acc:
    """Streaming SQNR / cosine / max / mean error of one traced point over batches.

    With a range ``(lo, hi)`` it also counts clipped elements (the float value at this scale
    rounds outside the range) and the largest |int| reached (the used share of the range).
    ``zero``: the point's zero point (an imported model's asymmetric activations): its real values
    are ``scale * (q - zero)``.
    """

    def __init__(self, scale: float, rng: tuple[int, int] | None = None, zero: int = 0):
        self.scale = scale
        self.rng = rng
        self.zero = int(zero)
        self.clipped = 0
        self.int_max = 0
        self.signal = self.noise = self.dot = self.nref = self.ntest = self.err_sum = 0.0
        self.err_max = 0.0
        self.count = 0
        self.shape: tuple[int, ...] = ()
        self.worst_errors: np.ndarray | None = None  # signed errors in LSB (for the histogram)

    def add(self, ref: np.ndarray, q: np.ndarray) -> None:
        # a per-channel scale (FQ-ViT's power-of-two factor: s * 2^alpha_c) runs along the last axis
        scale = np.broadcast_to(np.asarray(self.scale, dtype=np.float64), np.shape(q)).reshape(-1)
        ref = np.asarray(ref, dtype=np.float64).reshape(-1)
        test = (np.asarray(q, dtype=np.float64).reshape(-1) - self.zero) * scale
        diff = ref - test
        # np.sum(a * b), not a @ b: the @ of float64 vectors goes to multithreaded BLAS ddot, whose
        # threads wait for any core another process holds: hundreds of times slower on a busy machine.
        self.signal += float(np.sum(ref * ref))
        self.noise += float(np.sum(diff * diff))
        self.dot += float(np.sum(ref * test))
        self.nref = self.signal
        self.ntest += float(np.sum(test * test))
        lsb = np.abs(diff) / scale
        self.err_max = max(self.err_max, float(lsb.max()) if lsb.size else 0.0)
        self.err_sum += float(lsb.sum())
        self.count += lsb.size
        if self.rng is not None:
            self.clipped += quantize_at(ref, scale, *self.rng, self.zero)[1]
            self.int_max = max(self.int_max, int(np.abs(np.asarray(q)).max()) if lsb.size else 0)
        kept = 0 if self.worst_errors is None else self.worst_errors.size
        if kept < HIST_SAMPLES:
            part = (diff / scale)[: HIST_SAMPLES - kept]
            self.worst_errors = part if self.worst_errors is None else np.concatenate([self.worst_errors, part])

    def merge(self, other: _Acc) -> None:
        """Add the sums of ``other`` (a later batch): merging one-batch accumulators in batch order
        performs the same float additions as `add` on each batch, so the numbers are identical."""
        self.signal += other.signal
        self.noise += other.noise
        self.dot += other.dot
        self.nref = self.signal
        self.ntest += other.ntest
        self.err_max = max(self.err_max, other.err_max)
        self.err_sum += other.err_sum
        self.count += other.count
        self.clipped += other.clipped
        self.int_max = max(self.int_max, other.int_max)
        kept = 0 if self.worst_errors is None else self.worst_errors.size
        if other.worst_errors is not None and kept < HIST_SAMPLES:
            part = other.worst_errors[: HIST_SAMPLES - kept]
            self.worst_errors = part if self.worst_errors is None else np.concatenate([self.worst_errors, part])

    def result(self) -> dict[str, float]:
        if self.noise == 0.0:
            sq = math.inf
        elif self.signal == 0.0:
            sq = -math.inf
        else:
            sq = 10.0 * math.log10(self.signal / self.noise)
        den = math.sqrt(self.nref * self.ntest)
        cos = self.dot / den if den > 0 else (1.0 if self.nref == self.ntest else 0.0)
        out = {
            "sqnr_db": sq,
            "cosine": cos,
            "max_err_lsb": self.err_max,
            "mean_err_lsb": self.err_sum / max(self.count, 1),
            "elements": self.count,
        }
        if self.rng is not None:
            lo, hi = self.rng
            out.update(
                scale=float(np.min(self.scale)),  # per channel: the finest (PTF's base scale s)
                int_lo=lo,
                int_hi=hi,
                clip_rate=self.clipped / max(self.count, 1),
                range_used=self.int_max / max(hi, -lo),
            )
        return out


@dataclass
class CompareResult:
    model: str
    images: int
    top1_float: float | None
    top1_int: float | None
    agreement: float
    logits_sqnr_db: float
    layers: list[dict] = field(default_factory=list)
    quant: dict = field(default_factory=dict)
    logits_float: np.ndarray | None = None  # (images, classes), for plots
    logits_int: np.ndarray | None = None  # dequantized
    pool_select: bool = False  # pool is a plain selection of token 0 (the class token)
    recipe: dict | None = None  # the quantization recipe (hwvit.quant.recipe), when not the plain int8 one
    calibration: dict = field(default_factory=dict)  # point -> how its range was calibrated
    errors: dict[str, np.ndarray] = field(default_factory=dict)  # signed LSB errors, first HIST_SAMPLES per point
    # a quantized ONNX file's: the file in onnxruntime beside the integer model (hwvit.onnx.runtime
    # SideBySide.to_dict()), in the JSON and the report
    onnxruntime: dict | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("logits_float", "logits_int", "errors"):
            d.pop(key)
        if d["onnxruntime"] is None:
            d.pop("onnxruntime")
        return d

    def worst_layer(self) -> dict | None:
        finite = [row for row in self.layers if row["path"] not in ("input",)]
        return min(finite, key=lambda row: row["sqnr_db"]) if finite else None


def compare(
    model: torch.nn.Module,
    int_model: IntViT,
    inputs: torch.Tensor,
    labels=None,
    name: str = "",
    batch_size: int | None = None,
    device: str = "cpu",
    isolated: bool = True,
    client=None,
) -> CompareResult:
    """Float forward on ``inputs`` vs integer forward on the same inputs, point by point.

    ``inputs``: one tensor (cut into ``batch_size`` images at a time, default
    ``hwvit.pipeline.batch_size_for``: memory-bounded), or an iterable of batches
    (hwvit.pipeline.Stream) so large image sets stream through in bounded memory. ``device`` runs the
    integer forward there (``hwvit.engine.Engine``, bit-identical to the CPU path). ``client`` (a
    Dask client) runs the batches on its workers; the driver merges their sums in batch order, so the
    result equals the local one to the last digit.

    Each point's row also holds its integer width ``bits`` (``IntViT.bits_at``: a recipe may set it
    per layer), ``clip_rate``, ``range_used``, ``scale`` and, with ``isolated``
    (a second, forced integer forward on the CPU: hwvit.analysis.isolate), ``isolated_sqnr_db``,
    ``isolated_max_err_lsb``, ``isolated_mean_err_lsb``: the error that point's layer adds by itself.
    """
    quant = dict(int_model.meta.get("quant", {}))
    if isinstance(inputs, torch.Tensor):
        if len(inputs) == 0:
            raise ValueError("no inputs to compare on")
        from hwvit.pipeline import batch_size_for

        whole, step = inputs, batch_size or batch_size_for(model.cfg)
        inputs = (whole[start : start + step] for start in range(0, len(whole), step))
    accs: dict[str, _Acc] = {}
    iso: dict[str, _Acc] = {}
    order: list[str] = []
    logits_f, logits_i = [], []

    def merge(part: tuple[np.ndarray, np.ndarray, dict[str, _Acc], dict[str, _Acc]]) -> None:
        lf_b, li_b, accs_b, iso_b = part
        logits_f.append(lf_b)
        logits_i.append(li_b)
        for path, acc in accs_b.items():
            if path not in accs:
                accs[path] = _Acc(acc.scale, acc.rng, acc.zero)
                accs[path].shape = acc.shape
                order.append(path)
            accs[path].merge(acc)
        for path, acc in iso_b.items():
            iso.setdefault(path, _Acc(acc.scale, zero=acc.zero)).merge(acc)

    if client is None:
        run_int = Engine(int_model, device)
        for x in inputs:
            merge(_batch(model, int_model, run_int, x, isolated))
    else:
        from hwvit.cluster import map_ordered

        # Torch's float kernels may sum in another order with another thread count: the workers
        # use the driver's, so their float forward is the driver's bit for bit.
        threads = torch.get_num_threads()
        for part in map_ordered(client, _batch_task, (model, int_model), inputs, device, threads, isolated):
            merge(part)
    if not logits_f:
        raise ValueError("no inputs to compare on")
    lf = np.concatenate(logits_f)
    li = np.concatenate(logits_i)
    pf, pi = lf.argmax(1), li.argmax(1)
    top1_f = top1_i = None
    if labels is not None:
        labels = np.asarray(labels)
        top1_f, top1_i = float((pf == labels).mean()), float((pi == labels).mean())
    layers = []
    for path in order:
        row = {"path": path, "shape": list(accs[path].shape), "bits": int_model.bits_at(path), **accs[path].result()}
        if path in iso:
            r = iso[path].result()
            row.update({f"isolated_{k}": r[k] for k in ("sqnr_db", "max_err_lsb", "mean_err_lsb")})
        layers.append(row)
    errors = {p: a.worst_errors for p, a in accs.items() if a.worst_errors is not None}
    return CompareResult(
        model=name,
        images=len(lf),
        top1_float=top1_f,
        top1_int=top1_i,
        agreement=float((pf == pi).mean()),
        logits_sqnr_db=sqnr_db(lf, li),
        layers=layers,
        quant=quant,
        pool_select=int_model.readout is None or int_model.readout.pool is None,
        recipe=int_model.meta.get("recipe"),
        calibration=dict(int_model.meta.get("calibration", {})),
        logits_float=lf,
        logits_int=li,
        errors=errors,
    )


def _batch(model: torch.nn.Module, int_model: IntViT, run_int, x: torch.Tensor, isolated: bool = True):
    """Float and integer forward of one batch: (float logits, dequantized int logits, {path: _Acc},
    {path: isolated _Acc})."""
    floats: dict[str, np.ndarray] = {}

    def record(path: str, tensor: torch.Tensor) -> None:
        floats[path] = tensor.detach().double().numpy()

    with torch.no_grad():
        lf = model(x, record=record)
    tr = Trace(values=True)
    li = run_int(x.numpy(), trace=tr)
    accs: dict[str, _Acc] = {}
    for path, (q, scale) in tr.values.items():
        ref = aligned(floats[path], q.shape) if path in floats else None
        if ref is None:
            continue
        acc = accs[path] = _Acc(scale, point_range(path, int_model.bits_at(path)), int_model.zero_at(path))
        acc.shape = tuple(q.shape[1:])
        acc.add(ref, q)
    iso: dict[str, _Acc] = {}
    if isolated:
        forced = Trace(values=True, force=Forcer(floats, int_model.bits_at, int_model.zero_at))
        int_model.forward(x.numpy(), trace=forced)  # forced values: the golden forward, on the CPU
        for path, (q, scale) in forced.values.items():
            ref = aligned(floats[path], q.shape) if path in accs else None
            if ref is not None:
                iso.setdefault(path, _Acc(scale, zero=int_model.zero_at(path))).add(ref, q)
    return lf.double().numpy(), int_model.dequantize_logits(li), accs, iso


def _batch_task(
    model: torch.nn.Module, int_model: IntViT, x: torch.Tensor, device: str, threads: int, isolated: bool = True
):
    """`_batch` on a Dask worker, with the driver's torch thread count and hwvit's heap setting."""
    from hwvit import heap

    heap.keep()
    torch.set_num_threads(threads)
    return _batch(model, int_model, Engine(int_model, device), x, isolated)
