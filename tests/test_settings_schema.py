"""The settings schema (gate/settings.py): every adapter, launcher and gate-tier setting has a type and a range,
checked before any data or model is built, and a bad value ends in one line that names its key.

Everything runs in process (composition and validation only): no subprocess, no training.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from hydra.utils import get_class

from gate.cli.common import hydra_entry, hydra_error
from gate.cli.tier import normalise_args
from gate.engine.validate import validate_run_config, validate_score_config, validate_tier_config
from gate.errors import ConfigError
from gate.settings import LAUNCHER_SETTINGS, TIER_RUN_SETTINGS, adapter_settings, check_section
from gate.tiers.expand import load_tier
from gate.tiers.spec import parse_tier

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
# The demo dataset of each packaged adapter (offline, composable without data).
ADAPTER_DATASET = {
    "linear_classifier": "digits", "multilabel_classifier": "fmnist_multilabel", "segmentation": "fmnist_seg",
    "medical_segmentation": "fmnist_volume", "protonet": "fmnist_fewshot", "relational": "fmnist_relational",
    "temporal_classifier": "fmnist_video", "temporal_regressor": "fmnist_video_speed",
    "zero_shot_contrastive": "fmnist_pairs",
}


def _compose(config: str, root: Path, overrides: list[str]):
    with initialize_config_module("gate.conf", version_base=None):
        return compose(config, overrides=[f"paths.root={root}", *overrides])


def _one_line_error(validate, cfg) -> str:
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    text = str(err.value)
    assert "\n" not in text, text
    return text


# (overrides of gate-run, texts the one-line error must contain: the key first)
RUN_CASES = [
    # the silent wrong results
    (["dataset=fmnist_seg", "adapter.focal_weight=-1"], ["adapter.focal_weight=-1", ">= 0"]),
    (["dataset=fmnist_seg", "adapter.depth=-1"], ["adapter.depth=-1", ">= 0"]),
    (["dataset=fmnist_pairs", "adapter.embed_dim=0"], ["adapter.embed_dim=0", ">= 1"]),
    (["dataset=fmnist_seg", "dataset.num_classes=20"], ["dataset.num_classes=20", "11 classes", "class_names"]),
    # the late raw torch messages
    (["dataset=fmnist_seg", "adapter.grid_size=0"], ["adapter.grid_size=0"]),
    (["dataset=fmnist_relational", "adapter.depth=-1"], ["adapter.depth=-1", ">= 1"]),
    (["dataset=fmnist_fewshot", "adapter.projection_dim=-5"], ["adapter.projection_dim=-5", "or null"]),
    # the dataset/adapter mismatch, named with the target kinds and the adapter that fits
    (["dataset=fmnist_pairs", "adapter=relational"],
     ["adapter=relational", "'zero_shot' task", "answer_type", "adapter=zero_shot_contrastive"]),
    # rules across keys, types, choices
    (["dataset=fmnist_seg", "adapter.hidden_dim=100", "adapter.num_heads=3"], ["adapter", "hidden_dim=100", "num_heads=3"]),
    (["dataset=fmnist_seg", "adapter.ce_weight=0", "adapter.focal_weight=0", "adapter.dice_weight=0"],
     ["ce_weight", "all 0"]),
    (["dataset=fmnist_fewshot", "adapter.min_ways=9", "adapter.max_ways=5"], ["min_ways=9", "max_ways=5"]),
    (["dataset=fmnist_video", "adapter.pool=max"], ["adapter.pool='max'", "'cls'"]),
    (["dataset=fmnist_video", "adapter.width=130"], ["width=130", "heads=4"]),
    (["adapter.label_smoothing=1.0"], ["adapter.label_smoothing=1.0"]),
    (["dataset=fmnist_multilabel", "adapter.per_class=maybe"], ["adapter.per_class='maybe'", "true or false"]),
    # keys nothing declares: refused, not dropped
    (["dataset=fmnist_seg", "+adapter.focal_wieght=1"], ["adapter.focal_wieght", "not a setting of adapter segmentation"]),
    (["+foo=1"], ["foo is not a gate-run setting"]),
    (["+data.batchsize=8"], ["data.batchsize", "batch_size"]),
    # a default lives in YAML only: a config without it is an error, not a Python fallback
    (["~data.num_workers"], ["data.num_workers is missing"]),
    # the loader and compile settings (issue 25): auto or a value torch can honour, refused before any work
    (["data.num_workers=-1"], ["data.num_workers=-1", "an integer >= 0 or auto"]),
    (["data.num_workers=2.5"], ["data.num_workers=2.5", "an integer >= 0 or auto"]),
    (["data.num_workers=many"], ["data.num_workers='many'", "an integer >= 0 or auto"]),
    (["data.pin_memory=maybe"], ["data.pin_memory='maybe'", "true, false or auto"]),
    (["~data.pin_memory"], ["data.pin_memory is missing"]),
    (["compile=fastest"], ["compile='fastest'", "false, true or one of ['default', 'reduce-overhead'"]),
    (["~compile"], ["compile is missing"]),
    (["~data.eval_batch_size"], ["data.eval_batch_size is missing"]),
    (["~ensembles"], ["ensembles is missing"]),
    (["~evaluate_test"], ["evaluate_test is missing"]),
    (["evaluate_test=sometimes"], ["evaluate_test='sometimes'", "true or false"]),
    (["~recipe.freeze_encoder"], ["recipe.freeze_encoder is missing"]),
    (["~recipe.scheduler_interval"], ["recipe.scheduler_interval is missing"]),
    (["recipe.scheduler_interval=hour"], ["recipe.scheduler_interval='hour'"]),
    # issue 16: a config written with the old names is refused naming the new key, never silently ignored
    (["+dataset.family=Img Class"], ["dataset.family was renamed: write dataset.paper_group"]),
    (["dataset=cifar100", "+dataset.protocol={image_size:224}"], ["dataset.protocol was renamed: write dataset.paper_protocol"]),
    (["+encoder.family=conv"], ["encoder.family was renamed: write encoder.architecture"]),
    (["encoder=siglip_vitb16", "encoder.architecture=siglip"], ["encoder.architecture='siglip'", "encoder.model_type"]),
    # a metric the task family never records, or one gate/metrics.py has no direction for: named with the dataset
    (["dataset.metrics=[acc@1,miou]"], ["dataset.metrics=", "dataset fashion_mnist names ['miou']", "valid: ["]),
    (["dataset.tier_metric=acc@3"], ["dataset.tier_metric='acc@3'", "dataset fashion_mnist names ['acc@3']"]),
    (["dataset=fmnist_seg", "dataset.tier_metric=made_up"], ["dataset.tier_metric='made_up'", "'miou'"]),
]


@pytest.mark.parametrize("overrides,needles", RUN_CASES, ids=[" ".join(c[0]) for c in RUN_CASES])
def test_bad_run_settings_end_in_one_line_naming_the_key(overrides, needles, tmp_path):
    text = _one_line_error(validate_run_config, _compose("run", tmp_path, overrides))
    for needle in needles:
        assert needle in text, text


SCORE_CASES = [
    (["+foo=1"], ["foo is not a gate-score setting"]),
    (["~cache"], ["cache is missing"]),
    (["~device"], ["device is missing"]),
    (["~num_workers"], ["num_workers is missing"]),
    (["num_workers=-2"], ["num_workers=-2", "an integer >= 0 or auto"]),
    (["pin_memory=often"], ["pin_memory='often'", "true, false or auto"]),
    (["progress_bar=sometimes"], ["progress_bar='sometimes'"]),
    (["+dataset.family=Img Class"], ["dataset.family was renamed: write dataset.paper_group"]),
    (["+encoder.family=conv"], ["encoder.family was renamed: write encoder.architecture"]),
    (["dataset.tier_metric=acc@3"], ["dataset.tier_metric='acc@3'", "dataset fashion_mnist names ['acc@3']"]),
]


@pytest.mark.parametrize("overrides,needles", SCORE_CASES, ids=[" ".join(c[0]) for c in SCORE_CASES])
def test_bad_score_settings_end_in_one_line_naming_the_key(overrides, needles, tmp_path):
    text = _one_line_error(validate_score_config, _compose("score", tmp_path, overrides))
    for needle in needles:
        assert needle in text, text


TIER_CASES = [
    (["launcher.poll_seconds=-1"], ["launcher.poll_seconds=-1", "> 0"]),
    (["launcher.poll_seconds=0"], ["launcher.poll_seconds=0"]),
    (["launcher.workers=0"], ["launcher.workers=0"]),
    (["launcher.timeout_min=abc"], ["launcher.timeout_min='abc'"]),
    (["+launcher.poll_second=1"], ["launcher.poll_second", "not a setting of gate-tier's launcher"]),
    (["~launcher.wait"], ["launcher.wait is missing"]),
    (["seeds=[0,0]"], ["seeds=[0, 0]", "each once"]),
    (["encoders=[a,a]"], ["encoders=['a', 'a']", "each once"]),
    (["report=maybe"], ["report='maybe'"]),
    (["overrides=[abc]"], ["overrides=['abc']", "key=value"]),
]


@pytest.mark.parametrize("overrides,needles", TIER_CASES, ids=[" ".join(c[0]) for c in TIER_CASES])
def test_bad_tier_and_launcher_settings_end_in_one_line_naming_the_key(overrides, needles, tmp_path):
    text = _one_line_error(validate_tier_config, _compose("tier_run", tmp_path, overrides))
    for needle in needles:
        assert needle in text, text


def test_seeds_listed_twice_in_a_tier_file_are_refused():
    with pytest.raises(ConfigError, match=r"seeds=\[0, 0\] is invalid: a seed is listed twice"):
        parse_tier({"name": "twice", "seeds": [0, 0], "benchmarks": ["digits"]}, "twice")


def test_an_empty_encoder_name_is_refused_not_dropped():
    with pytest.raises(ConfigError, match=r"encoder='a,,b' has an empty name"):
        normalise_args(["encoder=a,,b"])
    with pytest.raises(ConfigError, match=r"seeds='0,' has an empty name"):
        normalise_args(["seeds=0,"])


def test_the_documented_overrides_form_reaches_gate_tier(tmp_path):
    """``gate-tier 'overrides=[trainer.max_steps=10]'`` (conf/tier_run.yaml's own example) parses: each item is
    quoted for Hydra, brackets inside an item included."""
    args = normalise_args(["overrides=[trainer.max_steps=10,ensembles=[1,3]]"])
    assert args == ['overrides=["trainer.max_steps=10","ensembles=[1,3]"]']
    plain = validate_tier_config(_compose("tier_run", tmp_path, args))
    assert plain["overrides"] == ["trainer.max_steps=10", "ensembles=[1,3]"]
    assert normalise_args(['overrides=["a=1"]']) == ['overrides=["a=1"]']  # already quoted: as given


def test_a_binary_tier_file_gets_one_line_naming_it(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ConfigError) as err:
        load_tier(str(path))
    assert str(path) in str(err.value) and "not a text file" in str(err.value) and "\n" not in str(err.value)


def test_hydra_parse_errors_say_how_to_quote():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    with pytest.raises(Exception) as err:
        OverridesParser.create().parse_overrides(["overrides=[a=1,b=2]"])
    text = hydra_error(err.value)
    assert "\n" not in text and "single quotes" in text and '\'overrides=["trainer.max_steps=10"' in text


def test_an_unknown_override_key_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    """``gate-run trainer.max_stepz=3``: Hydra's multi-line report (exit 1) becomes one line naming the key."""
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.delenv("GATE_DEBUG", raising=False)
    with pytest.raises(ConfigCompositionException) as err:
        _compose("run", tmp_path, ["trainer.max_stepz=3"])
    assert "trainer.max_stepz" in hydra_error(err.value) and "\n" not in hydra_error(err.value)

    seen = {}

    def composes_badly():  # what Hydra does with an unknown key, when asked to raise (HYDRA_FULL_ERROR=1)
        import os

        seen["full_error"] = os.environ.get("HYDRA_FULL_ERROR")
        raise err.value

    with pytest.raises(SystemExit) as code:
        hydra_entry("gate-run", composes_badly)
    assert code.value.code == 2 and seen["full_error"] == "1"
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gate-run: error: unknown config key 'trainer.max_stepz'")
    import os

    assert "HYDRA_FULL_ERROR" not in os.environ  # taken back: runs and the jobs they start never see it


# ------------------------------------------------------------------------ the schema covers every packaged config


@pytest.mark.parametrize("adapter", sorted(p.stem for p in (CONF / "adapter").glob("*.yaml")))
def test_every_adapter_yaml_key_is_declared_and_passes(adapter, tmp_path):
    doc = yaml.safe_load((CONF / "adapter" / f"{adapter}.yaml").read_text())
    cls = get_class(doc["_target_"])
    declared = adapter_settings(cls)
    assert declared is not None, f"{doc['_target_']} declares no settings in gate/settings.py"
    settings, _ = declared
    keys = set(doc) - {"_target_", "name"}
    assert keys <= set(settings), f"conf/adapter/{adapter}.yaml keys {sorted(keys - set(settings))} are not declared"
    params = set(inspect.signature(cls).parameters)
    if "head" in params or any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls).parameters.values()):
        params |= set(inspect.signature(cls.__mro__[1]).parameters)  # **head: the base class's keys
    assert set(settings) <= params, f"{cls.__name__} has no parameter(s) {sorted(set(settings) - params)}"
    # The composed section (interpolations resolved against its demo dataset) passes, as does the whole config.
    plain = validate_run_config(_compose("run", tmp_path, [f"dataset={ADAPTER_DATASET[adapter]}", f"adapter={adapter}"]))
    assert check_section("adapter", plain["adapter"], *declared) == []


