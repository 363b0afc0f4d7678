"""Every entry point answers a config error in one shape: one line ``<cmd>: error: ...`` on stderr and exit code 2
(docs/design.md "Hydra's own errors"), never Hydra's multi-line report with exit code 1. Each of the seven
commands is run in process, as its console script would run, with an unknown key and with an override Hydra
cannot parse; neither may start any work."""

from __future__ import annotations

import pytest

from helpers import call_cli


def _mains():
    from gate.cli import analysis, data, eevee, rank, run, score, tier

    # (main, prog, the arguments before the overrides): gate-data takes its action first
    return {"gate-run": (run.main, []), "gate-score": (score.main, []), "gate-tier": (tier.main, []),
            "gate-data": (data.main, ["list"]), "gate-rank": (rank.main, []), "gate-analysis": (analysis.main, []),
            "gate-eevee": (eevee.main, [])}


CMDS = ["gate-run", "gate-score", "gate-tier", "gate-data", "gate-rank", "gate-analysis", "gate-eevee"]


def _one_line(proc, cmd: str) -> str:
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-2000:]
    assert "Traceback" not in text and "HYDRA_FULL_ERROR" not in text, text[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{cmd}: error: "), proc.stderr[-2000:]
    return lines[0]


@pytest.mark.parametrize("cmd", CMDS)
def test_an_unknown_key_is_one_line_and_exit_2(cmd, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    main, first = _mains()[cmd]
    proc = call_cli(main, [*first, f"paths.root={tmp_path / 'root'}", "no_such_key=1"], capsys, prog=cmd)
    line = _one_line(proc, cmd)
    assert "unknown config key 'no_such_key'" in line, line
    assert not (tmp_path / "root" / "results").exists() and not (tmp_path / "root" / "runs").exists()


@pytest.mark.parametrize("cmd", CMDS)
def test_an_override_hydra_cannot_parse_is_one_line_and_exit_2(cmd, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    main, first = _mains()[cmd]
    proc = call_cli(main, [*first, f"paths.root={tmp_path / 'root'}", "seed=[1,"], capsys, prog=cmd)
    line = _one_line(proc, cmd)
    assert "Hydra cannot parse an override" in line, line


def test_a_renamed_key_names_its_new_name(tmp_path, monkeypatch, capsys):
    """``experiment`` was the name of the ``preset`` group: the old name says what to type now."""
    from gate.cli import run

    monkeypatch.chdir(tmp_path)
    proc = call_cli(run.main, [f"paths.root={tmp_path}", "experiment=paper_finetune"], capsys, prog="gate-run")
    line = _one_line(proc, "gate-run")
    assert "preset=paper_finetune" in line and "renamed" in line, line


@pytest.mark.parametrize("cmd", CMDS)
def test_a_key_added_with_plus_that_nothing_reads_is_refused(cmd, tmp_path, monkeypatch, capsys):
    """``+partial_tier=true`` (for partial_tiers) or ``+foo=1`` composes, since ``+`` adds a key; every command
    refuses a key nothing reads, naming it, before any work."""
    monkeypatch.chdir(tmp_path)
    main, first = _mains()[cmd]
    extra = ["dataset=digits"] if cmd == "gate-data" else []
    first = ["prepare"] if cmd == "gate-data" else first
    proc = call_cli(main, [*first, f"paths.root={tmp_path / 'root'}", *extra, "+foo=1"], capsys, prog=cmd)
    line = _one_line(proc, cmd)
    assert f"foo is not a {cmd} setting (+foo=... adds a key nothing reads)" in line, line
    assert not (tmp_path / "root" / "results").exists() and not (tmp_path / "root" / "reports").exists()
    assert not (tmp_path / "root" / "splits").exists()
