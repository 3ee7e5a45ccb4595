"""Checkpoints -> float ViT: read a state dict, rename its keys, infer the config, load strictly.

Every family is a list of key-renaming rules (``hwvit.float.keymaps``) from the original's names to
ours (``hwvit.float.model.ViT``). Loading is the same for all of them (``hwvit.float.loading``):

1. read the source: a state dict, a ``.safetensors`` or ``.pt/.pth/.bin`` file, or a model
   directory (``save_pretrained``: single or sharded weights, ``config.json``);
2. find the family from the key names when none is given (a given family the keys do not
   match is an error naming the family they do match);
3. rename every key; a key no rule knows is *unexpected*;
4. infer the config from the shapes (dim, depth, mlp width, patch, tokens, biases, head...); what
   the weights cannot say (LayerNorm eps, attention scaling, pooling, heads) comes from the
   directory's config.json, from ``config=`` (any vocabulary, ``hwvit.float.vocab``; may be
   partial) and from the family's defaults; a field that contradicts the shapes is an error
   naming both values;
5. build ``ViT(cfg)`` and compare: missing, unexpected and mis-shaped keys (named as in the source)
   and non-finite weights are reported together in one ValueError.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any

import torch
import yaml

from hwvit.atomic import atomic_file
from hwvit.float import keymaps, vocab
from hwvit.float.config import ViTConfig
from hwvit.float.keymaps import ATTENTION_FAMILIES, MODEL_FAMILIES, Rule
from hwvit.float.loading import Checkpoint, check_and_load, detect_family, hint_fields, read_checkpoint, rename
from hwvit.textfiles import parse_yaml

FAMILIES = MODEL_FAMILIES + ATTENTION_FAMILIES

# The one metadata entry save_float writes in a .safetensors file: a YAML mapping with the model
# config under "config" plus the caller's notes. One entry, because safetensors writes several in
# an arbitrary order, and the same weights should give the same bytes.
METADATA_KEY = "hwvit"


def _resolve_config(family: str, weights: dict[str, torch.Tensor], hint: dict[str, Any]) -> ViTConfig:
    spec = keymaps.SPECS[family]
    hard, soft, inner = keymaps.infer_fields(weights, spec.embed)
    hard.update(spec.extra(weights))
    fields = dict(spec.defaults)
    hint = dict(hint)
    mlp_ratio = hint.pop("mlp_ratio", None)
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
            raise ValueError(
                f"{family} checkpoint: the number of heads cannot be read from the weights "
                f"(dim {fields['dim']}); pass heads=H (CLI: --heads H), a preset or a config"
            )
        fields["heads"] = heads
    heads = fields.get("heads")
    if inner is not None and heads is not None:
        if type(heads) is not int or heads <= 0 or inner % heads:
            raise ValueError(f"{family} checkpoint: q/k/v width {inner} is not divisible by heads={heads!r}")
        head_dim = inner // heads
        if hint.get("head_dim") is not None and hint["head_dim"] != head_dim:
            raise ValueError(
                f"{family} checkpoint does not match the given config: head_dim: checkpoint "
                f"{head_dim}, config {hint['head_dim']!r}"
            )
        fields["head_dim"] = head_dim
    if mlp_ratio is not None and "dim" in fields and "mlp_dim" in fields:
        if int(fields["dim"] * mlp_ratio) != fields["mlp_dim"]:
            raise ValueError(
                f"{family} checkpoint does not match the given config: mlp_dim: checkpoint "
                f"{fields['mlp_dim']}, config {int(fields['dim'] * mlp_ratio)} (mlp_ratio {mlp_ratio:g})"
            )
    fields.setdefault("name", hint.get("name", f"{family}-import"))
    needed = [f.name for f in dc_fields(ViTConfig) if f.default is MISSING and f.name not in fields]
    if needed:
        raise ValueError(
            f"{family} checkpoint: cannot read {', '.join(needed)} from the weights; "
            f"pass config= (a preset, a YAML/JSON file or a dict with these fields)"
        )
    return ViTConfig.from_dict(fields, source=f"{family} checkpoint")


# Public API --------------------------------------------------------------------------------------
@dataclass
class Loaded:
    """A loaded float model and what came with it."""

    model: torch.nn.Module  # eval mode
    family: str
    checkpoint: Checkpoint
    class_names: list[str] | None  # from a HF config's id2label, when it names the classes


def check_family(keys, family: str | None) -> str:
    """The family of a state dict: ``family`` checked against the key names, or inferred from them."""
    found = detect_family(keys)
    if family is None:
        if found is None:
            raise ValueError(
                f"cannot tell the checkpoint family from its keys ({', '.join(sorted(keys)[:4])}, ...); "
                f"give the family ({', '.join(FAMILIES)})"
            )
        return found
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")
    if found is not None and found != family:
        raise ValueError(f"the checkpoint keys do not match family {family!r}; they match {found!r}")
    return family


def load_checkpoint(source: Any, family: str | None = None, config: Any = None, heads: int | None = None) -> Loaded:
    """``load_float`` with what the checkpoint carried besides weights (family, files, class names)."""
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")
    ckpt = read_checkpoint(source)
    family = check_family(ckpt.state_dict, family)
    names = vocab.class_names(ckpt.config)
    if names is None:
        names = vocab.class_names(vocab.hf_object_dict(config) or (config if isinstance(config, dict) else None))
    if family in ATTENTION_FAMILIES:
        from hwvit.float.attention_blocks import load_attention

        model = load_attention(ckpt.state_dict, family, config, heads)
        return Loaded(model, family, ckpt, None)
    hint = vocab.to_fields(ckpt.config, str(ckpt.path / "config.json")) if ckpt.config else {}
    hint.update(hint_fields(config))
    if heads is not None:
        hint["heads"] = heads
    model = _load_vit(ckpt, family, hint, heads)
    if names is not None and model.cfg.num_classes and len(names) != model.cfg.num_classes:
        names = None  # id2label that does not fit the head names nothing
    return Loaded(model, family, ckpt, names)


def _load_vit(ckpt: Checkpoint, family: str, hint: dict[str, Any], heads: int | None) -> torch.nn.Module:
    from hwvit.float.model import ViT

    sd = ckpt.state_dict
    if family == "hwvit":
        stored: Any = {}
        if METADATA_KEY in ckpt.meta:
            stored = parse_yaml(ckpt.meta[METADATA_KEY], "hwvit checkpoint metadata")
            stored = stored.get("config") if isinstance(stored, dict) else None
        fields = {**(stored if isinstance(stored, dict) else {}), **hint}
        if not fields:
            raise ValueError("hwvit checkpoint without a config: pass config= (preset, YAML path or ViTConfig)")
        if heads is not None and "head_dim" not in hint:
            fields["head_dim"] = None
        cfg = ViTConfig.from_dict(fields, source="hwvit checkpoint config")
        model = ViT(cfg)
        rules = [Rule(k, k) for k in model.state_dict()]
        weights, origin, unexpected = rename(sd, rules)
        check_and_load(model, weights, origin, unexpected, rules, "hwvit checkpoint")
        return model.eval()
    spec = keymaps.SPECS[family]
    rules = spec.rules(set(sd))
    weights, origin, unexpected = rename(sd, rules, spec.ignore)
    spec.validate(set(sd))
    cfg = _resolve_config(family, weights, hint)
    model = ViT(cfg)
    check_and_load(model, weights, origin, unexpected, rules, f"{family} checkpoint")
    return model.eval()


def load_float(source: Any, family: str | None = None, config: Any = None, heads: int | None = None) -> torch.nn.Module:
    """The float model of a checkpoint, in eval mode.

    ``source``: a state dict, a checkpoint file or a model directory. ``family``: hf, timm,
    simple_vit, ecg1d, hwvit (a ViT); sablock, cookbook_attention (one attention block); None:
    inferred from the key names. ``config``: what the weights cannot say, checked against what
    they do say: a ViTConfig, a transformers ViTConfig, a preset name, a YAML/JSON file or a
    dict, in hwvit's, HuggingFace's, timm's or lucidrains' names, whole or partial. ``heads``:
    shortcut for ``config={"heads": heads}``.
    """
    return load_checkpoint(source, family, config, heads).model


def save_float(model: torch.nn.Module, path: str | Path, notes: dict[str, Any] | None = None) -> Path:
    """Write a ViT's state dict (our key names) and its config to ``path`` (.safetensors), atomically.

    The same weights, config and notes give the same bytes.
    """
    from safetensors.torch import save_file

    path = Path(path)
    meta = {METADATA_KEY: yaml.safe_dump({"config": model.cfg.to_dict(), **(notes or {})}, sort_keys=False)}
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as tmp:
        save_file(tensors, tmp, metadata=meta)
    return path


__all__ = ["FAMILIES", "Loaded", "check_family", "load_checkpoint", "load_float", "read_checkpoint", "save_float"]
