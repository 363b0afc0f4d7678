"""The settings schema (gate/settings.py): every setting of every section (gate-run with its data, trainer, recipe,
callbacks and logger; gate-score; gate-rank; gate-tier and its launcher; a tier file; every adapter; a dataset and
its splits, source and paper_protocol blocks) has a type and a range, checked before any data or model is built,
and a bad value ends in one line that names its key. The defaults live in the YAML files only.

Everything runs in process (composition and validation only): no subprocess, no training.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import yaml
from hydra.errors import ConfigCompositionException
from hydra.utils import get_class

from gate.cli.arguments import normalise_args as _normalise_args
from gate.cli.commands import COMMANDS
from gate.cli.common import hydra_entry, hydra_error
from gate.engine.validate import validate_run_config, validate_score_config, validate_tier_config
from gate.errors import ConfigError
from gate.settings import ADAPTER_FACTS, LAUNCHER, TIER_RUN, adapter_section, check
from gate.tiers.expand import load_tier
from gate.tiers.spec import parse_tier

from helpers import compose_run

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
# The demo dataset of each packaged adapter (offline, composable without data).
ADAPTER_DATASET = {
    "linear_classifier": "digits", "multilabel_classifier": "fmnist_multilabel", "segmentation": "fmnist_seg",
    "medical_segmentation": "fmnist_volume", "protonet": "fmnist_fewshot", "relational": "fmnist_relational",
    "temporal_classifier": "fmnist_video", "temporal_regressor": "fmnist_video_speed",
    "zero_shot_contrastive": "fmnist_pairs",
}


def normalise_args(argv):
    """gate-tier's command line as its row of the command table reads it."""
    return _normalise_args(argv, dict(COMMANDS["gate-tier"].list_keys))


