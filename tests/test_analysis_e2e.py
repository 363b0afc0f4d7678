"""gate-analysis end to end: results store → every output file; the HTML report in a headless browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gate.results import Record, ResultsStore

from helpers import call_cli

ENCODERS = ["resnet18_scratch", "efficientnet_lite0", "efficientnet_lite1", "vit_tiny_scratch", "minilm_probe"]
DATASETS = {"digits": 10, "fashion_mnist": 10}
SCORES = {"logme": True, "leep": True, "nce": True, "coral": False}


def make_store(root: Path) -> Path:
    """A results store shaped like gate-run/gate-score output: two seeds of fine-tuning on the test split
    (plus the best validation value), one score record per (encoder, dataset, score) on the train split,
    and one corrupt line."""
    rng = np.random.default_rng(0)
    store = ResultsStore(root / "results" / "records.jsonl")
    quality = dict(zip(ENCODERS, [0.55, 0.8, 0.85, 0.6, 0.3]))
    for ds, classes in DATASETS.items():
        for enc in ENCODERS:
            base = {"dataset": {"name": ds, "num_classes": classes, "paper_group": "Img Class", "task": "classification"},
                    "encoder": {"name": enc}, "adapter": {"name": "linear_classifier"}, "recipe": {"name": "conv"}}
            for seed in (0, 1):
                acc = float(np.clip(quality[enc] + 0.02 * rng.normal(), 0, 1))
                common = dict(experiment=f"{enc}-{ds}-{seed}", kind="finetune", encoder=enc, dataset=ds,
                              task="classification", adapter="linear_classifier", recipe="conv", seed=seed,
                              config={**base, "seed": seed})
                store.append([
                    Record(split="test", metric="acc@1", value=acc, higher_is_better=True, **common),
                    Record(split="test", metric="acc@5", value=min(1.0, acc + 0.15), higher_is_better=True, **common),
                    Record(split="test", metric="loss", value=2.5 * (1 - acc), higher_is_better=False, **common),
                    Record(split="test", metric="ensemble_3/acc@1", value=min(1.0, acc + 0.01), higher_is_better=True,
                           **common),
                    Record(split="val", metric="acc@1", value=acc + 0.01, higher_is_better=True, **common),
                ])
            scores = []
            for name, hib in SCORES.items():
                signal = quality[enc] if hib else -quality[enc]
                scores.append(Record(experiment=f"score-{enc}-{ds}", kind="score", encoder=enc, dataset=ds,
                                     task="classification", adapter="", recipe="", seed=0, split="train",
                                     metric=name, value=float(signal + 0.05 * rng.normal()), higher_is_better=hib,
                                     config={"dataset": {"name": ds, "num_classes": classes}, "encoder": {"name": enc},
                                             "seed": 0}))
            store.append(scores)
    with open(store.path, "a") as fh:
        fh.write('{"experiment": "half-written", "kind": "finet\n')
    return store.path


EXPECTED = ["table.csv", "table.md", "table.tex", "table_std.csv", "table_n.csv", "summary.csv", "tiers.csv",
            "tiers_benchmarks.csv", "correlations.csv", "correlation_points.csv", "report.html",
            "figures/ranking_heatmap.png", "figures/groups.png", "figures/benchmarks_heatmap.png"]


@pytest.fixture
def report(tmp_path_factory, monkeypatch, capsys):
    """gate-analysis' main() with this command line, in process (its own process: tests/test_bad_inputs.py)."""
    from gate.cli import analysis

    root = tmp_path_factory.mktemp("gate_outputs")
    results = make_store(root)
    monkeypatch.chdir(root)
    with pytest.warns(UserWarning, match=r"records\.jsonl:\d+: skipping corrupt record line"):  # named, then skipped
        proc = call_cli(analysis.main, [f"results={results}", "target=acc@1", f"paths.root={root}"], capsys,
                        prog="gate-analysis")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = root / "reports" / "latest"  # the default: next to the results store
    return out, proc


