"""Every command has one shape (issue 35, item 2): a row of gate/cli/commands.py turned into its console script by
gate/cli/common.py's ``gate_command``, its composed config parsed once, its stage given the parse's request and never
checking it again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import SMOKE, TINY_ENCODER, call_cli, compose_run

ROOT = Path(__file__).resolve().parents[1]


def test_every_console_script_is_a_row_of_the_command_table_and_its_parts_load():
    """pyproject's scripts and the table name the same seven commands; each row's parse and stage import; every
    command is the wrapper's (gate-data's action word is taken off its command line by its row's front)."""
    from gate.cli.commands import COMMANDS

    section = (ROOT / "pyproject.toml").read_text().split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    scripts = dict(re.findall(r'^([\w-]+) = "([\w.:]+)"', section, flags=re.M))
    assert set(scripts) == set(COMMANDS)
    for name, row in COMMANDS.items():
        assert (ROOT / "conf" / f"{row.config}.yaml").is_file(), name
        assert callable(row.load("stage")), name
        assert callable(row.load("parse")), name
        module = scripts[name].split(":")[0]
        text = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        assert f'main = gate_command("{name}")' in text, name


def test_a_gate_run_checks_its_config_once(tmp_path, capsys, monkeypatch):
    """Before, gate-run's CLI checked the run config and run_finetune checked it again (and resolved it twice
    more): two calls of validate_run_config per run, the dataset section checked three times and the split recipe
    four. Now, counted on a real gate-run: the config resolved once (it was twice: once to check, once more with
    absolute output paths), checked once, the dataset section checked once, its spec built once, the split recipe
    checked once."""
    from omegaconf import OmegaConf

    from gate.cli import run
    from gate.data import spec as spec_module
    from gate.engine import build, validate

    calls = {"run config": 0, "dataset section": 0, "spec": 0, "split recipe": 0, "resolved": 0}

    def counting(what, real):
        def counted(*args, **kwargs):
            calls[what] += 1
            return real(*args, **kwargs)
        return counted

    monkeypatch.setattr(validate, "validate_run_config", counting("run config", validate.validate_run_config))
    monkeypatch.setattr(spec_module, "dataset_problems", counting("dataset section", spec_module.dataset_problems))
    monkeypatch.setattr(spec_module.DatasetSpec, "__post_init__",
                        counting("spec", spec_module.DatasetSpec.__post_init__))
    monkeypatch.setattr(build, "checked_recipe", counting("split recipe", build.checked_recipe))
    real_resolved, real_plain_of = validate.resolved_config, validate.resolved
    monkeypatch.setattr(validate, "resolved_config", counting("resolved", real_resolved))
    monkeypatch.setattr(validate, "resolved", lambda cfg: (counting("resolved", real_plain_of)
                                                            if OmegaConf.is_config(cfg) else real_plain_of)(cfg))
    out = call_cli(run.main, [*SMOKE, "dataset=digits", *TINY_ENCODER, f"paths.root={tmp_path}"], capsys,
                   prog="gate-run")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "test/" in out.stdout
    assert calls == {"run config": 1, "dataset section": 1, "spec": 1, "split recipe": 1, "resolved": 1}, calls


@pytest.mark.parametrize("command,key", [("run", "seed"), ("score", "seed"), ("rank", "budget"),
                                         ("analysis", "results"), ("eevee", "table")])
def test_an_interpolation_that_cannot_resolve_is_the_same_one_line_for_every_command(command, key, tmp_path, capsys):
    """Every parse resolves its config through gate.engine.validate.resolved (gate-rank's read it with OmegaConf
    itself and printed OmegaConf's bare message)."""
    import importlib

    main = importlib.import_module(f"gate.cli.{command}").main
    out = call_cli(main, [f"paths.root={tmp_path}", f"{key}=${{nope}}"], capsys, prog=f"gate-{command}")
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith(f"gate-{command}: error: the config does not resolve: Interpolation key 'nope'")


