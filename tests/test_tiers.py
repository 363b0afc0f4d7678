"""gate-tier: expansion, launchers, resumability and bad input (CPU, offline, tiny tiers written to tmp)."""

import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gate.cli import tier as tier_cli
from gate.cli.arguments import normalise_args as _normalise_args
from gate.cli.commands import COMMANDS
from gate.engine.validate import resolved_config
from gate.errors import ConfigError
from gate.results import ResultsStore, experiment_id, identity
from gate.tiers.expand import expand_tier, load_tier
from gate.tiers.spec import parse_tier, render_value
from gate.tiers.summary import compare_encoders, cost_table, experiment_facts

from helpers import call_cli, compose_run, sigkill_once

# Two tiny experiments (digits × efficientnet_lite0 × seeds 0 and 1), long enough to be killed mid-run.
TINY = {
    "name": "tiny", "seeds": [0, 1], "score": False,
    # callbacks=none: no figures, FLOP count or hardware sampling (run-only: the ids stay; tests/test_logging_e2e.py
    # runs them)
    "overrides": {"logger": "csv", "callbacks": "none", "image_size": 32, "ensembles": [1], "trainer.max_steps": 30,
                  "trainer.val_check_interval": 10, "data.batch_size": 16, "data.max_train_samples": 200,
                  "data.max_val_samples": 60, "data.max_test_samples": 60},
    "benchmarks": ["digits", {"dataset": "bbc_news", "note": "text: skipped for image encoders"}],
}
# The same tier with one seed, as short as a run can be and still be killed between two checkpoints (steps 2, 4, 6).
KILLABLE = dict(TINY, seeds=[0],
                overrides=dict(TINY["overrides"], **{"trainer.max_steps": 6, "trainer.val_check_interval": 2}))


def normalise_args(argv):
    """gate-tier's command line as its row of the command table reads it."""
    return _normalise_args(argv, dict(COMMANDS["gate-tier"].list_keys))


def write_tier(path: Path, doc=TINY) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def gate_tier(args, cwd=None, timeout=1800):
    """gate-tier in a fresh interpreter, as a user's terminal runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("GATE_DEBUG", "HYDRA_FULL_ERROR")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return subprocess.run([sys.executable, "-m", "gate.cli.tier", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=cwd)


@pytest.fixture
def tier_in_process(monkeypatch, capsys):
    """``run(args)``: gate-tier's ``main()`` in this process with that command line (tests/helpers.py ``call_cli``);
    the venv's commands on PATH, as ``gate_tier`` gives them (launch=commands lines run gate-run)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return lambda args: call_cli(tier_cli.main, args, capsys, prog="gate-tier")


def complete_sets(store: ResultsStore) -> dict[str, int]:
    """experiment → number of complete record sets (attempts) stored."""
    attempts: dict[str, set] = {}
    for r in store.complete_records(kind="finetune"):
        attempts.setdefault(r["experiment"], set()).add(r["attempt"])
    return {k: len(v) for k, v in attempts.items()}


# ------------------------------------------------------------------------------------------ unit tests


def test_encoder_lists_and_tier_paths_are_read_before_hydra():
    assert normalise_args(["encoder=a,b,c", "seeds=0,1", "tier=/x/my.yaml", "launch=local"]) == [
        "encoders=[a,b,c]", "seeds=[0,1]", "tier_file=/x/my.yaml", "launch=local"]
    assert normalise_args(["encoder=a", "encoders=[a,b]", "tier=small"]) == ["encoders=[a]", "encoders=[a,b]", "tier=small"]


def test_tier_files_parse_and_bad_ones_list_every_problem():
    tier = parse_tier(TINY, "tiny")
    assert tier.seeds == (0, 1) and [e.dataset for e in tier.entries] == ["digits", "bbc_news"]
    assert "ensembles=[1]" in tier.overrides and "trainer.max_steps=30" in tier.overrides
    assert render_value("a b") == "'a b'" and render_value(None) == "null" and render_value([1, 2]) == "[1,2]"
    with pytest.raises(ConfigError) as err:
        parse_tier({"name": "bad", "seeds": [-1], "benchmarks": [{"adapter": "x"}, {"dataset": "digits", "steps": 3}],
                    "colour": "red"}, "bad")
    text = str(err.value)
    for part in ("colour", "seeds=[-1]", "entry 1", "entry 2 (digits): unknown key(s) ['steps']"):
        assert part in text
    for name in ("small", "base", "big", "full", "demo"):
        loaded = load_tier(name)
        assert len(loaded.entries) == {"small": 8, "base": 15, "big": 21, "full": 31, "demo": 11}[name]
        assert loaded.seeds == ((0,) if name == "demo" else (0, 1, 2))
    with pytest.raises(ConfigError, match=r"tier='nope' is unknown: known tiers are \['base', 'big', 'demo'"):
        load_tier("nope")