def _compose(config: str, root: Path, overrides: list[str]):
    return compose_run(root, overrides, config_name=config)


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
    # issue 26/27: the recipe's optimizer and scheduler keys are declared (lr=inf trained on NaN; patience=-1 halved
    # the LR every step; factor=5 and mode=bogus ended in raw torch messages)
    (["recipe.optimizer.lr=inf"], ["recipe.optimizer.lr=inf", "a finite number > 0"]),
    (["recipe.optimizer.lr=nan"], ["recipe.optimizer.lr=nan", "expected a finite number > 0"]),
    (["recipe.optimizer.lr=fast"], ["recipe.optimizer.lr='fast'", "a finite number > 0"]),
    (["recipe.optimizer.weight_decay=inf"], ["recipe.optimizer.weight_decay=inf"]),
    (["recipe.optimizer.weight_decay=-0.1"], ["recipe.optimizer.weight_decay=-0.1", ">= 0"]),
    (["+recipe.optimizer.lrr=0.1"], ["recipe.optimizer.lrr is not a setting of the recipe's optimizer",
                                     "the parameters of its _target_"]),
    (["recipe.scheduler.factor=5"], ["recipe.scheduler.factor=5", "in (0.0, 1.0)"]),
    (["recipe.scheduler.factor=0"], ["recipe.scheduler.factor=0"]),
    (["recipe.scheduler.patience=-1"], ["recipe.scheduler.patience=-1", ">= 0"]),
    (["recipe.scheduler.patience=1.5"], ["recipe.scheduler.patience=1.5", "an integer >= 0"]),
    (["recipe.scheduler.mode=bogus"], ["recipe.scheduler.mode='bogus'", "['min', 'max']"]),
    (["+recipe.scheduler.patiense=3"], ["recipe.scheduler.patiense is not a setting of the recipe's scheduler"]),
    (["+recipe.warmup=100"], ["recipe.warmup is not a recipe setting"]),
    # the trainer: gradient_clip_val=-1 meant no clipping without a word; an unknown key reached Lightning late
    (["trainer.gradient_clip_val=-1"], ["trainer.gradient_clip_val=-1", ">= 0", "or null"]),
    (["trainer.gradient_clip_val=big"], ["trainer.gradient_clip_val='big'"]),
    (["+trainer.max_stepz=3"], ["trainer.max_stepz is not a setting of the trainer"]),
    (["trainer.devices=0"], ["trainer.devices=0", "a number of devices >= 1"]),
    # an adapter's loss weight must be finite (focal_weight=inf trained the whole run on NaN)
    (["dataset=fmnist_seg", "adapter.focal_weight=inf"], ["adapter.focal_weight=inf"]),
    (["dataset=fmnist_seg", "adapter.focal_gamma=nan"], ["adapter.focal_gamma=nan"]),
    # callbacks and logger: type, range, unknown key
    (["callbacks.count_flops=maybe"], ["callbacks.count_flops='maybe'", "true or false"]),
    (["callbacks.visuals.max_examples=0"], ["callbacks.visuals.max_examples=0", ">= 1"]),
    (["+callbacks.grad_norms.every=3"], ["callbacks.grad_norms.every is not a setting of callbacks.grad_norms"]),
    (["logger=wandb", "+logger.projct=x"], ["logger.projct is not a setting of the logger"]),
    # the dataset section: type, range, unknown keys (the block's and its splits'), the declared tier range
    (["dataset.num_classes=ten"], ["dataset.num_classes='ten'", "an integer"]),
    (["dataset.modality=smell"], ["dataset.modality='smell'", "['image', 'text', 'audio', 'video']"]),
    (["+dataset.colour=red"], ["dataset.colour is not a dataset setting"]),
    (["dataset=cifar100", "dataset.splits.seed=-1"], ["dataset.splits.seed=-1", "must be in [0, 4294967295]"]),
    (["+dataset.splits.val_fractoin=0.2"], ["dataset.splits.val_fractoin is not a setting of dataset.splits"]),
    (["+dataset.tier_range=[1,0]"], ["dataset.tier_range=[1, 0]", "finite low < high"]),
    (["dataset=cifar100", "dataset.source.access=free"], ["dataset.source", "access='free'"]),
    (["dataset=cifar100", "+dataset.paper_protocol.batch_unit=crate"], ["dataset.paper_protocol.batch_unit='crate'"]),
    (["+dataset.builder.train_sise=10"], ["dataset.builder.train_sise is not a parameter of the dataset's builder"]),
    # the recipe follows the architecture: a timm ViT body left on the conv recipe (lr 1e-3, not 1e-5) is refused
    (["encoder=timm", "encoder.architecture=vit", "encoder.model_name=vit_small_patch16_224"],
     ["encoder.architecture='vit'", "recipe=conv", "recipe=vit"]),
    (["encoder=vit_tiny_scratch", "recipe=conv"], ["encoder.architecture='vit'", "recipe=conv", "recipe=vit"]),
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
    (["batch_size=abc"], ["batch_size='abc'", "an integer >= 1"]),
    (["max_samples=1"], ["max_samples=1", ">= 2"]),
    (["device=cuda:x"], ["device='cuda:x'", "cuda:<index>"]),
    (["+dataset.colour=red"], ["dataset.colour is not a dataset setting"]),
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
    (["seeds=[-1]"], ["seeds=[-1]", "integers in [0, 4294967295]"]),
    (["+colour=red"], ["colour is not a gate-tier setting"]),
    (["launcher.mem_gb=inf"], ["launcher.mem_gb=inf"]),
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


def _adapter_classes():
    return sorted({yaml.safe_load(p.read_text())["_target_"]: p.stem for p in (CONF / "adapter").glob("*.yaml")}.items())


@pytest.mark.parametrize("adapter", sorted(p.stem for p in (CONF / "adapter").glob("*.yaml")))
def test_every_adapter_yaml_key_is_declared_beside_its_class_and_passes(adapter, tmp_path):
    doc = yaml.safe_load((CONF / "adapter" / f"{adapter}.yaml").read_text())
    cls = get_class(doc["_target_"])
    assert isinstance(cls.__dict__.get("settings") or getattr(cls, "settings", None), dict), \
        f"{doc['_target_']} declares no `settings` on its class"
    section = adapter_section(cls)
    keys = set(doc) - {"_target_", "name"} - set(ADAPTER_FACTS)  # a fact of the class, stated for the experiment id
    assert doc["loss_splits_across_devices"] is cls.loss_splits_across_devices
    assert keys <= set(section.settings), f"conf/adapter/{adapter}.yaml keys {sorted(keys - set(section.settings))} " \
                                          f"are not declared"
    params = set(inspect.signature(cls).parameters)
    if "head" in params or any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls).parameters.values()):
        params |= set(inspect.signature(cls.__mro__[1]).parameters)  # **head: the base class's keys
    assert set(section.settings) <= params, f"{cls.__name__} has no parameter(s) {sorted(set(section.settings) - params)}"
    # The composed section (interpolations resolved against its demo dataset) passes, as does the whole config.
    plain = validate_run_config(_compose("run", tmp_path, [f"dataset={ADAPTER_DATASET[adapter]}", f"adapter={adapter}"]))
    assert check(plain["adapter"], section, "adapter") == []


