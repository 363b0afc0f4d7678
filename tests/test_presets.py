"""Every preset keeps every value it sets: a config that composes must also mean what it says.

A preset (``conf/preset/*.yaml``) that is composed before the root config's own values silently
loses them (the paper protocol ran at 48 px with capped splits). This composes each preset and checks
each key it sets, and each config group it overrides, survives composition.
"""

from importlib import resources

import pytest
import yaml
from hydra import compose
from omegaconf import OmegaConf

from helpers import composing


def presets():
    return sorted(p.name[:-5] for p in resources.files("gate.conf").joinpath("preset").iterdir()
                  if p.name.endswith(".yaml"))


def leaves(node, prefix=""):
    """(dotted key, value) for every leaf of a nested mapping."""
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from leaves(value, path + ".")
        else:
            yield path, value


def group_overrides(defaults):
    """``{group: option}`` of a preset's ``override /group: option`` entries."""
    out = {}
    for entry in defaults or []:
        if isinstance(entry, dict):
            for key, option in entry.items():
                out[key.replace("override ", "").strip().lstrip("/")] = option
    return out


def test_there_are_presets():
    assert {"paper_finetune", "digits_quick", "bbc_news_minilm", "smoke"} <= set(presets())


@pytest.mark.parametrize("name", presets())
def test_preset_keeps_every_value_it_sets(tmp_path, name):
    text = resources.files("gate.conf").joinpath("preset", f"{name}.yaml").read_text()
    assert text.startswith("# @package _global_"), f"{name}: presets are global packages"
    preset = yaml.safe_load(text)
    defaults = preset.pop("defaults", [])
    with composing():
        cfg = compose("run", overrides=[f"paths.root={tmp_path}", f"preset={name}"], return_hydra_config=True)
    choices = cfg.hydra.runtime.choices
    for group, option in group_overrides(defaults).items():
        assert choices[group] == option, f"{name}: {group}={option} became {group}={choices[group]}"
    checked = 0
    for key, value in leaves(preset):
        composed = OmegaConf.select(cfg, key)
        assert composed == value, f"{name}: {key}={value!r} composed as {composed!r}"
        checked += 1
    assert checked or group_overrides(defaults), f"{name} sets nothing"


def test_paper_protocol_is_the_paper_protocol(tmp_path):
    """The case that went wrong: the paper preset must run at 224 px on whole splits for 10k steps."""
    with composing():
        cfg = compose("run", overrides=[f"paths.root={tmp_path}", "preset=paper_finetune"])
    assert cfg.image_size == 224 and cfg.encoder.image_size == 224
    assert cfg.data.max_val_samples is None and cfg.data.max_test_samples is None
    assert cfg.trainer.max_steps == 10000 and cfg.trainer.val_check_interval == 500


def test_command_line_still_beats_a_preset(tmp_path):
    with composing():
        cfg = compose("run", overrides=[f"paths.root={tmp_path}", "preset=paper_finetune", "image_size=96"])
    assert cfg.image_size == 96


def test_an_encoder_names_its_recipe_and_the_command_line_wins(tmp_path):
    with composing():
        vit = compose("run", overrides=[f"paths.root={tmp_path}", "encoder=vit_tiny_scratch"])
        chosen = compose("run", overrides=[f"paths.root={tmp_path}", "encoder=vit_tiny_scratch", "recipe=hybrid"])
        conv = compose("run", overrides=[f"paths.root={tmp_path}", "encoder=resnet18_scratch"])
    assert (vit.recipe.name, chosen.recipe.name, conv.recipe.name) == ("vit", "hybrid", "conv")