def test_expansion_gives_gate_runs_ids_skips_what_an_encoder_cannot_take_and_lists_every_error(tmp_path):
    plan = expand_tier(parse_tier(TINY, "tiny"), ["efficientnet_lite0", "minilm"], tmp_path)
    assert [(e.encoder, e.dataset, e.seed) for e in plan.experiments] == [
        ("efficientnet_lite0", "digits", 0), ("efficientnet_lite0", "digits", 1),
        ("minilm", "digits", 0), ("minilm", "digits", 1),  # minilm takes images through its patch stem
        ("minilm", "bbc_news", 0), ("minilm", "bbc_news", 1)]
    assert plan.skipped == ["efficientnet_lite0 × bbc_news: text dataset, the encoder takes ['image'] (no stem)"]
    for exp in plan.experiments:  # the id gate-run computes from the same command line
        rest = [o for o in exp.overrides if not o.startswith("paths.root=")]
        assert exp.id == experiment_id(resolved_config(compose_run(tmp_path, rest)), "finetune")
    from gate.tiers.launchers import LaunchContext, get_launcher

    lines = []
    ctx = LaunchContext(tier="tiny", run_dir=plan.run_dir, options={}, out=str(tmp_path / "jobs.json"), echo=lines.append)
    assert not get_launcher("json")(plan.experiments, ctx).ran
    jobs = json.loads((tmp_path / "jobs.json").read_text())
    assert list(jobs) == [e.id for e in plan.experiments]
    assert all(shlex.split(c)[:2] == ["gate-run", f"paths.root={tmp_path}"] for c in jobs.values())
    get_launcher("commands")(plan.experiments[:1], ctx)
    assert lines[-1] == jobs[plan.experiments[0].id]
    with pytest.raises(ConfigError, match=r"launch='nope' is unknown: choose one of \['commands', 'json', 'local'"):
        get_launcher("nope")
    bad = dict(TINY, benchmarks=["digits", "no_such_set", "also_missing"])
    with pytest.raises(ConfigError) as err:
        expand_tier(parse_tier(bad, "bad"), ["efficientnet_lite0", "no_such_encoder"], tmp_path)
    text = str(err.value)
    assert "2 problem(s)" in text and "dataset 'no_such_set' (entry 2), 'also_missing' (entry 3) are not registered" in text
    assert "encoder='no_such_encoder' is unknown" in text
    with pytest.raises(ConfigError, match="encoder efficientnet_lite0 can take no entry of tier tiny"):
        expand_tier(parse_tier(dict(TINY, benchmarks=["bbc_news"]), "tiny"), ["efficientnet_lite0"], tmp_path)
    not_here = expand_tier.__wrapped__ if hasattr(expand_tier, "__wrapped__") else expand_tier
    with pytest.raises(ConfigError, match="not prepared here; run gate-data prepare dataset=digits"):
        not_here(parse_tier(dict(TINY, benchmarks=["digits"]), "tiny"), ["efficientnet_lite0"], tmp_path,
                 check_prepared=lambda ds: f"dataset {ds['name']} is not prepared here; run gate-data prepare "
                                           f"dataset={ds['name']}")
    assert not (tmp_path / "runs").exists()


