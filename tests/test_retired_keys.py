"""Keys that nothing reads are refused in one line, never accepted and ignored: gate-tier's ``config_dirs`` (it
was validated and never read; a config dir of one's own is added with ``hydra.searchpath``), and ``kind``,
``notes`` and ``recipe_hint`` in a component's section (once meta keys that no config used and no code read)."""

from __future__ import annotations

import pytest

from helpers import call_cli, compose_run


def test_config_dirs_is_refused_naming_hydra_searchpath(tmp_path, monkeypatch, capsys):
    from gate.cli import tier

    monkeypatch.chdir(tmp_path)
    proc = call_cli(tier.main, [f"paths.root={tmp_path}", "launch=commands", f"config_dirs=[{tmp_path}]"], capsys,
                    prog="gate-tier")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert lines[0].startswith("gate-tier: error: unknown config key 'config_dirs'") and "hydra.searchpath" in lines[0]
    assert not proc.stdout.strip()  # no command was printed: nothing was planned


@pytest.mark.parametrize("key", ["kind", "notes", "recipe_hint"])
def test_a_key_an_adapter_does_not_declare_is_refused(key, tmp_path):
    from gate.engine.validate import validate_run_config
    from gate.errors import ConfigError

    cfg = compose_run(tmp_path, ["dataset=digits", f"+adapter.{key}=x"])
    with pytest.raises(ConfigError, match=f"adapter.{key}"):
        validate_run_config(cfg)
