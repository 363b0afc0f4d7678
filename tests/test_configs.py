"""Every option of every config group composes, and instantiates where that is cheap."""

from importlib import resources

import hydra
import pytest
import torch
from hydra.errors import MissingConfigException
from omegaconf import OmegaConf

from gate.encoders import GATEEncoder
from gate.engine.build import build_encoder, build_spec, instantiate_component

from helpers import compose_run, resolved

GROUPS = ("encoder", "dataset", "adapter", "recipe", "trainer", "logger", "paths", "preset")


def options(group):
    return sorted(p.name[:-5] for p in resources.files("gate.conf").joinpath(group).iterdir()
                  if p.name.endswith(".yaml"))


ALL = [(group, name) for group in GROUPS for name in options(group)]


def test_every_group_has_options():
    for group in GROUPS:
        assert options(group), group


@pytest.mark.parametrize(("group", "name"), ALL, ids=[f"{g}={n}" for g, n in ALL])
def test_option_composes_and_resolves(tmp_path, group, name):
    cfg = compose_run(tmp_path, [f"{group}={name}"])
    plain = OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    # an adapter with classes takes them from the dataset (few-shot, retrieval and relational heads have none)
    assert plain["adapter"].get("num_classes", plain["dataset"]["num_classes"]) == plain["dataset"]["num_classes"]
    assert plain["paths"]["results"].startswith(str(tmp_path))


def runs_offline(name):
    """Encoders whose weights ship in packages or that train from scratch (hub entries need a download)."""
    import yaml

    raw = yaml.safe_load(resources.files("gate.conf").joinpath("encoder", f"{name}.yaml").read_text())
    packaged = raw["_target_"] in ("gate.encoders.EfficientNetLite", "gate.encoders.ResemblyzerEncoder") or \
        str(raw.get("model_path", "")).startswith("packaged:")
    return packaged or raw.get("pretrained") is False


@pytest.mark.parametrize("name", [n for n in options("encoder") if runs_offline(n)])
def test_encoders_instantiate_and_honour_the_contract(tmp_path, name):
    cfg = compose_run(tmp_path, [f"encoder={name}", "image_size=32"])
    encoder = build_encoder(resolved(cfg.encoder))
    assert isinstance(encoder, GATEEncoder) and encoder.modalities and encoder.feature_dim > 0
    modality = sorted(encoder.modalities)[0]
    raw = {"text": "a short news story", "audio": torch.randn(8000).numpy()}.get(
        modality, torch.randint(0, 255, (8, 8), dtype=torch.uint8).numpy())
    batch = encoder.prepare([raw, raw], modality)
    with torch.no_grad():
        out = encoder.eval()(batch)
    assert out.features.shape == (2, encoder.feature_dim)
    assert torch.isfinite(out.features).all()
    if encoder.num_source_classes:
        assert out.source_logits.shape == (2, encoder.num_source_classes)


@pytest.mark.parametrize("name", options("recipe"))
def test_recipes_build_an_optimizer_and_scheduler(tmp_path, name):
    cfg = compose_run(tmp_path, [f"recipe={name}"])
    params = [torch.nn.Parameter(torch.zeros(2))]
    optimizer = hydra.utils.instantiate(cfg.recipe.optimizer)(params)
    scheduler = hydra.utils.instantiate(cfg.recipe.scheduler)(optimizer)
    assert isinstance(optimizer, torch.optim.AdamW) and optimizer.defaults["weight_decay"] == 0.01
    assert isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
    assert scheduler.patience == 1000 and scheduler.factor == 0.5 and scheduler.mode == "min"


def test_recipe_learning_rates_follow_the_paper(tmp_path):
    lrs = {name: compose_run(tmp_path, [f"recipe={name}"]).recipe.optimizer.lr for name in options("recipe")}
    assert lrs == {"conv": 1e-3, "conv_segmentation": 6e-4, "vit": 1e-5, "hybrid": 2e-5}


@pytest.mark.parametrize("name", options("dataset"))
def test_dataset_specs(tmp_path, name):
    spec = build_spec(resolved(compose_run(tmp_path, [f"dataset={name}"]).dataset))
    from gate.families import family

    fam = family(spec.task)
    assert spec.num_classes >= (2 if fam.has_classes else 1) and spec.tier_metric in spec.metrics
    assert all(fam.records(m) for m in spec.metrics), (spec.metrics, fam.metrics)
    assert fam.targets <= set(spec.targets.values()) <= fam.target_kinds