def test_paper_tiers_apply_each_benchmarks_protocol_before_their_own_overrides(tmp_path):
    """use_paper_protocol: the small tier gives ade20k its protocol's 1024 px and batch 8 and cifar100 its own 224 px and
    batch 64 (over paper_finetune's 224 / 32), video its clips per batch, few-shot episodes and ACDC's one-volume
    batch no batch override; the tier's and an entry's own overrides win. Nothing is prepared here: the
    expansion runs with a permissive prepared check."""
    anywhere = lambda dataset: None
    small = load_tier("small")
    assert small.use_paper_protocol and not load_tier("demo").use_paper_protocol
    runs = {e.dataset: e for e in expand_tier(small, ["efficientnet_lite0"], tmp_path, seeds=[0],
                                              check_prepared=anywhere).experiments}
    assert (runs["ade20k"].config["image_size"], runs["ade20k"].config["data"]["batch_size"]) == (1024, 8)
    assert (runs["cifar100"].config["image_size"], runs["cifar100"].config["data"]["batch_size"]) == (224, 64)
    assert runs["iwildcam"].config["adapter"]["clips_per_batch"] == 8
    assert {"image_size=1024", "data.batch_size=8"} <= set(runs["ade20k"].overrides)
    for episodic_or_volume in ("cubirds", "mini_imagenet", "acdc"):
        assert not any(o.startswith(("data.batch_size=", "adapter.clips_per_batch="))
                       for o in runs[episodic_or_volume].overrides)
    assert "image_size=512" in runs["acdc"].overrides
    doc = {"name": "mine", "use_paper_protocol": True, "overrides": {"preset": "paper_finetune", "data.batch_size": 4},
           "benchmarks": [{"dataset": "ade20k", "overrides": {"image_size": 512}}]}
    (mine,) = expand_tier(parse_tier(doc, "mine"), ["efficientnet_lite0"], tmp_path, check_prepared=anywhere).experiments
    assert (mine.config["image_size"], mine.config["data"]["batch_size"]) == (512, 4)
    assert not {"image_size=1024", "data.batch_size=8"} & set(mine.overrides)  # a key set later is not repeated
    (plain,) = expand_tier(parse_tier(dict(doc, use_paper_protocol=False, overrides={"preset": "paper_finetune"}), "x"),
                           ["efficientnet_lite0"], tmp_path, check_prepared=anywhere).experiments
    assert (plain.config["image_size"], plain.config["data"]["batch_size"]) == (512, 32)
    with pytest.raises(ConfigError, match=r"use_paper_protocol='yes' is invalid: expected true or false"):
        parse_tier(dict(doc, use_paper_protocol="yes"), "bad")


def test_an_old_use_protocol_key_is_refused_naming_the_new_one():
    """A tier file written before the rename: silently ignoring use_protocol would run the tier's sizes instead of
    the paper's, so it is refused in one line that names use_paper_protocol."""
    with pytest.raises(ConfigError) as err:
        parse_tier({"name": "old", "use_protocol": True, "benchmarks": ["fashion_mnist"]}, "old")
    line = str(err.value)
    assert "\n" not in line and "use_protocol was renamed use_paper_protocol" in line
    assert "write use_paper_protocol: true" in line and "unknown key" not in line

def test_cost_sums_what_was_measured_and_never_invents_the_rest():
    recs = [
        {"kind": "finetune", "experiment": "a", "encoder": "p", "dataset": "d1", "seed": 0,
         "facts": {"wall_seconds": 3600, "gpu_hours": 0.5, "energy_kwh": None}},
        {"kind": "finetune", "experiment": "a", "encoder": "p", "dataset": "d1", "seed": 0,
         "facts": {"wall_seconds": 3600, "gpu_hours": 0.5}},   # same set: counted once
        {"kind": "finetune", "experiment": "b", "encoder": "s", "dataset": "d1", "seed": 0,
         "facts": {"wall_seconds": 1800, "cpu_seconds": 7200}},
    ]
    cost = cost_table(experiment_facts(recs)).set_index(["scope", "key"])
    total = cost.loc[("total", "all")]
    assert total["experiments"] == 2 and total["wall_hours"] == pytest.approx(1.5)
    assert total["gpu_hours"] == pytest.approx(0.5) and total["gpu_hours_measured"] == 1
    assert total["cpu_hours"] == pytest.approx(2.0) and math.isnan(total["energy_kwh"])
    assert cost.loc[("encoder", "s"), "gpu_hours_measured"] == 0 and math.isnan(cost.loc[("encoder", "s"), "gpu_hours"])


def test_encoder_comparison_per_paper_group():
    tiers = pd.DataFrame({"encoder": ["pre", "scratch"], "tier:demo": [0.7, 0.5], "tier:demo:rank": [1, 2],
                          "group:Img Class": [0.9, 0.6], "group:Img Class:rank": [1, 2], "group:Img Seg": [0.3, 0.4]})
    comp = compare_encoders(tiers, ["pre", "scratch"], "demo").set_index("group")
    assert comp.loc["demo (tier mean)", "pre − scratch"] == pytest.approx(0.2)
    assert comp.loc["Img Class", "pre − scratch"] == pytest.approx(0.3)
    assert comp.loc["Img Seg", "pre − scratch"] == pytest.approx(-0.1)


