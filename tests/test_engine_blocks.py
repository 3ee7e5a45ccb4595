"""hwvit.engine.blocks.encoder_block: a whole pre-norm encoder block in one compiled call equals its ten
kernel calls (``blocks.composed``, on the exact int64 backend) on every kernel kind, shape, tail and
extreme; other widths and backends take the ten calls; bad parameters are refused as the ten calls
refuse them; a Stack keeps its blocks' plans."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit.engine import blocks as encoder
from hwvit.ops import frozen
from hwvit.ops import gemm_backends as gb
from hwvit.ops.softmax import EXP_ONE

# (images, tokens, width, heads, head width, MLP width): one of each, tails off the 24-column panel,
# the 4-byte quad and the 32-row block, a batch whose heads read q, k, v across images, heads x head
# width other than the width (as in vit-tiny), ViT-B/16's attention shape
SHAPES = [
    (1, 1, 4, 1, 4, 4),
    (2, 5, 24, 3, 8, 40),
    (3, 33, 48, 4, 12, 72),
    (2, 7, 20, 3, 9, 30),
    (1, 197, 128, 2, 64, 100),
]


def _ro(a):
    return frozen.read_only(np.asarray(a))


def _linear(rng, n, k, big_bias=False):
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    w[0] = -128  # a row of the extreme weight: its sums reach K * 128 * 128
    bound = (1 << 31) - k * 255 * 128 - 1  # the accumulator bound the kernels require
    bias = rng.integers(-bound, bound, n) if big_bias else rng.integers(-(1 << 16), 1 << 16, n)
    return encoder.Linear(_ro(w), _ro(bias), _ro(rng.integers(1 << 20, 1 << 31, n)), _ro(rng.integers(30, 40, n)), 8)


def _norm(rng, d):
    gamma = rng.integers(-16383, 16384, d)
    return encoder.Norm(_ro(gamma), _ro(rng.integers(-(1 << 30), 1 << 30, d)), 1 << 22, 1 << 20, 27, 8)


def _exp_table(rng, entries=256):
    t = np.sort(rng.integers(0, EXP_ONE, entries))[::-1].copy()
    t[0] = EXP_ONE
    return _ro(t)


def _block(rng, d, heads, f, gelu=None, per_channel_add=False, hd=None):
    def add():
        if per_channel_add:
            return encoder.Add(_ro(rng.integers(1 << 28, 1 << 30, d)), _ro(rng.integers(1 << 27, 1 << 30, d)), 31)
        return encoder.Add(int(rng.integers(1 << 28, 1 << 30)), int(rng.integers(1 << 27, 1 << 30)), 31, 8)

    table = rng.integers(-128, 128, 256) if gelu is None else gelu
    hd = d // heads if hd is None else hd
    heads_p = encoder.Heads(heads, hd, 1 << 30, 37, 8, _exp_table(rng), 8, (1 << 30) + 12345, 36, 8)
    return encoder.EncoderBlock(
        _norm(rng, d), _linear(rng, 3 * heads * hd, d), heads_p, _linear(rng, d, heads * hd, big_bias=True), add(),
        _norm(rng, d), _linear(rng, f, d), encoder.Lookup(_ro(table), 8), _linear(rng, d, f), add(),
    )  # fmt: skip


def _tokens(rng, b, n, d):
    x = rng.integers(-128, 128, (b, n, d)).astype(np.int8)
    x[0, 0] = 127  # a constant row: variance 0, every normalized value 0
    if n > 1:
        x[0, 1, ::2], x[0, 1, 1::2] = -128, 127  # the widest row
    return x


def _ten_calls(x, block):
    """The composition itself, on the exact int64 backend."""
    with gb.using("int64"):
        return encoder.composed(x, block, narrow=True)


@pytest.mark.parametrize("per_channel_add", [False, True])
def test_one_call_equals_the_ten_on_every_kernel(kind, per_channel_add):
    from hwvit.engine import compiled

    rng = np.random.default_rng(50)
    for b, n, d, heads, hd, f in SHAPES:
        block = _block(rng, d, heads, f, per_channel_add=per_channel_add, hd=hd)
        x = _tokens(rng, b, n, d)
        want = _ten_calls(x, block)
        plan = encoder._plan(x, block, f"test-kind-{kind}", kind)
        assert plan is not None and plan[0].kind == kind
        got, ve, spent = compiled.encoder_block(x.reshape(b * n, d), b, plan)
        assert got.dtype == np.int8 and np.array_equal(got.reshape(b, n, d), want), (b, n, d, heads, hd, f)
        assert 0 < ve < 1 << 62 and spent > 0
        assert len(np.unique(want)) > min(20, want.size // 2)  # not a saturated block


@pytest.mark.parametrize("name", ["int8_avx2", "int16_avx2", "int8_vnni", "float64", "int64"])
def test_the_op_on_each_backend(name, vnni_here, monkeypatch, counted):
    """The fused backends take the one call (counted), the others the ten; the integers are the same."""
    from hwvit.engine import compiled

    calls = counted(compiled, "encoder_block")
    monkeypatch.setenv(gb.ENV, name)
    rng = np.random.default_rng(51)
    block = _block(rng, 48, 4, 72)
    x = _tokens(rng, 2, 21, 48)
    got = encoder.encoder_block(x, block)
    assert got.dtype == np.int64 and np.array_equal(got, _ten_calls(x, block))
    assert len(calls) == (0 if name in ("float64", "int64") else 1)
    narrow = encoder.encoder_block(x, block, narrow=True)
    assert narrow.dtype == np.int8 and np.array_equal(narrow, got)


def test_other_widths_and_operands_take_the_ten_calls(vnni_here, monkeypatch, counted):
    """9-bit scores, a 7-bit LayerNorm, 10-bit fc1 outputs, int16 tokens, writable parameters: the
    ten calls or a plan made afresh, with the same integers."""
    from hwvit.engine import compiled

    calls = counted(compiled, "encoder_block")
    monkeypatch.setenv(gb.ENV, "int8_vnni")
    rng = np.random.default_rng(52)
    base = _block(rng, 24, 2, 36)
    x = _tokens(rng, 1, 9, 24)
    att9 = base.attention._replace(scores_bits=9, exp_table=_exp_table(rng, 512))
    scores9 = base._replace(attention=att9)
    norm7 = base._replace(norm1=base.norm1._replace(out_bits=7))
    fc1_10 = base._replace(
        fc1=base.fc1._replace(out_bits=10), gelu=encoder.Lookup(_ro(rng.integers(-128, 128, 1024)), 10)
    )
    for block in (scores9, norm7, fc1_10):
        assert np.array_equal(encoder.encoder_block(x, block, narrow=True), _ten_calls(x, block))
    assert calls == []
    assert np.array_equal(encoder.encoder_block(x.astype(np.int16), base), _ten_calls(x, base))  # checked, narrowed
    writable = base._replace(proj=encoder.Linear(*(np.array(v) for v in base.proj[:4]), 8))
    assert np.array_equal(encoder.encoder_block(x, writable), _ten_calls(x, writable))
    assert len(calls) == 2


def test_bad_blocks_are_refused_as_the_ten_calls_refuse_them(vnni_here, monkeypatch):
    monkeypatch.setenv(gb.ENV, "int8_vnni")
    rng = np.random.default_rng(53)
    block = _block(rng, 24, 2, 36)
    x = _tokens(rng, 1, 9, 24)
    wide = x.astype(np.int16)
    wide[0, 0, 0] = 128
    with pytest.raises(ValueError, match="x: values must lie in"):
        encoder.encoder_block(wide, block)
    with pytest.raises(ValueError, match="72 channels, not 3 x 5 x 12"):
        encoder.encoder_block(x, block._replace(attention=block.attention._replace(heads=5)))
    with pytest.raises(ValueError, match="0 heads"):
        encoder.encoder_block(x, block._replace(attention=block.attention._replace(heads=0)))
    with pytest.raises(ValueError, match="tokens, got shape"):
        encoder.encoder_block(x[0], block)
    with pytest.raises(ValueError, match="gamma"):
        encoder.encoder_block(x, block._replace(norm2=block.norm2._replace(gamma=_ro(np.full(24, 20000)))))
    wide_gelu = block._replace(gelu=encoder.Lookup(_ro(rng.integers(-300, 300, 256)), 8))
    with pytest.raises(ValueError, match="a: values must lie in"):  # GELU outputs past fc2's int8 input
        encoder.encoder_block(x, wide_gelu)
    short = block._replace(qkv=_linear(rng, 48, 24))
    with pytest.raises(ValueError, match="48 channels, not 3 x 2 x 12"):
        encoder.encoder_block(x, short)
    with pytest.raises(ValueError, match="a: expected shape"):  # fc2 takes 36 inputs, fc1 gives 40
        encoder.encoder_block(x, block._replace(fc1=_linear(rng, 40, 24)))


def test_one_thread(vnni_here, monkeypatch):
    """On one numba thread every parallel step runs on the one worker: the same integers."""
    import numba

    monkeypatch.setenv(gb.ENV, "int8_vnni")
    rng = np.random.default_rng(54)
    block = _block(rng, 48, 4, 72)
    x = _tokens(rng, 2, 40, 48)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        got = encoder.encoder_block(x, block, narrow=True)
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(got, _ten_calls(x, block))


def test_repeated_calls_agree(vnni_here, monkeypatch):
    """Every buffer the compiled block hands to C by address lives until the C code has run: a buffer
    freed early (numba frees an array after its last use, and taking its address is one) is reused by
    the next allocation and the result changes from call to call. 30 calls, one result."""
    monkeypatch.setenv(gb.ENV, "int8_vnni")
    rng = np.random.default_rng(55)
    block = _block(rng, 96, 4, 192)
    x = _tokens(rng, 1, 65, 96)
    want = _ten_calls(x, block)
    for _ in range(30):
        assert np.array_equal(encoder.encoder_block(x, block, narrow=True), want)


def test_a_stack_of_blocks_equals_each_block_in_turn(vnni_here, monkeypatch, counted):
    """ops.encoder_blocks: every block's one call in turn (counted), or where one block cannot run as
    one call, each block as encoder_block takes it; the integers of the ten calls block after block."""
    from hwvit.engine import compiled

    monkeypatch.setenv(gb.ENV, "int8_vnni")
    rng = np.random.default_rng(56)
    blocks = [_block(rng, 48, 4, 72) for _ in range(3)]
    x = _tokens(rng, 2, 19, 48)
    want = x
    for block in blocks:
        want = _ten_calls(want, block)
    calls = counted(compiled, "encoder_block")
    got = encoder.encoder_blocks(x, blocks)
    assert got.dtype == np.int64 and np.array_equal(got, want) and len(calls) == 3
    mixed = [blocks[0], blocks[1]._replace(norm2=blocks[1].norm2._replace(out_bits=7)), blocks[2]]
    want = x
    for block in mixed:
        want = _ten_calls(want, block)
    got = encoder.encoder_blocks(x, mixed, narrow=True)
    assert got.dtype == np.int8 and np.array_equal(got, want) and len(calls) == 5  # blocks 0 and 2
    assert np.array_equal(encoder.encoder_blocks(x, []), x)
    with pytest.raises(ValueError, match="x: values must lie in"):
        encoder.encoder_blocks(x.astype(np.int16) * 2, blocks)


def test_the_last_block_gives_only_the_tokens_asked_for(kind):
    """encoder_blocks(..., tokens=t): the last block's first t tokens of each image, equal to the full
    stack's [:, :t] (the ten calls block after block) on every kernel kind and shape; the query rows
    past t are not worked out, every token still gives its key and value."""
    rng = np.random.default_rng(57)
    for b, n, d, heads, hd, f in SHAPES:
        blocks = [_block(rng, d, heads, f, hd=hd) for _ in range(2)]
        x = _tokens(rng, b, n, d)
        want = x
        for block in blocks:
            want = _ten_calls(want, block)
        plans = [encoder._plan(x, block, f"test-kind-{kind}", kind) for block in blocks]
        for t in sorted({1, n // 2 + 1, n}):
            got = encoder._run(x, plans, True, t)
            assert got.shape == (b, t, d) and np.array_equal(got, want[:, :t]), (b, n, d, heads, hd, f, t)


def test_tokens_through_the_op_and_its_ten_calls(vnni_here, monkeypatch, counted):
    """ops.encoder_blocks with ``tokens``: one call a block where it can, the ten calls (every row
    worked out, the rest dropped) where it cannot, the same integers; a count of tokens outside 1..N
    is one line of error."""
    from hwvit.engine import compiled

    monkeypatch.setenv(gb.ENV, "int8_vnni")
    rng = np.random.default_rng(58)
    blocks = [_block(rng, 48, 4, 72) for _ in range(2)]
    x = _tokens(rng, 3, 23, 48)
    full = encoder.encoder_blocks(x, blocks)
    calls = counted(compiled, "encoder_block")
    for t in (1, 2, 23):
        got = encoder.encoder_blocks(x, blocks, tokens=t)
        assert got.dtype == np.int64 and np.array_equal(got, full[:, :t])
    assert len(calls) == 6
    slow = [blocks[0], blocks[1]._replace(norm1=blocks[1].norm1._replace(out_bits=7))]
    want = encoder.encoder_blocks(x, slow, narrow=True)
    got = encoder.encoder_blocks(x, slow, narrow=True, tokens=4)
    assert got.dtype == np.int8 and np.array_equal(got, want[:, :4]) and len(calls) == 8  # block 0 twice
    for bad in (0, 24, -1, 1.0, True, "1"):
        with pytest.raises(ValueError, match=r"^encoder_blocks: tokens must be 1\.\.N \(N = 23 tokens an image\)"):
            encoder.encoder_blocks(x, blocks, tokens=bad)


def test_a_stack_keeps_its_plans(vnni_here, monkeypatch, counted):
    """encoder_blocks given a Stack: each block's plan made once per token shape and backend (a list
    of blocks: at every call); a copied Stack (pickle) keeps no plans."""
    import pickle

    monkeypatch.setenv(gb.ENV, "int8_vnni")
    rng = np.random.default_rng(59)
    blocks = [_block(rng, 48, 4, 72) for _ in range(3)]
    x = _tokens(rng, 2, 19, 48)
    want = encoder.encoder_blocks(x, blocks)
    stack = encoder.Stack(blocks)
    assert len(stack) == 3 and stack[1] is blocks[1] and list(stack) == blocks
    looked = counted(encoder, "_fused_plan")
    assert np.array_equal(encoder.encoder_blocks(x, stack), want) and len(looked) == 3
    assert np.array_equal(encoder.encoder_blocks(x, stack, tokens=1), want[:, :1]) and len(looked) == 3
    shorter = x[:, :7].copy()
    assert np.array_equal(encoder.encoder_blocks(shorter, stack), encoder.encoder_blocks(shorter, blocks))
    assert len(looked) == 9  # 3 for the new token count (kept), 3 for the list
    monkeypatch.setenv(gb.ENV, "int16_avx2")
    assert np.array_equal(encoder.encoder_blocks(x, stack), want) and len(looked) == 12
    monkeypatch.setenv(gb.ENV, "int8_vnni")
    assert np.array_equal(encoder.encoder_blocks(x, stack), want) and len(looked) == 12
    copied = pickle.loads(pickle.dumps(stack))
    assert isinstance(copied, encoder.Stack) and copied._plans == {}
    assert np.array_equal(encoder.encoder_blocks(x, copied), want) and len(looked) == 15