def _bad_values(setting):
    """(a value of the wrong type, a value out of range or None) for one declared adapter setting."""
    wrong = "abc" if setting.kind != "str" else 12
    low = None
    if setting.kind in ("int", "float") and setting.low is not None:
        low = setting.low - 1 if not setting.low_open else setting.low
    elif setting.kind == "int_list" and setting.low is not None:
        low = [setting.low - 1]
    return wrong, low


@pytest.mark.parametrize("adapter", sorted(p.stem for p in (CONF / "adapter").glob("*.yaml")))
def test_every_adapter_refuses_a_wrong_type_an_out_of_range_value_and_an_unknown_key(adapter, tmp_path):
    """For every packaged adapter, generated from its own declaration: each declared key given a value of the wrong
    type, each bounded key one below its bound, and a key it does not declare: each one line naming the key."""
    doc = yaml.safe_load((CONF / "adapter" / f"{adapter}.yaml").read_text())
    section = adapter_section(get_class(doc["_target_"]))
    base = [f"dataset={ADAPTER_DATASET[adapter]}", f"adapter={adapter}"]
    cfg = _compose("run", tmp_path, base)
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=True)
    checked = 0
    for key, setting in section.settings.items():
        for value in _bad_values(setting):
            if value is None or key not in plain["adapter"]:
                continue
            bad = {**plain, "adapter": {**plain["adapter"], key: value}}
            text = _one_line_error(validate_run_config, bad)
            assert f"adapter.{key}=" in text, (key, value, text)
            checked += 1
    assert checked >= 2
    text = _one_line_error(validate_run_config, {**plain, "adapter": {**plain["adapter"], "not_a_key": 1}})
    assert "adapter.not_a_key is not a setting of adapter" in text


def test_a_user_adapter_declares_its_settings_on_its_class_and_they_are_checked():
    from toy_family import ToyRegressor

    section = adapter_section(ToyRegressor, "toy_regressor")
    assert check({"squash": "yes"}, section, "adapter") == [
        "adapter.squash='yes' is invalid: expected true or false"]
    assert "adapter.sqash is not a setting of adapter toy_regressor" in check({"sqash": True}, section, "adapter")[0]


@pytest.mark.parametrize("dataset", sorted(p.stem for p in (CONF / "dataset").glob("*.yaml")))
def test_every_dataset_validates_with_its_default_adapter(dataset, tmp_path):
    encoder = "minilm" if dataset == "bbc_news" else "efficientnet_lite0"
    validate_run_config(_compose("run", tmp_path, [f"dataset={dataset}", f"encoder={encoder}"]))


def test_the_launcher_and_tier_yaml_pass_and_declare_every_key(tmp_path):
    doc = yaml.safe_load((CONF / "tier_run.yaml").read_text())
    assert set(doc["launcher"]) == set(LAUNCHER.settings)
    assert set(doc) - {"defaults", "hydra"} | {"tier", "paths"} == set(TIER_RUN.settings)
    plain = validate_tier_config(_compose("tier_run", tmp_path, []))
    assert check(plain["launcher"], LAUNCHER, "launcher") == []


def _groups(config: str) -> set[str]:
    """The keys a root config's defaults list fills: a group's name, or the first key of its package
    (``tier@tiers.small`` fills ``tiers``)."""
    doc = yaml.safe_load((CONF / f"{config}.yaml").read_text())
    names = [str(next(iter(e))) for e in doc.get("defaults") or () if isinstance(e, dict)]
    return {n.split("@")[1].split(".")[0] if "@" in n else n for n in names if not n.startswith("override ")}


@pytest.mark.parametrize("name", ["RUN", "DATA", "SCORE", "RANK", "TIER_RUN", "LAUNCHER", "TRAINER", "CALLBACKS",
                                  "RECIPE", "PATHS", "SPLIT_RECIPE", "ANALYSIS", "EEVEE_COMMAND", "DATA_COMMAND"])
