"""The task-family registry (gate/families.py): a packaged family is one YAML file (conf/family/), a family of
your own one register_family call next to its adapter, and nothing else in gate names one.

* A toy family registered from the test directory (tests/toy_family.py: adapter + entry + stand-in, with its
  adapter and dataset YAML written here to a config dir of the test's own) fine-tunes end to end in process.
* No module of gate outside the adapters names a task family (a scan of string literals, with an allow-list
  whose counts are checked).
* A family lookup, the experiment id, the tiers and gate-analysis load no torch (a fresh interpreter).
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from gate.families import TaskFamily, families, family, register_family, unregister_family

from helpers import resolved

ROOT = Path(__file__).resolve().parents[1]

TOY_ADAPTER = """\
name: toy_regressor
_target_: toy_family.ToyRegressor
squash: true
"""
TOY_DATASET = """\
defaults:
  - override /adapter@_global_.adapter: toy_regressor
  - _self_
name: toy_brightness_ds
modality: image
task: toy_brightness
num_classes: 1
targets: {brightness: brightness}
metrics: [mae, mse]
tier_metric: mae
builder:
  _target_: toy_family.toy_brightness
  size: 96
splits:
  test_fraction: 0.25
  val_fraction: 0.25
"""


@pytest.fixture
def toy(tmp_path):
    import toy_family

    register_family(toy_family.FAMILY)  # a no-op when the import already registered it
    conf = tmp_path / "my_conf"
    (conf / "adapter").mkdir(parents=True)
    (conf / "dataset").mkdir()
    (conf / "adapter" / "toy_regressor.yaml").write_text(TOY_ADAPTER)
    (conf / "dataset" / "toy_brightness_ds.yaml").write_text(TOY_DATASET)
    yield conf
    unregister_family("toy_brightness")


def _compose(root: Path, conf: Path, overrides=()):
    from helpers import compose_run

    return compose_run(root, [f"hydra.searchpath=[file://{conf}]", "dataset=toy_brightness_ds", "image_size=32",
                              "logger=csv", "trainer.max_steps=4", "trainer.val_check_interval=2",
                              "trainer.enable_progress_bar=false", "data.batch_size=8", "ensembles=[1]",
                              "callbacks.visuals.enabled=true", *overrides])


def test_a_toy_family_registered_from_the_tests_fine_tunes_end_to_end(toy, tmp_path):
    from gate.engine.build import build_spec
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run
    from gate.families import TARGET_KINDS
    from gate.results import ResultsStore

    cfg = _compose(tmp_path / "out", toy)
    spec = build_spec(resolved(cfg.dataset))
    assert spec.task == "toy_brightness" and spec.paper_group == "Toy Reg"  # the family's summary label by default
    assert "brightness" in TARGET_KINDS  # the kind the family brought
    result = run_finetune(parse_run(cfg))
    assert not result.skipped
    assert {"mae", "mse"} <= set(result.metrics), sorted(result.metrics)
    # brightness lies in [0, 1] and the head is squashed into it: an absolute error above 1 is impossible
    assert all(0.0 <= result.metrics[k] <= 1.0 + 1e-6 and math.isfinite(result.metrics[k]) for k in ("mae", "mse"))
    records = [r for r in ResultsStore(cfg.paths.results).complete_records(result.experiment, "finetune")]
    assert records and {r["task"] for r in records} == {"toy_brightness"}
    directions = {r["metric"]: r["higher_is_better"] for r in records if r["split"] == "test"}
    assert directions["mae"] is False and directions["mse"] is False  # from gate.metrics, via the family's metrics
    assert family("toy_brightness").directions() == {"loss": False, "mae": False, "mse": False}


def test_validation_asks_the_registry(toy, tmp_path):
    from gate.engine.validate import validate_run_config
    from gate.errors import ConfigError

    with pytest.raises(ConfigError) as err:  # a metric the family never records would leave the tier mean empty
        validate_run_config(_compose(tmp_path / "a", toy, ["dataset.tier_metric=acc@1"]))
    assert "dataset.tier_metric='acc@1' is invalid: dataset " in str(err.value)
    assert "names ['acc@1'], which a toy_brightness task never records; valid: ['loss', 'mae', 'mse']" in str(err.value)
    with pytest.raises(ConfigError) as err:
        validate_run_config(_compose(tmp_path / "b", toy, ["dataset.task=toy_brightnes"]))
    assert "dataset.task='toy_brightnes' is invalid: expected a registered task family" in str(err.value)
    assert "'toy_brightness'" in str(err.value)


def test_gate_score_and_gate_tier_score_only_families_that_take_transferability_scores(toy):
    scored = sorted(n for n, f in families().items() if f.transferability)
    assert scored == ["classification"]  # as before the registry: gate-score scored classification datasets only
    assert family("toy_brightness").transferability is False


def test_a_family_is_refused_when_its_facts_are_wrong():
    with pytest.raises(ValueError, match=r"metric\(s\) \['toy_score'\] are not in gate.metrics"):
        TaskFamily(name="t", targets=frozenset({"class"}), default_adapter="x", metrics=("toy_score",), summary_label="T")
    with pytest.raises(ValueError, match=r"unknown target kind\(s\) \['pixels'\]"):
        TaskFamily(name="t", targets=frozenset({"pixels"}), default_adapter="x", metrics=("mae",), summary_label="T")
    with pytest.raises(ValueError, match="already mean something else"):
        TaskFamily(name="t", targets=frozenset({"class"}), default_adapter="x", metrics=("mae",), summary_label="T",
                   new_target_kinds={"class": "something else"})
    with pytest.raises(ValueError, match="already registered with other facts"):
        register_family(TaskFamily(name="classification", targets=frozenset({"class"}), default_adapter="x",
                                   metrics=("acc@1",), summary_label="T"))
    with pytest.raises(ValueError, match=r"unknown task family 'nope'; known: \['classification'"):
        family("nope")


def test_every_packaged_family_names_a_registered_renderer_and_an_adapter_config():
    from gate.engine.training.visuals import RENDERERS

    for name, fam in families().items():
        assert fam.renderer is None or fam.renderer in RENDERERS, name
        assert (ROOT / "conf" / "adapter" / f"{fam.default_adapter}.yaml").is_file(), name


# ------------------------------------------------------------------------------------ nobody else names one
#: Modules of gate (outside gate/adapters/, whose adapters name the families they serve) allowed to name a
#: task family in a string literal, with how many times. Empty: every table and if-chain asks the registry.
ALLOWED: dict[str, int] = {}


def _family_literals(path: Path, names: set[str]) -> int:
    tree = ast.parse(path.read_text(), filename=str(path))
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in names)


def test_no_module_outside_the_adapters_names_a_task_family():
    names = set(families())
    counts = {}
    for path in sorted((ROOT / "gate").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("gate/adapters/"):
            continue
        n = _family_literals(path, names)
        if n:
            counts[rel] = n
    assert counts == ALLOWED
    # the scan sees a literal where there is one (so an empty result means something)
    assert _family_literals(ROOT / "gate" / "adapters" / "classification.py", names) >= 1


# ------------------------------------------------------------------------- how the registry finds a family
def test_every_packaged_family_is_a_yaml_file_of_taskfamily_fields():
    """gate's families are conf/family/<name>.yaml (the file's name is the family's); no adapter module declares
    one, so a lookup has nothing to import."""
    import dataclasses

    import yaml

    fields = {f.name for f in dataclasses.fields(TaskFamily)} - {"name"}
    files = sorted((ROOT / "conf" / "family").glob("*.yaml"))
    assert {p.stem for p in files} == set(families()) and len(files) == 8
    for path in files:
        assert set(yaml.safe_load(path.read_text())) <= fields, path.name
    for path in sorted((ROOT / "gate" / "adapters").glob("*.py")):
        assert "register_family(" not in path.read_text(), path.name


def test_the_family_lookup_the_experiment_id_tiers_and_analysis_never_import_torch():
    """In a fresh interpreter: every family looked up, a composed gate-run config's experiment id (one device: the
    adapter is not imported to read its loss layout), the tiers and gate-analysis imported, and every packaged dataset
    config read by the engine's reader as gate-analysis reads them (their builders' signatures checked), gate-data list's
    rows; neither torch nor Hugging Face ``datasets`` (a second of import, which only building a dataset needs) is loaded."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from hydra import compose, initialize_config_dir\n"
            "from omegaconf import OmegaConf\n"
            "import gate.families, gate.results, gate.tiers, gate.analysis\n"
            "from gate.settings import conf_dir\n"
            "print(sorted(gate.families.families()))\n"
            "with initialize_config_dir(str(conf_dir()), version_base=None):\n"
            "    cfg = compose('run', overrides=['dataset=digits', 'encoder=resnet18_scratch'])\n"
            "print(gate.results.experiment_id(OmegaConf.to_container(cfg, resolve=True), 'finetune'))\n"
            "for ds in ('digits', 'fmnist_seg'):\n"  # several devices: the id reads the adapter YAML's fact, not its class
            "    with initialize_config_dir(str(conf_dir()), version_base=None):\n"
            "        two = compose('run', overrides=[f'dataset={ds}', 'trainer.devices=2'])\n"
            "    assert gate.results.experiment_id(OmegaConf.to_container(two, resolve=True), 'finetune')\n"
            "from gate.analysis.meta import load_benchmark_meta\n"
            "assert len(load_benchmark_meta()) >= 31\n"
            "import tempfile\n"
            "from gate.engine.prepare import listing\n"  # gate-data list: a hub dataset's state and a packaged one's
            "assert len(listing(['cifar100', 'digits'], [f'paths.root={tempfile.mkdtemp()}'])) == 4\n"
            "print('torch' in sys.modules or 'datasets' in sys.modules,\n"
            "      [m for m in sys.modules if m.startswith('gate.adapters')])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    names, exp_id, loaded = out.stdout.strip().splitlines()
    assert len(eval(names)) == 8 and len(exp_id) == 16  # noqa: S307 - our own printout
    assert loaded == "False []", loaded


