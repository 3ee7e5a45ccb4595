"""TensorRT Model Optimizer's ONNX PTQ of a float ONNX file, run in the venv `make modelopt` makes
(.venv-modelopt: nvidia-modelopt pins onnx and onnxruntime versions other than hwvit's).

    .venv-modelopt/bin/python tests/producers/modelopt_ptq.py FLOAT.onnx CALIB.npy OUT.onnx

int8 (its default mode), max calibration on the images in CALIB.npy (float32, the model's input
shape), the parts it leaves unquantized in float32 (``high_precision_dtype="fp32"``: its default
converts them to float16, for TensorRT), calibration on onnxruntime's CPU provider. The float file
is copied first: the quantizer rewrites its input in place.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np


def main(src: str, calib: str, out: str) -> None:
    import modelopt.onnx.quantization as mq

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "float.onnx"
        shutil.copyfile(src, model)
        mq.quantize(
            str(model), quantize_mode="int8", calibration_data={"input": np.load(calib)}, calibration_method="max",
            calibration_eps=["cpu"], high_precision_dtype="fp32", output_path=str(Path(tmp) / "q.onnx"),
            log_level="ERROR",
        )  # fmt: skip
        shutil.move(str(Path(tmp) / "q.onnx"), out)


if __name__ == "__main__":
    main(*sys.argv[1:])