def test_a_stage_handed_a_composed_config_says_to_parse_it_first(tmp_path):
    """run_finetune and run_score take their command's parse (checked once, where the config was composed)."""
    from gate.engine.training.finetune import run_finetune
    from gate.scoring.stage import run_score

    cfg = compose_run(tmp_path, ["dataset=digits", "encoder=resnet18_scratch"])
    with pytest.raises(TypeError, match=r"^run_finetune takes gate-run's parse, got a DictConfig: "
                                        r"run_finetune\(gate\.engine\.validate\.parse_run\(cfg\)\)$"):
        run_finetune(cfg)
    with pytest.raises(TypeError, match=r"^run_score takes gate-score's parse, got a dict: "
                                        r"run_score\(gate\.engine\.validate\.parse_score\(cfg\)\)$"):
        run_score({"dataset": "digits"})


def test_a_warning_prints_as_one_line():
    """scikit-learn's convergence warning spans six lines (a URL each); gate's printout keeps one line per warning."""
    from gate.cli.common import _one_line_warning

    text = _one_line_warning(UserWarning("lbfgs failed to converge\n\nIncrease the number of iterations\n    https://x"),
                             UserWarning, "f.py", 1)
    assert text == "[gate] warning: lbfgs failed to converge Increase the number of iterations https://x\n"


def test_gate_datas_action_word_is_checked_in_one_line(tmp_path, capsys, monkeypatch):
    """gate-data's first word is its action (its row's front takes it off the command line): a missing or unknown
    one is one line naming the three, before Hydra composes anything (argparse printed its usage and an error)."""
    from gate.cli import data

    monkeypatch.chdir(tmp_path)
    for argv, got in (([], ""), (["lst", "dataset=digits"], "got 'lst'")):
        out = call_cli(data.main, argv, capsys, prog="gate-data")
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1, out.stderr
        assert lines[0].startswith("gate-data: error: the first word says what gate-data does: list, prepare, verify")
        assert got in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing composed, nothing written


def test_hydras_flags_may_stand_before_gate_datas_action_word(tmp_path, capsys, monkeypatch):
    """``gate-data --cfg job list`` printed a parse error naming ``list`` (the flags were handed to Hydra with the
    action word still among the overrides); Hydra's flags are taken off wherever they stand."""
    from gate.cli import data

    assert data.hydra_flags(["--cfg", "job", "list", "dataset=digits"]) == (["--cfg", "job"], ["list", "dataset=digits"])
    assert data.hydra_flags(["list", "--info", "defaults", "-m"]) == (["--info", "defaults", "-m"], ["list"])
    assert data.hydra_flags(["--info", "list"]) == (["--info"], ["list"])  # `list` is not one of --info's topics
    assert data.hydra_flags(["--cfg=job", "list", "~dataset.x"]) == (["--cfg=job"], ["list", "~dataset.x"])
    monkeypatch.chdir(tmp_path)
    for argv in (["--cfg", "job", "list"], ["list", "--cfg", "job"]):
        out = call_cli(data.main, argv, capsys, prog="gate-data")
        assert out.returncode == 0 and "error" not in out.stderr, out.stderr
        assert "\npaths:\n" in out.stdout and "force: false" in out.stdout  # Hydra printed the composed config


def test_help_names_the_command_not_the_wrapper_module(capsys):
    """Every command goes through gate/cli/common.py's wrapper, after whose file Hydra named the job: `gate-run
    --help` opened with "common is powered by Hydra"."""
    from gate.cli import data, run

    for main, prog in ((run.main, "gate-run"), (data.main, "gate-data")):
        out = call_cli(main, ["--help"], capsys, prog=prog)
        assert out.returncode == 0 and out.stdout.startswith(f"{prog} is powered by Hydra."), out.stdout[:200]


def test_the_builders_take_the_plain_config_a_parse_resolved_once(tmp_path):
    """engine/build.py resolved any composed section handed to it, at every call (to_plain, ≈ 10 times a run on data
    already plain): now a command's parse resolves its config once and the builders refuse a composed one in one line
    naming where to resolve it."""
    from gate.engine.build import build_spec
    from gate.engine.validate import parse_run

    cfg = compose_run(tmp_path, ["dataset=digits"])
    with pytest.raises(TypeError, match=r"build_spec takes plain data .* got a composed DictConfig: resolve the config "
                                        r"once where it is composed \(gate.engine.validate.parse_run\(cfg\).config"):
        build_spec(cfg.dataset)
    assert build_spec(parse_run(cfg).config["dataset"]).name == "digits"
