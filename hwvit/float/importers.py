"""Checkpoints -> float ViT: read a state dict, rename its keys, infer the config, load strictly.

Every family is a list of key-renaming rules (``hwvit.float.keymaps``) from the original's names to
ours (``hwvit.float.model.ViT``). Loading is the same for all of them:

1. read the source (a state dict, ``.safetensors``, or ``.pt/.pth/.bin`` through
   ``torch.load(weights_only=True)``);
2. rename every key; a key no rule knows is *unexpected*;
3. infer the config from the shapes (dim, depth, mlp width, patch, tokens, biases, head...); what
   the weights cannot say (LayerNorm eps, attention scaling, pooling) comes from the family's
   defaults, and ``config=`` (a ViTConfig, a preset name, a YAML path or a dict of fields) overrides
   the defaults and is checked against the shapes;
4. build ``ViT(cfg)`` and compare: missing, unexpected and mis-shaped keys (named as in the source)
   and non-finite weights are reported together in one ValueError.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import MISSING
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any

import torch
import yaml

from hwvit.float import keymaps
from hwvit.float.config import ViTConfig, list_presets, load_config, load_preset
from hwvit.float.keymaps import ATTENTION_FAMILIES, MODEL_FAMILIES, Rule

FAMILIES = MODEL_FAMILIES + ATTENTION_FAMILIES

# Suffixes read through torch.load(weights_only=True) (a pickle restricted to tensors and containers).
TORCH_SUFFIXES = (".pt", ".pth", ".bin")
# The one metadata entry save_float writes in a .safetensors file: a YAML mapping with the model
# config under "config" plus the caller's notes. One entry, because safetensors writes several in
# an arbitrary order, and the same weights should give the same bytes.
METADATA_KEY = "hwvit"
# Names shown per kind of problem before "... and N more".
_SHOW = 8


# Reading -----------------------------------------------------------------------------------------
def read_checkpoint(source: Any) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(state dict, safetensors metadata) from a path, a directory holding one, or a mapping."""
    if isinstance(source, Mapping):
        return _as_state_dict(source, "state dict"), {}
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"checkpoint source must be a path or a state dict, got {type(source).__name__}")
    path = Path(source)
    if path.is_dir():  # a save_pretrained() directory
        for name in ("model.safetensors", "pytorch_model.bin"):
            if (path / name).is_file():
                path = path / name
                break
        else:
            raise ValueError(f"{path}: directory holds no model.safetensors or pytorch_model.bin")
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint file")
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as fh:
                meta = dict(fh.metadata() or {})
                sd = {k: fh.get_tensor(k) for k in fh.keys()}
        except Exception as exc:  # noqa: BLE001 - any parse failure is the same user error
            raise ValueError(f"{path}: not a readable .safetensors checkpoint ({_first_line(exc)})") from None
        return _as_state_dict(sd, str(path)), meta
    if suffix in TORCH_SUFFIXES:
        try:
            obj = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"{path}: not a PyTorch checkpoint loadable with weights_only=True "
                             f"({_first_line(exc)})") from None
        return _as_state_dict(obj, str(path)), {}
    raise ValueError(f"{path}: unknown checkpoint type {suffix or '(no suffix)'!r}; "
                     f"use .safetensors or {', '.join(TORCH_SUFFIXES)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _as_state_dict(obj: Any, where: str) -> dict[str, torch.Tensor]:
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
        raise ValueError(f"{where}: entries that are not named tensors: {_names(bad)}")
    if not obj:
        raise ValueError(f"{where}: the state dict is empty")
    if all(k.startswith("module.") for k in obj):  # saved from DataParallel
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return dict(obj)


def _names(items: list[str]) -> str:
    shown = ", ".join(items[:_SHOW])
    return shown + (f" ... and {len(items) - _SHOW} more" if len(items) > _SHOW else "")


# Config hints ------------------------------------------------------------------------------------
def _hint_fields(config: Any) -> dict[str, Any]:
    """The fields a ``config=`` argument fixes: all of them for a ViTConfig/preset/file, some for a dict."""
    if config is None:
        return {}
    if isinstance(config, ViTConfig):
        return config.to_dict()
    if isinstance(config, Mapping):
        return dict(config)
    if isinstance(config, (str, os.PathLike)):
        text = str(config)
        if Path(text).is_file():
            return load_config(text).to_dict()
        if text in list_presets():
            return load_preset(text).to_dict()
        raise ValueError(f"config {text!r} is neither a file nor a preset; presets: {', '.join(list_presets())}")
    raise ValueError(f"config must be a ViTConfig, preset name, YAML path or dict, got {type(config).__name__}")


def _resolve_config(family: str, weights: dict[str, torch.Tensor], hint: dict[str, Any]) -> ViTConfig:
    spec = keymaps.SPECS[family]
    hard, soft, inner = keymaps.infer_fields(weights, spec.embed)
    hard.update(spec.extra(weights))
    fields = dict(spec.defaults)
    fields.update(hint)
    conflicts = [f"{k}: checkpoint {v!r}, config {hint[k]!r}" for k, v in hard.items() if k in hint and hint[k] != v]
    if conflicts:
        raise ValueError(f"{family} checkpoint does not match the given config: {'; '.join(conflicts)}")
    fields.update(hard)
    for key, value in soft.items():
        fields.setdefault(key, value)
    if "heads" not in fields and "dim" in fields:
        heads = spec.heads_for(fields["dim"], inner)
        if heads is None:
            raise ValueError(f"{family} checkpoint: the number of heads cannot be read from the weights "
                             f"(dim {fields['dim']}); pass config={{'heads': H}}, a preset or a config file")
        fields["heads"] = heads
    heads = fields.get("heads")
    if inner is not None and heads is not None:
        if type(heads) is not int or heads <= 0 or inner % heads:
            raise ValueError(f"{family} checkpoint: q/k/v width {inner} is not divisible by heads={heads!r}")
        head_dim = inner // heads
        if hint.get("head_dim") is not None and hint["head_dim"] != head_dim:
            raise ValueError(f"{family} checkpoint does not match the given config: head_dim: checkpoint "
                             f"{head_dim}, config {hint['head_dim']!r}")
        fields["head_dim"] = head_dim
    fields.setdefault("name", hint.get("name", f"{family}-import"))
    needed = [f.name for f in dc_fields(ViTConfig) if f.default is MISSING and f.name not in fields]
    if needed:
        raise ValueError(f"{family} checkpoint: cannot read {', '.join(needed)} from the weights; "
                         f"pass config= (a preset, a YAML file or a dict with these fields)")
    return ViTConfig.from_dict(fields, source=f"{family} checkpoint")


# Renaming and checking ---------------------------------------------------------------------------
def _rename(sd: dict[str, torch.Tensor], rules: list[Rule], ignore: tuple[str, ...]):
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


def _check_and_load(module: torch.nn.Module, weights: dict[str, torch.Tensor], origin: dict[str, str],
                    unexpected: list[str], rules: list[Rule], what: str) -> None:
    expected = module.state_dict()
    missing = [_source_name(k, rules) for k in expected if k not in weights]
    unexpected = unexpected + [origin.get(k, k) for k in weights if k not in expected]
    shaped = [f"{origin.get(k, k)} {tuple(weights[k].shape)} (expected {tuple(v.shape)})"
              for k, v in expected.items() if k in weights and weights[k].shape != v.shape]
    bad_dtype = [origin.get(k, k) for k in expected if k in weights and not weights[k].is_floating_point()]
    problems = []
    for label, items in (("missing keys", missing), ("unexpected keys", unexpected),
                         ("mis-shaped keys", shaped), ("non-float tensors", bad_dtype)):
        if items:
            problems.append(f"{label}: {_names(items)}")
    if not problems:
        nonfinite = [origin.get(k, k) for k in expected if not torch.isfinite(weights[k]).all()]
        if nonfinite:
            problems.append(f"non-finite weights (NaN/Inf): {_names(nonfinite)}")
    if problems:
        raise ValueError(f"cannot load {what}: {'; '.join(problems)}")
    module.load_state_dict({k: weights[k].to(torch.float32) for k in expected}, strict=True)


# Public API --------------------------------------------------------------------------------------
def load_float(source: Any, family: str = "hf", config: Any = None, heads: int | None = None) -> torch.nn.Module:
    """The float model of a checkpoint, in eval mode.

    ``family``: hf, timm, simple_vit, ecg1d, hwvit (a ViT); sablock, cookbook_attention (one
    attention block). ``config``: ViTConfig, preset name, YAML path or dict of fields fixing what
    the weights cannot say (and checked against what they do say). ``heads``: shortcut for
    ``config={"heads": heads}``.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")
    sd, meta = read_checkpoint(source)
    if family in ATTENTION_FAMILIES:
        from hwvit.float.attention_blocks import load_attention

        return load_attention(sd, family, config, heads)
    hint = _hint_fields(config)
    from hwvit.float.model import ViT

    if family == "hwvit":
        if config is None and METADATA_KEY in meta:
            try:
                stored = yaml.safe_load(meta[METADATA_KEY])
            except yaml.YAMLError:
                raise ValueError("hwvit checkpoint: its metadata is not valid YAML") from None
            stored = stored.get("config") if isinstance(stored, dict) else None
            hint = dict(stored) if isinstance(stored, dict) else {}
        if not hint:
            raise ValueError("hwvit checkpoint without a config: pass config= (preset, YAML path or ViTConfig)")
        if heads is not None:
            hint["heads"], hint["head_dim"] = heads, None
        cfg = ViTConfig.from_dict(hint, source="hwvit checkpoint config")
        model = ViT(cfg)
        rules = [Rule(k, k) for k in model.state_dict()]
        weights, origin, unexpected = _rename(sd, rules, ())
        _check_and_load(model, weights, origin, unexpected, rules, "hwvit checkpoint")
        return model.eval()
    if heads is not None:
        hint["heads"] = heads
    spec = keymaps.SPECS[family]
    rules = spec.rules(set(sd))
    weights, origin, unexpected = _rename(sd, rules, spec.ignore)
    spec.validate(set(sd))
    cfg = _resolve_config(family, weights, hint)
    model = ViT(cfg)
    _check_and_load(model, weights, origin, unexpected, rules, f"{family} checkpoint")
    return model.eval()


def save_float(model: torch.nn.Module, path: str | Path, notes: dict[str, Any] | None = None) -> Path:
    """Write a ViT's state dict (our key names) and its config to ``path`` (.safetensors), atomically.

    The same weights, config and notes give the same bytes.
    """
    from safetensors.torch import save_file

    path = Path(path)
    meta = {METADATA_KEY: yaml.safe_dump({"config": model.cfg.to_dict(), **(notes or {})}, sort_keys=False)}
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=meta)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; checkpoints are shared files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


__all__ = ["FAMILIES", "load_float", "read_checkpoint", "save_float"]