def test_each_section_and_its_yaml_list_the_same_keys(name):
    """The defaults are stated once, in the YAML the section names: every key the YAML states is declared, and
    every declared key (but those marked optional and the config groups of a root config) has its default there."""
    import gate.settings as settings

    section = getattr(settings, name)
    stated = set(settings.yaml_defaults(section))
    declared = set(section.settings)
    groups = {k for k, s in section.settings.items() if getattr(s, "kind", "") == "group"}
    optional = {k for k, s in section.settings.items() if s.optional}
    root = section.yaml.partition(":")[0].removesuffix(".yaml")
    if ":" not in section.yaml and (CONF / section.yaml).parent == CONF:
        stated |= _groups(root)  # a root config's groups come from its defaults list
    assert stated - set(section.meta) <= declared, f"{section.yaml} states undeclared {sorted(stated - declared)}"
    assert declared - optional - groups <= stated | groups, \
        f"{name} declares {sorted(declared - optional - stated - groups)} without a default in {section.yaml}"


def test_gate_eevees_search_settings_are_declared_with_their_yaml_and_dataclass():
    import dataclasses

    from gate.analysis.eevee import EeveeConfig
    from gate.settings import EEVEE

    doc = yaml.safe_load((CONF / "eevee.yaml").read_text())
    assert set(EEVEE.settings) == {f.name for f in dataclasses.fields(EeveeConfig)} and set(EEVEE.settings) <= set(doc)
    assert dataclasses.asdict(EeveeConfig()) == {k: doc[k] for k in EEVEE.settings}  # its defaults are the YAML's
    with pytest.raises(ValueError, match=r"^chunk=0 is invalid: expected an integer >= 1; threads='x' is invalid"):
        EeveeConfig(chunk=0, threads="x")


def test_gate_ranks_request_is_its_settings_with_the_yamls_defaults():
    import dataclasses

    from gate.ranking.request import Request
    from gate.settings import RANK

    doc = yaml.safe_load((CONF / "rank.yaml").read_text())
    fields = {f.name for f in dataclasses.fields(Request)} - {"tier", "_"}
    assert fields <= set(RANK.settings) - {"tier"}
    default = Request(None, (), 0.1)
    for name in fields - {"encoders", "budget"}:
        value = getattr(default, name)
        assert (list(value) if isinstance(value, tuple) else value) == doc[name], name


def test_the_evaluate_test_default_is_read_from_run_yaml():
    """The experiment id leaves evaluate_test out at its default: the default read from conf/run.yaml."""
    from gate.results import DEFAULT_ONLY_IF_SET
    from gate.settings import RUN, yaml_defaults

    assert dict(DEFAULT_ONLY_IF_SET) == {"evaluate_test": yaml_defaults(RUN)["evaluate_test"]}


# `.get(key, default)` reads the scan leaves alone, each with why it is not a second default of a declared setting:
# plain data that is not a composed config, or a key the YAML leaves to Lightning (its own default).
NOT_CONFIG = {
    ("gate/analysis/eevee.py", "out"): "a workspace dict of numpy buffers",
    ("gate/data/loaders/relational.py", "split"): "a CLEVR question record (its split field, else the source's)",
    ("gate/data/manifest.py", "source"): "a manifest file's JSON (one written before the field is refused later)",
    ("gate/data/manifest.py", "recipe"): "a manifest file's JSON",
    ("gate/tiers/summary.py", "device"): "a stored record's facts",
    ("gate/ranking/scores.py", "num_classes"): "a score record's facts, else the dataset's declared classes",
    ("gate/ranking/grading.py", "tier"): "the seed-to-seed ceiling's table",
    ("gate/scoring/features.py", "split"): "a cache key file's JSON, for a message",
    ("gate/tiers/spec.py", "seeds"): "a tier file: one without seeds runs seed 0 (gate.settings.TIER_FILE says so)",
    ("gate/parallel.py", "devices"): "a stored record's trainer section (the identity of runs made before the key)",
    ("gate/parallel.py", "accelerator"): "a stored record's trainer section; Lightning's own default",
    ("gate/parallel.py", "num_nodes"): "trainer/default.yaml leaves it to Lightning (default 1)",
    ("gate/engine/build.py", "num_nodes"): "trainer/default.yaml leaves it to Lightning (default 1)",
    ("gate/engine/training/distributed.py", "strategy"): "trainer/default.yaml leaves it to Lightning (auto)",
    ("gate/engine/training/trainer.py", "accelerator"): "Lightning's own keyword arguments, as Lightning reads them",
    ("gate/engine/training/trainer.py", "max_steps"): "Lightning's own keyword arguments (-1: no limit)",
    ("gate/engine/training/trainer.py", "enable_progress_bar"): "Lightning's own keyword arguments",
}


