"""measurements/rank_table_retro.py --json: one retrospective split of the GATE paper's table, from the table alone,
reproduced exactly by a second call; v2's plain branch carries its tier score's 80 % interval (complete.predict_tier)."""

from __future__ import annotations

import json

from helpers import load_script

HELD = "svit,clip,bert,dino,r50a1,effv2,whspr,siglip,flex,cvnxtv2"


def _split(capsys) -> dict:
    retro = load_script("measurements/rank_table_retro.py")
    assert retro.main(["--holdout", HELD, "--tier", "small", "--k", "3", "--inner-splits", "2", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    return json.loads(lines[0])


def test_one_split_from_the_table_alone_is_reproduced_with_the_plain_branchs_interval(capsys):
    first, second = _split(capsys), _split(capsys)
    assert first == second
    assert first["pool"] == HELD.split(",") and len(first["chosen"]) == 3
    plain = first["methods"]["v2_plain"]
    assert set(plain["truth"]) == set(HELD.split(",")) and 0.0 <= plain["coverage"] <= 1.0
    assert -1.0 <= plain["tau"] <= 1.0
