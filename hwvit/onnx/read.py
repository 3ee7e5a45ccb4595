"""Loading an ONNX file without trusting it: its protobuf, its external data, its operators.

- the file is parsed with ``load_external_data=False``; every external-data location is checked to
  be a relative path that stays inside the model's folder (and exists) before any byte is read;
- only the standard domain is accepted: a node of any other domain (a custom operator, whose code
  a runtime would have to load) is refused, naming the node;
- ``onnx.checker`` validates the graph.

Every fault is a ValueError of one line naming the file.
"""

from __future__ import annotations

from pathlib import Path

from hwvit.textfiles import first_line

STANDARD_DOMAINS = ("", "ai.onnx")


def _onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover - a dependency of hwvit
        raise ValueError("reading ONNX files needs the onnx package: pip install onnx onnxruntime") from None
    return onnx


def external_locations(model) -> list[str]:
    """The external-data locations the model's tensors name (initializers and Constant nodes)."""
    onnx = _onnx()
    tensors = list(model.graph.initializer)
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                tensors.append(attr.t)
    found = []
    for t in tensors:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            entries = {e.key: e.value for e in t.external_data}
            found.append(entries.get("location", ""))
    return found


def check_external(model, path: Path) -> None:
    """ValueError unless every external-data location is a file inside ``path``'s folder."""
    root = path.parent.resolve()
    for location in external_locations(model):
        target = (root / location).resolve()
        if not location or Path(location).is_absolute() or root not in target.parents:
            raise ValueError(f"{path}: external data {location!r} lies outside the model's folder")
        if not target.is_file():
            raise ValueError(f"{path}: external data file {location!r} is missing")


def check_domains(model, path: Path) -> None:
    """ValueError naming the first node of a domain other than the standard one (but QONNX's
    ``Quant``, which hwvit reads itself: hwvit.onnx.qonnx; no operator code is loaded)."""
    from hwvit.onnx.qonnx import DOMAINS, QUANT_OPS

    for node in model.graph.node:
        if node.domain in DOMAINS and node.op_type in QUANT_OPS:
            continue
        if node.domain not in STANDARD_DOMAINS:
            raise ValueError(
                f"{path}: node {node.name or node.op_type!r} ({node.op_type}) is of the custom domain "
                f"{node.domain!r}; hwvit reads standard ONNX operators only"
            )


def load(path) -> object:
    """The checked ``onnx.ModelProto`` of ``path``, its external data (if any) loaded."""
    onnx = _onnx()
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such ONNX file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the same user error
        raise ValueError(f"{path}: not a readable ONNX file ({first_line(exc, with_type=True)})") from None
    if not model.graph.node:
        raise ValueError(f"{path}: not a readable ONNX file (its graph has no nodes)")
    check_domains(model, path)
    check_external(model, path)
    if external_locations(model):
        from onnx.external_data_helper import load_external_data_for_model

        try:
            load_external_data_for_model(model, str(path.parent))
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"{path}: cannot read its external data ({first_line(exc, with_type=True)})") from None
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"{path}: not a valid ONNX model ({first_line(exc)})") from None
    return model


__all__ = ["STANDARD_DOMAINS", "check_domains", "check_external", "external_locations", "load"]