def test_no_python_fallback_restates_a_yaml_default():
    """Every module of the gate package is scanned (not a list of readers): a `.get("<key>", <default>)` of a key
    some section declares restates the default its YAML states (data.batch_size was 32 in conf/run.yaml and 64 in
    gate/engine/build.py; the split recipe was written three times; evaluate_test's default three times)."""
    import gate.settings as settings

    keys = set()
    for section in (settings.RUN, settings.DATA, settings.SCORE, settings.RANK, settings.TIER_RUN, settings.LAUNCHER,
                    settings.TRAINER, settings.RECIPE, settings.OPTIMIZER, settings.SCHEDULER, settings.CALLBACKS,
                    settings.SPLIT_RECIPE, settings.TIER_FILE, settings.DATASET):
        keys |= set(section.settings)
    keys -= {"name", "metrics"}  # a section's name in messages; `metrics` is also gate-score's list of scores
    found = []
    for path in sorted((ROOT / "gate").rglob("*.py")):
        module = str(path.relative_to(ROOT))
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            for key in re.findall(r"\.get\(\s*[\"'](\w+)[\"']\s*,\s*(?!\s|None\s*\))", line):
                if key in keys and (module, key) not in NOT_CONFIG:
                    found.append(f"{module}:{line_no}: {line.strip()}")
    assert not found, "defaults restated in Python:\n" + "\n".join(found)


def test_the_fallback_scan_sees_a_planted_fallback(tmp_path):
    # the scan's pattern catches the form it looks for (with and without a space after the comma)
    pattern = r"\.get\(\s*[\"'](\w+)[\"']\s*,\s*(?!\s|None\s*\))"
    assert re.findall(pattern, 'x.get("batch_size", 64)') == ["batch_size"]
    assert re.findall(pattern, 'x.get("batch_size",64)') == ["batch_size"]
    assert re.findall(pattern, 'x.get("batch_size", None)') == []


def test_no_isinstance_validation_chain_outside_the_schema():
    """The config checkers speak one vocabulary: no `isinstance(...) ... or not isinstance(...)` chain that
    type-checks a setting remains in the modules that check configs."""
    checkers = ["gate/engine/validate.py", "gate/ranking/request.py", "gate/cli/rank.py", "gate/tiers/spec.py",
                "gate/tiers/expand.py", "gate/tiers/launchers/local.py", "gate/data/spec.py", "gate/data/hub.py",
                "gate/data/manifest.py", "gate/analysis/eevee.py", "gate/adapters/temporal.py"]
    chain = re.compile(r"isinstance\([^)]*\)[^\n]*\bnot isinstance\(|isinstance\(\w+, bool\) or not isinstance")
    found = [f"{m}: {line.strip()}" for m in checkers for line in (ROOT / m).read_text().splitlines()
             if chain.search(line)]
    assert not found, "\n".join(found)


# ---------------------------------------------------------------------------------------------- gate-rank's request
RANK_CASES = [
    ({"budget": "cheap"}, "budget='cheap' is invalid: expected a fraction of the full tier's compute"),
    ({"budget": 2.0}, "budget=2.0 is invalid"),
    ({"eta": 2}, "eta was replaced by halving=contested (v1's successive halving over every encoder was removed"),
    ({"n_boot": -1}, "n_boot=-1 is invalid: must be >= 0"),
    ({"overhead_steps": 2}, "overhead_steps was replaced by the cost model's fixed seconds per run"),
    ({"seed": 3}, "seed was replaced by proxy_seeds"),
    ({"proxy_seeds": [-2]}, "proxy_seeds=[-2] is invalid"),
    ({"validate": "maybe"}, "validate='maybe' is invalid: expected true or false"),
    ({"colour": "red"}, "colour is not a gate-rank setting"),
    ({"encoders": ["a", "b"]}, "a ranking needs at least 3 distinct encoders"),
    ({"prior": ["nope"]}, "prior: unknown score 'nope'"),
]