def test_bad_input_is_one_line_before_anything_runs(tmp_path, tier_in_process):
    gate_tier = tier_in_process  # the command line, in process: no interpreter start per case
    out = gate_tier(["tier=nosuch", f"paths.root={tmp_path}"])
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "gate-tier: error: tier='nosuch' is unknown: known tiers are ['base', 'big', 'demo', 'full', 'small']" \
        in out.stderr
    tier = write_tier(tmp_path / "t.yaml", dict(TINY, benchmarks=["digits", "not_a_set", "no_such_set"]))
    out = gate_tier([f"tier={tier}", "encoder=efficientnet_lite0,minilm", "launch=slurm", f"paths.root={tmp_path}"])
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "gate-tier: error: launch=slurm needs SLURM's sbatch on PATH" in out.stderr  # found before expanding
    out = gate_tier([f"tier={tier}", "encoder=efficientnet_lite0,minilm", f"paths.root={tmp_path}"])
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "dataset 'not_a_set' (entry 2), 'no_such_set' (entry 3) are not registered" in out.stderr
    # launch=json's out= is checked before the tier is expanded (the full tier's expansion takes half a minute)
    for args, message in (([], "gate-tier: error: launch=json needs out=<file.json>"),
                          ([f"out={tmp_path / 'no' / 'jobs.json'}"], f"its folder {tmp_path / 'no'} does not exist")):
        out = gate_tier(["tier=demo", "encoder=efficientnet_lite0", "launch=json", f"paths.root={tmp_path}",
                         *args])
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and message in out.stderr, out.stderr
        assert "expanding" not in out.stdout + out.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


