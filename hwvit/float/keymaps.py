"""Key names of each checkpoint family, mapped onto hwvit.float.model.ViT's, and shape inference.

A ``Rule`` renames one parameter: ``src`` and ``dst`` are templates where ``{i}`` is a block
index. Rules run both ways: forward to load, inverse to name a missing key as the source spells it.

Families (originals restated faithfully in tests/test_float_importers.py):
- hf: transformers ViTModel / ViTForImageClassification. 4.x names
  ``vit.encoder.layer.N.attention.attention.{query,key,value}``, ``attention.output.dense``,
  ``intermediate.dense``, ``output.dense``; 5.x names ``vit.layers.N.attention.{q,k,v,o}_proj``,
  ``mlp.fc1/fc2``. Both: ``layernorm_before/after``, ``vit.embeddings.{cls_token,
  position_embeddings,patch_embeddings.projection}``, ``vit.layernorm``, ``classifier``. The
  ``vit.`` prefix is absent in a bare ViTModel, whose ``pooler`` (dense + tanh on token 0, not
  used by the classifier) is ignored.
- timm: VisionTransformer ``cls_token``, ``pos_embed``, ``patch_embed.proj``, ``blocks.N.{norm1,
  attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}``, ``norm``, ``fc_norm``, ``head``.
- simple_vit: lucidrains SimpleViT ``to_patch_embedding.{1,2,3}`` (LN, Linear, LN),
  ``transformer.layers.N.0.{norm,to_qkv,to_out}``, ``transformer.layers.N.1.net.{0,1,3}``, then
  either ``transformer.norm`` + ``linear_head`` (current) or ``linear_head.{0,1}`` (LN + Linear, older).
- ecg1d: ECGformer ``embedding.{0,1,cls_token}``, ``positional_encoding`` (T, D),
  ``encoder.N.0.block.0`` (LN), ``encoder.N.0.block.1.{queries,keys,values,final}_projection``,
  ``encoder.N.1.block.0`` (LN), ``encoder.N.1.block.1.{0,2}`` (MLP), ``classifier.{1,2,3}``
  (Linear, LN, Linear after the mean).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import torch

from hwvit.float.config import Embed

MODEL_FAMILIES = ("hf", "timm", "simple_vit", "ecg1d", "hwvit")
ATTENTION_FAMILIES = ("sablock", "cookbook_attention")

# Heads of the standard ViT widths (head_dim 64): Ti 192, S 384, B 768, L 1024, H 1280.
STANDARD_HEADS = {192: 3, 384: 6, 768: 12, 1024: 16, 1280: 16}


@cache
def _pattern(template: str) -> re.Pattern:
    return re.compile(re.escape(template).replace(r"\{i\}", r"(?P<i>\d+)"))


@dataclass(frozen=True)
class Rule:
    """Rename ``src`` -> ``dst`` (templates with an optional ``{i}``); ``transform`` reshapes on load."""

    src: str
    dst: str
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None

    def forward(self, key: str) -> str | None:
        m = _pattern(self.src).fullmatch(key)
        return None if m is None else self.dst.format(**m.groupdict())

    def inverse(self, key: str) -> str | None:
        m = _pattern(self.dst).fullmatch(key)
        return None if m is None else self.src.format(**m.groupdict())


def linear(src: str, dst: str) -> list[Rule]:
    """weight and bias of one Linear / Conv / LayerNorm."""
    return [Rule(f"{src}.weight", f"{dst}.weight"), Rule(f"{src}.bias", f"{dst}.bias")]


def _block(src_prefix: str, names: dict[str, str]) -> list[Rule]:
    """Rules of block N: ``names`` maps source sub-module -> our sub-module."""
    return [r for src, dst in names.items() for r in linear(f"{src_prefix}.{src}", "layers.{i}." + dst)]


# Families -------------------------------------------------------------------------------------
def hf_rules(keys: set[str]) -> list[Rule]:
    p = "vit." if any(k.startswith("vit.") for k in keys) else ""
    v4 = any(k.startswith(p + "encoder.layer.") for k in keys)
    emb = p + "embeddings"
    rules = [
        Rule(f"{emb}.cls_token", "cls_token"),
        Rule(f"{emb}.position_embeddings", "pos_embed"),
        *linear(f"{emb}.patch_embeddings.projection", "patch_embed.proj"),
    ]
    common = {"layernorm_before": "norm1", "layernorm_after": "norm2"}
    if v4:
        names = {
            "attention.attention.query": "attn.q",
            "attention.attention.key": "attn.k",
            "attention.attention.value": "attn.v",
            "attention.output.dense": "attn.proj",
            "intermediate.dense": "mlp.fc1",
            "output.dense": "mlp.fc2",
            **common,
        }
        rules += _block(p + "encoder.layer.{i}", names)
    else:
        names = {
            "attention.q_proj": "attn.q",
            "attention.k_proj": "attn.k",
            "attention.v_proj": "attn.v",
            "attention.o_proj": "attn.proj",
            "mlp.fc1": "mlp.fc1",
            "mlp.fc2": "mlp.fc2",
            **common,
        }
        rules += _block(p + "layers.{i}", names)
    return rules + linear(p + "layernorm", "norm") + linear("classifier", "head")


def timm_rules(keys: set[str]) -> list[Rule]:
    names = {n: n for n in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2")}
    return [
        Rule("cls_token", "cls_token"),
        Rule("pos_embed", "pos_embed"),
        *linear("patch_embed.proj", "patch_embed.proj"),
        *_block("blocks.{i}", names),
        *linear("norm", "norm"),
        *linear("fc_norm", "pre_head.norm"),
        *linear("head", "head"),
    ]


def timm_validate(keys: set[str]) -> None:
    if "cls_token" in keys and "fc_norm.weight" in keys:
        raise ValueError(
            "timm checkpoint: global_pool='avg' with a class token (mean over the patch "
            "tokens only, then fc_norm) is not supported; hwvit mean-pools all tokens"
        )
    if "reg_token" in keys:
        raise ValueError("timm checkpoint: register tokens (reg_token) are not supported")


def simple_vit_rules(keys: set[str]) -> list[Rule]:
    names = {
        "0.norm": "norm1",
        "0.to_qkv": "attn.qkv",
        "0.to_out": "attn.proj",
        "1.net.0": "norm2",
        "1.net.1": "mlp.fc1",
        "1.net.3": "mlp.fc2",
    }
    rules = [
        *linear("to_patch_embedding.1", "patch_embed.norm_in"),
        *linear("to_patch_embedding.2", "patch_embed.proj"),
        *linear("to_patch_embedding.3", "patch_embed.norm_out"),
        *_block("transformer.layers.{i}", names),
        *linear("transformer.norm", "norm"),
    ]
    if "linear_head.0.weight" in keys:  # older SimpleViT: head = LayerNorm -> Linear after the mean
        return rules + linear("linear_head.0", "pre_head.norm") + linear("linear_head.1", "head")
    return rules + linear("linear_head", "head")


def _rows_to_batch(t: torch.Tensor) -> torch.Tensor:
    """ECGformer keeps cls (1, D) and positions (T, D) without the batch axis; ours are (1, ., D)."""
    return t.unsqueeze(0) if t.dim() == 2 else t


def ecg1d_rules(keys: set[str]) -> list[Rule]:
    attn = {
        "0.block.0": "norm1",
        "0.block.1.queries_projection": "attn.q",
        "0.block.1.keys_projection": "attn.k",
        "0.block.1.values_projection": "attn.v",
        "0.block.1.final_projection": "attn.proj",
        "1.block.0": "norm2",
        "1.block.1.0": "mlp.fc1",
        "1.block.1.2": "mlp.fc2",
    }
    return [
        *linear("embedding.0", "patch_embed.proj"),
        *linear("embedding.1", "patch_embed.norm_out"),
        Rule("embedding.cls_token", "cls_token", _rows_to_batch),
        Rule("positional_encoding", "pos_embed", _rows_to_batch),
        *_block("encoder.{i}", attn),
        *linear("classifier.1", "pre_head.fc"),
        *linear("classifier.2", "pre_head.norm"),
        *linear("classifier.3", "head"),
    ]


def _preset_heads(preset: str, dim: int) -> int | None:
    from hwvit.float.config import load_preset

    cfg = load_preset(preset)
    return cfg.heads if cfg.dim == dim else None


@dataclass(frozen=True)
class FamilySpec:
    """How to read one family: renaming rules, defaults for what the weights cannot say, heads."""

    embed: str
    rules: Callable[[set[str]], list[Rule]]
    defaults: dict
    heads_for: Callable[[int, int | None], int | None]
    ignore: tuple[str, ...] = ()  # source key prefixes dropped on purpose
    validate: Callable[[set[str]], None] = field(default=lambda keys: None)
    extra: Callable[[dict[str, torch.Tensor]], dict] = field(default=lambda w: {})


_VIT = {
    "embed": "conv",
    "pool": "cls",
    "pos": "learned",
    "attn_scale": "standard",
    "ndim": 2,
    "head_pre": "none",
    "pos_every_layer": False,
}

SPECS: dict[str, FamilySpec] = {
    "hf": FamilySpec(
        "conv",
        hf_rules,
        {**_VIT, "qkv": "separate", "norm_eps": 1e-12},
        lambda dim, inner: STANDARD_HEADS.get(dim) or _preset_heads("vit-b16", dim),
        ignore=("pooler.", "vit.pooler."),
    ),
    "timm": FamilySpec(
        "conv",
        timm_rules,
        {**_VIT, "qkv": "fused", "norm_eps": 1e-6},
        lambda dim, inner: STANDARD_HEADS.get(dim) or _preset_heads("vit-tiny", dim),
        validate=timm_validate,
        extra=lambda w: {"pool": "cls" if "cls_token" in w else "mean"},
    ),
    # lucidrains' dim_head defaults to 64, so heads = (q width) / 64 when that divides.
    "simple_vit": FamilySpec(
        "simple",
        simple_vit_rules,
        {**_VIT, "embed": "simple", "pool": "mean", "pos": "sincos2d", "qkv": "fused", "norm_eps": 1e-5},
        lambda dim, inner: inner // 64 if inner and inner % 64 == 0 else None,
    ),
    "ecg1d": FamilySpec(
        "linear1d",
        ecg1d_rules,
        {
            **_VIT,
            "embed": "linear1d",
            "ndim": 1,
            "patch_size": 1,
            "pool": "mean",
            "cls_token": True,
            "pos_every_layer": True,
            "qkv": "separate",
            "norm_eps": 1e-5,
            "attn_scale": "post_softmax_sqrt_dim",
        },
        lambda dim, inner: _preset_heads("ecg1d", dim),
    ),
}


# Shape inference ------------------------------------------------------------------------------
def infer_fields(w: dict[str, torch.Tensor], embed: str) -> tuple[dict, dict, int | None]:
    """(fields the shapes fix, fields they suggest, q/k/v width) from weights under our names."""
    hard: dict = {}
    soft: dict = {}

    def shape(key: str) -> tuple[int, ...] | None:
        return tuple(w[key].shape) if key in w else None

    blocks = {int(m.group(1)) for k in w if (m := re.match(r"layers\.(\d+)\.", k))}
    if blocks:
        hard["depth"] = max(blocks) + 1
    for key in ("layers.0.norm1.weight", "cls_token", "norm.weight"):
        s = shape(key)
        if s:
            hard["dim"] = s[-1]
            break
    s = shape("layers.0.mlp.fc1.weight")
    if s and len(s) == 2:
        hard["mlp_dim"] = s[0]
    inner = None
    if "layers.0.attn.qkv.weight" in w:
        hard["qkv"] = "fused"
        hard["qkv_bias"] = "layers.0.attn.qkv.bias" in w
        inner = shape("layers.0.attn.qkv.weight")[0] // 3
    elif "layers.0.attn.q.weight" in w:
        hard["qkv"] = "separate"
        hard["qkv_bias"] = "layers.0.attn.q.bias" in w
        inner = shape("layers.0.attn.q.weight")[0]
    if "layers.0.attn.proj.weight" in w:
        hard["proj_bias"] = "layers.0.attn.proj.bias" in w
    if "layers.0.mlp.fc1.weight" in w:
        hard["mlp_bias"] = "layers.0.mlp.fc1.bias" in w
    hard["final_norm"] = "norm.weight" in w
    s = shape("head.weight")
    hard["num_classes"] = s[0] if s else 0
    hard["head_pre"] = "linear_norm" if "pre_head.fc.weight" in w else "norm" if "pre_head.norm.weight" in w else "none"
    hard["cls_token"] = "cls_token" in w
    if "pos_embed" in w:
        hard["pos"] = "learned"

    proj = shape("patch_embed.proj.weight")
    pos = shape("pos_embed")
    n_patches = pos[-2] - int(hard["cls_token"]) if pos and len(pos) >= 2 else None
    if embed == Embed.CONV and proj and len(proj) == 4:
        hard["in_chans"], hard["patch_size"] = proj[1], proj[2]
        if n_patches:
            grid = math.isqrt(n_patches)
            if grid * grid != n_patches:
                raise ValueError(
                    f"position table of {pos[-2]} tokens is not a square grid"
                    f"{' plus a cls slot' if hard['cls_token'] else ''}"
                )
            hard["image_size"] = grid * proj[2]
    elif embed == Embed.LINEAR1D and proj and len(proj) == 2:
        soft["in_chans"] = proj[1]  # one sample per token (patch_size 1), as the ECG model
        if n_patches:
            soft["image_size"] = n_patches
    return hard, soft, inner


__all__ = [
    "ATTENTION_FAMILIES",
    "MODEL_FAMILIES",
    "SPECS",
    "STANDARD_HEADS",
    "FamilySpec",
    "Rule",
    "infer_fields",
    "linear",
]
