"""A short real CPU run writes every logging output: grad-norm and hardware metrics in the CSV logger's
metrics.csv, cost and model facts in the records, PNG visualisations under the run dir, the NVML info line."""

from __future__ import annotations

import csv

import pytest

import gate.engine.training.finetune as finetune
from gate.engine.validate import parse_run
from gate.results import ResultsStore

from helpers import compose_run

pytestmark = pytest.mark.slow

TINY = ["image_size=32", "logger=csv", "trainer.max_steps=4", "trainer.val_check_interval=2",
        "trainer.enable_progress_bar=false", "data.batch_size=8", "data.max_val_samples=16",
        "data.max_test_samples=16", "ensembles=[1]", "callbacks.grad_norms.every_n_steps=2",
        "callbacks.hardware.every_n_steps=2", "callbacks.visuals.max_examples=4"]
CASES = {
    "digits": ["dataset=digits"],
    "fmnist_seg": ["dataset=fmnist_seg", "dataset.builder.train_size=32", "dataset.builder.val_size=8",
                   "dataset.builder.test_size=8", "adapter.hidden_dim=32", "adapter.num_heads=2", "adapter.depth=1"],
}


@pytest.mark.parametrize("dataset", sorted(CASES))
def test_short_run_writes_grad_norms_hardware_facts_and_visuals(tmp_path, capsys, dataset):
    result = finetune.run_finetune(parse_run(compose_run(tmp_path, [*TINY, *CASES[dataset]])))
    assert not result.skipped
    task = "segmentation" if dataset == "fmnist_seg" else "classification"

    # visualisations: one PNG per validation (steps 2 and 4), under the run dir
    for step in (2, 4):
        png = result.run_dir / "media" / str(step) / f"val_{task}.png"
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # grad norms (steps 0 and 2) and hardware metrics (steps 2 and 4) in the CSV logger's metrics.csv
    with open(f"{result.logger_dir}/metrics.csv") as f:
        rows = list(csv.DictReader(f))
    def logged(key):  # noqa: E306
        return {int(r["step"]): float(r[key]) for r in rows if r.get(key)}
    assert set(logged("grad_norm/total")) == {0, 2}
    assert {"grad_norm/encoder/stem", "grad_norm/encoder/depth1", "grad_norm/encoder/depth4", "grad_norm/adapter"} \
        <= set(rows[0])
    assert all(v > 0 for v in logged("grad_norm/total").values())
    assert set(logged("hw/samples_per_second")) == {2, 4}
    assert all(0 <= v <= 1 for v in logged("hw/data_wait_fraction").values())
    assert all(v > 0 for v in logged("hw/cpu_seconds").values())

    # cost and model facts in every record
    records = ResultsStore(tmp_path / "results" / "records.jsonl").records()
    facts = records[0]["facts"]
    assert all(r["facts"] == facts for r in records)
    assert facts["gpu_hours"] == 0.0 and facts["energy_kwh"] is None  # CPU run: no GPU, nothing metered
    assert facts["cpu_seconds"] > 0 and 0 <= facts["data_wait_fraction"] < 1
    assert facts["params"] == facts["trainable_params"] > 4_000_000  # EfficientNet-Lite0 + head, all trained
    assert 0 < facts["gflops"] < 1  # about 0.02 GFLOPs per 32-px image

    # the NVML part is off, said once
    assert [line for line in capsys.readouterr().out.splitlines() if "hardware" in line] == [
        "[gate] hardware: no GPU in use: GPU utilisation, power and energy are not logged (energy_kwh is null)"]
