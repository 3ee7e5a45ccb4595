"""Speed of the bit-exact integer forward against the float forward, measured side by side."""

from __future__ import annotations

import contextlib
import os
import statistics
import time

import torch

from hwvit import ops


def _timed(fn, box: list[float]):
    """``fn``, adding the seconds each call takes to ``box[0]``."""

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            box[0] += time.perf_counter() - t0

    return timed


@contextlib.contextmanager
def _gemm_timer(box: list[float]):
    """Time every ops.gemm and ops.linear call (the integer layers call them through the module
    attributes). ops.linear's time counts as GEMM time whole: where the backend requantizes inside
    the GEMM the two cannot be told apart. The engine's attention_heads (attention's two products and the
    softmax between them in one call) counts outside: its softmax is a third of it. An encoder block
    run as one compiled call (``hwvit.engine.compiled.encoder_block``) reports the time of its four
    projections itself: that counts as GEMM time, its attention outside, as above."""
    from hwvit.engine import compiled

    real = {name: getattr(ops, name) for name in ("gemm", "linear")}
    for name, fn in real.items():
        setattr(ops, name, _timed(fn, box))
    block = compiled.encoder_block

    def timed_block(*args):
        y, ve, spent_ns = block(*args)
        box[0] += 1e-9 * spent_ns
        return y, ve, spent_ns

    compiled.encoder_block = timed_block
    try:
        yield
    finally:
        compiled.encoder_block = block
        for name, fn in real.items():
            setattr(ops, name, fn)


# the entries timed by name: the engine's compositions (the stack of blocks, one block, attention's
# heads) and hwvit.ops' kernels, each looked up on its module at every call
_OPS = (
    ("hwvit.engine.blocks", ("encoder_blocks", "encoder_block")),
    ("hwvit.engine.heads", ("attention_heads",)),
    (
        "hwvit.ops",
        ("gemm", "linear", "requant", "quantize", "layernorm", "softmax", "gelu", "residual_add", "mean_pool"),
    ),
)


@contextlib.contextmanager
def _op_timer(into: dict, compiled_box: list[float]):
    """Time every top-level call of an entry of ``_OPS`` (one called inside another counts as that
    one's) by name into ``into`` ({op: [calls, seconds, seconds in compiled kernels]}), and every call
    of hwvit's compiled kernels (the numba functions of hwvit.ops._jit, hwvit.ops.native and
    hwvit.engine.compiled, which run the C kernels) to the op that made it. The forward looks both up
    on their modules at each call."""
    import importlib
    import sys

    from numba.core.dispatcher import Dispatcher

    current: list = [None]  # the top-level op running now

    def op_timer(name, fn):
        def timed(*args, **kwargs):
            if current[0] is not None:
                return fn(*args, **kwargs)
            current[0] = name
            t0, c0 = time.perf_counter(), compiled_box[0]
            try:
                return fn(*args, **kwargs)
            finally:
                row = into.setdefault(name, [0, 0.0, 0.0])
                row[0] += 1
                row[1] += time.perf_counter() - t0
                row[2] += compiled_box[0] - c0
                current[0] = None

        return timed

    entries = [(importlib.import_module(m), name) for m, names in _OPS for name in names]
    patched = [(module, name, getattr(module, name)) for module, name in entries]
    timed_ops = len(patched)
    for module_name in ("hwvit.ops._jit", "hwvit.ops.native", "hwvit.engine.compiled"):  # loaded by the warm-up forward
        module = sys.modules.get(module_name)
        if module is not None:
            patched += [(module, n, f) for n, f in vars(module).items() if isinstance(f, Dispatcher)]
    for i, (module, name, fn) in enumerate(patched):
        setattr(module, name, op_timer(name, fn) if i < timed_ops else _timed(fn, compiled_box))
    try:
        yield
    finally:
        for module, name, fn in patched:
            setattr(module, name, fn)


def breakdown(run_int, repeats: int) -> dict:
    """Where the int forward's time goes, per hwvit.ops entry: calls, milliseconds a forward, and of
    them the milliseconds in hwvit's compiled kernels (numba, C) and the rest (Python, numpy, torch,
    allocation), plus the forward's time outside every op (the model's own code and any kernel called
    around hwvit.ops, such as an arithmetic variant's). A loop of its own: the wrappers cost a few
    microseconds a call, so the bench's main figures are taken without them. Medians over ``repeats``."""
    runs = []
    for _ in range(repeats):
        per_op: dict = {}
        compiled = [0.0]
        with _op_timer(per_op, compiled):
            t0 = time.perf_counter()
            run_int()
            total = time.perf_counter() - t0
        runs.append((total, per_op))
    names = sorted(
        {n for _, per_op in runs for n in per_op},
        key=lambda n: -statistics.median(per_op.get(n, [0, 0.0, 0.0])[1] for _, per_op in runs),
    )
    ops_rows = {}
    for n in names:
        rows = [per_op.get(n, [0, 0.0, 0.0]) for _, per_op in runs]
        ops_rows[n] = {
            "calls": int(statistics.median(r[0] for r in rows)),
            "ms": 1e3 * statistics.median(r[1] for r in rows),
            "compiled_ms": 1e3 * statistics.median(r[2] for r in rows),
            "rest_ms": 1e3 * statistics.median(r[1] - r[2] for r in rows),
        }
    outside = [total - sum(r[1] for r in per_op.values()) for total, per_op in runs]
    return {
        "forward_ms": 1e3 * statistics.median(total for total, _ in runs),
        "ops": ops_rows,
        "outside_ops_ms": 1e3 * statistics.median(outside),
    }