def test_checking_a_run_config_reads_the_adapters_without_their_metrics():
    """gate-run's checks and a tier's expansion read each adapter class's declaration (its tasks, settings and
    rules): importing every packaged adapter loads torch, not torchmetrics or Lightning (seconds more: torchmetrics'
    own imports load scipy.signal, torchvision's models and transformers), nor Hugging Face ``datasets`` (a second;
    read where a split's columns are). The metrics are built when a run evaluates (``gate.adapters.<family>_metrics``)."""
    import subprocess
    import sys

    code = ("import sys, importlib, pkgutil\n"
            "import gate.adapters\n"
            "from gate.engine.validate import validate_run_config\n"
            "from hydra import compose, initialize_config_dir\n"
            "from gate.settings import conf_dir\n"
            "names = [m.name for m in pkgutil.iter_modules(gate.adapters.__path__) if not m.name.endswith('_metrics')]\n"
            "for name in names:\n"
            "    importlib.import_module(f'gate.adapters.{name}')\n"
            "with initialize_config_dir(str(conf_dir()), version_base=None):\n"
            "    for ds in ('digits', 'fmnist_seg', 'fmnist_multilabel', 'fmnist_pairs', 'fmnist_relational',\n"
            "               'fmnist_fewshot', 'fmnist_video', 'fmnist_video_speed', 'fmnist_volume'):\n"
            "        validate_run_config(compose('run', overrides=[f'dataset={ds}', 'encoder=resnet18_scratch']))\n"
            "print(len(names), sorted(m for m in ('torch', 'torchmetrics', 'lightning', 'datasets') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["9", "['torch']"], out.stdout  # base, retrieval and the 7 adapters' modules