# ----------------------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_local_tier_survives_sigkill_reruns_train_nothing_and_commands_give_the_same_runs(tmp_path, tier_in_process):
    tier = write_tier(tmp_path / "tiny.yaml", KILLABLE)
    root = tmp_path / "local"
    args = [f"tier={tier}", "encoder=efficientnet_lite0", f"paths.root={root}", "launch=local", "launcher.workers=2"]
    # the launcher, a real process, dies mid-run (at its job's first checkpoint); the job dies with it
    sigkill_once("gate.cli.tier", args, root / "runs", "*/checkpoints/step=2.ckpt", timeout=600)
    assert list((root / "runs").glob("*/checkpoints/step=2.ckpt")), "no checkpoint within 600 s"
    assert not (root / "results" / "records.jsonl").exists()  # killed before its experiment was recorded
    out = tier_in_process(args)  # the same command resumes it (its job a gate-run process of its own, as before)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 experiment(s)" in out.stdout and "skipped: efficientnet_lite0 × bbc_news" in out.stdout
    report = Path(out.stdout.strip().splitlines()[-1].removeprefix("[gate] report: "))
    assert report.name == "report.html" and report.parent.name == "tier-tiny" and "Cost of the tier" in report.read_text()
    store = ResultsStore(root / "results" / "records.jsonl")
    plan = expand_tier(load_tier(str(tier)), ["efficientnet_lite0"], root)
    ids = {e.id for e in plan.experiments}
    assert complete_sets(store) == {i: 1 for i in ids}  # each experiment: exactly one complete record set
    rows = store.records()
    assert len(rows) == rows[0]["set_size"]  # nothing of the killed attempt was stored
    assert rows[0]["facts"]["resumed_from_step"] >= 2  # the job, SIGKILLed with its launcher, resumed its checkpoint
    raw = (root / "results" / "records.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in raw)  # no corrupt line
    again = tier_in_process([*args, "report=false"])  # a finished tier: nothing trains, everything is reported done
    assert again.returncode == 0, again.stderr[-2000:]
    assert "1 already done (skipped), 0 to run" in again.stdout and "nothing to train" in again.stdout
    assert (root / "results" / "records.jsonl").read_text().splitlines() == raw

    # launch=commands, each printed line parsed by a shell: the experiments the local launcher ran, with the configs
    # their records hold (composed from the printed words, as gate-run composes them: training them again would only
    # repeat the two runs above).
    other = tmp_path / "commands"
    listed = tier_in_process([f"tier={tier}", "encoder=efficientnet_lite0", f"paths.root={other}", "launch=commands"])
    assert listed.returncode == 0, listed.stderr[-2000:]
    lines = [ln for ln in listed.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1 and all(shlex.split(ln)[0] == "gate-run" for ln in lines)
    stored = {r["experiment"]: r["config"] for r in store.complete_records()}
    for line in lines:
        # bash parses the line as a user's shell would (quoting included) and hands gate-run its words
        words = subprocess.run(["bash", "-c", 'gate-run() { printf "%s\\0" "$@"; }; ' + line], capture_output=True,
                               text=True, check=True).stdout.split("\0")[:-1]
        assert f"paths.root={other}" in words
        config = resolved_config(compose_run(root, [w for w in words if not w.startswith("paths.root=")]))
        exp = experiment_id(config, "finetune")
        assert exp in ids and json.loads(json.dumps(identity(config, "finetune"))) == stored[exp], exp


@pytest.mark.slow
def test_submitit_local_runs_a_tiny_experiment_to_completion(tmp_path, tier_in_process):
    # one job: submitit's array of jobs is its own (tests/test_tiers.py's slurm test reads the script it writes)
    doc = dict(TINY, seeds=[0],
               overrides=dict(TINY["overrides"], **{"trainer.max_steps": 4, "trainer.val_check_interval": 2}))
    tier = write_tier(tmp_path / "tiny.yaml", doc)
    out = tier_in_process([f"tier={tier}", "encoder=efficientnet_lite0", f"paths.root={tmp_path}", "launch=submitit_local",
                     "report=false", "launcher.poll_seconds=0.5"])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "submitted 1 job(s) (local" in out.stdout and out.stdout.count("done   efficientnet_lite0 × digits") == 1
    plan = expand_tier(load_tier(str(tier)), ["efficientnet_lite0"], tmp_path)
    assert complete_sets(ResultsStore(tmp_path / "results" / "records.jsonl")) == {e.id: 1 for e in plan.experiments}


def test_slurm_options_reach_the_sbatch_script(tmp_path, monkeypatch):
    import yaml
    from submitit.slurm.slurm import SlurmExecutor

    from gate.tiers.launchers import LaunchContext
    from gate.tiers.launchers.submitit_array import GateRunJob, _executor

    monkeypatch.setattr(SlurmExecutor, "affinity", classmethod(lambda cls: 1))  # as if on a cluster (srun found)
    opts = yaml.safe_load((Path(__file__).parents[1] / "conf" / "tier_run.yaml").read_text())["launcher"]
    opts.update(partition="gpu", qos="high", account="lab", timeout_min=720, setup=["source /x/.venv/bin/activate"],
                additional_parameters={"constraint": "a100"})
    executor = _executor("slurm", LaunchContext(tier="small", run_dir=tmp_path, options=opts))
    script = executor._executor._make_submission_file_text("python -m x", "uid")
    for line in ("#SBATCH --partition=gpu", "#SBATCH --qos=high", "#SBATCH --account=lab", "#SBATCH --time=720",
                 "#SBATCH --gpus-per-node=1", "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32GB",
                 "#SBATCH --constraint=a100", "#SBATCH --job-name=gate-small", "source /x/.venv/bin/activate",
                 "#SBATCH --signal=USR2@90"):
        assert line in script, line
    assert hasattr(GateRunJob(), "checkpoint")  # preemption/timeout: submitit requeues the job
    delayed = GateRunJob().checkpoint(["dataset=digits"], False)
    assert isinstance(delayed.function, GateRunJob) and delayed.args == (["dataset=digits"], False)


def test_encoders_from_your_own_config_dir(tmp_path):
    conf = Path(__file__).parents[1] / "conf" / "encoder" / "efficientnet_lite0.yaml"
    (tmp_path / "my_configs" / "encoder").mkdir(parents=True)
    (tmp_path / "my_configs" / "encoder" / "my_lite.yaml").write_text(
        conf.read_text().replace("name: efficientnet_lite0", "name: my_lite"))
    plan = expand_tier(parse_tier(dict(TINY, seeds=[0]), "tiny"), ["my_lite"], tmp_path / "out",
                       searchpath=[f"file://{tmp_path / 'my_configs'}"])
    (exp,) = plan.experiments
    assert exp.encoder == "my_lite" and f"hydra.searchpath=[file://{tmp_path / 'my_configs'}]" in exp.overrides
    rest = [o for o in exp.overrides if not o.startswith("paths.root=")]
    assert exp.id == experiment_id(resolved_config(compose_run(tmp_path / "out", rest)), "finetune")


def test_a_long_expansion_says_how_far_it_is(tmp_path, monkeypatch):
    """The paper's full table composes 651 benchmark × encoder pairs (minutes): the expansion is not silent."""
    import gate.tiers.expand as expand

    monkeypatch.setattr(expand, "PROGRESS_SECONDS", 0.0)
    lines = []
    plan = expand_tier(parse_tier(TINY, "tiny"), ["efficientnet_lite0", "minilm"], tmp_path, progress=lines.append)
    assert len(plan.experiments) == 6
    assert len(lines) == 1 and lines[0].startswith("[gate]   1 of 2 benchmarks composed × 2 encoder(s) (")
