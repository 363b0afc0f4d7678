"""docs/design.md "To add X, touch these files", re-counted by doing it: each row's toy addition is made here with
exactly the files the row names, no others, and is then used the way gate uses it.

* Additions outside the package (an encoder, a dataset, a task family of one's own) are files in a config dir on
  ``hydra.searchpath`` and a module on ``sys.path``, written by the test; the encoder with a new wrapper is the
  README's example (its files are counted here; tests/test_readme.py runs it), the task family the toy of
  tests/test_task_family_registry.py (which fine-tunes it).
* Additions inside the package (a score, a launcher) are made to a copy of ``gate/``: the files that differ from the
  package afterwards are counted, and the copy is imported in a subprocess to use the addition.
* A packaged task family is counted by reading (its entry-point line is checked for every packaged family by
  tests/test_task_family_registry.py, which fails when one is missing).
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ROWS = ("an encoder a packaged wrapper loads", "an encoder with a new wrapper", "a dataset a packaged loader reads",
        "a dataset with a loader of its own", "a task family of your own", "a packaged task family",
        "a transferability score", "a tier launcher")


def table() -> dict[str, int]:
    """The table's rows: ``{what: files}``."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## To add X, touch these files", 1)[1].split("\n## ", 1)[0]
    return {m[0].strip(): int(m[1]) for m in re.findall(r"^\| ([^|]+?) \| (\d+) \|", section, re.M)}