def test_every_packaged_adapter_class_declares_its_settings():
    # in the table (gate.settings.ADAPTER_SETTINGS) or, like a user's adapter, as ``settings`` on its class
    for target in {yaml.safe_load(p.read_text())["_target_"] for p in (CONF / "adapter").glob("*.yaml")}:
        assert adapter_settings(get_class(target)) is not None, target


@pytest.mark.parametrize("dataset", sorted(p.stem for p in (CONF / "dataset").glob("*.yaml")))
def test_every_dataset_validates_with_its_default_adapter(dataset, tmp_path):
    encoder = "minilm" if dataset == "bbc_news" else "efficientnet_lite0"
    validate_run_config(_compose("run", tmp_path, [f"dataset={dataset}", f"encoder={encoder}"]))


def test_the_launcher_and_tier_yaml_pass_and_declare_every_key(tmp_path):
    doc = yaml.safe_load((CONF / "tier_run.yaml").read_text())
    assert set(doc["launcher"]) == set(LAUNCHER_SETTINGS)
    assert set(doc) - {"defaults", "hydra"} | {"tier", "paths"} == set(TIER_RUN_SETTINGS)
    plain = validate_tier_config(_compose("tier_run", tmp_path, []))
    assert check_section("launcher", plain["launcher"], LAUNCHER_SETTINGS, required=True) == []


