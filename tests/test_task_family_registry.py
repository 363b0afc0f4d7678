"""The task-family registry (gate/families.py): a family is one entry next to its adapter, and nothing else in
gate names one.

* A toy family registered from the test directory (tests/toy_family.py: adapter + entry + stand-in, with its
  adapter and dataset YAML written here to a config dir of the test's own) fine-tunes end to end in process.
* No module of gate outside the adapters names a task family (a scan of string literals, with an allow-list
  whose counts are checked).
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from gate.families import TaskFamily, families, family, register_family, unregister_family

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
    from gate.families import TARGET_KINDS
    from gate.results import ResultsStore

    cfg = _compose(tmp_path / "out", toy)
    spec = build_spec(cfg.dataset)
    assert spec.task == "toy_brightness" and spec.paper_group == "Toy Reg"  # the family's summary label by default
    assert "brightness" in TARGET_KINDS  # the kind the family brought
    result = run_finetune(cfg)
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
#: Modules of gate (outside gate/adapters/, where each family is declared next to its adapter) allowed to name a
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
def _declared_families() -> dict[str, str]:
    """``{family: module}`` of every ``register_family(TaskFamily(name=...))`` in gate/adapters/."""
    found = {}
    for path in sorted((ROOT / "gate" / "adapters").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "TaskFamily":
                name = next(k.value.value for k in node.keywords if k.arg == "name")
                found[name] = f"gate.adapters.{path.stem}"
    return found


def test_the_entry_point_table_names_every_packaged_family_and_the_install_is_current():
    from importlib.metadata import entry_points

    import tomllib

    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["gate.task_families"]
    assert table == _declared_families(), "pyproject.toml [project.entry-points.\"gate.task_families\"] must name " \
                                          "each family registered in gate/adapters/ with its module"
    installed = {ep.name: ep.value for ep in entry_points(group="gate.task_families")}
    assert installed == table, "the installed gate's entry points differ from pyproject.toml: pip install -e ."


def test_a_lookup_imports_only_the_adapter_module_of_that_family():
    """The registry imports no adapter itself (tests/test_layers.py: no upward import, no cycle): a lookup loads the
    one module the entry-point table names for the family (and what that module imports), not every adapter. What
    the module imports is read from its source (tests/test_layers.py's import scan, followed through gate.adapters);
    the lookup runs in a fresh interpreter."""
    import subprocess
    import sys

    from test_layers import imports_of, modules

    def adapters_after(statement: str) -> set[str]:
        code = f"import sys; {statement}; print(' '.join(m for m in sys.modules if m.startswith('gate.adapters.')))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return set(out.stdout.split())

    sources = {module: (path, package) for path, module, package in modules()}

    def reachable(start: str) -> set[str]:  # gate.adapters modules importing ``start`` runs, directly or not
        seen, todo = set(), [start]
        while todo:
            module = todo.pop()
            if module in seen or module not in sources:
                continue
            seen.add(module)
            todo.extend(imports_of(sources[module][0], module, sources[module][1]))
            todo.extend(module.rsplit(".", k)[0] for k in range(1, module.count(".") + 1))  # its packages run first
        return {m for m in seen if m.startswith("gate.adapters.")}

    looked_up = adapters_after("from gate.families import family; family('segmentation')")
    assert "gate.adapters.segmentation" in looked_up and looked_up <= reachable("gate.adapters.segmentation"), looked_up
    assert "gate.adapters.contrastive" not in looked_up and "gate.adapters.temporal" not in looked_up, looked_up
    assert adapters_after("import gate.families") == set()


def test_a_checkout_run_without_installing_finds_its_families_in_pyproject(tmp_path):
    """An offline GPU host runs the checkout from PYTHONPATH, with no installed metadata: the registry reads gate's
    own entries from the checkout's pyproject.toml (the one place they are written)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    # The entries alone (importing a family's module loads torch: seconds, and the same code as when installed).
    code = ("import importlib.metadata as m, sys\n"
            "real = m.entry_points\n"
            "m.entry_points = lambda **kw: [] if kw.get('group') == 'gate.task_families' else real(**kw)\n"
            "from gate.families import _entry_points\n"
            "print(dict(_entry_points()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    entries = ast.literal_eval(out.stdout.strip())
    assert entries["segmentation"] == "gate.adapters.segmentation" and entries["zero_shot"] == "gate.adapters.contrastive"
    assert set(entries) == set(families())  # every packaged family, found without installed metadata
