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
