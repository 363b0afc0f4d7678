"""Each stand-in's plain `gate-run dataset=<name>` composes the short defaults its dataset config sets (README
"Stand-in defaults": measured to finish in about two minutes on 2 CPU cores); presets and the command line win."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tests.helpers import compose_run

# dataset -> resolved keys its plain run must keep (the values the stand-in's YAML sets, or the run defaults).
EXPECTED = {
    "fmnist_fewshot": {"trainer.max_steps": 40, "trainer.val_check_interval": 20, "adapter.max_shots": 5,
                       "adapter.val_episodes": 10, "adapter.test_episodes": 30, "adapter.min_ways": 5},
    "fmnist_seg": {"trainer.max_steps": 40, "trainer.val_check_interval": 20, "dataset.builder.train_size": 2000,
                   "dataset.builder.val_size": 100, "dataset.builder.test_size": 150},
    "fmnist_volume": {"trainer.max_steps": 60, "trainer.val_check_interval": 30},
    "fmnist_multilabel": {"trainer.max_steps": 150, "trainer.val_check_interval": 30},
    "fmnist_pairs": {"trainer.max_steps": 150, "trainer.val_check_interval": 30},
    "fmnist_relational": {"trainer.max_steps": 150, "trainer.val_check_interval": 30},
    "fmnist_video": {"trainer.max_steps": 150, "trainer.val_check_interval": 30},
    "fmnist_video_speed": {"trainer.max_steps": 1000, "trainer.val_check_interval": 200, "recipe.freeze_encoder": True,
                           "dataset.builder.max_rate": 20.0},
    "digits": {"trainer.max_steps": 150, "trainer.val_check_interval": 30, "recipe.freeze_encoder": False},
    "fashion_mnist": {"trainer.max_steps": 150, "trainer.val_check_interval": 30},
    "bbc_news": {"trainer.max_steps": 150, "trainer.val_check_interval": 30},
}


def resolved(tmp_path, overrides):
    return OmegaConf.to_container(compose_run(tmp_path, overrides), resolve=True)


def value(config, dotted):
    for part in dotted.split("."):
        config = config[part]
    return config


@pytest.mark.parametrize("dataset", sorted(EXPECTED))
def test_plain_run_of_each_standin_keeps_its_short_defaults(dataset, tmp_path):
    config = resolved(tmp_path, [f"dataset={dataset}"])
    got = {key: value(config, key) for key in EXPECTED[dataset]}
    assert got == EXPECTED[dataset]


def test_presets_and_the_command_line_still_win_over_a_standins_defaults(tmp_path):
    assert value(resolved(tmp_path, ["dataset=fmnist_fewshot", "preset=paper_finetune"]), "trainer.max_steps") == 10000
    mine = resolved(tmp_path, ["dataset=fmnist_seg", "trainer.max_steps=7", "trainer.val_check_interval=7"])
    assert (value(mine, "trainer.max_steps"), value(mine, "trainer.val_check_interval")) == (7, 7)
    shots = resolved(tmp_path, ["dataset=fmnist_fewshot", "adapter.max_shots=3", "adapter.test_episodes=9"])
    assert (value(shots, "adapter.max_shots"), value(shots, "adapter.test_episodes")) == (3, 9)
    tuned = resolved(tmp_path, ["dataset=fmnist_video_speed", "recipe.freeze_encoder=false", "recipe=vit"])
    assert value(tuned, "recipe.freeze_encoder") is False
    assert value(resolved(tmp_path, ["dataset=fmnist_video_speed", "recipe=vit"]), "recipe.freeze_encoder") is True


def test_the_bbc_news_preset_keeps_its_two_minute_size(tmp_path):
    # README "Stand-in defaults": MiniLM still fully fine-tuned, but 60 steps of 64 tokens (was 200 of 128: 6 min)
    config = resolved(tmp_path, ["preset=bbc_news_minilm"])
    keys = ("dataset.name", "encoder.name", "trainer.max_steps", "trainer.val_check_interval", "encoder.max_length",
            "recipe.freeze_encoder")
    assert {key: value(config, key) for key in keys} == {
        "dataset.name": "bbc_news", "encoder.name": "minilm", "trainer.max_steps": 60, "trainer.val_check_interval": 20,
        "encoder.max_length": 64, "recipe.freeze_encoder": False}
    assert value(config, "recipe.optimizer.lr") == pytest.approx(5e-5, rel=1e-9)
