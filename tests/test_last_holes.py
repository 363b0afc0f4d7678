"""The last holes (issue 36): each case failed before its fix. One line naming the input and what to do, exit 2, no
traceback, and nothing written where the case says so."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from gate.cli import run as run_cli
from gate.cli import tier as tier_cli
from gate.errors import GateError
from gate.results import ExperimentLock, Record, ResultsStore

from helpers import SMOKE, TINY_ENCODER, call_cli, composing

RUN = [*SMOKE, "dataset=digits", *TINY_ENCODER]


def one_line(result, cmd: str) -> str:
    assert result.returncode == 2, (result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith(f"{cmd}: error: ")]
    assert len(errors) == 1, result.stderr[-2000:]
    return errors[0]


# ------------------------------------------------------------------------------------ errors that name nothing


class _FillsUp(io.RawIOBase):
    """A file on a disk that fills after ``room`` bytes: the first writes succeed, the next raises ENOSPC."""

    def __init__(self, room: int) -> None:
        self.room = room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return len(data)


def test_torch_turns_a_disk_that_fills_mid_write_into_an_error_that_names_nothing():
    """Why atomic_torch_save keeps the OSError its file raised: once a first write went through, torch's zip writer
    reports a later ENOSPC as "unexpected pos", a RuntimeError that says nothing of the disk."""
    with pytest.raises(RuntimeError, match="unexpected pos"):
        torch.save({"x": torch.zeros(50_000)}, _FillsUp(1000))


def test_a_checkpoint_on_a_disk_that_fills_mid_write_names_the_checkpoints_folder(tmp_path, capsys, monkeypatch):
    import builtins

    real_open = builtins.open

    def open_on_a_full_disk(file, mode="r", *args, **kwargs):
        if "w" in mode and str(file).endswith(".tmp") and ".ckpt." in str(file):
            real_open(file, mode, *args, **kwargs).close()
            return io.BufferedWriter(_FillsUp(1000), buffer_size=64)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_on_a_full_disk)
    out = call_cli(run_cli.main, [*RUN, f"paths.root={tmp_path}"], capsys, prog="gate-run")
    line = one_line(out, "gate-run")
    assert "no space left on the device holding " in line and "checkpoints" in line and "step=2.ckpt" in line, line
    assert "unexpected pos" not in line


def test_memory_running_out_says_which_stage_and_what_to_lower(tmp_path, capsys, monkeypatch):
    from gate.cli import score as score_cli
    from gate.scoring import features

    def no_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(features, "extract_features", no_memory)
    out = call_cli(score_cli.main, ["dataset=digits", *TINY_ENCODER, f"paths.root={tmp_path}",
                                    "max_samples=100", "progress_bar=false"], capsys, prog="gate-score")
    line = one_line(out, "gate-score")
    assert "memory ran out" in line and "max_samples" in line and "batch_size" in line, line
    assert "internal error" not in line


@pytest.mark.parametrize("override, key", [
    ("+trainer.accumulate_grad_batches=0", "trainer.accumulate_grad_batches=0"),
    ("+recipe.optimizer.betas=[2,3]", "recipe.optimizer.betas=[2, 3]"),
])
def test_a_value_its_library_rejects_names_the_key_passed_on(override, key, tmp_path, capsys):
    out = call_cli(run_cli.main, [*RUN, f"paths.root={tmp_path}", override], capsys, prog="gate-run")
    line = one_line(out, "gate-run")
    assert key in line and "internal error" not in line, line


def test_a_seed_numpy_cannot_take_is_refused_by_the_schema(tmp_path, capsys):
    out = call_cli(run_cli.main, [*RUN, f"paths.root={tmp_path}", "seed=18446744073709551616"], capsys, prog="gate-run")
    line = one_line(out, "gate-run")
    assert "seed=18446744073709551616 is invalid: must be in [0, 4294967295]" in line, line


def test_a_results_store_that_cannot_be_written_is_named_before_training(tmp_path, capsys, monkeypatch):
    """Root writes through a read-only mode, so the kernel's refusal of an immutable file is what is planted."""
    store = tmp_path / "results" / "records.jsonl"
    store.parent.mkdir(parents=True)
    store.write_text("")
    real_open = os.open

    def immutable(path, flags, *args, **kwargs):
        if Path(path) == store and flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", immutable)
    out = call_cli(run_cli.main, [*RUN, f"paths.root={tmp_path}"], capsys, prog="gate-run")
    line = one_line(out, "gate-run")
    assert f"the results store {store} cannot be written" in line and "paths.root" in line, line
    assert not list((tmp_path / "runs").glob("*/checkpoints/*.ckpt")) if (tmp_path / "runs").exists() else True


