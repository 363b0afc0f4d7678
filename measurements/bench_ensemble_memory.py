"""Peak memory of testing a segmentation model with checkpoint ensembles, at ADE20K's shapes, for a test split of
N and 10·N images: it must not grow with the test split (the test pass streams, gate/engine/training/ensemble.py).

    python measurements/bench_ensemble_memory.py            # N = 4 and 40 (each run in a fresh process)
    python measurements/bench_ensemble_memory.py --test 40  # one run, prints its peak

ADE20K under the paper protocol: 150 classes, 256×256 masks, 224 px images; the logits of one test image are
150 × 256 × 256 float32 = 39 MiB per checkpoint. The encoder is the packaged EfficientNet-Lite0 (the decoder and
its logits, not the encoder, are what grows); 3 steps of batch 2, a checkpoint at every step, ensembles of 1 and
3. Peak resident memory: the process's high-water mark (getrusage), each run in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NUM_CLASSES, MASK, IMAGE = 150, 256, 224


def synthetic_segmentation(train: int = 8, val: int = 4, test: int = 4, seed: int = 0):
    """Random RGB images with random 150-class masks (``mask``), as a dataset builder."""
    import datasets
    import numpy as np

    rng = np.random.default_rng(seed)
    features = datasets.Features({"image": datasets.Image(), "mask": datasets.Image()})

    def split(n):
        images = [rng.integers(0, 256, (IMAGE, IMAGE, 3), dtype=np.uint8) for _ in range(n)]
        masks = [rng.integers(0, NUM_CLASSES, (MASK, MASK), dtype=np.uint8) for _ in range(n)]
        return datasets.Dataset.from_dict({"image": images, "mask": masks}, features=features)

    return datasets.DatasetDict({"train": split(train), "validation": split(val), "test": split(test)})


def one_run(test: int) -> dict:
    import resource

    from hydra import compose, initialize_config_module
    from omegaconf import open_dict

    from gate.engine.training.finetune import run_finetune

    root = tempfile.mkdtemp(prefix="gate-ensemble-memory-")
    with initialize_config_module("gate.conf", version_base=None):
        cfg = compose("run", overrides=[
            f"paths.root={root}", "dataset=fmnist_seg", f"dataset.num_classes={NUM_CLASSES}", f"image_size={IMAGE}",
            "logger=csv", "callbacks=none", "trainer.max_steps=3", "trainer.val_check_interval=1",
            "trainer.enable_progress_bar=false", "data.batch_size=2", "data.eval_batch_size=2", "ensembles=[1,3]",
            "data.max_val_samples=null", "data.max_test_samples=null", "keep_checkpoints=none"])
    with open_dict(cfg):
        cfg.dataset.class_names = [f"class{i}" for i in range(NUM_CLASSES)]
        cfg.dataset.builder = {"_target_": "bench_ensemble_memory.synthetic_segmentation", "test": test}
    started = time.perf_counter()
    result = run_finetune(cfg)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the process's high-water mark (KiB on Linux)
    return {"test_images": test, "peak_rss_mb": round(peak / 2**20, 1), "seconds": round(time.perf_counter() - started, 1),
            "miou": result.metrics.get("miou"), "ensemble_3_miou": result.metrics.get("ensemble_3/miou")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test", type=int, help="one run with this many test images (else N and 10 N)")
    parser.add_argument("--n", type=int, default=4)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.test:
        print(json.dumps(one_run(args.test)))
        return
    rows = []
    for test in (args.n, 10 * args.n):  # fresh processes: a peak is a process's high-water mark
        out = subprocess.run([sys.executable, __file__, "--test", str(test)], capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    small, large = rows
    print(f"peak RSS: {small['peak_rss_mb']} MB with {small['test_images']} test images, {large['peak_rss_mb']} MB with "
          f"{large['test_images']}; ratio {large['peak_rss_mb'] / small['peak_rss_mb']:.2f} (holding the logits would add "
          f"{(large['test_images'] - small['test_images']) * NUM_CLASSES * MASK * MASK * 4 / 2**20:.0f} MiB per checkpoint)")


if __name__ == "__main__":
    main()
