"""hwvit.analysis.diagnose: which points add the most error, their stages, and the suggested change."""

from __future__ import annotations

from types import SimpleNamespace

from hwvit.analysis.diagnose import by_stage, stage_of, suggestion, worst_points


def _row(path: str, sqnr: float, **more) -> dict:
    return {"path": path, "sqnr_db": sqnr, **more}


def test_stages_in_forward_order():
    assert [stage_of(p) for p in ("input", "tokens", "embed.proj", "layers.11.mlp.fc2", "pool", "logits")] == [
        "embed",
        "embed",
        "embed",
        "layers.11",
        "head",
        "head",
    ]
    rows = [_row("input", 99), _row("embed.proj", 40), _row("layers.0.attn.qkv", 30), _row("layers.1.ln1", 25)]
    rows.append(_row("logits", 20))
    stages = by_stage(rows)
    assert list(stages) == ["embed", "layers.0", "layers.1", "head"]
    assert [r["path"] for r in stages["embed"]] == ["input", "embed.proj"]


def test_worst_points_rank_by_isolated_error_and_skip_the_input():
    rows = [
        _row("input", -5.0),
        _row("embed.proj", 10.0, isolated_sqnr_db=40.0),  # low accumulated, but not its own error
        _row("layers.0.attn.probs", 30.0, isolated_sqnr_db=12.0),
        _row("layers.0.mlp.fc2", 25.0),  # isolated not measured: ranked by accumulated
        _row("logits", 35.0, isolated_sqnr_db=33.0),
    ]
    worst = worst_points(SimpleNamespace(layers=rows), n=3)
    assert [r["path"] for r in worst] == ["layers.0.attn.probs", "layers.0.mlp.fc2", "logits"]


def test_one_suggestion_per_cause():
    assert suggestion(_row("a", 20.0, clip_rate=0.01, isolated_sqnr_db=21.0)).startswith("clips more than 0.1%")
    assert suggestion(_row("a", 20.0, isolated_sqnr_db=22.0)).startswith("its own error dominates")
    assert suggestion(_row("a", 20.0, isolated_sqnr_db=40.0, range_used=0.3)).startswith("uses less than half")
    assert suggestion(_row("a", 20.0, isolated_sqnr_db=40.0, range_used=0.9)).startswith("most of its error")
