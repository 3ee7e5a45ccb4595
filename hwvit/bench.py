"""Speed of the bit-exact integer forward against the float forward, measured side by side."""

from __future__ import annotations

import contextlib
import statistics
import time

import torch

from hwvit import ops


@contextlib.contextmanager
def _gemm_timer(box: list[float]):
    """Time every ops.gemm call (the integer layers call it through the module attribute)."""
    real = ops.gemm

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            box[0] += time.perf_counter() - t0

    ops.gemm = timed
    try:
        yield
    finally:
        ops.gemm = real


def bench_forward(preset: str = "vit-b16", repeats: int = 5, calib_images: int = 2, seed: int = 0) -> dict:
    """Median int_ms, float_ms (batch 1), their ratio and the share of int time outside GEMM."""
    from hwvit import pipeline
    from hwvit.quant import quantize_model

    source = pipeline.load_source(preset, seed=seed)
    model = source.model
    int_model = quantize_model(model, pipeline.calibration_inputs(source, calib_images, seed))
    x = pipeline.eval_inputs(source, 1, seed)[0]
    xn = x.numpy()
    with torch.no_grad():
        model(x)  # warm up both paths once
    int_model.forward(xn)
    float_ms, int_ms, gemm_ms = [], [], []
    for _ in range(repeats):  # interleaved, so both see the same machine load
        t0 = time.perf_counter()
        with torch.no_grad():
            model(x)
        float_ms.append(1e3 * (time.perf_counter() - t0))
        box = [0.0]
        with _gemm_timer(box):
            t0 = time.perf_counter()
            int_model.forward(xn)
            int_ms.append(1e3 * (time.perf_counter() - t0))
        gemm_ms.append(1e3 * box[0])
    i, f, g = statistics.median(int_ms), statistics.median(float_ms), statistics.median(gemm_ms)
    return {"model": preset, "batch": 1, "tokens": int(int_model.pos_q.shape[0]) if int_model.pos_q is not None else None,
            "threads": torch.get_num_threads(), "repeats": repeats, "int_ms": i, "float_ms": f,
            "ratio": i / f, "gemm_ms": g, "outside_gemm_share": (i - g) / i}