def test_gate_analysis_writes_every_file_and_its_report_opens_in_a_browser(report, tmp_path):
    out, proc = report
    for name in EXPECTED:
        assert (out / name).is_file(), name
    table = pd.read_csv(out / "table.csv")
    assert list(table.columns[:4]) == ["paper_group", "dataset", "metric", "higher_is_better"]
    assert set(table.columns[4:]) == set(ENCODERS)
    assert set(table["metric"]) == {"acc@1", "acc@5", "loss", "ensemble_3/acc@1"}  # test split only
    n = pd.read_csv(out / "table_n.csv")
    assert (n[ENCODERS].to_numpy() == 2).all()  # two seeds averaged
    assert "±" in (out / "table.md").read_text() and r"\toprule" in (out / "table.tex").read_text()
    corr = pd.read_csv(out / "correlations.csv")
    assert list(corr.columns) == ["dataset", "score_metric", "target_metric", "n", "pearson", "pearson_p", "spearman",
                                  "spearman_p", "kendall", "kendall_p", "weighted_tau", "top1", "top3", "rel_top1", "degenerate"]
    assert len(corr) == len(DATASETS) * len(SCORES) and (corr["n"] == len(ENCODERS)).all()
    assert (corr["target_metric"] == "acc@1").all()
    coral = corr[corr["score_metric"] == "coral"]
    assert (coral["spearman"] > 0.5).all()  # lower-is-better discrepancy negated before correlating
    tiers = pd.read_csv(out / "tiers.csv")
    assert "group:Img Class" in tiers.columns and "group:Img Class:rank" in tiers.columns
    assert tiers.iloc[0]["encoder"] == "efficientnet_lite1"
    for ds in DATASETS:
        assert (out / "figures" / f"scores_{ds}_acc@1.png").is_file()
    html = (out / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(list((out / "figures").glob("*.png")))
    assert "http://" not in html and "https://" not in html  # self-contained
    check_report_in_browser(out / "report.html", tmp_path)


def test_unknown_target_metric_fails_clearly(tmp_path):
    from gate.analysis.pipeline import run_analysis

    results = make_store(tmp_path)
    with pytest.raises(ValueError, match=r"unknown target metric\(s\) \['top1_acc'\]"), pytest.warns(UserWarning):
        run_analysis(results, tmp_path / "r", target="top1_acc", figures=False)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def check_report_in_browser(report_html: Path, tmp_path: Path) -> None:
    """Open report.html in headless chromium: every figure decodes, no console errors, not blank."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium) - cannot open report.html headless")
    out = report_html.parent
    url = report_html.resolve().as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
             "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([browser, *flags, "--virtual-time-budget=5000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    n_figures = len(list((out / "figures").glob("*.png")))
    assert dom.stdout.count('src="data:image/png;base64,') == n_figures
    total = re.search(r'data-images-total="(\d+)"', dom.stdout)
    ok = re.search(r'data-images-ok="(\d+)"', dom.stdout)
    assert total and ok, "the page's load handler did not run"
    assert int(total.group(1)) == n_figures and int(ok.group(1)) == n_figures, "some figures did not decode"
    errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)]
    assert not errors, errors
    shot = tmp_path / "report.png"
    run = subprocess.run([browser, *flags, "--window-size=1280,2400", f"--screenshot={shot}", url],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert pixels.std() > 5.0, "the screenshot is blank"
    assert (pixels < 128).mean() > 0.01  # text and figures are drawn


@pytest.mark.slow
def test_gate_run_and_gate_score_records_to_report(tmp_path, digits_smoke_run, monkeypatch, capsys):
    """Real records of gate-run (one tiny fine-tune: the session's finished digits run, conftest.py) and gate-score
    (three encoders), plus copies of the fine-tuning records for the two other encoders, through gate-analysis to a
    report that opens. gate-score and gate-analysis run their command lines in process (tests/helpers.py call_cli);
    their real processes are tested in test_gate_score.py and above."""
    from gate.cli import analysis
    from gate.cli import score as score_cli

    from helpers import call_cli

    root = tmp_path / "gate_outputs"
    (root / "results").mkdir(parents=True)
    shutil.copy(digits_smoke_run[0] / "results" / "records.jsonl", root / "results" / "records.jsonl")
    monkeypatch.chdir(tmp_path)
    encoders = ["resnet18_scratch", "vit_tiny_scratch", "efficientnet_lite0"]
    score = call_cli(score_cli.main, ["-m", f"encoder={','.join(encoders)}", "dataset=digits", "max_samples=150",
                                      "image_size=32", "progress_bar=false", f"paths.root={root}"], capsys,
                     prog="gate-score")
    assert score.returncode == 0, score.stderr[-3000:]
    store = ResultsStore(root / "results" / "records.jsonl")
    real = [r for r in store.records() if r["kind"] == "finetune"]
    assert real and {r["encoder"] for r in real} == {"resnet18_scratch"}
    extra = []
    for i, enc in enumerate(encoders[1:]):
        for r in real:  # the same experiment configuration, another encoder
            cfg = dict(r["config"], encoder={"name": enc})
            extra.append(Record(**{**r, "experiment": f"{r['experiment']}-{enc}", "encoder": enc, "config": cfg,
                                   "value": float(r["value"]) * (1.2 + 0.3 * i), "timestamp": ""}))
    store.append(extra)
    proc = call_cli(analysis.main, [f"paths.root={root}", "target=acc@1"], capsys, prog="gate-analysis")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = root / "reports" / "latest"
    for name in EXPECTED + ["figures/scores_digits_acc@1.png"]:
        assert (out / name).is_file(), name
    table = pd.read_csv(out / "table.csv")
    assert set(table.columns[4:]) == set(encoders)
    assert set(table["dataset"]) == {"digits"}  # one configuration: no variant split
    corr = pd.read_csv(out / "correlations.csv")
    assert {"logme", "h_score", "transrate"} <= set(corr["score_metric"])  # gate-score's feature scores
    assert (corr["n"] == 3).all() and (corr["target_metric"] == "acc@1").all()
    tiers = pd.read_csv(out / "tiers.csv")
    assert "group:Img Class" in tiers.columns
    check_report_in_browser(out / "report.html", tmp_path)


def test_paper_table_analysis_in_process(tmp_path):
    import yaml

    from gate.analysis.meta import default_paper_table, packaged_dataset_dir
    from gate.analysis.pipeline import run_analysis

    tiers = {f.stem: yaml.safe_load(f.read_text()) for f in (packaged_dataset_dir().parent / "tier").glob("*.yaml")}
    res = run_analysis(default_paper_table(), tmp_path, tiers=tiers, figures=False)
    assert (tmp_path / "published_check.csv").is_file() and (tmp_path / "report.html").is_file()
    assert {"tier:small", "tier:base", "tier:big", "tier:full"} <= set(res.tiers.columns)
    assert res.correlations.empty  # the paper table has no transferability scores
    assert json.loads(json.dumps(res.warnings)) == res.warnings


def test_a_published_table_in_percent_analyses_as_typed(tmp_path, capsys):
    """experiments/imagenet_cnns/imagenet_cnns_percent.csv, as the README types it: fine-tuned accuracies in percent
    (acc@1, whose registry range is [0, 1]) and two zero-training predictors. Without a range everything scale-free
    is computed (tables, correlations, figures) and the group mean waits, with one warning naming the fix; with
    ranges={acc@1:[0,100]} on the command line the group mean is computed too, as x / 100."""
    from gate.cli.analysis import main

    table = Path(__file__).resolve().parents[1] / "experiments" / "imagenet_cnns" / "imagenet_cnns_percent.csv"
    plain = call_cli(main, [f"results={table}", f"out={tmp_path / 'plain'}", "figures=false"], capsys,
                     prog="gate-analysis")
    assert plain.returncode == 0, plain.stderr
    corr = pd.read_csv(tmp_path / "plain" / "correlations.csv")
    assert set(corr["dataset"]) == {"cars", "cifar10", "cifar100", "dtd", "food", "sun397"}
    assert set(corr["score_metric"]) == {"source_top1", "params"} and (corr["n"] == 11).all()
    assert "group:Img Class" not in pd.read_csv(tmp_path / "plain" / "tiers.csv").columns
    assert "1 warning(s)" in plain.stdout  # the report lists it; a process of its own prints it on stderr
    report = (tmp_path / "plain" / "report.html").read_text()
    assert report.count("ranges={acc@1:[0,100]}") == 1 and "outside the metric&#x27;s range [0, 1]" in report

    ranged = call_cli(main, [f"results={table}", f"out={tmp_path / 'ranged'}", "figures=false",
                             "ranges={acc@1:[0,100]}", "+tiers.kornblith=[cars,cifar10,cifar100,dtd,food,sun397]"],
                      capsys, prog="gate-analysis")
    assert ranged.returncode == 0, ranged.stderr
    assert "ranges={acc@1:[0,100]}" not in (tmp_path / "ranged" / "report.html").read_text()
    tiers = pd.read_csv(tmp_path / "ranged" / "tiers.csv").set_index("encoder")
    accs = pd.read_csv(table).query("kind == 'finetune' and encoder == 'resnet152'")["value"]
    assert tiers.loc["resnet152", "group:Img Class"] == pytest.approx(accs.mean() / 100)
    assert tiers.loc["resnet152", "tier:kornblith"] == pytest.approx(accs.mean() / 100)
    assert tiers["tier:kornblith:rank"].idxmin() == "resnet152"
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "ranged" / "correlations.csv"), corr)  # scale-free


def test_relative_accuracy_waits_for_the_range_too(tmp_path):
    from gate.analysis.pipeline import run_analysis

    table = Path(__file__).resolve().parents[1] / "experiments" / "imagenet_cnns" / "imagenet_cnns_percent.csv"
    nums = {"cars": 196, "cifar10": 10, "cifar100": 100, "dtd": 47, "food": 101, "sun397": 397}
    with pytest.warns(UserWarning, match=r"relative accuracy skipped for \['cars', .*ranges=\{acc@1:\[0,100\]\}"):
        res = run_analysis(table, tmp_path / "a", relative=True, num_classes=nums, figures=False)
    assert "ALL" not in set(res.correlations["dataset"])  # the pooled rows need relative accuracy
    res = run_analysis(table, tmp_path / "b", relative=True, num_classes=nums, figures=False,
                       ranges={"acc@1": [0, 100]})
    pooled = res.correlations[res.correlations["dataset"] == "ALL"]
    assert set(pooled["score_metric"]) == {"source_top1", "params"} and (pooled["n"] == 66).all()
