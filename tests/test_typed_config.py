"""Parse once into typed objects: gate-run's and gate-score's configs are checked, resolved and built into frozen
dataclasses generated from the settings tables (gate.settings.typed), which their stages read."""

import dataclasses

import pytest

from gate import settings
from gate.engine.validate import parse_run, parse_score
from gate.errors import ConfigError
from gate.results import experiment_id

from helpers import compose_run


def test_the_run_configs_fields_are_the_declared_keys_of_its_table():
    fields = {f.name for f in dataclasses.fields(settings.RunConfig)} - {"_source"}
    assert fields == set(settings.RUN.settings)
    data = next(f.type for f in dataclasses.fields(settings.RunConfig) if f.name == "data")
    assert {f.name for f in dataclasses.fields(data)} - {"_source"} == set(settings.DATA.settings)
    assert settings.typed(settings.RUN, "anything") is settings.RunConfig  # one class per table


def test_gate_runs_parse_gives_typed_values_and_keeps_the_plain_data_it_hashes(tmp_path):
    cfg = compose_run(tmp_path, ["dataset=digits", "encoder=resnet18_scratch", "data.batch_size=16",
                                 "recipe.optimizer.lr=1", "+trainer.accumulate_grad_batches=2"])
    checked = parse_run(cfg)
    run = checked.run
    assert isinstance(run, settings.RunConfig)
    assert run.data.batch_size == 16 and isinstance(run.trainer.max_steps, int)
    assert run.recipe.optimizer.lr == 1.0 and isinstance(run.recipe.optimizer.lr, float)  # a float setting is a float
    assert isinstance(run.ensembles, tuple) and run.ensembles == tuple(checked.config["ensembles"])
    assert run.trainer["accumulate_grad_batches"] == 2  # a key handed on to the Trainer: read as a mapping
    assert run.as_dict() == checked.config and dict(run) == checked.config
    assert checked.spec.name == "digits" and checked.spec.num_classes == 10
    assert experiment_id(run, "finetune") == experiment_id(checked.config, "finetune")
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.seed = 3
    copy = run.as_dict()
    copy["data"]["batch_size"] = 1  # a caller's copy: nothing reaches the parsed config
    assert run.data.batch_size == 16 and checked.config["data"]["batch_size"] == 16


def test_gate_scores_parse_is_typed_too(tmp_path):
    cfg = compose_run(tmp_path, ["dataset=digits", "encoder=resnet18_scratch", "metrics=[logme]"], config_name="score")
    checked = parse_score(cfg)
    assert isinstance(checked.run, settings.ScoreConfig)
    assert checked.run.metrics == ("logme",) and checked.run.split in settings.SPLITS and checked.run.cache in (True, False)


def test_parse_checks_before_it_builds_one_line_naming_the_key():
    good = {**settings.yaml_defaults(settings.DATA), "batch_size": 8}
    assert settings.parse(settings.DATA, good, "Data").batch_size == 8
    with pytest.raises(ConfigError, match=r"^data\.batch_size=0 is invalid: must be >= 1$"):
        settings.parse(settings.DATA, {**good, "batch_size": 0}, "Data", prefix="data")


def test_every_declared_section_has_its_typed_class():
    """A key a section declares must be a field name (an identifier, not a keyword): a table that cannot become its
    dataclass fails here, not in a user's run."""
    sections = {name: value for name, value in vars(settings).items() if isinstance(value, settings.Section)}
    assert len(sections) >= 15
    for name, section in sections.items():
        cls = settings.typed(section, f"Typed{name.title().replace('_', '')}")
        assert {f.name for f in dataclasses.fields(cls)} - {"_source"} == set(section.settings), name


def test_the_store_layout_under_a_root_is_read_from_the_paths_config(tmp_path):
    """Measurements and a plan without experiments find a root's store where a composed run puts it."""
    checked = parse_run(compose_run(tmp_path, ["dataset=digits", "encoder=resnet18_scratch"]))
    for key in ("results", "runs", "data"):
        assert str(settings.default_path(key, tmp_path)) == checked.config["paths"][key]


