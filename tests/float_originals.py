"""The seed models restated for parity tests: same module tree (so the same state-dict key names),
same arithmetic, written independently of hwvit. Sources, as read:

- timm ``vision_transformer.py`` VisionTransformer (class token, pos_embed covering it, pre-norm
  Block with norm1/attn/norm2/mlp, Attention with fused qkv reshaped (B, N, 3, H, hd), q scaled
  by hd^-0.5 before q k^T, LayerNorm eps 1e-6, forward_head: pool -> fc_norm -> head);
- lucidrains/vit-pytorch ``vit_pytorch/simple_vit.py`` (both the current head, transformer.norm
  + Linear, and the older LayerNorm + Linear ``linear_head``);
- the ECG transformer (ECGformer) with LinearEmbedding, ResidualAdd, MultiHeadAttention
  (queries/keys/values/final_projection, softmax output divided by sqrt(embed_size)), MLP
  with expansion, Classifier (mean -> Linear -> LayerNorm -> Linear), positions added before
  every encoder layer;
- MONAI's SABlock (qkv Linear, ``b h (qkv l d) -> qkv b l h d``, out_proj);
- a textbook multi-head attention with separate query/key/value/out Linears taking (N, B, C).
"""

from __future__ import annotations

import math

import einops
import torch
from einops.layers.torch import Rearrange, Reduce
from torch import nn

# timm ------------------------------------------------------------------------------------------


class TimmPatchEmbed(nn.Module):
    def __init__(self, img, patch, chans, dim):
        super().__init__()
        self.num_patches = (img // patch) ** 2
        self.proj = nn.Conv2d(chans, dim, patch, patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class TimmAttention(nn.Module):
    def __init__(self, dim, heads, qkv_bias):
        super().__init__()
        self.num_heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * self.scale
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class TimmMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TimmBlock(nn.Module):
    def __init__(self, dim, heads, mlp_ratio, qkv_bias, eps):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = TimmAttention(dim, heads, qkv_bias)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = TimmMlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TimmViT(nn.Module):
    """timm VisionTransformer with global_pool 'token' (class_token=True) or 'avg' (class_token=False)."""

    def __init__(
        self,
        img=16,
        patch=4,
        chans=3,
        classes=7,
        dim=32,
        depth=2,
        heads=4,
        mlp_ratio=4.0,
        qkv_bias=True,
        class_token=True,
        eps=1e-6,
    ):
        super().__init__()
        self.patch_embed = TimmPatchEmbed(img, patch, chans, dim)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02) if class_token else None
        n = self.patch_embed.num_patches + (1 if class_token else 0)
        self.pos_embed = nn.Parameter(torch.randn(1, n, dim) * 0.02)
        self.blocks = nn.Sequential(*[TimmBlock(dim, heads, mlp_ratio, qkv_bias, eps) for _ in range(depth)])
        avg = not class_token
        self.norm = nn.Identity() if avg else nn.LayerNorm(dim, eps=eps)
        self.fc_norm = nn.LayerNorm(dim, eps=eps) if avg else nn.Identity()
        self.head = nn.Linear(dim, classes) if classes else nn.Identity()

    def forward(self, x):
        x = self.patch_embed(x)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.norm(self.blocks(x + self.pos_embed))
        x = x[:, 0] if self.cls_token is not None else x.mean(dim=1)
        return self.head(self.fc_norm(x))


# lucidrains SimpleViT ----------------------------------------------------------------------------


def posemb_sincos_2d(h, w, dim, temperature=10000):
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = torch.arange(dim // 4) / (dim // 4 - 1)
    omega = 1.0 / (temperature**omega)
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    return torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1).float()


class SvFeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        return self.net(x)


class SvAttention(nn.Module):
    def __init__(self, dim, heads, dim_head):
        super().__init__()
        inner = dim_head * heads
        self.heads, self.scale = heads, dim_head**-0.5
        self.norm = nn.LayerNorm(dim)
        self.attend = nn.Softmax(dim=-1)
        self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
        self.to_out = nn.Linear(inner, dim, bias=False)

    def forward(self, x):
        x = self.norm(x)
        q, k, v = (einops.rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in self.to_qkv(x).chunk(3, dim=-1))
        attn = self.attend(torch.matmul(q, k.transpose(-1, -2)) * self.scale)
        return self.to_out(einops.rearrange(torch.matmul(attn, v), "b h n d -> b n (h d)"))


class SvTransformer(nn.Module):
    def __init__(self, dim, depth, heads, dim_head, mlp_dim, final_norm):
        super().__init__()
        self.norm = nn.LayerNorm(dim) if final_norm else nn.Identity()
        self.layers = nn.ModuleList(
            nn.ModuleList([SvAttention(dim, heads, dim_head), SvFeedForward(dim, mlp_dim)]) for _ in range(depth)
        )

    def forward(self, x):
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return self.norm(x)


class SimpleViT(nn.Module):
    """``old_head``: the earlier release (no transformer.norm; linear_head = LayerNorm -> Linear)."""

    def __init__(
        self,
        image_size=8,
        patch_size=2,
        num_classes=6,
        dim=32,
        depth=2,
        heads=4,
        mlp_dim=48,
        channels=3,
        dim_head=16,
        old_head=False,
    ):
        super().__init__()
        grid, patch_dim = image_size // patch_size, channels * patch_size**2
        self.to_patch_embedding = nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size),
            nn.LayerNorm(patch_dim),
            nn.Linear(patch_dim, dim),
            nn.LayerNorm(dim),
        )
        self.pos_embedding = posemb_sincos_2d(grid, grid, dim)  # plain attribute: not in the state dict
        self.transformer = SvTransformer(dim, depth, heads, dim_head, mlp_dim, final_norm=not old_head)
        self.linear_head = (
            nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes)) if old_head else nn.Linear(dim, num_classes)
        )

    def forward(self, img):
        x = self.to_patch_embedding(img) + self.pos_embedding
        return self.linear_head(self.transformer(x).mean(dim=1))


