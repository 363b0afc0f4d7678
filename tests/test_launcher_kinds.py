"""Launchers declare what they are (gate-tier asks the kind, never the name), and the tier planner asks the data
stage's real check whether a benchmark is prepared here: an error for jobs that run here or on the cluster, a
warning for jobs described for another machine."""

from __future__ import annotations

import pytest

from gate.errors import ConfigError
from gate.tiers.expand import expand_tier
from gate.tiers.launchers import LAUNCHERS, Launcher, LauncherKind, get_launcher
from gate.tiers.spec import parse_tier

TIER = {"name": "t", "seeds": [0], "score": False, "overrides": {"logger": "csv", "image_size": 32},
        "benchmarks": ["cifar100"]}


@pytest.mark.parametrize("name", ["commands", "json", "local", "submitit_local"])
def test_every_registered_launcher_declares_its_kind(name):
    launcher = get_launcher(name)
    assert isinstance(launcher, Launcher) and isinstance(launcher.kind, LauncherKind) and launcher.name == name
    assert launcher.kind.describes_only == (name in ("commands", "json"))
    assert launcher.kind.pins_gpus == (name == "local")
    assert set(LAUNCHERS) >= {"commands", "json", "local", "slurm", "submitit_local"}


def test_the_real_check_names_a_missing_or_interrupted_copy_and_passes_stand_ins(tmp_path):
    from gate.data import hub
    from gate.engine.prepare import why_not_prepared

    source = {"kind": "hf", "repo": "uoft-cs/cifar100", "access": "open"}
    missing = why_not_prepared({"name": "cifar100", "source": source, "data_dir": str(tmp_path / "none")})
    assert "not prepared here" in missing and "gate-data prepare dataset=cifar100" in missing
    (tmp_path / "half" / hub.DOWNLOADS).mkdir(parents=True)
    (tmp_path / "half" / hub.DOWNLOADS / "archive.zip.part").write_bytes(b"PK")
    interrupted = why_not_prepared({"name": "cifar100", "source": source, "data_dir": str(tmp_path / "half")})
    assert "incomplete" in interrupted and "gate-data prepare dataset=cifar100" in interrupted
    assert why_not_prepared({"name": "digits", "builder": {}}) is None  # packaged: always ready


def test_an_unprepared_benchmark_stops_a_run_here_but_only_warns_when_described_for_elsewhere(tmp_path):
    tier = parse_tier(TIER, "t")
    root = tmp_path / "root"
    with pytest.raises(ConfigError, match=r"dataset 'cifar100' is not prepared here .*gate-data prepare dataset=cifar100"):
        expand_tier(tier, ["efficientnet_lite0"], root)
    with pytest.warns(UserWarning, match="not prepared here .*described for another machine"):
        plan = expand_tier(tier, ["efficientnet_lite0"], root, unprepared_is_error=False)
    assert [e.dataset for e in plan.experiments] == ["cifar100"]


def test_the_local_launcher_runs_a_one_thread_job_per_core_on_the_cpu():
    """Measured on 2 cores (gate/tiers/launchers/local.py): two 1-thread jobs beat one 2-thread job; never more
    workers than jobs or than memory holds at 2 GiB a job, and a value given on the command line is kept."""
    from gate.tiers.launchers.local import JOB_MEMORY, cpu_layout

    assert cpu_layout(None, None, jobs=20, cores=2, memory=24 * 2**30) == (2, 1)
    assert cpu_layout(None, None, jobs=1, cores=2, memory=None) == (1, 2)  # one job: both cores are its own
    assert cpu_layout(None, None, jobs=20, cores=16, memory=3 * JOB_MEMORY) == (3, 5)
    assert cpu_layout(None, 2, jobs=20, cores=8, memory=None) == (4, 2)
    assert cpu_layout(3, None, jobs=20, cores=2, memory=None) == (3, 1)
    assert cpu_layout(1, None, jobs=20, cores=2, memory=None) == (1, 2)


def test_each_local_job_gets_its_thread_count_in_its_own_environment(tmp_path, monkeypatch):
    import os

    from gate.tiers.launchers import LaunchContext, local

    seen = []

    class Finished:
        def __init__(self, cmd, env=None, **kwargs):
            seen.append(env)

        def poll(self):
            return 0

    monkeypatch.setattr(local.subprocess, "Popen", Finished)
    monkeypatch.setattr(local, "_cores", lambda: 2)
    exps = [type("E", (), {"id": f"e{i}", "label": f"job {i}", "overrides": ["seed=0"]})() for i in range(3)]
    before = os.environ.get("OMP_NUM_THREADS")
    ctx = LaunchContext(tier="t", run_dir=tmp_path, options={"workers": None, "threads": None, "poll_seconds": 0.01},
                        echo=lambda *a, **k: None)
    result = local.launch(exps, ctx)
    assert result.finished == ["e0", "e1", "e2"]
    assert [env["OMP_NUM_THREADS"] for env in seen] == ["1", "1", "1"]
    assert os.environ.get("OMP_NUM_THREADS") == before  # this process's own setting is left as it was