@pytest.mark.parametrize("change,message", RANK_CASES, ids=[str(c[0]) for c in RANK_CASES])
def test_gate_ranks_request_goes_through_the_schema(change, message, tmp_path):
    from omegaconf import OmegaConf

    from gate.ranking.request import check_request

    plain = OmegaConf.to_container(_compose("rank", tmp_path, []), resolve=True)
    plain.pop("hydra", None)
    check_request(plain)  # the packaged request is valid
    with pytest.raises(ConfigError) as err:
        check_request({**plain, **change})
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


# ------------------------------------------------------------------------------------------------------ tier files
@pytest.mark.parametrize("change,message", [
    ({"seeds": "abc"}, "seeds='abc' is invalid: expected a non-empty list of integers in [0, 4294967295]"),
    ({"seeds": [-1]}, "seeds=[-1] is invalid"),
    ({"score": "yes"}, "score='yes' is invalid: expected true or false"),
    ({"colour": "red"}, "colour is not a tier key"),
    ({"use_protocol": True}, "use_protocol was renamed use_paper_protocol"),
    ({"benchmarks": []}, "benchmarks=[] is invalid: expected a non-empty list"),
])
def test_a_tier_file_goes_through_the_schema(change, message):
    with pytest.raises(ConfigError) as err:
        parse_tier({"name": "t", "seeds": [0], "benchmarks": ["digits"], **change}, "t")
    assert message in str(err.value), str(err.value)


# --------------------------------------------------------------------------------------------- datasets and families
def test_a_segmentation_dataset_without_tier_metric_is_summarised_by_its_familys_metric():
    from gate.data.spec import spec_from_config

    spec = spec_from_config({"name": "seg", "modality": "image", "task": "segmentation", "num_classes": 3,
                             "targets": {"mask": "mask"}})
    assert spec.tier_metric == "miou" and spec.metrics == ("miou",)
    regression = spec_from_config({"name": "speed", "modality": "video", "task": "temporal_regression",
                                   "num_classes": 1, "targets": {"v": "clip_value"}})
    assert regression.tier_metric == "r2"


def test_the_family_registry_states_each_familys_tier_metric():
    from gate.families import families

    for fam in families().values():
        assert fam.records(fam.tier_metric), (fam.name, fam.tier_metric)


def test_the_dataset_checker_is_one_function_for_the_engine_and_for_files(tmp_path):
    """A dataset YAML read without composing a run (analysis) meets the same checks as gate-run's validation."""
    from gate.data.spec import load_dataset_spec

    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nmodality: image\ntask: classification\nnum_classes: 3\ncolour: red\n"
                    "splits: {val_fraction: 1.5}\n")
    with pytest.raises(ValueError) as err:
        load_dataset_spec(path)
    assert "dataset.colour is not a dataset setting" in str(err.value)
    assert "dataset.splits.val_fraction=1.5 is invalid" in str(err.value)


# ------------------------------------------------------------------------------------------- split recipe defaults
def test_the_split_recipe_defaults_live_in_the_yaml_and_keep_every_manifest_name():
    """conf/dataset_defaults/splits.yaml states the split recipe's defaults once; moving them out of Python changed
    no manifest file name (the names below were computed by the code that wrote 0.1 / 0.2 / seed 0 in Python)."""
    from gate.data.manifest import manifest_path, recipe_of
    from gate.settings import SPLIT_RECIPE, yaml_defaults

    assert {k: v for k, v in yaml_defaults(SPLIT_RECIPE).items() if v is not None} == {
        "seed": 0, "val_fraction": 0.1, "test_fraction": 0.2}
    for cfg, stratify, name in [({"seed": 0}, "label", "toy-3de17be5abc6.json"), ({}, None, "toy-68331a6371d4.json"),
                                ({"seed": 0, "val_fraction": 0.05}, "label", "toy-61ec5db631cf.json"),
                                ({"seed": 0, "group_column": "patient", "val_fraction": 0.1}, "label",
                                 "toy-2a4fef1e7c95.json")]:
        assert manifest_path("/m", "toy", recipe_of(cfg, stratify)).name == name, cfg
    for source in ("gate/data/splits.py", "gate/data/manifest.py"):
        text = (ROOT / source).read_text()
        assert not re.search(r"fraction[\"']?\s*(,|:\s*float\s*=)\s*0\.[12]\b|[\"']seed[\"']\s*,\s*0\)", text), \
            f"{source} restates the split recipe's defaults"


