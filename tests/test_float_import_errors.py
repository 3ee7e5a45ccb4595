"""Bad checkpoints: each gives one ValueError that names the problem (and the keys, as spelled)."""

from __future__ import annotations

import pickle

import pytest
import torch
from float_originals import ECGformer, TimmViT, randomize
from safetensors.torch import save_file

from hwvit.float import load_float, load_preset, save_float
from hwvit.float.model import ViT


@pytest.fixture(scope="module")
def timm_sd():
    return randomize(TimmViT(), seed=11).state_dict()


def test_unknown_family_lists_families(timm_sd):
    with pytest.raises(
        ValueError,
        match="unknown family 'keras'; families: hf, timm, simple_vit, ecg1d, hwvit, sablock, cookbook_attention",
    ):
        load_float(timm_sd, family="keras")


def test_missing_unexpected_misshaped_in_one_error(timm_sd):
    sd = dict(timm_sd)
    del sd["blocks.1.mlp.fc2.bias"]
    sd["blocks.0.ls1.gamma"] = torch.ones(32)  # layer scale: not supported, so unexpected
    sd["blocks.0.attn.proj.weight"] = torch.zeros(32, 31)
    with pytest.raises(ValueError) as err:
        load_float(sd, family="timm", heads=4)
    msg = str(err.value)
    assert msg.startswith("cannot load timm checkpoint: ")
    assert "missing keys: blocks.1.mlp.fc2.bias" in msg
    assert "unexpected keys: blocks.0.ls1.gamma" in msg
    assert "mis-shaped keys: blocks.0.attn.proj.weight (32, 31) (expected (32, 32))" in msg
    assert "\n" not in msg


def test_missing_key_named_in_the_source_spelling():
    sd = randomize(ECGformer(), seed=12).state_dict()
    del sd["encoder.1.0.block.1.keys_projection.weight"]
    with pytest.raises(ValueError, match=r"missing keys: encoder\.1\.0\.block\.1\.keys_projection\.weight"):
        load_float(sd, family="ecg1d", heads=4)


def test_non_finite_weights(timm_sd):
    sd = dict(timm_sd)
    sd["blocks.0.mlp.fc1.weight"] = sd["blocks.0.mlp.fc1.weight"].clone()
    sd["blocks.0.mlp.fc1.weight"][3, 4] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite weights \(NaN/Inf\): blocks\.0\.mlp\.fc1\.weight"):
        load_float(sd, family="timm", heads=4)


def test_long_lists_are_cut(timm_sd):
    sd = {f"junk.{i}": torch.zeros(1) for i in range(20)}
    sd.update(timm_sd)
    with pytest.raises(ValueError, match=r"unexpected keys: junk\.0, .* and 12 more"):
        load_float(sd, family="timm", heads=4)


def test_heads_needed_and_config_mismatch(timm_sd):
    with pytest.raises(ValueError, match=r"number of heads cannot be read .*dim 32"):
        load_float(timm_sd, family="timm")
    with pytest.raises(
        ValueError,
        match=r"does not match the given config: depth: checkpoint 2, config 12; dim: "
        r"checkpoint 32, config 192",
    ):
        load_float(timm_sd, family="timm", config="vit-tiny")
    with pytest.raises(ValueError, match="not divisible by heads=5"):
        load_float(timm_sd, family="timm", heads=5)


def test_config_argument_forms(tmp_path, timm_sd):
    with pytest.raises(ValueError, match="neither a file nor a preset; presets: digits"):
        load_float(timm_sd, family="timm", config="no-such-preset")
    with pytest.raises(ValueError, match="config must be a ViTConfig"):
        load_float(timm_sd, family="timm", config=3.5)
    cfg = load_float(timm_sd, family="timm", config={"heads": 4, "name": "mine"}).cfg
    path = tmp_path / "c.yaml"
    import yaml

    path.write_text(yaml.safe_dump(cfg.to_dict()))
    assert load_float(timm_sd, family="timm", config=str(path)).cfg == cfg
    assert load_float(timm_sd, family="timm", config=cfg).cfg == cfg


def test_files_that_are_not_checkpoints(tmp_path):
    garbage = b"this is not a checkpoint at all" * 10
    for name in ("x.safetensors", "x.pt", "x.bin"):
        (tmp_path / name).write_bytes(garbage)
        with pytest.raises(ValueError, match=f"{name}: not a"):
            load_float(tmp_path / name, family="timm")
    (tmp_path / "x.yaml").write_text("a: 1\n")
    with pytest.raises(ValueError, match=r"unknown checkpoint type '\.yaml'"):
        load_float(tmp_path / "x.yaml", family="timm")
    with pytest.raises(ValueError, match="no such checkpoint file"):
        load_float(tmp_path / "missing.pt", family="timm")
    with pytest.raises(ValueError, match="directory holds no model.safetensors"):
        load_float(tmp_path, family="timm")
    with pytest.raises(ValueError, match="must be a path or a state dict"):
        load_float(42, family="timm")


class _Evil:
    def __reduce__(self):
        return (print, ("code ran while loading",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickles_with_code_are_refused(tmp_path):
    path = tmp_path / "evil.pt"
    with open(path, "wb") as fh:
        pickle.dump({"w": _Evil()}, fh)
    with pytest.raises(ValueError, match="weights_only=True"):
        load_float(path, family="timm")


def test_state_dict_shapes_of_torch_files(tmp_path, timm_sd):
    wrapped = tmp_path / "wrapped.pth"
    torch.save({"model": timm_sd, "epoch": 3}, wrapped)  # the usual training-script layout
    assert load_float(wrapped, family="timm", heads=4).cfg.depth == 2
    dp = tmp_path / "dp.pt"
    torch.save({f"module.{k}": v for k, v in timm_sd.items()}, dp)  # DataParallel prefix
    assert load_float(dp, family="timm", heads=4).cfg.dim == 32
    bad = tmp_path / "bad.pt"
    torch.save({"w": torch.zeros(2), "lr": 0.1}, bad)
    with pytest.raises(ValueError, match="entries that are not named tensors: lr"):
        load_float(bad, family="timm")
    empty = tmp_path / "empty.safetensors"
    save_file({}, str(empty))
    with pytest.raises(ValueError, match="state dict is empty"):
        load_float(empty, family="timm")


def test_safetensors_round_trip_of_our_own_family(tmp_path):
    torch.manual_seed(13)
    model = ViT(load_preset("ecg1d").replace(depth=1, image_size=10, dim=16, heads=2, mlp_dim=32)).eval()
    path = save_float(model, tmp_path / "m.safetensors")
    back = load_float(path, family="hwvit")  # config from the file's metadata
    assert back.cfg == model.cfg
    x = torch.randn(2, 10)
    with torch.no_grad():
        assert torch.equal(model(x), back(x))
    again = save_float(model, tmp_path / "again.safetensors")
    assert again.read_bytes() == path.read_bytes()  # same weights, same bytes
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "bare.safetensors"))
    with pytest.raises(ValueError, match="hwvit checkpoint without a config"):
        load_float(tmp_path / "bare.safetensors", family="hwvit")


def test_timm_avg_pool_with_class_token_is_refused(timm_sd):
    sd = dict(timm_sd)
    sd["fc_norm.weight"], sd["fc_norm.bias"] = torch.ones(32), torch.zeros(32)
    with pytest.raises(ValueError, match="global_pool='avg' with a class token"):
        load_float(sd, family="timm", heads=4)