def test_out_that_is_a_device_names_the_key(tmp_path, capsys):
    from gate.cli import analysis, eevee

    table = Path(__file__).resolve().parents[1] / "experiments" / "gate_paper" / "gate_paper_table3.csv"
    for main, prog, args in ((analysis.main, "gate-analysis", [f"results={table}"]),
                             (eevee.main, "gate-eevee", [f"table={table}", "k=1"])):
        out = call_cli(main, [*args, f"paths.root={tmp_path}", "out=/dev/null"], capsys, prog=prog)
        line = one_line(out, prog)
        assert "out=/dev/null" in line and "a character device" in line and "Errno" not in line, line


# ------------------------------------------------------------------------------------------------ unsafe


def test_a_lock_planted_as_a_link_is_never_written_through(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    run_dir = tmp_path / "root" / "runs" / "abc"
    run_dir.mkdir(parents=True)
    (run_dir / "lock").symlink_to(outside)
    with pytest.raises(GateError, match=r"lock .*is a link .*remove it"), ExperimentLock(run_dir, "abc"):
        pass
    assert outside.read_text() == "precious"
    (run_dir / "lock").unlink()
    (run_dir / "lock").symlink_to("/dev/full")
    with pytest.raises(GateError, match="is a link"), ExperimentLock(run_dir, "abc"):
        pass


def test_a_tier_file_cannot_reach_a_target(tmp_path, capsys):
    victim = tmp_path / "copied"
    tier = tmp_path / "evil.yaml"
    tier.write_text(yaml.safe_dump({"name": "evil", "seeds": [0], "benchmarks": [
        {"dataset": "digits", "overrides": {"dataset.builder._target_": "shutil.copyfile",
                                            "+dataset.builder.src": str(tier), "+dataset.builder.dst": str(victim)}}]}))
    out = call_cli(tier_cli.main, [f"tier={tier}", "encoder=resnet18_scratch", f"paths.root={tmp_path / 'root'}",
                                   "launch=local"], capsys, prog="gate-tier")
    line = one_line(out, "gate-tier")
    assert "digits" in line and "dataset.builder._target_" in line and "names code to run" in line, line
    assert not victim.exists()
    tier.write_text(yaml.safe_dump({"name": "evil", "seeds": [0], "overrides": {
        "dataset.builder": {"_target_": "shutil.rmtree", "path": str(tmp_path)}}, "benchmarks": ["digits"]}))
    out = call_cli(tier_cli.main, [f"tier={tier}", "encoder=resnet18_scratch", f"paths.root={tmp_path / 'root'}",
                                   "launch=commands"], capsys, prog="gate-tier")
    assert "_target_" in one_line(out, "gate-tier") and tier.exists()


# ------------------------------------------------------------------------------------------------ hangs


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One gate-score run of resnet18_scratch on 60 digits: its feature cache pair and its config."""
    from hydra import compose

    from gate.engine.validate import parse_score
    from gate.scoring.stage import run_score

    root = tmp_path_factory.mktemp("scored")
    with composing():
        cfg = compose("score", overrides=[f"paths.root={root}", "dataset=digits", "encoder=resnet18_scratch",
                                          "max_samples=60", "progress_bar=false", "metrics=[logme]"])
    run_score(parse_score(cfg))
    pt = next((root / "cache" / "features").rglob("*.pt"))
    return root, cfg, pt


def _fresh_copy(scored, tmp_path):
    import shutil

    from hydra import compose

    from gate.engine.validate import parse_score

    root, _, pt = scored
    shutil.copytree(root / "cache", tmp_path / "cache")
    with composing():
        cfg = compose("score", overrides=[f"paths.root={tmp_path}", "dataset=digits", "encoder=resnet18_scratch",
                                          "max_samples=60", "progress_bar=false", "metrics=[logme]"])
    return parse_score(cfg).config, tmp_path / "cache" / pt.relative_to(root / "cache")  # as gate-score's stage takes it


@pytest.mark.timeout(120)
@pytest.mark.parametrize("which, kind", [("json", "fifo"), ("json", "zero"), ("pt", "fifo"), ("pt", "zero"),
                                         ("pt", "folder")])
def test_a_cache_file_that_is_not_a_regular_file_is_set_aside_before_any_extraction(which, kind, scored, tmp_path,
                                                                                   monkeypatch):
    from gate.scoring import features

    cfg, pt = _fresh_copy(scored, tmp_path)
    bad = pt if which == "pt" else pt.with_suffix(".json")
    bad.unlink()
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "zero":
        bad.symlink_to("/dev/zero")
    else:
        bad.mkdir()
    extracted = []
    real = features.extract_features
    monkeypatch.setattr(features, "extract_features", lambda *a, **k: extracted.append(1) or real(*a, **k))
    with pytest.warns(UserWarning, match="moved aside"):
        found = features.cached_features(cfg, "train", 60, tmp_path / "cache", progress=False)
    assert extracted == [1] and not found.from_cache
    assert stat.S_ISREG(os.lstat(pt).st_mode) and stat.S_ISREG(os.lstat(pt.with_suffix(".json")).st_mode)
    assert list(pt.parent.glob(f"{bad.name}.corrupt-*"))


def test_a_forged_cache_of_another_width_is_not_scored(scored, tmp_path):
    """A tensor file of another encoder's width (1280 for efficientnet_lite0) with its hash written into the key
    file: every other check passes, the encoder's declared width does not."""
    from gate.data.hub import sha256_of
    from gate.scoring import features

    cfg, pt = _fresh_copy(scored, tmp_path)
    blob = torch.load(pt, weights_only=True)
    blob["features"] = torch.randn(blob["features"].shape[0], 1280)
    torch.save(blob, pt)
    record = json.loads(pt.with_suffix(".json").read_text())
    record["sha256"] = sha256_of(pt)
    pt.with_suffix(".json").write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="1280 features wide.*512"):
        found = features.cached_features(cfg, "train", 60, tmp_path / "cache", progress=False)
    assert not found.from_cache and found.features.shape[1] == 512


