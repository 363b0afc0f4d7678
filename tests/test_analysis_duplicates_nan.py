"""gate-analysis and gate-eevee say what they leave out (issue 27): a result listed twice in a table is named
(and refused when the two values disagree: which one is right cannot be known), a rerun's records replacing the
earlier ones is said, rows without a value are counted and named, and a gate-eevee setting that is not a finite
number in range (``lr=nan`` once wrote a "best subset" of untrained models) is refused in one line."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from test_eevee import SMALL, planted_table

from gate.analysis.eevee import EeveeConfig, Problem, search
from gate.analysis.load import from_frame, load_results, summarize
from gate.results import Record, ResultsStore

from helpers import call_cli

HEADER = "encoder,dataset,metric,value\n"
OTHERS = "b,digits,acc@1,0.7\nc,digits,acc@1,0.5\n"


def test_a_result_listed_twice_with_one_value_is_named_and_counted_once(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "a,digits,acc@1,0.8\n" + OTHERS + "a,digits,acc@1,0.8\n")
    with pytest.warns(UserWarning, match=r"t.csv: 2 rows hold the same result.*a × digits acc@1 \(CSV lines 2, 5\); "
                                         r"counted once"):
        long = load_results(path).long
    row = summarize(long).set_index("encoder").loc["a"]
    assert row["n"] == 1 and row["mean"] == pytest.approx(0.8)


def test_a_result_listed_twice_with_two_values_is_refused(tmp_path):
    """Before: the second row won silently (0.6 kept, 0.8 dropped)."""
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "a,digits,acc@1,0.8\n" + OTHERS + "a,digits,acc@1,0.6\n")
    with pytest.raises(ValueError, match=r"t.csv: a result is listed twice with different values: a × digits acc@1 "
                                         r"\(CSV lines 2, 5: 0.8, 0.6\)") as err:
        load_results(path)
    assert "\n" not in str(err.value)


def test_a_rerun_replacing_stored_records_is_said(tmp_path):
    store = ResultsStore(tmp_path / "r.jsonl")
    cfg = {"dataset": {"name": "digits", "num_classes": 10}, "encoder": {"name": "a"}, "seed": 0}
    common = dict(experiment="exp1", kind="finetune", encoder="a", dataset="digits", task="classification",
                  adapter="linear", recipe="conv", seed=0, split="test", metric="acc@1", config=cfg)
    store.append([Record(**common, value=0.8, timestamp="2024-01-01T00:00:00+00:00"),
                  Record(**common, value=0.7, timestamp="2024-01-02T00:00:00+00:00"),
                  Record(**{**common, "experiment": "exp2", "encoder": "b", "config": {**cfg, "encoder": {"name": "b"}}},
                         value=0.5)])
    with pytest.warns(UserWarning, match=r"1 result\(s\) recorded more than once; the latest record is used: "
                                         r"a × digits acc@1 \(seed 0, experiment exp1: 0.7 replaces 0.8\)"):
        s = summarize(load_results(store.path).long)
    assert s.set_index("encoder").loc["a", "mean"] == pytest.approx(0.7)


def test_rows_without_a_value_are_counted_and_named(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "a,digits,acc@1,\n" + OTHERS + "a,cifar100,acc@1,nan\nb,cifar100,acc@1,0.3\n")
    with pytest.warns(UserWarning, match=r"t.csv: 2 row\(s\) have no value and are left out: a × digits acc@1 "
                                         r"\(CSV line 2\), a × cifar100 acc@1 \(CSV line 5\)"):
        long = load_results(path).long
    assert len(long) == 3


def test_an_empty_cell_of_a_wide_table_stays_a_missing_result_without_a_warning():
    import pandas as pd

    wide = pd.DataFrame({"dataset": ["x", "y"], "metric": ["acc@1", "acc@1"], "a": [0.5, np.nan], "b": [0.7, 0.2],
                         "c": [0.1, 0.3]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        long = from_frame(wide).long
    assert len(long) == 5


@pytest.mark.parametrize("setting", [{"lr": math.nan}, {"lr": math.inf}, {"lr": 0.0}, {"weight_decay": math.nan},
                                     {"weight_decay": -1.0}, {"val_fraction": math.nan}, {"population": math.nan},
                                     {"epochs": 2.5}])
def test_eevee_refuses_a_setting_that_is_not_a_finite_number_in_range(setting):
    (name, value), = setting.items()
    with pytest.raises(ValueError, match=rf"^{name}={value!r} is invalid: expected "):
        EeveeConfig(**{**SMALL, **setting})


def test_gate_eevee_lr_nan_is_one_line_and_writes_nothing(tmp_path, capsys):
    from gate.analysis.meta import default_paper_table
    from gate.cli import eevee

    out = tmp_path / "out"
    proc = call_cli(eevee.main, [f"table={default_paper_table()}", "k=1", f"out={out}", "lr=nan", "figures=false",
                                 "importance=false", "progress=false"], capsys, prog="gate-eevee")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("gate-eevee: error: lr=nan is invalid")
    assert not out.exists()


def test_a_search_where_no_subset_can_be_scored_is_refused(monkeypatch):
    """Whatever makes every meta-model's validation error NaN, no subset is called best."""
    import gate.analysis.eevee as eevee

    problem = Problem(planted_table(n_enc=12, n_other=2), EeveeConfig(**SMALL))
    monkeypatch.setattr(eevee.Evaluator, "__init__", lambda self, p, scorer=None: (
        setattr(self, "problem", p), setattr(self, "cache", {}),
        setattr(self, "scorer", lambda pr, subsets: [np.full(3, np.nan) for _ in subsets]))[0])
    with pytest.raises(ValueError, match=r"k=1: no subset could be scored"):
        search(problem, 1)