def test_a_gate_run_checks_each_section_once_and_builds_its_dataset_spec_once(tmp_path, capsys, monkeypatch):
    """A real gate-run (the console script's main, in this process): its run config is checked and built once, its
    dataset section (the split recipe inside it) checked once, the trainer section once, the dataset spec built
    once — no stage re-checks what the parse at the edge checked. Counted on the one checker every section goes
    through (gate.settings.check, which checks nested sections by calling itself) and on the spec's constructor."""
    import sys
    from collections import Counter

    from gate.cli import run
    from gate.data.spec import DatasetSpec

    from helpers import SMOKE, TINY_ENCODER, call_cli

    original, counts = settings.check, Counter()
    watched = {id(settings.RUN): "run", id(settings.DATASET): "dataset", id(settings.TRAINER): "trainer",
               id(settings.DATA): "data"}

    def counting(values, section, *args, **kwargs):
        name = watched.get(id(section)) or ("split recipe" if section.owner == settings.SPLIT_RECIPE.owner else None)
        if name:
            counts[name] += 1
        return original(values, section, *args, **kwargs)

    for module in [m for name, m in sys.modules.items() if name.startswith("gate") and m is not None]:
        if getattr(module, "check", None) is original:
            monkeypatch.setattr(module, "check", counting)
    built, init = [], DatasetSpec.__post_init__
    monkeypatch.setattr(DatasetSpec, "__post_init__", lambda self: (built.append(self.name), init(self))[1])
    parsed, build = [], settings.build
    monkeypatch.setattr(settings, "build", lambda section, values, name: (parsed.append(name), build(section, values, name))[1])

    out = call_cli(run.main, [*SMOKE, "dataset=digits", *TINY_ENCODER, f"paths.root={tmp_path}"], capsys,
                   prog="gate-run")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "test/acc@1" in out.stdout  # it trained and tested
    assert parsed.count("RunConfig") == 1, parsed
    assert counts == {"run": 1, "data": 1, "trainer": 1, "dataset": 1, "split recipe": 1}, counts
    assert built == ["digits"], built


def _set(config: dict, dotted: str, value) -> dict:
    import copy

    changed = copy.deepcopy(config)
    *parents, last = dotted.split(".")
    node = changed
    for key in parents:
        node = node[key]
    node[last] = value
    return changed


def _declared_leaves(section: settings.Section, config: dict, prefix: str = ""):
    """The dotted keys of ``section`` present in ``config`` that are settings (not sections), nested ones included."""
    for key, setting in section.settings.items():
        if key not in config:
            continue
        if isinstance(setting, settings.Section):
            if isinstance(config[key], dict):
                yield from _declared_leaves(setting, config[key], f"{prefix}{key}.")
        elif setting.kind != "group":
            yield f"{prefix}{key}"


def test_a_run_only_setting_says_so_on_its_declaration_and_only_those_leave_the_experiment_id(tmp_path):
    """What the id leaves out is read from the declarations (``run_only=True``): every such key of a real run
    config changes nothing when its value changes, and every other declared setting it holds changes the id."""
    from gate.results import RUN_ONLY_KEYS

    config = parse_run(compose_run(tmp_path, ["dataset=digits", "encoder=resnet18_scratch"])).config
    exp = experiment_id(config, "finetune")
    marked = settings.run_only_keys(settings.RUN)
    assert {"paths", "force", "compile", "data.num_workers", "trainer.enable_progress_bar", "dataset.tier_range",
            "encoder.paper_name"} <= set(marked) and set(marked) <= set(RUN_ONLY_KEYS["finetune"])
    present = [k for k in marked if k.split(".")[0] in config]
    assert len(present) >= 10
    for key in present:
        assert experiment_id(_set(config, key, "changed"), "finetune") == exp, key
    counted = [k for k in _declared_leaves(settings.RUN, config)
               if not any(k == r or k.startswith(f"{r}.") for r in RUN_ONLY_KEYS["finetune"])]
    assert {"seed", "image_size", "data.batch_size", "trainer.max_steps", "recipe.optimizer.lr"} <= set(counted)
    for key in counted:
        assert experiment_id(_set(config, key, "changed"), "finetune") != exp, key
