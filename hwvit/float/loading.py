"""Reading checkpoints and loading them strictly: the steps every importer shares.

- ``read_checkpoint``: a state dict from a mapping, a file (``.safetensors``, or ``.pt/.pth/.bin``
  through ``torch.load(weights_only=True)``) or a model directory as ``save_pretrained`` writes it
  (``model.safetensors``, sharded ``model.safetensors.index.json``, ``pytorch_model.bin`` or its
  index, or else its one weights file; ``config.json`` and ``preprocessor_config.json`` beside them);
- ``detect_family``: which family's key names a state dict uses;
- ``rename``: source key names -> ours by a family's rules (``hwvit.float.keymaps``);
- ``check_and_load``: missing, unexpected, mis-shaped and non-finite weights reported together.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hwvit.float.keymaps import Rule
from hwvit.textfiles import first_line, read_yaml

# Suffixes read through torch.load(weights_only=True) (a pickle restricted to tensors and containers).
TORCH_SUFFIXES = (".pt", ".pth", ".bin")
# Weight files of a model directory, in the order transformers' from_pretrained looks for them.
DIR_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
# Names shown per kind of problem before "... and N more".
_SHOW = 8


@dataclass
class Checkpoint:
    """What a checkpoint source holds: weights, safetensors metadata and, for a directory, its JSON files."""

    state_dict: dict[str, torch.Tensor]
    meta: dict[str, str] = field(default_factory=dict)
    path: Path | None = None  # the file or directory read (None for an in-memory state dict)
    files: list[Path] = field(default_factory=list)  # the weight files read
    config: dict | None = None  # config.json of a model directory
    preprocessor: dict | None = None  # preprocessor_config.json of a model directory


def names(items: list[str]) -> str:
    """The first few names, then '... and N more'."""
    shown = ", ".join(items[:_SHOW])
    return shown + (f" ... and {len(items) - _SHOW} more" if len(items) > _SHOW else "")


# Reading -----------------------------------------------------------------------------------------
def read_checkpoint(source: Any) -> Checkpoint:
    """A Checkpoint from a path (file or model directory) or a mapping of names to tensors."""
    if isinstance(source, Mapping):
        return Checkpoint(as_state_dict(source, "state dict"))
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"checkpoint source must be a path or a state dict, got {type(source).__name__}")
    path = Path(source)
    if path.is_dir():
        return _read_directory(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint file")
    sd, meta = _read_file(path)
    return Checkpoint(as_state_dict(sd, str(path)), meta, path, [path])


def _read_file(path: Path) -> tuple[dict, dict[str, str]]:
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as fh:
                meta = dict(fh.metadata() or {})
                return {k: fh.get_tensor(k) for k in fh.keys()}, meta
        except Exception as exc:  # noqa: BLE001 - any parse failure is the same user error
            raise ValueError(
                f"{path}: not a readable .safetensors checkpoint ({first_line(exc, with_type=True)})"
            ) from None
    if suffix in TORCH_SUFFIXES:
        try:
            return torch.load(str(path), map_location="cpu", weights_only=True), {}
        except Exception as exc:  # noqa: BLE001
            raise ValueError(
                f"{path}: not a PyTorch checkpoint loadable with weights_only=True ({first_line(exc, with_type=True)})"
            ) from None
    raise ValueError(
        f"{path}: unknown checkpoint type {suffix or '(no suffix)'!r}; use .safetensors or {', '.join(TORCH_SUFFIXES)}"
    )


def read_json(path: Path) -> dict:
    """A JSON object from ``path`` (ValueError naming the file otherwise)."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({first_line(exc, with_type=True)})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _read_directory(path: Path) -> Checkpoint:
    weights = next((path / n for n in DIR_WEIGHTS if (path / n).is_file()), None)
    if weights is None:  # any other single weights file (a timm or lucidrains model saved by hand)
        suffixes = (".safetensors", *TORCH_SUFFIXES)
        others = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in suffixes)
        if len(others) != 1:
            found = f"; it holds {len(others)} weight files" if others else ""
            raise ValueError(f"{path}: directory holds no {', '.join(DIR_WEIGHTS[:-1])} or {DIR_WEIGHTS[-1]}{found}")
        weights = others[0]
    if weights.name.endswith(".index.json"):
        files = _shards(weights)
    else:
        files = [weights]
    sd: dict = {}
    meta: dict[str, str] = {}
    for f in files:
        part, part_meta = _read_file(f)
        if not isinstance(part, Mapping):
            raise ValueError(f"{f}: expected a state dict, got {type(part).__name__}")
        sd.update(part)
        meta.update(part_meta)
    config = read_json(path / "config.json") if (path / "config.json").is_file() else None
    pre = path / "preprocessor_config.json"
    preprocessor = read_json(pre) if pre.is_file() else None
    return Checkpoint(as_state_dict(sd, str(path)), meta, path, files, config, preprocessor)


