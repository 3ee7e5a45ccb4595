"""Config vocabularies: HuggingFace, timm and lucidrains names for the fields of hwvit's ViTConfig.

A user holds a config in the vocabulary of the library that trained the model; ``to_fields``
translates any of them into (some of) ViTConfig's fields:

- HuggingFace ``config.json`` / ``transformers.ViTConfig``: hidden_size, num_hidden_layers,
  num_attention_heads, intermediate_size, image_size, patch_size, num_channels, layer_norm_eps,
  qkv_bias (its many generic fields are ignored; ``id2label`` gives class names);
- timm ``VisionTransformer`` kwargs: embed_dim, depth, num_heads, mlp_ratio, img_size,
  patch_size, in_chans, num_classes, class_token, global_pool, qkv_bias, fc_norm (dropouts
  ignored: they do nothing in eval mode);
- lucidrains ViT / SimpleViT kwargs: image_size, patch_size, dim, depth, heads, mlp_dim,
  channels, dim_head, num_classes, pool (dropouts ignored);
- hwvit's own field names;
- timm's hub ``config.json`` (``architecture``, ``num_classes``, ``global_pool``, ``model_args``
  holding the kwargs above; its ``pretrained_cfg`` gives the preprocessing, hwvit.dataset).

A dict may hold only some fields: the rest come from the weights (``hwvit.float.importers``).
``mlp_ratio`` is kept as is when ``dim`` is not given; the importer checks it against the weights.
"""

from __future__ import annotations

from dataclasses import fields as dc_fields
from typing import Any

from hwvit.float.config import ViTConfig

OURS = {f.name for f in dc_fields(ViTConfig)}

HF_NAMES = {
    "hidden_size": "dim",
    "num_hidden_layers": "depth",
    "num_attention_heads": "heads",
    "intermediate_size": "mlp_dim",
    "image_size": "image_size",
    "patch_size": "patch_size",
    "num_channels": "in_chans",
    "layer_norm_eps": "norm_eps",
    "qkv_bias": "qkv_bias",
}
TIMM_NAMES = {
    "embed_dim": "dim",
    "num_heads": "heads",
    "img_size": "image_size",
    "in_chans": "in_chans",
    "class_token": "cls_token",
}
LUCIDRAINS_NAMES = {"channels": "in_chans", "dim_head": "head_dim"}
# Training-only or default-valued kwargs that change nothing in an eval-mode forward pass.
IGNORED = {
    "drop_rate",
    "pos_drop_rate",
    "patch_drop_rate",
    "proj_drop_rate",
    "attn_drop_rate",
    "drop_path_rate",
    "dropout",
    "emb_dropout",
    "weight_init",
    "dynamic_img_size",
    "dynamic_img_pad",
    "model_name",
}
# timm kwargs hwvit's model cannot follow when set: name -> the value that is fine.
TIMM_UNSUPPORTED = {"pre_norm": False, "no_embed_class": False, "init_values": None, "reg_tokens": 0, "qk_norm": False}


def is_hf(data: dict) -> bool:
    return "model_type" in data or "hidden_size" in data or "num_attention_heads" in data


def class_names(data: Any) -> list[str] | None:
    """Class names from a HF config's id2label, when they are not transformers' LABEL_i placeholders."""
    if not isinstance(data, dict) or not isinstance(data.get("id2label"), dict):
        return None
    try:
        table = {int(k): str(v) for k, v in data["id2label"].items()}
    except (TypeError, ValueError):
        return None
    if sorted(table) != list(range(len(table))) or all(v == f"LABEL_{k}" for k, v in table.items()):
        return None
    return [table[i] for i in range(len(table))]


def _square(value: Any, name: str, source: str) -> Any:
    if isinstance(value, (list, tuple)):
        if len(value) != 2 or value[0] != value[1]:
            raise ValueError(f"{source}: {name}={list(value)} is not square; hwvit handles square images and patches")
        return value[0]
    return value


