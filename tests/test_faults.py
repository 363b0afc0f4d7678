"""gate under faults and hostile inputs (issue 27): a stop signal is never a success, a checkpoint never runs code,
no name writes outside paths.root, nothing but a regular file is read or written, a full disk names the file,
reading a local copy makes no network call, and a GPU asked for on a CPU machine is one line."""

from __future__ import annotations

import errno
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

from gate.cli import run as run_cli
from gate.cli import tier as tier_cli
from gate.errors import GateError
from gate.files import atomic_write_text
from gate.results import Record, ResultsStore, read_jsonl

from helpers import SMOKE, TINY_ENCODER, call_cli, compose_run

# The smoke preset on digits (tests/helpers.py): a checkpoint every 2 steps; 12 steps leave seconds to stop it in.
SIGNALLED = [*SMOKE, "dataset=digits", "trainer.max_steps=8", "trainer.val_check_interval=2", "data.batch_size=8"]


def gate_run_process(args: list[str]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
    return subprocess.Popen([sys.executable, "-m", "gate.cli.run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def wait_for(pattern: str, where: Path, proc: subprocess.Popen | None = None, timeout: float = 300) -> Path:
    """The first file matching ``pattern`` under ``where`` (polled every 50 ms, as tests/helpers.py's kill does)."""
    deadline = time.time() + timeout
    while time.time() < deadline and (proc is None or proc.poll() is None):
        found = sorted(where.glob(pattern))
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no {pattern} under {where} within {timeout} s")


# ----------------------------------------------------------------------------------------------- signals


@pytest.mark.slow
def test_sigterm_mid_training_exits_143_stores_nothing_and_the_rerun_resumes(tmp_path, capsys):
    args = [*SIGNALLED, f"paths.root={tmp_path}"]
    proc = gate_run_process(args)
    wait_for("*/checkpoints/step=2.ckpt", tmp_path / "runs", proc)
    proc.send_signal(signal.SIGTERM)  # as SLURM does at pre-emption or a time limit
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, err[-2000:])
    lines = err.strip().splitlines()
    assert "stopped by SIGTERM (exit code 143)" in lines[-1] and "resumes from its last checkpoint" in lines[-1]
    assert "Traceback" not in err
    assert not (tmp_path / "results" / "records.jsonl").exists()
    again = call_cli(run_cli.main, args, capsys, prog="gate-run")  # the same command goes on
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming experiment" in again.stdout
    rows = ResultsStore(tmp_path / "results" / "records.jsonl").records()
    assert rows and rows[0]["facts"]["resumed_from_step"] >= 2


def test_lightnings_own_sigterm_exit_is_a_stop_not_a_success(tmp_path, monkeypatch):
    """Without gate's handlers (the library called by gate-rank, a notebook): Lightning answers SIGTERM with a bare
    ``SystemExit()``, exit code 0; the run raises ``SystemExit(143)`` instead and records nothing."""
    from gate.engine.model import GATEModel
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run

    step = GATEModel.training_step

    def signalled_step(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # Lightning's handler notes it; its loop stops at the step's end
        return step(self, *args, **kwargs)

    monkeypatch.setattr(GATEModel, "training_step", signalled_step)
    cfg = compose_run(tmp_path, [*SMOKE, "dataset=digits", *TINY_ENCODER])
    with pytest.raises(SystemExit) as stopped:
        run_finetune(parse_run(cfg))
    assert stopped.value.code == 128 + signal.SIGTERM
    assert not (tmp_path / "results" / "records.jsonl").exists()


def _child_running(needle: str) -> int | None:
    """The pid of a child of this process whose command line holds ``needle``."""
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat_file.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and needle in cmdline:
            return int(stat_file.parent.name)
    return None


@pytest.mark.slow
def test_gate_tier_counts_a_signalled_job_as_failed_and_its_report_names_it(tmp_path, monkeypatch, capsys):
    from gate.tiers.expand import expand_tier, load_tier

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # two jobs at once on this 2-core machine: one torch thread each
    tier = tmp_path / "two.yaml"
    tier.write_text(yaml.safe_dump({
        "name": "two", "seeds": [0, 1], "score": False,
        "overrides": {"logger": "csv", "callbacks": "none", "image_size": 32, "ensembles": [1], "trainer.max_steps": 4,
                      "trainer.val_check_interval": 2, "data.batch_size": 8, "data.max_train_samples": 200,
                      "data.max_val_samples": 60, "data.max_test_samples": 60},
        "benchmarks": ["digits"]}))
    root = tmp_path / "root"
    plan = expand_tier(load_tier(str(tier)), ["efficientnet_lite0"], root)
    victim = next(e for e in plan.experiments if e.seed == 0)

    def stop_seed_0():  # SIGTERM to the seed-0 job at its first checkpoint, as a cluster pre-empting one task
        wait_for(f"{victim.id}/checkpoints/step=2.ckpt", root / "runs")
        pid = _child_running("seed=0")
        assert pid is not None
        os.kill(pid, signal.SIGTERM)

    watcher = threading.Thread(target=stop_seed_0, daemon=True)
    watcher.start()
    out = call_cli(tier_cli.main, [f"tier={tier}", "encoder=efficientnet_lite0", f"paths.root={root}",
                                   "launch=local", "launcher.workers=2", "launcher.poll_seconds=0.2"],
                   capsys, prog="gate-tier")
    watcher.join(timeout=5)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 of 2 experiment(s) done, 1 failed" in out.stdout
    assert f"FAILED {victim.label}" in out.stdout and "exit 143, stopped by SIGTERM" in out.stdout
    report = (root / "reports" / "tier-two" / "report.html").read_text()
    assert f"failed: {victim.label}" in report
    done = {r["experiment"] for r in ResultsStore(root / "results" / "records.jsonl").complete_records()}
    assert victim.id not in done and len(done) == 1


# ------------------------------------------------------------------------------------------ unsafe loads


class _Planted:
    """A pickle that runs code when loaded: it creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_planted_pickle_checkpoint_never_runs_when_an_ensemble_loads_it(tmp_path):
    from gate.engine.training.ensemble import load_member

    marker = tmp_path / "pwned"
    planted = tmp_path / "runs" / "abc" / "checkpoints" / "step=2.ckpt"
    planted.parent.mkdir(parents=True)
    torch.save({"state_dict": {}, "payload": _Planted(marker)}, planted)
    with pytest.raises(GateError, match=r"checkpoint .*step=2\.ckpt .*not loaded"):
        load_member(torch.nn.Linear(2, 2), str(planted))
    assert not marker.exists()


@pytest.mark.slow
def test_a_planted_pickle_as_the_resume_checkpoint_is_refused_in_one_line(tmp_path, capsys):
    from gate.engine.validate import resolved_config
    from gate.results import experiment_id

    args = [*SMOKE, "dataset=digits", *TINY_ENCODER, f"paths.root={tmp_path}"]
    exp = experiment_id(resolved_config(compose_run(tmp_path, args)), "finetune")
    marker = tmp_path / "pwned"
    planted = tmp_path / "runs" / exp / "checkpoints" / "step=2.ckpt"
    planted.parent.mkdir(parents=True)
    torch.save({"state_dict": {}, "payload": _Planted(marker)}, planted)
    out = call_cli(run_cli.main, args, capsys, prog="gate-run")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"checkpoint {planted} holds more than weights" in out.stderr.strip().splitlines()[-1]
    assert not marker.exists()


# ------------------------------------------------------------------------------------------------ paths


def test_a_tier_name_that_is_a_path_is_refused_and_nothing_lands_outside_the_root(tmp_path, capsys):
    from gate.cli import rank as rank_cli

    tier = tmp_path / "evil.yaml"
    tier.write_text(yaml.safe_dump({"name": "../../x", "seeds": [0], "overrides": {"logger": "csv"},
                                    "benchmarks": ["digits"]}))
    root = tmp_path / "a" / "b" / "root"
    encoders = "encoder=efficientnet_lite0,efficientnet_lite1,resnet18_scratch"  # gate-rank ranks 3 or more
    for main, prog, extra in ((tier_cli.main, "gate-tier", ["launch=commands"]), (rank_cli.main, "gate-rank", [])):
        out = call_cli(main, [f"tier={tier}", encoders, f"paths.root={root}", *extra], capsys, prog=prog)
        assert out.returncode == 2, out.stderr[-2000:]
        line = out.stderr.strip().splitlines()[-1]
        assert line.startswith(f"{prog}: error: ") and "tier name '../../x' cannot become a file or folder name" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "evil.yaml"]
    assert not (tmp_path / "a" / "x").exists() and not (tmp_path / "a" / "b" / "x").exists()


def test_a_dataset_or_encoder_name_that_is_a_path_never_becomes_one(tmp_path):
    from gate.data.manifest import manifest_path
    from gate.scoring.features import feature_cache_path

    with pytest.raises(GateError, match=r"dataset.name '\.\./\.\./x' cannot become a file or folder name"):
        manifest_path(tmp_path / "splits", "../../x", {"seed": 0})
    key = {"encoder": {"name": ".."}, "dataset": {"name": "digits"}, "split": "test"}
    with pytest.raises(GateError, match=r"'\.\.' cannot become a file or folder name"):
        feature_cache_path(tmp_path, key)


# ----------------------------------------------------------------------------------------------- writes


def test_launch_json_never_writes_through_a_device_or_a_fifo_and_a_missing_folder_is_named(tmp_path, capsys):
    tier = tmp_path / "t.yaml"
    tier.write_text(yaml.safe_dump({"name": "t", "seeds": [0], "overrides": {"logger": "csv"},
                                    "benchmarks": ["digits"]}))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    device = tmp_path / "null.json"
    device.symlink_to(os.devnull)  # a link to a device: a plain open() would write to the device
    for out_path, kind in ((fifo, "a FIFO (named pipe)"), (device, "a character device")):
        out = call_cli(tier_cli.main, [f"tier={tier}", "encoder=efficientnet_lite0", f"paths.root={tmp_path}",
                                       "launch=json", f"out={out_path}"], capsys, prog="gate-tier")
        assert out.returncode == 2, out.stderr[-2000:]
        line = out.stderr.strip().splitlines()[-1]
        assert f"launch=json out file {out_path}" in line and f"is {kind}, not a regular file" in line
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and device.is_symlink()
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    missing = tmp_path / "no" / "such" / "jobs.json"
    out = call_cli(tier_cli.main, [f"tier={tier}", "encoder=efficientnet_lite0", f"paths.root={tmp_path}",
                                   "launch=json", f"out={missing}"], capsys, prog="gate-tier")
    assert out.returncode == 2 and f"its folder {missing.parent} does not exist" in out.stderr
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_writes_get_the_mode_a_plain_open_gives(tmp_path, umask):
    old = os.umask(umask)
    try:
        fresh = atomic_write_text(tmp_path / "new.txt", "x")
        (tmp_path / "plain.txt").write_text("x")  # what a plain open() gives, under the same umask
    finally:
        os.umask(old)
    assert stat.S_IMODE(fresh.stat().st_mode) == stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == 0o666 & ~umask
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    kept.chmod(0o640)
    atomic_write_text(kept, "new")  # replacing a file keeps its mode, as writing into it would
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == "new"


def _record() -> Record:
    return Record(experiment="0" * 16, kind="score", encoder="e", dataset="d", task="classification", adapter="a",
                  recipe="r", seed=0, split="test", metric="logme", value=0.5, higher_is_better=True)


def test_a_full_disk_is_one_line_naming_the_file_and_what_to_free(tmp_path, monkeypatch):
    import gate.results

    store = ResultsStore(tmp_path / "results" / "records.jsonl")

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a bare [Errno 28], as the kernel gives it

    monkeypatch.setattr(gate.results.os, "write", full)
    with pytest.raises(GateError) as err:
        store.append([_record()])
    assert f"no space left on the device holding {store.path}" in str(err.value) and "free space" in str(err.value)
    monkeypatch.undo()

    def fill(tmp):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    from gate.files import atomic_write

    with pytest.raises(GateError, match=rf"no space left on the device holding {tmp_path / 'out.json'}"):
        atomic_write(tmp_path / "out.json", fill)
    assert [p.name for p in tmp_path.iterdir()] == ["results"]  # no temporary file left behind


@pytest.mark.slow
def test_torch_names_a_full_disk_only_when_it_writes_through_a_file_object():
    """Why gate.files.atomic_torch_save hands torch.save an open file: /dev/full answers every write with ENOSPC."""
    import torch

    blob = {"x": torch.zeros(100_000)}
    with open("/dev/full", "wb", buffering=0) as fh, pytest.raises(OSError) as err:
        torch.save(blob, fh)
    assert err.value.errno == errno.ENOSPC  # gate.files.writing turns it into one line naming the file
    with pytest.raises(RuntimeError, match="unexpected pos"):
        torch.save(blob, "/dev/full")  # a file name: a RuntimeError that says nothing of the disk


def test_a_full_disk_while_checkpointing_names_the_checkpoint(tmp_path, capsys, monkeypatch):
    import torch

    def full(obj, f, *args, **kwargs):  # what torch.save raises writing to a file object on a full disk (above)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full)
    out = call_cli(run_cli.main, [*SMOKE, "dataset=digits", *TINY_ENCODER, f"paths.root={tmp_path}"],
                   capsys, prog="gate-run")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith("gate-run: error: no space left on the device holding ") and "step=2.ckpt" in line, line


# ------------------------------------------------------------------------------------------------ reads


@pytest.fixture
def hostile(tmp_path):
    """``make(name)`` → a FIFO and a link to /dev/zero under that name (each would hang a reader: the FIFO blocks
    in open(), /dev/zero is read without end)."""

    def make(name: str) -> list[Path]:
        fifo = tmp_path / "fifo" / name
        fifo.parent.mkdir(exist_ok=True)
        os.mkfifo(fifo)
        link = tmp_path / "zero" / name
        link.parent.mkdir(exist_ok=True)
        link.symlink_to("/dev/zero")
        return [fifo, link]

    return make


@pytest.mark.timeout(30)
def test_a_results_store_that_is_a_fifo_or_a_device_is_refused_at_once(hostile):
    for path in hostile("records.jsonl"):
        started = time.monotonic()
        with pytest.raises(GateError, match=r"is (a FIFO \(named pipe\)|a character device), not a regular file"):
            ResultsStore(path).records()
        with pytest.raises(GateError, match=r"not a regular file"):
            list(read_jsonl(path))
        with pytest.raises(GateError, match=r"not a regular file"):
            ResultsStore(path).append([_record()])
        assert time.monotonic() - started < 1.0


@pytest.mark.timeout(30)
def test_tables_tier_files_and_benchmarks_files_that_are_not_regular_files_are_refused_at_once(hostile):
    from gate.analysis.load import load_results
    from gate.analysis.meta import load_benchmark_meta
    from gate.tiers.expand import load_tier

    for path in [*hostile("table.csv"), *hostile("tier.yaml"), *hostile("benchmarks.yaml")]:
        started = time.monotonic()
        with pytest.raises(GateError, match=r"not a regular file"):
            if path.name == "table.csv":
                load_results(path)
            elif path.name == "tier.yaml":
                load_tier(str(path))
            else:
                load_benchmark_meta(benchmarks_file=path)
        assert time.monotonic() - started < 1.0


# ------------------------------------------------------------------------------------------------ network


def test_reading_a_local_copy_makes_no_network_call(tmp_path, monkeypatch):
    """cifar100 from its local copy (the fixture of tests/benchmark_fixtures: uoft-cs/cifar100's parquet layout),
    with the hub *not* marked offline: no socket is opened, no name is looked up."""
    import datasets
    import huggingface_hub.constants
    from benchmark_fixtures import all_fixtures

    from gate.data import hub

    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    calls = []

    def no_network(*args, **kwargs):
        calls.append(args[:2])
        raise OSError("network access in a test")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    copy = tmp_path / "copy"
    all_fixtures()["cifar100"](copy)
    files = {"train": ["cifar100/train-*.parquet"], "test": ["cifar100/test-*.parquet"]}
    raw = hub.load_parquet("cifar100", {"files": files}, copy, columns=["img", "fine_label"], cache_dir=tmp_path / "c")
    assert {name: len(split) for name, split in raw.items()} == {"train": 300, "test": 100}
    assert calls == []


# ------------------------------------------------------------------------------------------------ devices


def test_an_accelerator_this_machine_lacks_is_one_line_before_any_work(tmp_path, capsys):
    from lightning.pytorch.accelerators import CUDAAccelerator, MPSAccelerator, XLAAccelerator

    has_gpu = CUDAAccelerator.is_available() or MPSAccelerator.is_available()
    missing = "gpu" if not has_gpu else "tpu" if not XLAAccelerator.is_available() else None
    assert missing is not None, "this machine has every accelerator Lightning knows"
    out = call_cli(run_cli.main, [*SMOKE, "dataset=digits", f"trainer.accelerator={missing}",
                                  f"paths.root={tmp_path}"], capsys, prog="gate-run")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith(f"gate-run: error: trainer.accelerator={missing} but torch finds no {missing} device")
    assert "internal error" not in line
    assert not (tmp_path / "runs").exists()


def test_a_stop_signal_exit_code_reads_as_not_done():
    from gate.signals import exit_reason

    assert exit_reason(143) == exit_reason(-signal.SIGTERM) == "stopped by SIGTERM"
    assert exit_reason(130) == "stopped by SIGINT" and exit_reason(0) is None and exit_reason(2) is None