def _shards(index: Path) -> list[Path]:
    """The shard files an index names, each checked to lie inside the index's directory."""
    data = read_json(index)
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index}: no weight_map")
    root = index.parent.resolve()
    files = []
    for name in sorted(set(map(str, weight_map.values()))):
        f = (index.parent / name).resolve()
        if root not in f.parents:
            raise ValueError(f"{index}: shard {name!r} lies outside the model directory")
        if not f.is_file():
            raise ValueError(f"{index}: shard {name} is missing")
        files.append(f)
    return files


def as_state_dict(obj: Any, where: str) -> dict[str, torch.Tensor]:
    """A flat {name: tensor} from what a training script saved (unwrapping the usual containers)."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected a state dict (mapping of names to tensors), got {type(obj).__name__}")
    # Training scripts often save {"model": sd, "optimizer": ...} or {"state_dict": sd, "epoch": ...}.
    if not all(isinstance(v, torch.Tensor) for v in obj.values()):
        for key in ("state_dict", "model", "model_state_dict", "module"):
            if isinstance(obj.get(key), Mapping):
                obj = obj[key]
                break
    bad = [str(k) for k, v in obj.items() if not isinstance(v, torch.Tensor) or not isinstance(k, str)]
    if bad:
        raise ValueError(f"{where}: entries that are not named tensors: {names(bad)}")
    if not obj:
        raise ValueError(f"{where}: the state dict is empty")
    if all(k.startswith("module.") for k in obj):  # saved from DataParallel
        obj = {k[len("module.") :]: v for k, v in obj.items()}
    return dict(obj)


# Which family ------------------------------------------------------------------------------------
# One regular expression per family that only its key names match (checked with re.search).
SIGNATURES = {
    "hf": r"(^|\.)(embeddings\.patch_embeddings\.projection|encoder\.layer\.\d+\.attention\.attention|"
    r"layers\.\d+\.attention\.q_proj)\.",
    "timm": r"^blocks\.\d+\.(attn\.qkv|norm1)\.",
    "simple_vit": r"^(to_patch_embedding\.|transformer\.layers\.\d+\.0\.to_qkv\.)",
    "ecg1d": r"^encoder\.\d+\.0\.block\.",
    "hwvit": r"^layers\.\d+\.attn\.(qkv|q|proj)\.",
    "sablock": r"^out_proj\.weight$",
    "cookbook_attention": r"^query\.weight$",
}


def detect_family(keys) -> str | None:
    """The family whose key names ``keys`` use, or None when none matches."""
    for family, pattern in SIGNATURES.items():
        rx = re.compile(pattern)
        if any(rx.search(k) for k in keys):
            return family
    return None


# Renaming and checking ---------------------------------------------------------------------------
def rename(sd: dict[str, torch.Tensor], rules: list[Rule], ignore: tuple[str, ...] = ()):
    """(weights under our names, our name -> source name, source keys no rule knows)."""
    out: dict[str, torch.Tensor] = {}
    origin: dict[str, str] = {}
    unexpected: list[str] = []
    for key, tensor in sd.items():
        if any(key.startswith(prefix) for prefix in ignore):
            continue
        for rule in rules:
            dst = rule.forward(key)
            if dst is not None:
                out[dst] = rule.transform(tensor) if rule.transform else tensor
                origin[dst] = key
                break
        else:
            unexpected.append(key)
    return out, origin, unexpected


def _source_name(dst: str, rules: list[Rule]) -> str:
    for rule in rules:
        src = rule.inverse(dst)
        if src is not None:
            return src
    return dst


def check_and_load(
    module: torch.nn.Module,
    weights: dict[str, torch.Tensor],
    origin: dict[str, str],
    unexpected: list[str],
    rules: list[Rule],
    what: str,
) -> None:
    """Load ``weights`` into ``module`` strictly; every problem, named as in the source, in one ValueError."""
    expected = module.state_dict()
    missing = [_source_name(k, rules) for k in expected if k not in weights]
    unexpected = unexpected + [origin.get(k, k) for k in weights if k not in expected]
    shaped = [
        f"{origin.get(k, k)} {tuple(weights[k].shape)} (expected {tuple(v.shape)})"
        for k, v in expected.items()
        if k in weights and weights[k].shape != v.shape
    ]
    bad_dtype = [origin.get(k, k) for k in expected if k in weights and not weights[k].is_floating_point()]
    problems = []
    for label, items in (
        ("missing keys", missing),
        ("unexpected keys", unexpected),
        ("mis-shaped keys", shaped),
        ("non-float tensors", bad_dtype),
    ):
        if items:
            problems.append(f"{label}: {names(items)}")
    if not problems:
        nonfinite = [origin.get(k, k) for k in expected if not torch.isfinite(weights[k]).all()]
        if nonfinite:
            problems.append(f"non-finite weights (NaN/Inf): {names(nonfinite)}")
    if problems:
        raise ValueError(f"cannot load {what}: {'; '.join(problems)}")
    module.load_state_dict({k: weights[k].to(torch.float32) for k in expected}, strict=True)


__all__ = [
    "DIR_WEIGHTS",
    "SIGNATURES",
    "TORCH_SUFFIXES",
    "Checkpoint",
    "as_state_dict",
    "check_and_load",
    "detect_family",
    "names",
    "read_checkpoint",
    "read_json",
    "rename",
]


# Config hints ------------------------------------------------------------------------------------
def hint_fields(config: Any) -> dict[str, Any]:
    """The ViTConfig fields a ``config=`` argument fixes: all of them for a ViTConfig or preset, some
    for a partial mapping or file. Accepted: None, a ViTConfig, a transformers ViTConfig, a mapping
    (hwvit, HF, timm or lucidrains names), a preset name, a YAML/JSON file or a model directory
    holding config.json."""
    from hwvit.float import vocab
    from hwvit.float.config import ViTConfig, list_presets, load_preset

    if config is None:
        return {}
    if isinstance(config, ViTConfig):
        return config.to_dict()
    hf = vocab.hf_object_dict(config)
    if hf is not None:
        return vocab.to_fields(hf, f"transformers {type(config).__name__}")
    if isinstance(config, Mapping):
        return vocab.to_fields(dict(config))
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        if path.is_dir() and (path / "config.json").is_file():
            path = path / "config.json"
        if path.is_file():
            return vocab.to_fields(read_config_file(path), str(path))
        if str(config) in list_presets():
            return load_preset(str(config)).to_dict()
        raise ValueError(f"config {str(config)!r} is neither a file nor a preset; presets: {', '.join(list_presets())}")
    raise ValueError(f"config must be a ViTConfig, preset name, YAML/JSON path or dict, got {type(config).__name__}")


def read_config_file(path: Path) -> dict:
    """A mapping from a .json file (json) or any other file (yaml.safe_load; JSON is YAML too)."""
    if path.suffix.lower() == ".json":
        return read_json(path)
    data = read_yaml(path, what="config")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of config fields, got {type(data).__name__}")
    return data


__all__ += ["hint_fields", "read_config_file"]