# ECG transformer -------------------------------------------------------------------------------


class LinearEmbedding(nn.Sequential):
    def __init__(self, input_channels, output_channels):
        super().__init__(nn.Linear(input_channels, output_channels), nn.LayerNorm(output_channels), nn.GELU())
        self.cls_token = nn.Parameter(torch.randn(1, output_channels))

    def forward(self, x):
        embedded = super().forward(x)
        cls = einops.repeat(self.cls_token, "n e -> b n e", b=x.shape[0])
        return torch.cat([cls, embedded], dim=1)


class EcgMLP(nn.Sequential):
    def __init__(self, channels, expansion=4):
        super().__init__(
            nn.Linear(channels, channels * expansion), nn.GELU(), nn.Linear(channels * expansion, channels)
        )


class ResidualAdd(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return x + self.block(x)


class EcgMultiHeadAttention(nn.Module):
    def __init__(self, embed_size, num_heads):
        super().__init__()
        self.queries_projection = nn.Linear(embed_size, embed_size)
        self.values_projection = nn.Linear(embed_size, embed_size)
        self.keys_projection = nn.Linear(embed_size, embed_size)
        self.final_projection = nn.Linear(embed_size, embed_size)
        self.embed_size, self.num_heads = embed_size, num_heads

    def forward(self, x):
        keys, values, queries = (
            einops.rearrange(f(x), "b n (h e) -> b n h e", h=self.num_heads)
            for f in (self.keys_projection, self.values_projection, self.queries_projection)
        )
        energy = torch.einsum("bqhe, bkhe -> bqhk", queries, keys)
        weights = torch.softmax(energy, -1)
        out = torch.einsum("bihv, bvhd -> bihd", weights / math.sqrt(self.embed_size), values)
        return self.final_projection(einops.rearrange(out, "b n h e -> b n (h e)"))


class EcgEncoderLayer(nn.Sequential):
    def __init__(self, embed_size, expansion, num_heads, dropout=0.1):
        super().__init__(
            ResidualAdd(
                nn.Sequential(
                    nn.LayerNorm(embed_size), EcgMultiHeadAttention(embed_size, num_heads), nn.Dropout(dropout)
                )
            ),
            ResidualAdd(nn.Sequential(nn.LayerNorm(embed_size), EcgMLP(embed_size, expansion), nn.Dropout(dropout))),
        )


class EcgClassifier(nn.Sequential):
    def __init__(self, embed_size, num_classes):
        super().__init__(
            Reduce("b n e -> b e", reduction="mean"),
            nn.Linear(embed_size, embed_size),
            nn.LayerNorm(embed_size),
            nn.Linear(embed_size, num_classes),
        )


class ECGformer(nn.Module):
    def __init__(
        self, num_layers=2, signal_length=12, num_classes=5, input_channels=1, embed_size=32, num_heads=4, expansion=4
    ):
        super().__init__()
        self.encoder = nn.ModuleList(EcgEncoderLayer(embed_size, expansion, num_heads) for _ in range(num_layers))
        self.classifier = EcgClassifier(embed_size, num_classes)
        self.positional_encoding = nn.Parameter(torch.randn(signal_length + 1, embed_size))
        self.embedding = LinearEmbedding(input_channels, embed_size)

    def forward(self, x):
        embedded = self.embedding(x)
        for layer in self.encoder:
            embedded = layer(embedded + self.positional_encoding)
        return self.classifier(embedded)


# Attention-only seeds --------------------------------------------------------------------------


class SABlock(nn.Module):
    def __init__(self, hidden_size=64, num_heads=4, qkv_bias=False):
        super().__init__()
        self.num_heads, self.dim_head = num_heads, hidden_size // num_heads
        self.out_proj = nn.Linear(hidden_size, hidden_size)
        self.qkv = nn.Linear(hidden_size, hidden_size * 3, bias=qkv_bias)
        self.input_rearrange = Rearrange("b h (qkv l d) -> qkv b l h d", qkv=3, l=num_heads)
        self.out_rearrange = Rearrange("b h l d -> b l (h d)")
        self.scale = self.dim_head**-0.5

    def forward(self, x):
        q, k, v = self.input_rearrange(self.qkv(x))
        att = (torch.einsum("blxd,blyd->blxy", q, k) * self.scale).softmax(dim=-1)
        return self.out_proj(self.out_rearrange(torch.einsum("bhxy,bhyd->bhxd", att, v)))


class CookbookAttention(nn.Module):
    """Separate query/key/value/out Linears with bias; input and output (N, B, C)."""

    def __init__(self, embed_dim=64, num_heads=4):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.query, self.key = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.value, self.out = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        n, b, c = x.shape

        def split(t):  # (N, B, C) -> (B, H, N, hd)
            return t.view(n, b, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)  # (B, H, N, hd)
        return self.out(ctx.permute(2, 0, 1, 3).reshape(n, b, c))


def randomize(module: nn.Module, seed: int) -> nn.Module:
    """Every parameter drawn afresh (LayerNorm gains around 1), so no default init hides a mix-up."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            is_gain = p.dim() == 1 and isinstance(_owner(module, name), nn.LayerNorm) and name.endswith("weight")
            p.copy_(1.0 + 0.2 * noise if is_gain else 0.2 * noise)
    return module.eval()


def _owner(root: nn.Module, name: str) -> nn.Module:
    return root.get_submodule(name.rsplit(".", 1)[0]) if "." in name else root