# Modules that read composed configs: a `.get("<key>", <default>)` there would restate a YAML default (and could
# disagree with it, as data.batch_size did: 32 in conf/run.yaml, 64 in gate/engine/build.py).
READERS = ["gate/engine/build.py", "gate/engine/training/finetune.py", "gate/scoring/stage.py", "gate/tiers/launchers/local.py",
           "gate/tiers/launchers/submitit_array.py"]


def test_no_python_fallback_restates_a_yaml_default():
    keys = set()
    for name in ("run", "score"):
        doc = yaml.safe_load((CONF / f"{name}.yaml").read_text())
        keys |= {k for k in doc if k not in ("defaults", "hydra")} | set(doc.get("data") or {})
    keys |= set(LAUNCHER_SETTINGS)
    for recipe in (CONF / "recipe").glob("*.yaml"):
        keys |= set(yaml.safe_load(recipe.read_text()))
    keys -= {"name", "metrics"}  # a section's name in messages; `metrics` there is the dataset's own key
    found = []
    for module in READERS:
        for line_no, line in enumerate((ROOT / module).read_text().splitlines(), 1):
            for key in re.findall(r"\.get\(\s*[\"'](\w+)[\"']\s*,\s*(?!None\s*\))", line):
                if key in keys:
                    found.append(f"{module}:{line_no}: {line.strip()}")
    assert not found, "defaults restated in Python:\n" + "\n".join(found)