def written(*folders: Path) -> list[Path]:
    return sorted(p for folder in folders for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_the_table_has_one_row_per_extension_counted_here():
    assert tuple(table()) == ROWS


# ------------------------------------------------------------------------------------- outside the package
TOY_TIMM = """\
# A model timm already loads, as a user adds one: a randomly initialised ResNet-10-T.
name: toy_resnet
architecture: conv
_target_: gate.encoders.TimmEncoder
model_name: resnet10t
pretrained: false
image_size: ${image_size}
"""

TOY_DIGITS = """\
# scikit-learn's digits through the packaged builder, with splits of its own.
name: toy_digits
modality: image
task: classification
num_classes: 10
metrics: [acc@1]
tier_metric: acc@1
builder:
  _target_: gate.data.sources.digits
splits:
  test_fraction: 0.3
  val_fraction: 0.3
"""

TOY_LOADER = '''\
"""A loader of one's own: 12-px grey images of horizontal (label 0) or vertical (label 1) stripes, seeded."""

import datasets
import numpy as np


def stripes(size: int = 96, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size)
    phase = rng.integers(0, 2, size)
    ramp = (np.arange(12)[:, None] + phase[:, None, None]) % 2  # (size, 12, 1): rows alternate
    images = np.where(labels[:, None, None] == 0, ramp, ramp.transpose(0, 2, 1)) * np.ones((1, 12, 12))
    images = (images * 200 + rng.integers(0, 40, (size, 12, 12))).astype(np.uint8)
    features = datasets.Features({"image": datasets.List(datasets.List(datasets.Value("uint8"))),
                                  "label": datasets.ClassLabel(names=["horizontal", "vertical"])})
    train = datasets.Dataset.from_dict({"image": images.tolist(), "label": labels.tolist()}, features=features)
    return datasets.DatasetDict({"train": train})
'''

TOY_STRIPES = """\
name: toy_stripes
modality: image
task: classification
num_classes: 2
metrics: [acc@1]
tier_metric: acc@1
builder:
  _target_: toy_loader.stripes
  size: 96
splits:
  test_fraction: 0.25
  val_fraction: 0.25
"""


@pytest.fixture
def own(tmp_path, monkeypatch):
    """A config dir of one's own (on hydra.searchpath) and a package dir (on sys.path), empty."""
    conf, pkg = tmp_path / "my_conf", tmp_path / "my_pkg"
    conf.mkdir()
    pkg.mkdir()
    monkeypatch.syspath_prepend(str(pkg))
    return conf, pkg


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _compose(tmp_path, conf, overrides):
    from helpers import compose_run

    return compose_run(tmp_path / "out", [f"hydra.searchpath=[file://{conf}]", "image_size=32", "logger=csv",
                                          "trainer.enable_progress_bar=false", *overrides])


def test_an_encoder_and_a_dataset_with_the_tables_files(own, tmp_path):
    """An encoder a packaged wrapper loads (its YAML) and a dataset a packaged loader reads (its YAML): composed,
    validated and built; then a dataset with a loader of its own (YAML + module) fine-tunes that encoder."""
    from gate.engine.build import build_encoder, build_splits
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run, validate_run_config

    conf, pkg = own
    counts = table()
    _write(conf / "encoder" / "toy_resnet.yaml", TOY_TIMM)
    assert len(written(conf, pkg)) == counts["an encoder a packaged wrapper loads"]
    before = set(written(conf, pkg))
    _write(conf / "dataset" / "toy_digits.yaml", TOY_DIGITS)
    assert len(set(written(conf, pkg)) - before) == counts["a dataset a packaged loader reads"]

    from helpers import resolved

    cfg = _compose(tmp_path, conf, ["encoder=toy_resnet", "dataset=toy_digits"])
    validate_run_config(cfg)
    assert build_encoder(resolved(cfg.encoder)).feature_dim > 0
    splits = build_splits(resolved(cfg.dataset), seed=0)
    assert sum(len(s) for s in splits.values()) == 1797 and len(splits["test"]) == pytest.approx(0.3 * 1797, abs=2)

    before = set(written(conf, pkg))
    _write(pkg / "toy_loader.py", TOY_LOADER)
    _write(conf / "dataset" / "toy_stripes.yaml", TOY_STRIPES)
    assert len(set(written(conf, pkg)) - before) == counts["a dataset with a loader of its own"]
    cfg = _compose(tmp_path, conf, ["encoder=toy_resnet", "dataset=toy_stripes", "trainer.max_steps=4",
                                    "trainer.val_check_interval=2", "data.batch_size=8", "ensembles=[1]"])
    result = run_finetune(parse_run(cfg))
    assert not result.skipped and 0.0 <= result.metrics["acc@1"] <= 1.0


def test_an_encoder_with_a_new_wrapper_is_the_readmes_example():
    from test_readme import examples

    files = [path for path in examples() if path != "run.sh"]  # run.sh is the command that uses them
    assert sorted(files) == ["my_configs/encoder/tiny_cnn.yaml", "my_encoders.py"]
    assert len(files) == table()["an encoder with a new wrapper"]


def test_a_task_family_of_your_own_is_the_toy_family():
    """tests/toy_family.py holds the adapter (with its settings), the registry entry and the builder; the test
    writes the adapter's and the dataset's YAML: 3 files, and tests/test_task_family_registry.py fine-tunes it."""
    import toy_family
    from test_task_family_registry import TOY_ADAPTER, TOY_DATASET

    from gate.adapters.base import Adapter

    assert issubclass(toy_family.ToyRegressor, Adapter) and toy_family.ToyRegressor.settings
    assert toy_family.FAMILY.name in toy_family.ToyRegressor.tasks and callable(toy_family.toy_brightness)
    assert yaml.safe_load(TOY_ADAPTER)["_target_"] == "toy_family.ToyRegressor"
    assert yaml.safe_load(TOY_DATASET)["builder"]["_target_"] == "toy_family.toy_brightness"
    assert 1 + 2 == table()["a task family of your own"]


# --------------------------------------------------------------------------------------- inside the package
def _package_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "gate", copy / "gate", ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _changed(copy: Path) -> list[str]:
    """The files of the copy that differ from the package (added or edited)."""
    out = []
    for path in written(copy / "gate"):
        rel = path.relative_to(copy)
        original = ROOT / rel
        if not original.exists() or not filecmp.cmp(original, path, shallow=False):
            out.append(rel.as_posix())
    return sorted(out)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def _python(copy: Path, code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(copy), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


TOY_SCORE = '''\
"""A toy score: between-class over within-class scatter of the features (traces), higher when classes separate."""

from __future__ import annotations

from typing import Any

import torch

from ._validation import check_features, check_labels


def scatter_ratio(features: Any, labels: Any) -> float:
    x = check_features(features)
    y, classes = check_labels(labels, x.shape[0], device=x.device)
    means = torch.zeros(classes, x.shape[1], dtype=x.dtype, device=x.device).index_add_(0, y, x)
    means /= torch.bincount(y, minlength=classes).to(x.dtype)[:, None]
    within = ((x - means[y]) ** 2).sum()
    between = ((means[y] - x.mean(0)) ** 2).sum()
    return float(between / within)
'''


SCORE_CHECK = """
import numpy as np
from hydra import compose, initialize_config_module
import gate
from gate.engine.validate import validate_score_config
from gate.ranking.request import known_scores
from gate.transferability import SCORES
assert gate.__file__.startswith({copy!r}), gate.__file__
with initialize_config_module("gate.conf", version_base=None):
    cfg = compose("score", overrides=["paths.root={out}", "dataset=digits", "metrics=[scatter_ratio,logme]"])
validate_score_config(cfg)
assert "scatter_ratio" in known_scores()
rng = np.random.default_rng(0)
y = np.repeat([0, 1], 50)
apart = rng.normal(size=(100, 8)) + 4 * y[:, None]
mixed = rng.normal(size=(100, 8))
metric = SCORES["scatter_ratio"]
assert metric.higher_is_better and metric(features=apart, labels=y) > 10 * metric(features=mixed, labels=y)
print("score ok")
"""


def add_score(copy: Path) -> None:
    tr = copy / "gate" / "transferability"
    _write(tr / "toy_scatter.py", TOY_SCORE)
    _edit(tr / "registry.py", "from . import collapse,", "from . import toy_scatter\nfrom . import collapse,")
    _edit(tr / "registry.py", '        Metric("logme", evidence.logme),\n',
          '        Metric("logme", evidence.logme),\n        Metric("scatter_ratio", toy_scatter.scatter_ratio),\n')
    _edit(copy / "gate" / "metrics.py", 'register("logme", True, citation="You et al., ICML 2021")',
          'register("scatter_ratio", True, 0.0, description="a toy score (tests/test_extension_counts.py)")\n'
          'register("logme", True, citation="You et al., ICML 2021")')


TOY_LAUNCHER = '''\
"""launch=toy_file: the pending experiments' ids, one a line, in <run dir>/toy_jobs.txt."""

from __future__ import annotations

from gate.files import atomic_write_text
from gate.tiers.launchers import LaunchContext, LauncherKind, LaunchResult

KIND = LauncherKind(describes_only=True)


def launch(experiments, ctx: LaunchContext) -> LaunchResult:
    path = atomic_write_text(ctx.run_dir / "toy_jobs.txt", "".join(f"{e.id}\\n" for e in experiments))
    ctx.echo(f"[gate] toy_file: {len(experiments)} job(s) in {path}")
    return LaunchResult(ran=False)
'''


def add_launcher(copy: Path) -> None:
    launchers = copy / "gate" / "tiers" / "launchers"
    _write(launchers / "toy_file.py", TOY_LAUNCHER)
    _edit(launchers / "__init__.py", '    "local": "gate.tiers.launchers.local:launch",\n',
          '    "local": "gate.tiers.launchers.local:launch",\n    "toy_file": "gate.tiers.launchers.toy_file:launch",\n')


LAUNCHER_CHECK = """
import sys
from gate.cli import tier
sys.argv = ["gate-tier", "tier={tier}", "encoder=resnet18_scratch,efficientnet_lite0", "launch=toy_file",
            "paths.root={out}"]
tier.main()
"""


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
    """One copy of the package with the toy score added, then the toy launcher (the files each one changed are
    recorded as it is added), and one interpreter that uses both (an interpreter that imports torch starts in ~7 s):
    ``(files of the score, files of the launcher, the process, the output root)``."""
    tmp_path = tmp_path_factory.mktemp("extended")
    copy = _package_copy(tmp_path)
    add_score(copy)
    score_files = _changed(copy)
    add_launcher(copy)
    launcher_files = sorted(set(_changed(copy)) - set(score_files))
    tier = tmp_path / "tiny.yaml"
    tier.write_text(yaml.safe_dump({"name": "tiny", "seeds": [0, 1], "benchmarks": ["digits"]}))
    out = tmp_path / "out"
    code = SCORE_CHECK.format(copy=str(copy), out=out) + LAUNCHER_CHECK.format(tier=tier, out=out)
    return score_files, launcher_files, _python(copy, code, tmp_path), out


def test_a_transferability_score_with_the_tables_files(extended):
    changed, _, proc, _ = extended
    assert changed == ["gate/metrics.py", "gate/transferability/registry.py", "gate/transferability/toy_scatter.py"]
    assert len(changed) == table()["a transferability score"]
    # gate-score's config accepts the name (checked against SCORES, the registry its stage computes from), gate-rank
    # knows it, and it separates classes
    assert "score ok" in proc.stdout.splitlines(), proc.stderr[-3000:]


def test_a_tier_launcher_with_the_tables_files(extended):
    _, changed, proc, out = extended
    assert changed == ["gate/tiers/launchers/__init__.py", "gate/tiers/launchers/toy_file.py"]
    assert len(changed) == table()["a tier launcher"]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    jobs = list((out / "tiers").glob("tiny-*/toy_jobs.txt"))
    assert len(jobs) == 1 and len(jobs[0].read_text().split()) == 4, proc.stdout  # 2 encoders x 2 seeds x digits
    assert "toy_file: 4 job(s)" in proc.stdout
