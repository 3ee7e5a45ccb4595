"""Speed of the bit-exact integer forward against the float forward, measured side by side."""

from __future__ import annotations

import contextlib
import os
import statistics
import time

import torch

from hwvit import ops


@contextlib.contextmanager
def _gemm_timer(box: list[float]):
    """Time every ops.gemm and ops.linear call (the integer layers call them through the module
    attributes). ops.linear's time counts as GEMM time whole: where the backend requantizes inside
    the GEMM the two cannot be told apart."""
    real = {name: getattr(ops, name) for name in ("gemm", "linear")}

    def timer(fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                box[0] += time.perf_counter() - t0

        return timed

    for name, fn in real.items():
        setattr(ops, name, timer(fn))
    try:
        yield
    finally:
        for name, fn in real.items():
            setattr(ops, name, fn)


def bench_forward(
    preset: str = "vit-b16", repeats: int = 5, calib_images: int = 2, seed: int = 0, batch: int = 1, device: str = "cpu"
) -> dict:
    """Median int and float forward times on ``batch`` inputs (random weights), their ratio, images/s,
    the share of int time outside GEMM (CPU only), the GEMM backend and the CPU (or GPU)."""
    from hwvit import heap, pipeline
    from hwvit.intvit.device import DeviceForward, resolve_device
    from hwvit.ops import gemm_backends
    from hwvit.quant import quantize_model

    dev = resolve_device(device)
    heap.keep()  # as every hwvit command does: the figures are the CLI's
    source = pipeline.load_source(preset, seed=seed)
    model = source.model
    int_model = quantize_model(model, pipeline.calibration_inputs(source, calib_images, seed))
    x = pipeline.eval_inputs(source, batch, seed)[0]
    xn = x.numpy()
    on_cpu = dev.type == "cpu"
    if on_cpu:
        run_int = int_model.forward
        x_float = x
    else:
        run_int = DeviceForward(int_model, dev)
        model = model.to(dev)
        x_float = x.to(dev)

    def sync():
        if not on_cpu:
            torch.cuda.synchronize(dev)

    with torch.no_grad():
        model(x_float)  # warm up both paths once (and run the GEMM probe)
    run_int(xn)
    float_ms, int_ms, gemm_ms = [], [], []
    for _ in range(repeats):  # interleaved, so both see the same machine load
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            model(x_float)
        sync()
        float_ms.append(1e3 * (time.perf_counter() - t0))
        box = [0.0]
        with _gemm_timer(box):
            t0 = time.perf_counter()
            run_int(xn)  # returns host numpy logits: synchronized
            int_ms.append(1e3 * (time.perf_counter() - t0))
        gemm_ms.append(1e3 * box[0])
    i, f, g = statistics.median(int_ms), statistics.median(float_ms), statistics.median(gemm_ms)
    cpu = gemm_backends.cpu_info()
    res = {
        "model": preset,
        "batch": batch,
        "device": str(dev),
        "tokens": int(int_model.pos_q.shape[0]) if int_model.pos_q is not None else None,
        "threads": torch.get_num_threads(),
        "load_avg_1min": os.getloadavg()[0],
        "repeats": repeats,
        "int_ms": i,
        "float_ms": f,
        "ratio": i / f,
        "int_images_per_s": 1e3 * batch / i,
        "float_images_per_s": 1e3 * batch / f,
        "gemm_ms": g if on_cpu else None,
        "outside_gemm_share": (i - g) / i if on_cpu else None,
        "gemm_backend": gemm_backends.backend() if on_cpu else "torch_kernels (_int_mm, float64 bmm)",
        "gemm_probe_ms": gemm_backends.probe()["times_ms"] if on_cpu else None,
        "cpu": cpu["model"],
        "cpu_capability": cpu["capability"],
        "cpu_flags": cpu["flags"],
        "heap": heap.state(),
    }
    if not on_cpu:
        res["gpu"] = torch.cuda.get_device_name(dev)
    return res