# ------------------------------------------------------------------------------------------ unclear answers


def test_a_store_whose_lines_are_not_records_is_refused_and_nothing_is_written(tmp_path, capsys):
    other = tmp_path / "notes.txt"
    other.write_text("my notes\nsecond line\n")
    store = tmp_path / "root" / "results" / "records.jsonl"
    store.parent.mkdir(parents=True)
    store.symlink_to(other)
    out = call_cli(run_cli.main, [*RUN, f"paths.root={tmp_path / 'root'}"], capsys, prog="gate-run")
    line = one_line(out, "gate-run")
    assert "is not a results store" in line and str(store) in line, line
    assert other.read_text() == "my notes\nsecond line\n"
    rec = Record(experiment="0" * 16, kind="score", encoder="e", dataset="d", task="classification", adapter="a",
                 recipe="r", seed=0, split="test", metric="logme", value=0.5, higher_is_better=True)
    with pytest.raises(GateError, match="is not a results store"):
        ResultsStore(store).append([rec])
    assert other.read_text() == "my notes\nsecond line\n"


def test_a_torn_last_line_is_still_a_store(tmp_path):
    rec = Record(experiment="0" * 16, kind="score", encoder="e", dataset="d", task="classification", adapter="a",
                 recipe="r", seed=0, split="test", metric="logme", value=0.5, higher_is_better=True)
    store = ResultsStore(tmp_path / "records.jsonl")
    store.append([rec])
    with open(store.path, "a") as fh:
        fh.write('{"experiment": "1111", "kind": "sco')
    with pytest.warns(UserWarning, match="corrupt record line"):
        store.append([rec])
        assert len(store.records()) == 2


@pytest.mark.slow
def test_every_job_stopped_ends_with_the_tiers_own_account(tmp_path, capsys, monkeypatch):
    """A tier whose only job was stopped by a signal: the tier's account (0 of 1 done, 1 stopped, the rerun), exit
    1 as for failed jobs, not a report error about an empty store."""
    from gate.tiers import launchers
    from gate.tiers.launchers import LaunchResult

    tier = tmp_path / "one.yaml"
    tier.write_text(yaml.safe_dump({"name": "one", "seeds": [0], "score": False, "benchmarks": ["digits"]}))

    def all_stopped(experiments, ctx):
        return LaunchResult(ran=True, failed=[(e, "log") for e in experiments], stopped={e.id for e in experiments})

    real = launchers.get_launcher
    monkeypatch.setattr(launchers, "get_launcher",
                        lambda name: launchers.Launcher(name, real(name).kind, all_stopped))
    out = call_cli(tier_cli.main, [f"tier={tier}", "encoder=resnet18_scratch", f"paths.root={tmp_path / 'root'}"],
                   capsys, prog="gate-tier")
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "error" not in out.stderr, out.stderr
    assert "0 of 1 experiment(s) done, 1 failed (1 stopped by a signal)" in out.stdout
    assert "rerun the same command" in out.stdout


@pytest.mark.slow
def test_a_stop_after_the_records_were_written_says_so(tmp_path):
    """SIGTERM in a finished run's last moment: exit 143 (a stop is never 0), and a line saying the records are
    complete."""
    env = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
    code = ("import os, signal, sys\n"
            "from gate.engine.training import checkpoints\n"  # the run imports prune from it where it trains
            "real = checkpoints.prune\n"
            "def prune(*a, **k):\n"
            "    real(*a, **k)\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "checkpoints.prune = prune\n"
            "from gate.cli.run import main\n"
            f"sys.argv = ['gate-run', *{[*RUN, f'paths.root={tmp_path}']!r}]\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-2000:]
    assert "after its records were written" in proc.stderr and "is complete in the results store" in proc.stderr, proc.stderr[-2000:]
    assert ResultsStore(tmp_path / "results" / "records.jsonl").complete_records()
