"""A stand-in IntViT with zero parameters, for the program of a model too large to quantize quickly.

The compiler reads only shapes and constants from the layers, so `hwvit core estimate` builds the
program of ViT-B/16 from its config in milliseconds (zero-stride arrays, nothing materialized).
"""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np

from hwvit.float.config import Pool, Qkv


def _z(*shape) -> np.ndarray:
    return np.broadcast_to(np.int64(0), shape)


def _lin(n: int, k: int) -> NS:
    return NS(w=_z(n, k), bias=_z(n), mult=_z(n), shift=_z(n))


def _ln(c: int) -> NS:
    return NS(gamma=_z(c), beta=_z(c), eps_int=0, mult=0, shift=0)


def _res() -> NS:
    return NS(mult_a=0, mult_b=0, shift=1)


def shape_model(cfg) -> NS:
    """An object with the attributes hwvit.core.compile reads from an IntViT, all zero."""
    d, f, h = cfg.dim, cfg.mlp_dim, cfg.heads
    e = cfg.inner_dim  # q, k, v and the context: heads x head_dim, which SimpleViT lets differ from d
    pd = cfg.in_chans * cfg.patch_size**cfg.ndim
    t = (cfg.image_size // cfg.patch_size) ** cfg.ndim + int(cfg.cls_token)
    sep = cfg.qkv == Qkv.SEPARATE
    blocks = [
        NS(
            norm1=_ln(d),
            norm2=_ln(d),
            add1=_res(),
            add2=_res(),
            fc1=_lin(f, d),
            fc2=_lin(d, f),
            gelu=NS(in_bits=8, out_bits=8, table=_z(256)),
            attn=NS(
                heads=h,
                head_dim=cfg.head_dim,
                qkv=None if sep else _lin(3 * e, d),
                q=_lin(e, d) if sep else None,
                k=_lin(e, d) if sep else None,
                v=_lin(e, d) if sep else None,
                scores=NS(mult=0, shift=0),
                context=NS(mult=0, shift=0),
                proj=_lin(d, e),
                softmax=NS(exp="table", in_bits=8, out_bits=8, exp_table=_z(256)),
            ),
        )
        for _ in range(cfg.depth)
    ]
    return NS(
        config=cfg,
        act_bits=8,
        embed=NS(
            patch_embed=NS(kind=cfg.embed, patch_size=cfg.patch_size, proj=_lin(d, pd)),
            cls_q=_z(d) if cfg.cls_token else None,
            pos_q=_z(t, d),
            pos_add=_res(),
        ),
        layer_pos_adds=[],
        blocks=blocks,
        readout=NS(
            norm=_ln(d) if cfg.final_norm else None,
            pool=None if cfg.pool == Pool.CLS else NS(mult=0, shift=0),
            pre_head_fc=None,
            pre_head_norm=None,
            head=_lin(cfg.num_classes, d) if cfg.num_classes else None,
        ),
    )
