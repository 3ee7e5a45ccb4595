"""Quantized ONNX files of the tests' ViTs, made on first use and kept for the session.

Models: the bundled digits ViT (held-out split: the evaluation images and labels), a second,
differently shaped hwvit ViT (3 channels, 12x12 images, patch 3, dim 48, 3 heads, depth 2, random
weights; random images), and an HF-shaped one (transformers' ViTForImageClassification: 16x16
images, patch 4, hidden 32, 2 heads, depth 2, 5 classes, random weights; separate q, k, v and
SDPA's head_dim^-1/4 on Q and on K). Each is exported once (hwvit.onnx.make.export) and quantized by
onnxruntime's quantize_static in the configurations asked for (hwvit.onnx.make.CONFIGS), on
``calib`` calibration images; ``pow2`` rounds the file's scales to powers of two.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CALIB = 256  # calibration images of every file
FAST_IMAGES = 32  # evaluation images of make test's side-by-side runs


class Zoo:
    def __init__(self, root: Path):
        self.root = root
        self._models: dict[str, tuple] = {}
        self._files: dict[tuple, Path] = {}
        self._sides: dict[tuple, tuple] = {}

    def model(self, name: str):
        """(float model, calibration images, evaluation images, labels or None) of ``name``."""
        if name not in self._models:
            self._models[name] = _MODELS[name]()
        return self._models[name]

    def file(self, name: str, config: str, calib: int = CALIB, pow2: bool = False) -> Path:
        from hwvit.onnx import make

        key = (name, config, calib, pow2)
        if key not in self._files:
            _, x_calib, _, _ = self.model(name)
            src = self.file_of_float(name)
            dst = self.root / f"{name}-{config}-{calib}{'-pow2' if pow2 else ''}.onnx"
            make.quantize(src, dst, x_calib[:calib], config)
            if pow2:
                make.pow2_scales(dst, dst)
            self._files[key] = dst
        return self._files[key]

    def qonnx_files(self) -> tuple[Path, Path]:
        """The digits ViT quantized by Brevitas (QuantConv2d / QuantLinear: int8 per-tensor weights,
        narrow range; int8 per-tensor inputs; calibrated on 256 training images) and exported as QONNX
        twice: with a dynamic batch (what hwvit reads) and with batch 1 (what qonnx executes)."""
        return self._brevitas()[:2]

    def qcdq_file(self) -> Path:
        """The same Brevitas model exported as QCDQ (``export_onnx_qcdq``: QuantizeLinear, Clip,
        DequantizeLinear at its GEMMs' inputs and weights), dynamic batch."""
        return self._brevitas()[2]

    def pt2e_file(self) -> Path:
        """The digits ViT quantized by PyTorch's PT2E flow (torchao's X86InductorQuantizer: int8
        per-channel weights, uint8 inputs of every linear and convolution, calibrated on 256 training
        images) and exported by torch.onnx's dynamo exporter, dynamic batch."""
        if "pt2e" not in self._files:
            self._files["pt2e"] = _pt2e_digits(self.root)
        return self._files["pt2e"]

    def modelopt_file(self, name: str = "digits") -> Path:
        """Model ``name`` quantized by TensorRT Model Optimizer's ONNX PTQ (int8, max calibration on its
        256 calibration images, the rest float32; tests/producers/modelopt_ptq.py in `make modelopt`'s
        venv): weights stored float and quantized in the graph, a fused qkv quantized after its split
        into q, k and v, the residual stream quantized into each LayerNorm and float along the skip,
        biases, the classifier and the scores float."""
        if ("modelopt", name) not in self._files:
            _, x_calib, _, _ = self.model(name)
            self._files[("modelopt", name)] = _modelopt(self.root, name, self.file_of_float(name), x_calib)
        return self._files[("modelopt", name)]

    def file_of_float(self, name: str) -> Path:
        """The float model ``name`` exported to ONNX (what each quantizer starts from)."""
        from hwvit.onnx import make

        src = self.root / f"{name}.onnx"
        if not src.exists():
            model, x_calib, _, _ = self.model(name)
            make.export(model, x_calib[:1], src)
        return src

    def _brevitas(self) -> tuple[Path, Path, Path]:
        if "brevitas" not in self._files:
            self._files["brevitas"] = _brevitas_digits(self.root)
        return self._files["brevitas"]

    def data(self, name: str, images: int | None = FAST_IMAGES):
        _, _, x, y = self.model(name)
        return x[:images], None if y is None else y[:images]

    def side(
        self, name: str, config: str, images: int | None = FAST_IMAGES, softmax: str = "round_each", on: bool = True,
        **kw,
    ):  # fmt: skip
        """(Imported, SideBySide) of a file on the first ``images`` evaluation images (None: all), with
        graph optimizations off and, if ``on``, on (a session per point: the part of the run that costs)."""
        from hwvit.onnx import build, runtime

        levels = runtime.LEVELS if on else ("off",)
        key = (name, config, images, softmax, levels, tuple(sorted(kw.items())))
        if key not in self._sides:
            imported = build.load(self.file(name, config, **kw), softmax=softmax)
            x, y = self.data(name, images)
            self._sides[key] = (imported, runtime.side_by_side(imported, x, y, levels=levels))
        return self._sides[key]


def _digits():
    from hwvit.float.digits import load_demo_model, load_digits_split

    x_train, _, x_test, y_test = load_digits_split()
    return load_demo_model().eval(), x_train.numpy(), x_test.numpy(), y_test.numpy()


def _second():
    import torch

    from hwvit.float.config import load_preset
    from hwvit.float.model import ViT

    torch.manual_seed(3)
    cfg = load_preset("digits").replace(
        name="second", image_size=12, patch_size=3, in_chans=3, dim=48, heads=3, head_dim=None, depth=2, mlp_dim=96
    )
    gen = torch.Generator().manual_seed(5)
    x = torch.rand((256 + 200, 3, 12, 12), generator=gen).numpy()
    return ViT(cfg).eval(), x[:256], x[256:], None


def _hf():
    import torch
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(4)
    cfg = ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, num_labels=5,
    )  # fmt: skip
    vit = ViTForImageClassification(cfg).eval()

    class Logits(torch.nn.Module):  # the exported graph's one output
        def __init__(self):
            super().__init__()
            self.vit = vit

        def forward(self, x):
            return self.vit(pixel_values=x).logits

    gen = torch.Generator().manual_seed(6)
    x = torch.rand((256 + 200, 3, 16, 16), generator=gen).numpy()
    return Logits().eval(), x[:256], x[256:], None