def torch_dynamic_int8(model: torch.nn.Module) -> torch.nn.Module:
    """The peer a user would reach for instead of hwvit: PyTorch's dynamic int8 quantization of the
    float model's Linear layers (int8 weights, activations quantized per call, fbgemm/oneDNN kernels;
    not bit-exact to anything). A copy: the float model is left as it is."""
    import copy
    import warnings

    with warnings.catch_warnings():  # torch.ao.quantization warns that it is deprecated, on every call
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model).eval(), {torch.nn.Linear}, dtype=torch.qint8)


def _interleaved(runners: dict, repeats: int, sync=lambda: None, settle: float = 0.0) -> dict[str, list[float]]:
    """Milliseconds of each runner, ``repeats`` times, interleaved (each round runs every runner once,
    in an order rotated round by round) so that every runner sees the same machine load. ``settle``
    seconds of pause before each run let the threads a BLAS leaves spinning go to sleep, so one
    backend's spinning threads do not slow the next one's run."""
    names = list(runners)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            sync()
            time.sleep(settle)
            t0 = time.perf_counter()
            runners[name]()
            sync()
            times[name].append(1e3 * (time.perf_counter() - t0))
    return times


def _numba_threads() -> int:
    import numba

    return numba.get_num_threads()


MARKDOWN_COLUMNS = (
    "machine",
    "torch",
    "model",
    "backend",
    "threads",
    "batch",
    "int ms",
    "float ms",
    "torch int8 ms",
    "int/float",
    "int/torch int8",
    "int img/s",
)


def machine(run: dict) -> str:
    """The machine a run measured, in one cell: the CPU (model, family and model number, cores, the
    int8 flags), the GPU where the forward ran on one, and the load average when it started."""
    fam, num = run["cpu_family_model"]
    where = f" (family {fam} model {num})" if fam is not None else ""
    flags = " ".join(run["cpu_flags"]) or "no int8 flags"
    gpu = f"; GPU {run['gpu']}" if run.get("gpu") else ""
    return f"{run['cpu']}{where}, {run['cores']} cores, {flags}{gpu}; load {run['load_avg_1min']:.1f}"