@pytest.mark.parametrize("overrides,expected", [
    (["dataset=digits"], "4b7de0601056fca1"), (["dataset=fmnist_seg"], "3b788042c1143411"),
    (["dataset=fmnist_pairs", "evaluate_test=false"], "2c51fcd2c62a7ff2")])
def test_experiment_ids_are_unchanged_by_the_schema(overrides, expected, tmp_path):
    """Ids computed before the schema (issue 26): defaults moved to the YAML at equal values change none."""
    from gate.results import experiment_id

    plain = validate_run_config(_compose("run", tmp_path, overrides))
    assert experiment_id(plain, "finetune") == expected


# ---------------------------------------------------------------------------------------- the recipe follows the body
def test_encoder_architectures_are_the_recipe_files():
    from gate.settings import recipe_architectures

    names = {p.stem for p in (CONF / "recipe").glob("*.yaml")}
    assert set(recipe_architectures()) == {n for n in names if "_" not in n}
    for name in names:
        assert name.split("_")[0] in recipe_architectures(), f"recipe {name} names no architecture"


def test_frame_by_frame_and_needs_are_stated_once():
    """An image encoder takes video frame by frame, and an adapter's needs must be among what its encoder
    provides: each rule has one home (GATEEncoder.accepts, Adapter.missing_needs) that the others call."""
    for module in ("gate/engine/validate.py", "gate/tiers/expand.py"):
        text = (ROOT / module).read_text()
        assert '"video" and "image" in' not in text, module
        assert "needs <= provides" not in text and "needs - provides" not in text, module
    from gate.adapters.relational import RelationalReasoner
    from gate.encoders.base import GATEEncoder
    from gate.encoders.hf_text import HFTextEncoder
    from gate.encoders.timm_encoder import TimmEncoder

    class FeaturesOnly(GATEEncoder):
        modalities = frozenset({"image"})

    assert TimmEncoder.accepts("video") and not TimmEncoder.accepts("text") and HFTextEncoder.accepts("text")
    assert RelationalReasoner.missing_needs(FeaturesOnly) == {"tokens"}
    assert not RelationalReasoner.missing_needs(HFTextEncoder)
    assert not RelationalReasoner.missing_needs(TimmEncoder)  # it says what it provides once built: not refused early


def _parameter_defaults(cls) -> dict:
    """Each keyword parameter's default of an adapter class (through ``**head`` to its base class)."""
    out = {}
    for klass in reversed(cls.__mro__[:2]):
        try:
            params = inspect.signature(klass).parameters.values()
        except (TypeError, ValueError):
            continue
        out.update({p.name: p.default for p in params if p.default is not inspect.Parameter.empty})
    return out


@pytest.mark.parametrize("adapter", sorted(p.stem for p in (CONF / "adapter").glob("*.yaml")))
def test_an_adapters_yaml_states_its_constructors_defaults(adapter):
    """The YAML is where a run's adapter values come from; a constructor default that differs from it would be a
    second, silent source for a library caller (``GATEDataModule(batch_size=64)`` against run.yaml's 32 was one).
    A value the YAML takes from the dataset (``${oc.select:dataset.options...,5}``) is compared by its fallback."""
    import re

    doc = yaml.safe_load((CONF / "adapter" / f"{adapter}.yaml").read_text())
    defaults = _parameter_defaults(get_class(doc["_target_"]))
    compared, differ = 0, []
    for key, value in doc.items():
        if key in ("_target_", "name") or key not in defaults or isinstance(value, dict):
            continue
        if isinstance(value, str) and value.startswith("${"):
            fallback = re.fullmatch(r"\$\{oc\.select:[^,]+,(.+)\}", value)
            if fallback is None:
                continue  # the dataset's own value (num_classes): no default to compare
            value = yaml.safe_load(fallback.group(1))
        compared += 1
        default = list(defaults[key]) if isinstance(defaults[key], tuple) else defaults[key]
        if value != default:
            differ.append(f"{key}: yaml {value!r}, constructor {defaults[key]!r}")
    assert compared, f"conf/adapter/{adapter}.yaml: no value compared"
    assert not differ, f"conf/adapter/{adapter}.yaml and its class disagree: {differ}"