def to_fields(data: dict, source: str = "config") -> dict[str, Any]:
    """ViTConfig fields (maybe a partial set) from a mapping in any known vocabulary."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a mapping of config fields, got {type(data).__name__}")
    if is_hf(data):
        return _from_hf(data, source)
    if "architecture" in data:  # timm's config.json on the HF hub: kwargs under model_args
        args = data.get("model_args") or {}
        if not isinstance(args, dict):
            raise ValueError(f"{source}: model_args is not a mapping")
        kept = {k: data[k] for k in ("num_classes", "global_pool") if k in data}
        return to_fields({**kept, **args}, source)
    out: dict[str, Any] = {}
    given_by: dict[str, str] = {}
    unknown: list[str] = []

    def put(name: str, value: Any, key: str) -> None:
        if name in out and out[name] != value:
            raise ValueError(f"{source}: {given_by[name]}={out[name]!r} and {key}={value!r} disagree")
        out[name], given_by[name] = value, key

    for key, value in data.items():
        key = str(key)
        if key in IGNORED:
            continue
        if key in TIMM_UNSUPPORTED:
            if value != TIMM_UNSUPPORTED[key]:
                raise ValueError(f"{source}: timm {key}={value!r} is not supported by hwvit's ViT")
            continue
        if key in OURS:
            put(key, _square(value, key, source) if key in ("image_size", "patch_size") else value, key)
        elif key in TIMM_NAMES or key in LUCIDRAINS_NAMES:
            name = TIMM_NAMES.get(key) or LUCIDRAINS_NAMES[key]
            put(name, _square(value, key, source) if name == "image_size" else value, key)
        elif key == "global_pool":
            pools = {"token": "cls", "avg": "mean"}
            if value not in pools:
                raise ValueError(f"{source}: global_pool={value!r} is not supported; use 'token' or 'avg'")
            put("pool", pools[value], key)
        elif key == "fc_norm":
            if value is not None:
                put("head_pre", "norm" if value else "none", key)
        elif key == "mlp_ratio":
            put("mlp_ratio", float(value), key)
        else:
            unknown.append(key)
    if unknown:
        raise ValueError(
            f"{source}: unknown config fields {', '.join(sorted(unknown))} (hwvit, HuggingFace, "
            f"timm and lucidrains names are understood)"
        )
    if "mlp_ratio" in out and "dim" in out:
        # timm: mlp hidden width = int(embed_dim * mlp_ratio)
        put("mlp_dim", int(out["dim"] * out.pop("mlp_ratio")), "mlp_ratio")
    return out


def _from_hf(data: dict, source: str) -> dict[str, Any]:
    model_type = data.get("model_type", "vit")
    if model_type != "vit":
        raise ValueError(f"{source}: model_type {model_type!r}; hwvit reads HuggingFace 'vit' models")
    act = data.get("hidden_act", "gelu")
    if act != "gelu":
        raise ValueError(f"{source}: hidden_act {act!r} is not supported; hwvit's MLP uses exact GELU ('gelu')")
    out = {ours: data[theirs] for theirs, ours in HF_NAMES.items() if theirs in data}
    for key in ("image_size", "patch_size"):
        if key in out:
            out[key] = _square(out[key], key, source)
    if "norm_eps" in out:
        out["norm_eps"] = float(out["norm_eps"])
    return out


def hf_object_dict(config: Any) -> dict | None:
    """The dict of a transformers PretrainedConfig (duck-typed: to_dict() and model_type), else None."""
    if hasattr(config, "to_dict") and hasattr(config, "model_type") and not isinstance(config, ViTConfig):
        data = config.to_dict()
        data.setdefault("model_type", config.model_type)
        return data
    return None


__all__ = ["HF_NAMES", "LUCIDRAINS_NAMES", "TIMM_NAMES", "class_names", "hf_object_dict", "is_hf", "to_fields"]