@pytest.fixture(scope="module")
def run_of_each_dataset(tmp_path_factory) -> dict:
    """{dataset: gate-run's composed config with ``dataset=<it>``}, every packaged dataset (read, never changed)."""
    root = tmp_path_factory.mktemp("composed")
    return {name: compose_run(root, [f"dataset={name}"]) for name in options("dataset")}


def test_analysis_reads_each_dataset_config_as_the_engine_composes_it(run_of_each_dataset):
    """gate.analysis reads a dataset YAML through gate.data.spec.load_dataset_spec; the engine builds its spec from
    the composed run. Both must give the same DatasetSpec for every packaged dataset."""
    from gate.data.spec import load_dataset_spec

    for name, cfg in run_of_each_dataset.items():
        path = resources.files("gate.conf").joinpath("dataset", f"{name}.yaml")
        assert load_dataset_spec(path) == build_spec(resolved(cfg.dataset)), name


# The keys every pool benchmark (a dataset with a `source:`) used to repeat, now composed from conf/dataset_defaults.
SHARED_BUILDER_KEYS = ("data_dir", "source", "name", "cache_dir")


def test_pool_datasets_compose_the_builder_arguments_they_always_had(run_of_each_dataset):
    """Each pool dataset resolves to exactly the builder it had when it spelled data_dir/source/name/cache_dir out:
    data_dir <paths.data>/<name>, its own source, and name/cache_dir where its loader takes them (the 31 pool
    datasets before issue 16: all took data_dir and source, 29 cache_dir, 18 name). The stand-ins are unchanged:
    no data_dir, no source in their builder."""
    import inspect

    import hydra.utils
    import yaml

    counts = {"pool": 0, "cache_dir": 0, "name": 0, "standin": 0}
    for name, cfg in run_of_each_dataset.items():
        plain = OmegaConf.to_container(cfg, resolve=True)
        dataset, paths = plain["dataset"], plain["paths"]
        raw = yaml.safe_load(resources.files("gate.conf").joinpath("dataset", f"{name}.yaml").read_text())
        builder = dict(dataset["builder"])
        takes = inspect.signature(hydra.utils.get_method(builder["_target_"])).parameters
        if not dataset.get("source"):
            counts["standin"] += 1
            assert "data_dir" not in dataset and "source" not in builder and "name" not in builder, name
            continue
        counts["pool"] += 1
        assert dataset["data_dir"] == f"{paths['data']}/{name}", name
        expected = {"data_dir": f"{paths['data']}/{name}", "source": dataset["source"]}
        if "cache_dir" in takes:
            expected["cache_dir"] = paths["cache"]
            counts["cache_dir"] += 1
        if "name" in takes:
            expected["name"] = name
            counts["name"] += 1
        assert {k: builder.pop(k) for k in SHARED_BUILDER_KEYS if k in builder} == expected, name
        assert not set(SHARED_BUILDER_KEYS) & set(raw.get("builder") or {}), f"{name} restates a shared builder key"
        assert "data_dir" not in raw, f"{name} restates data_dir (conf/dataset_defaults/pool.yaml holds it)"
        assert set(builder) == set(raw["builder"]), name  # the loader's own keys (_target_, columns) stay in the file
    assert counts == {"pool": 31, "cache_dir": 29, "name": 18, "standin": 11}


@pytest.mark.parametrize("name", options("logger"))
def test_loggers_instantiate_offline(tmp_path, name):
    cfg = compose_run(tmp_path, [f"logger={name}"])
    logger = instantiate_component(resolved(cfg.logger), name="t")
    assert logger is not None
    if name == "wandb":
        assert cfg.logger.mode == "offline"


def test_unknown_names_list_the_valid_ones(tmp_path):
    with pytest.raises(MissingConfigException, match="efficientnet_lite0"):
        compose_run(tmp_path, ["encoder=not_an_encoder"])
    with pytest.raises(MissingConfigException, match="fashion_mnist"):
        compose_run(tmp_path, ["dataset=nope"])