_MODELS = {"digits": _digits, "second": _second, "hf": _hf}


def _brevitas_digits(root: Path) -> tuple[Path, Path, Path]:
    import warnings

    import torch

    with warnings.catch_warnings():  # brevitas' notes on optional packages and the exporter's
        warnings.simplefilter("ignore")
        import brevitas.nn as qnn
        from brevitas.export import export_onnx_qcdq, export_qonnx
        from brevitas.graph.calibrate import calibration_mode
        from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat

        model, x_calib, _, _ = _digits()
        quant = {"weight_quant": Int8WeightPerTensorFloat, "input_quant": Int8ActPerTensorFloat}

        def swap(parent):
            for name, child in parent.named_children():
                if isinstance(child, torch.nn.Linear):
                    q = qnn.QuantLinear(child.in_features, child.out_features, bias=True, **quant)
                elif isinstance(child, torch.nn.Conv2d):
                    q = qnn.QuantConv2d(
                        child.in_channels,
                        child.out_channels,
                        child.kernel_size,
                        stride=child.stride,
                        bias=True,
                        **quant,
                    )
                else:
                    swap(child)
                    continue
                q.weight.data.copy_(child.weight.data)
                q.bias.data.copy_(child.bias.data)
                setattr(parent, name, q)

        swap(model)
        x = torch.as_tensor(x_calib)
        with torch.no_grad(), calibration_mode(model):
            for i in range(0, 256, 64):
                model(x[i : i + 64])
        model.eval()
        paths = root / "digits-qonnx.onnx", root / "digits-qonnx-b1.onnx", root / "digits-qcdq.onnx"
        names = {"opset_version": 17, "dynamo": False, "input_names": ["input"], "output_names": ["logits"]}
        dynamic = {"input": {0: "b"}, "logits": {0: "b"}}
        export_qonnx(model, input_t=x[:1], export_path=str(paths[0]), **names, dynamic_axes=dynamic)
        export_qonnx(model, input_t=x[:1], export_path=str(paths[1]), **names)
        export_onnx_qcdq(model, args=x[:1], export_path=str(paths[2]), **names, dynamic_axes=dynamic)
    return paths


def _pt2e_digits(root: Path) -> Path:
    import warnings

    import torch

    with warnings.catch_warnings():  # torch.export's and torchao's notes on APIs in flux
        warnings.simplefilter("ignore")
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
            X86InductorQuantizer,
            get_default_x86_inductor_quantization_config,
        )

        model, x_calib, _, _ = _digits()
        x = torch.as_tensor(x_calib)
        batch = torch.export.Dim("batch", min=1, max=4096)
        captured = torch.export.export(model.eval(), (x[:2],), dynamic_shapes=({0: batch},)).module()
        quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
        prepared = prepare_pt2e(captured, quantizer)
        with torch.no_grad():
            prepared(x[:256])
        path = root / "digits-pt2e.onnx"
        torch.onnx.export(convert_pt2e(prepared), (x[:2],), str(path), dynamo=True, input_names=["input"],
                          output_names=["logits"], dynamic_shapes=({0: batch},), verbose=False)  # fmt: skip
    return path


def _modelopt(root: Path, name: str, src: Path, x_calib) -> Path:
    import subprocess
    import sys

    import pytest

    repo = Path(__file__).resolve().parents[1]
    python = repo / ".venv-modelopt" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"TensorRT Model Optimizer's venv {python.parent.parent} is missing; run: make modelopt")
    calib, path = root / f"{name}-calib.npy", root / f"{name}-modelopt.onnx"
    np.save(calib, np.asarray(x_calib[:CALIB], np.float32))
    script = repo / "tests" / "producers" / "modelopt_ptq.py"
    done = subprocess.run([str(python), str(script), str(src), str(calib), str(path)], capture_output=True, text=True)
    if done.returncode or not path.exists():
        sys.stderr.write(done.stderr[-4000:])
        pytest.fail(f"{script.name} exited {done.returncode}")
    return path


GEMMS = ("embed", "attn.qkv", "attn.q", "attn.k", "attn.v", "attn.context", "attn.proj", "mlp.fc1", "mlp.fc2", "logits")


def gemm_rows(side, level: str = "on"):
    """The isolated rows of a side-by-side run (onnxruntime's graph optimizations ``level``) whose
    point is a GEMM with every parameter from the file."""
    return [d for d in side.isolated[level] if d.point.endswith(GEMMS) and d.origin == "file"]


def gemm_figures(side, level: str = "off") -> tuple[int, float, int]:
    """(GEMMs, integers that differ per million over all their outputs, largest difference in LSB)
    of every GEMM alone against onnxruntime at optimization ``level``."""
    rows = gemm_rows(side, level)
    differ, elements = sum(d.differ for d in rows), sum(d.elements for d in rows)
    return len(rows), 1e6 * differ / max(elements, 1), max((d.max_lsb for d in rows), default=0)