def markdown_table(runs: list[dict]) -> str:
    """``bench_forward``'s runs as a Markdown table, one row a run, each naming its machine: what
    docs/performance.md shows, pasted from `hwvit bench --markdown` (rows of other machines go under
    the same header)."""

    def ms(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = ["| " + " | ".join(MARKDOWN_COLUMNS) + " |", "|" + "---|" * 5 + "---:|" * 7]
    for r in runs:
        threads = f"{r['numba_threads']} (torch {r['threads']})" if r["numba_threads"] != r["threads"] else r["threads"]
        cells = (
            machine(r),
            r["torch"],
            r["model"],
            f"`{r['gemm_backend']}`" if r["device"] == "cpu" else f"{r['device']}: {r['gemm_backend']}",
            threads,
            r["batch"],
            ms(r["int_ms"]),
            ms(r["float_ms"]),
            ms(r["torch_int8_ms"]),
            ms(r["ratio"], 2),
            ms(r["int_vs_torch_int8"], 2),
            ms(r["int_images_per_s"]),
        )
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def bench_forward(
    preset: str = "vit-b16",
    repeats: int = 5,
    calib_images: int = 2,
    seed: int = 0,
    batch: int = 1,
    device: str = "cpu",
    peer: bool = True,
    backends: list[str] | None = None,
    with_breakdown: bool = False,
    checkpoint: str | None = None,
) -> dict:
    """Median int and float forward times on ``batch`` inputs (random weights), their ratio, images/s,
    the share of int time outside GEMM (CPU only), the GEMM backend and the CPU (or GPU); on the CPU
    also the torch dynamic int8 peer (``peer``) and the int forward on each backend of ``backends``,
    all interleaved in one loop; ``with_breakdown`` (CPU): ``breakdown`` of the int forward after them.
    ``checkpoint``: a quantized ONNX file instead of the preset: its own integer model (hwvit.onnx),
    the float model of its dequantized weights, and the file in onnxruntime (optimizations on, one
    thread, as hwvit's peer there: ``onnxruntime_ms``) in place of torch's dynamic int8."""
    from hwvit import heap, pipeline
    from hwvit.engine import Engine
    from hwvit.intvit.device import resolve_device
    from hwvit.ops import gemm_backends
    from hwvit.quant import quantize_model

    dev = resolve_device(device)
    heap.keep()  # as every hwvit command does: the figures are the CLI's
    source = pipeline.load_source(None if checkpoint else preset, checkpoint=checkpoint, seed=seed)
    model = source.model.eval()
    if source.imported is not None:
        int_model, preset, peer = source.imported.int_model, source.name, False
    else:
        int_model = quantize_model(model, pipeline.calibration_inputs(source, calib_images, seed))
    x = pipeline.eval_inputs(source, batch, seed)[0]
    xn = x.numpy()
    on_cpu = dev.type == "cpu"
    run_int = Engine(int_model, dev)
    x_float = x
    if not on_cpu:
        model = model.to(dev)
        x_float = x.to(dev)

    def sync():
        if not on_cpu:
            torch.cuda.synchronize(dev)

    def float_forward(net=model):
        with torch.no_grad():
            net(x_float)

    box, gemm_runs = [0.0], []

    def int_forward():
        box[0] = 0.0
        with _gemm_timer(box):
            run_int(xn)  # returns host numpy logits: synchronized
        gemm_runs.append(1e3 * box[0])

    runners = {"float": float_forward, "int": int_forward}
    if on_cpu and peer:
        quantized = torch_dynamic_int8(model)
        runners["torch_int8"] = lambda: float_forward(quantized)
    if source.imported is not None:
        from hwvit.onnx.ort import run_batched, session

        ort = session(source.imported.graph.model, optimize=True)
        feed = xn.astype("float32")
        runners["onnxruntime"] = lambda: run_batched(ort, feed)
    in_use = gemm_backends.backend() if on_cpu else None
    for fn in runners.values():  # warm up every path once (packed weights, threads, the GEMM probe)
        fn()
    gemm_runs.clear()
    times = _interleaved(runners, repeats, sync)
    med = {name: statistics.median(v) for name, v in times.items()}
    by_backend = {}  # the int forward on each backend: a loop of its own, so theirs don't touch the above
    for name in (backends or []) if on_cpu else []:

        def on_backend(name=name):
            with gemm_backends.using(name):
                run_int(xn)

        by_backend[name] = on_backend
        on_backend()  # warm up: its packed weights
    if by_backend:
        slow = {n: fn for n, fn in by_backend.items() if n == "int64"}  # 100x the others: timed once
        fast = {n: fn for n, fn in by_backend.items() if n not in slow}
        med.update({f"int[{n}]": statistics.median(v) for n, v in _interleaved(fast, repeats, settle=0.05).items()})
        med.update({f"int[{n}]": v[0] for n, v in _interleaved(slow, 1, settle=0.05).items()})
    i, f, g = med["int"], med["float"], statistics.median(gemm_runs)
    # each run's own share, then the median: GEMM and int times of one run belong together
    outside = statistics.median((t - gt) / t for t, gt in zip(times["int"], gemm_runs))
    cpu = gemm_backends.cpu_info()
    res = {
        "model": preset,
        "batch": batch,
        "device": str(dev),
        "tokens": int(int_model.embed.pos_q.shape[0]) if int_model.embed.pos_q is not None else None,
        "threads": torch.get_num_threads(),
        "load_avg_1min": os.getloadavg()[0],
        "repeats": repeats,
        "int_ms": i,
        "float_ms": f,
        "ratio": i / f,
        "int_images_per_s": 1e3 * batch / i,
        "float_images_per_s": 1e3 * batch / f,
        "torch_int8_ms": med.get("torch_int8"),
        "torch_int8_images_per_s": 1e3 * batch / med["torch_int8"] if "torch_int8" in med else None,
        "int_vs_torch_int8": i / med["torch_int8"] if "torch_int8" in med else None,
        "onnxruntime_ms": med.get("onnxruntime"),
        "backends_ms": {name[4:-1]: ms for name, ms in med.items() if name.startswith("int[")},
        "gemm_ms": g if on_cpu else None,
        "outside_gemm_share": outside if on_cpu else None,
        "gemm_backend": in_use if on_cpu else "torch_kernels (_int_mm, float64 bmm)",
        "gemm_probe_ms": gemm_backends.probe()["times_ms"] if on_cpu and not gemm_backends.named() else None,
        "cpu": cpu["model"],
        "cpu_family_model": [cpu["family"], cpu["model_number"]],
        "cpu_capability": cpu["capability"],
        "cpu_flags": cpu["flags"],
        "cores": cpu["cores"],
        "heap": heap.state(),
        "torch": torch.__version__,
        "numba_threads": _numba_threads(),
    }
    if on_cpu and with_breakdown:
        res["breakdown"] = breakdown(lambda: run_int(xn), repeats)
    if not on_cpu:
        res["gpu"] = torch.cuda.get_device_name(dev)
    return res
