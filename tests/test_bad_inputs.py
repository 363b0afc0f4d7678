"""Bad input never ends in a traceback or a silently wrong number: each of these gets one clear line that
names the offending key or path, and a non-zero exit, before any training.

The sweep calls each entry point's ``main()`` in this process with the command line a user types (Hydra parses it
from ``sys.argv``, as in a real process: tests/helpers.py ``call_cli``), so forty cases cost no forty interpreter
starts; one case runs as a real subprocess (the last test) to check what a user's terminal shows.
"""

import os
import subprocess
import sys

import pytest

from gate.cli import analysis, eevee, run, score

from helpers import SMOKE, call_cli

RUN = [*SMOKE, "dataset=digits"]
SCORE = ["dataset=digits", "image_size=32", "max_samples=60", "progress_bar=false"]

# (command, arguments, a text the error must contain: the offending key or path)
CASES = [
    ("run", ["trainer.max_steps=abc"], "trainer.max_steps"),
    ("run", ["trainer.max_steps=0"], "trainer.max_steps"),
    ("run", ["trainer.val_check_interval=0"], "trainer.val_check_interval"),
    ("run", ["trainer.val_check_interval=50"], "trainer.val_check_interval"),
    ("run", ["image_size=0"], "image_size"),
    ("run", ["image_size=7"], "image_size"),
    ("run", ["seed=abc"], "seed"),
    ("run", ["seed=-1"], "seed"),
    ("run", ["ensembles=abc"], "ensembles"),
    ("run", ["ensembles=[]"], "ensembles"),
    ("run", ["ensembles=[0]"], "ensembles"),
    ("run", ["data.batch_size=1.5"], "data.batch_size"),
    ("run", ["data.batch_size=0"], "data.batch_size"),
    ("run", ["data.max_val_samples=0"], "data.max_val_samples"),
    ("run", ["dataset.num_classes=20"], "num_classes"),
    ("run", ["paths.root="], "paths.root"),
    ("run", ["paths.root=/proc/gate-outputs"], "paths.root"),
    ("run", ["keep_checkpoints=some"], "keep_checkpoints"),
    ("run", ["logger=wandb", "logger.mode=sometimes"], "logger.mode"),
    ("run", ["recipe.optimizer.lr=-1"], "recipe.optimizer.lr"),
    ("run", ["adapter.dropout=1.5"], "adapter.dropout"),
    # the adapter YAML's statement of its class's fact, which the experiment id reads (gate.settings.ADAPTER_FACTS)
    ("run", ["adapter.loss_splits_across_devices=false"], "adapter.loss_splits_across_devices=false is invalid: "
                                                         "LinearClassifier's loss is a mean"),
    ("run", ["adapter.loss_splits_across_devices=sometimes"], "adapter.loss_splits_across_devices='sometimes'"),
    ("run", ["~adapter.loss_splits_across_devices", "trainer.devices=2"], "adapter.loss_splits_across_devices is "
                                                                          "missing"),
    ("run", ["encoder.bn_momentum=2"], "encoder.bn_momentum"),
    ("run", ["trainer.precision=fp8"], "trainer.precision"),
    ("run", ["force=maybe"], "force"),
    ("run", ["dataset.splits.val_fraction=1.5"], "val_fraction"),
    ("run", ["encoder=timm", "encoder.model_name=resnet18", "encoder.checkpoint_path={empty}"], "checkpoint_path"),
    ("run", ["encoder=timm", "encoder.model_name=resnet18", "encoder.checkpoint_path={garbage}"], "checkpoint_path"),
    ("run", ["encoder=timm", "encoder.model_name=resnet18", "encoder.checkpoint_path=/no/such.pth"],
     "checkpoint_path"),
    ("run", ["encoder=timm", "encoder.model_name=not_a_model_name"], "not_a_model_name"),
    ("run", ["dataset=bbc_news"], "bbc_news"),  # an image encoder has no text stem (text encoders take images)
    ("run", ["encoder=no_such_encoder"], "no_such_encoder"),
    ("score", ["max_samples=5"], "max_samples"),
    ("score", ["split=dev"], "split"),
    ("score", ["device=tpu"], "device"),
    ("score", ["metrics=[not_a_score]"], "not_a_score"),
    ("score", ["batch_size=0"], "batch_size"),
    ("score", ["encoder=resnet18_scratch", "metrics=[leep]"], "leep"),
    ("analysis", ["results=/no/such/records.jsonl"], "/no/such/records.jsonl"),
    ("analysis", ["results={binary}"], "binary.bin"),
    ("eevee", ["table=/no/such/table.csv"], "/no/such/table.csv"),
    ("eevee", ["table={binary}"], "binary.bin"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad")
    (base / "empty.pth").write_bytes(b"")
    (base / "garbage.pth").write_bytes(b"this is not a checkpoint\n" * 10)
    (base / "binary.bin").write_bytes(bytes(range(256)) * 8)
    return base


MAINS = {"run": run.main, "score": score.main, "analysis": analysis.main, "eevee": eevee.main}


def _argv(case, files, root):
    command, args, _ = case
    args = [a.format(empty=files / "empty.pth", garbage=files / "garbage.pth", binary=files / "binary.bin")
            for a in args]
    base = {"run": RUN, "score": SCORE}.get(command, [])
    has_root = any(a.startswith("paths.root=") for a in args)
    return [*base, *args] + ([] if has_root else [f"paths.root={root}"])


def _run(case, files, root):
    """The command in a fresh interpreter, as a user's terminal runs it."""
    argv = [sys.executable, "-m", f"gate.cli.{case[0]}", *_argv(case, files, root)]
    env = {k: v for k, v in os.environ.items() if k not in ("GATE_DEBUG", "HYDRA_FULL_ERROR")}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_bad_inputs_get_one_clear_line_and_no_traceback(files, tmp_path, capsys):
    assert len(CASES) >= 30
    outs = [call_cli(MAINS[case[0]], _argv(case, files, tmp_path / "out"), capsys, prog=f"gate-{case[0]}")
            for case in CASES]
    failures = []
    for (command, args, needle), out in zip(CASES, outs):
        text = out.stdout + out.stderr
        if out.returncode == 0 or "Traceback" in text or needle not in text:
            failures.append(f"gate-{command} {' '.join(args)} -> exit {out.returncode}:\n{text[-1500:]}")
    assert not failures, "\n\n".join(failures)
    # Nothing was trained: no record landed in the store.
    assert not (tmp_path / "out" / "results" / "records.jsonl").exists()


def test_gate_errors_are_one_line_with_exit_code_2(files, tmp_path):
    out = _run(("run", ["seed=abc", "trainer.max_steps=abc"], ""), files, tmp_path)
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gate-run: error: ")
    assert "seed" in lines[0] and "trainer.max_steps" in lines[0]  # every problem at once
    # gate-score's, gate-rank's, gate-analysis' and gate-eevee's own processes (their end-to-end runs are in
    # process), answered before torch loads
    for case, word in ((("score", ["max_samples=abc"], ""), "max_samples"), (("rank", ["budget=5"], ""), "budget"),
                       (("analysis", ["results=/no/such/records.jsonl"], ""), "/no/such/records.jsonl"),
                       (("eevee", ["table=/no/such/table.csv"], ""), "/no/such/table.csv")):
        out = _run(case, files, tmp_path)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"gate-{case[0]}: error: "), out.stderr
        assert word in lines[0]


def _gate_run_reporting_the_training_stack(*commands: list[str]) -> subprocess.CompletedProcess:
    """gate-run with each of ``commands`` (its arguments), one after the other in one fresh interpreter; after each,
    a line of stdout: its exit code and which of Lightning and torchmetrics the interpreter has imported so far."""
    code = ("import sys\n"
            "from gate.cli.run import main\n"
            f"for args in {[list(c) for c in commands]!r}:\n"
            "    sys.argv = ['gate-run', *args]\n"
            "    try:\n"
            "        code = main() or 0\n"
            "    except SystemExit as stop:\n"
            "        code = stop.code\n"
            "    print(code, sorted(m for m in ('lightning', 'torchmetrics') if m in sys.modules), flush=True)\n")
    env = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_a_stored_experiment_is_answered_before_the_training_stack_is_imported(tmp_path):
    """gate-run of an experiment the store holds says so without importing Lightning or torchmetrics (the rank that
    decides who prints is read from the environment as Lightning reads it: importing Lightning took 4 of the 9 s
    such a rerun took)."""
    from gate.engine.validate import parse_run
    from gate.results import Record, ResultsStore

    from helpers import compose_run

    overrides = ["dataset=digits", "encoder=resnet18_scratch"]
    checked = parse_run(compose_run(tmp_path, overrides))
    ResultsStore(checked.run.paths.results).append_set([Record(
        experiment=checked.experiment, kind="finetune", encoder="resnet18_scratch", dataset="digits",
        task="classification", adapter="linear_classifier", recipe="conv", seed=0, split="val", metric="acc@1",
        value=0.5)])
    out = _gate_run_reporting_the_training_stack([*overrides, f"paths.root={tmp_path}"])
    assert f"experiment {checked.experiment}" in out.stdout and "skipping" in out.stdout, out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout[-2000:] + out.stderr[-2000:]


def test_a_dataset_not_prepared_here_is_one_line_before_the_training_stack_is_imported(tmp_path):
    """gate-run on a pool benchmark without its local copy: the loader's own line (gate.data.hub.unavailable_copy,
    which the loader raises too), exit 2, said before Lightning and torchmetrics are imported (seconds). So is a
    dataset whose train split contradicts the class count it declares: the run builds its data first (it imported
    both before saying so: 10.6 s for the line here, 5.9 s now)."""
    out = _gate_run_reporting_the_training_stack(
        ["dataset=cifar100", "encoder=resnet18_scratch", f"paths.root={tmp_path}"],
        ["dataset=digits", "dataset.num_classes=20", "preset=smoke", f"paths.root={tmp_path}"])
    assert out.stdout.strip().splitlines()[-2:] == ["2 []", "2 []"], out.stdout[-2000:] + out.stderr[-2000:]
    line, classes = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert classes == ("gate-run: error: dataset 'digits' declares num_classes=20, but its train split holds 10 "
                       "classes; set dataset.num_classes=10"), classes
    assert line.startswith(f"gate-run: error: dataset 'cifar100' is not on disk (no local copy at {tmp_path}/data/cifar100); "
                           "download the hub dataset uoft-cs/cifar100"), line
    from omegaconf import OmegaConf

    from gate.data.hub import require_local
    from gate.errors import DatasetUnavailable

    from helpers import compose_run

    source = OmegaConf.to_container(compose_run(tmp_path, ["dataset=cifar100"]).dataset.source, resolve=True)
    with pytest.raises(DatasetUnavailable) as raised:  # the loader's line is the same one
        require_local("cifar100", source, tmp_path / "data" / "cifar100", {})
    assert line.removeprefix("gate-run: error: ") == str(raised.value)
