"""String-valued modes are Enums (hwvit.formats.NamedMode): one list of names per mode, read with
from_string, equal to the plain strings that configs, manifests and options keep."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from hwvit.byo.bind import STYLES, Interface
from hwvit.float.config import AttnScale, Embed, HeadPre, Pool, Pos, Qkv
from hwvit.formats import Calibration, ExpMode, NamedMode, Rounding
from hwvit.quant import QuantConfig
from hwvit.quant.recipe import WEIGHT_MODES, WeightScales, from_dict
from hwvit.toolchain import RUNNER_SIMULATORS, SIMULATORS, Simulator

MODES = (Rounding, Calibration, ExpMode, Simulator, WeightScales, Interface, Embed, Pool, Pos, Qkv, AttnScale, HeadPre)


@pytest.mark.parametrize("mode", MODES)
def test_from_string_reads_every_value_in_any_case(mode: type[NamedMode]):
    for member in mode:
        assert mode.from_string(member.value) is member
        assert mode.from_string(member.value.upper()) is member
        assert member == member.value and str(member) == member.value
    with pytest.raises(ValueError, match=r"unknown .*'bogus'; choose from " + ", ".join(mode.values())):
        mode.from_string("bogus")
    with pytest.raises(ValueError, match="unknown"):
        mode.from_string(None)


def test_names_and_plain_strings():
    assert ExpMode.values() == ("table", "shift")
    assert SIMULATORS == ("icarus", "verilator") and all(type(s) is str for s in SIMULATORS)
    assert WEIGHT_MODES == ("per_channel", "per_tensor")
    assert STYLES == ("valid_ready", "axis")
    with pytest.raises(ValueError, match="unknown exp mode 'cubic'"):
        ExpMode.from_string("cubic")
    with pytest.raises(ValueError, match="unknown rounding mode 'half_even'"):
        Rounding.from_string("half_even")


def test_configs_keep_the_strings_they_were_given():
    qc = QuantConfig(exp="shift")
    assert type(qc.exp) is str and qc.exp == ExpMode.SHIFT
    assert yaml.safe_dump(qc.to_dict()) == yaml.safe_dump({**QuantConfig().to_dict(), "exp": "shift"})
    with pytest.raises(ValueError, match="exp must be one of 'table', 'shift', got 'TABLE'"):
        QuantConfig(exp="TABLE")  # as written: a report records exactly this string
    recipe = from_dict({"default": {"weights": "per_tensor"}, "layers": {"head": {"weights": "per_channel"}}})
    assert recipe.weight("layers.0.mlp.fc1") == (8, True) and recipe.weight("head") == (8, False)
    assert recipe.to_dict()["default"]["weights"] == "per_tensor" and not recipe.is_plain()
    with pytest.raises(ValueError, match="choose per_channel or per_tensor"):
        from_dict({"default": {"weights": "per_row"}})


@pytest.mark.parametrize(
    ("args", "choices"),
    [
        (["compare", "--exp", "x"], ExpMode.values()),
        (["compare", "--calibration", "x"], Calibration.values()),
        (["sim", "--simulator", "x"], (*RUNNER_SIMULATORS, "both")),
        (["mutate", "--simulator", "x"], SIMULATORS),
    ],
)
def test_cli_choices_come_from_the_enums(args, choices):
    from hwvit.cli import main

    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert f"is not one of {', '.join(map(repr, choices))}." in result.output


def test_vit_config_string_fields_are_enums():
    from hwvit.float.config import CHOICES, load_preset

    enums = {"embed": Embed, "pool": Pool, "pos": Pos, "qkv": Qkv, "attn_scale": AttnScale, "head_pre": HeadPre}
    assert CHOICES == {name: enum.values() for name, enum in enums.items()}
    ecg, digits = load_preset("ecg1d"), load_preset("digits")
    assert type(ecg.embed) is str and ecg.embed == Embed.LINEAR1D and ecg.pool == Pool.MEAN
    assert digits.pool == Pool.CLS and digits.cls_token
    with pytest.raises(ValueError, match=r"bad pool='max' \(one of cls, mean\)"):
        digits.replace(pool="max")
