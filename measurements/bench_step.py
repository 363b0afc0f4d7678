"""gate-run's training step against a plain PyTorch loop of the same model, and the input pipeline alone.

    python measurements/bench_step.py                      # CUDA when there is one, else the CPU (64 px)
    python measurements/bench_step.py --device cpu --image-size 64 --short 6 --long 26
    python measurements/bench_step.py --only loader        # the input pipeline alone

Three measurements, each printed as a ratio:

1. **Plain loop** (the ceiling): the encoder and a linear head of gate's own build (``build_encoder`` +
   ``LinearClassifier``), AdamW at the recipe's rate, a batch of normalised float inputs already on the device, the
   run's precision (bf16 autocast where gate-run picks bf16-mixed). Forward, loss, backward, step; timed with a
   device synchronisation before each clock read (``torch.cuda.synchronize``), after warm-up steps.
2. **gate-run's marginal step**: ``run_finetune`` on Fashion-MNIST (the real files, 28 px images resized to
   ``--image-size``) for ``--short`` and ``--long`` steps, each with one validation at its end on ``batch`` images
   and no test; marginal step = (wall(long) − wall(short)) / (long − short), so start-up, validation and checkpoint
   writing cancel (the median over ``--repeats`` pairs). The plain loop's step is the median of its steps.
   Loader settings are the run's defaults unless ``--workers`` is given. Ratio = plain / gate (1.0: gate adds
   nothing to a step).
3. **The input pipeline alone**: samples per second the training loader delivers with one worker at
   ``--loader-size`` px (default 224), the batch moved and made model-ready (on the device when there is one):
   the former path (one row per fetch, resize, ToTensor and Normalize per example in the worker, float32 batches)
   against the uint8 path (one columnar fetch per batch, decode per example, stack; resize/normalise per batch).

Timing with synchronisation only: an unsynchronised CUDA clock reads the time Python takes to queue kernels.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ENCODERS = ("vit_base_scratch", "efficientnet_lite0")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module("gate.conf", version_base=None):
        return hydra_compose("run", overrides=overrides)


def run_overrides(encoder: str, image_size: int, batch: int, steps: int, root: str, workers: str | None,
                  accelerator: str) -> list[str]:
    out = [f"paths.root={root}", "dataset=fashion_mnist", f"encoder={encoder}", f"image_size={image_size}",
           f"data.batch_size={batch}", f"data.eval_batch_size={batch}", f"data.max_val_samples={batch}",
           f"trainer.max_steps={steps}", f"trainer.val_check_interval={steps}", "trainer.enable_progress_bar=false",
           "evaluate_test=false", "logger=csv", "keep_checkpoints=none", f"trainer.accelerator={accelerator}",
           "force=true"]
    if workers is not None:
        out.append(f"data.num_workers={workers}")
    return out


def plain_loop(encoder_name: str, image_size: int, batch: int, steps: int, device: torch.device,
               warmup: int = 3) -> dict:
    """Seconds per step of a hand-written loop over gate's model, the batch already on the device."""
    from gate.adapters import LinearClassifier
    from gate.engine.build import build_encoder
    from gate.engine.training.trainer import auto_precision
    from gate.engine.validate import resolved_config

    cfg = resolved_config(compose([f"encoder={encoder_name}", f"image_size={image_size}", "dataset=fashion_mnist"]))
    encoder = build_encoder(cfg["encoder"], "image", seed=0)
    head = LinearClassifier(feature_dim=encoder.feature_dim, num_classes=10)
    model = torch.nn.ModuleDict({"encoder": encoder, "head": head}).to(device).train()
    lr = float(cfg["recipe"]["optimizer"]["lr"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    precision = auto_precision(None) if device.type == "cuda" else "32-true"
    x = torch.randn(batch, 3, image_size, image_size, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
            logits = head(encoder({"image": x}), {"image": x})
            loss = torch.nn.functional.cross_entropy(logits.float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    sync(device)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        step()
        sync(device)
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times)  # the median step: a busy neighbour's hiccup is not the model's speed
    return {"step_seconds": seconds, "samples_per_second": batch / seconds, "precision": precision}


def gate_marginal(encoder: str, image_size: int, batch: int, short: int, long: int, workers: str | None,
                  device: torch.device, repeats: int = 1) -> dict:
    """gate-run's marginal training step (wall of a long run minus a short one, per step; the median over
    ``repeats`` pairs), and the last long run's facts."""
    from gate.engine.training.finetune import run_finetune

    accelerator = "gpu" if device.type == "cuda" else "cpu"
    marginals, walls, facts = [], [], {}
    for _ in range(repeats):
        wall = {}
        for steps in (short, long):
            root = tempfile.mkdtemp(prefix="gate-bench-step-")
            cfg = compose(run_overrides(encoder, image_size, batch, steps, root, workers, accelerator))
            started = time.perf_counter()
            result = run_finetune(cfg)
            sync(device)
            wall[steps] = time.perf_counter() - started
            facts = result.facts or {}
        walls.append(wall)
        marginals.append((wall[long] - wall[short]) / (long - short))
    seconds = statistics.median(marginals)
    return {"step_seconds": seconds, "samples_per_second": batch / seconds, "walls": walls, "marginals": marginals,
            "facts": {k: facts.get(k) for k in ("train_samples_per_second", "data_wait_fraction", "num_workers",
                                                "pin_memory", "precision", "device")}}


def old_transform(image_size: int, mean, std):
    """The per-example PIL path gate used before its device-side pipeline (gate/encoders/base.py at 58300a8)."""
    from torchvision import transforms as T

    from gate.encoders.base import to_pil_rgb

    pipeline = T.Compose([to_pil_rgb, T.Resize((image_size, image_size), antialias=True), T.ToTensor(),
                          T.Normalize(mean=list(mean), std=list(std))])
    return lambda value: {"image": pipeline(value)}


class RowByRow(torch.utils.data.Dataset):
    """A split read one row per fetch, as the loader read it before batched fetches (``__getitems__``)."""

    def __init__(self, data) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int):
        return self.data[index]


def loader_rate(image_size: int, batch: int, batches: int, device: torch.device, workers: int = 1) -> dict:
    """Samples/s one loader worker delivers at ``image_size`` (and model-ready on ``device``): the former path (one
    row per fetch, PIL resize and float32 normalisation per example) vs the uint8 path (batched fetch, uint8)."""
    from torch.utils.data import DataLoader

    from gate.data.transformed import TransformedSplit
    from gate.encoders.base import device_transform, image_transform
    from gate.engine.build import build_splits
    from gate.engine.validate import resolved_config

    cfg = resolved_config(compose(["dataset=fashion_mnist"]))
    split = build_splits(cfg["dataset"], seed=0, max_samples={"train": batch * (batches + 2)})["train"]
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    new = image_transform(image_size, mean, std, train=True, augment=True)

    def label(row):
        return {"label": torch.as_tensor(int(row["label"]))}

    out = {}
    for name, transform, collate, step in (("per-example PIL, float32", old_transform(image_size, mean, std), None, None),
                                           ("uint8, per batch on the device", new, new.collate, device_transform(new))):
        data = TransformedSplit(split, "image", transform, label, ["label"])
        if step is None:  # the former path fetched each row alone
            data = RowByRow(data)
        row = {"bytes_per_batch": int(next(iter(DataLoader(data, batch_size=batch, collate_fn=collate)))["image"].nbytes)}
        for stage, with_step in (("loader", False), ("model_ready", True)):
            loader = DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers, collate_fn=collate,
                                pin_memory=device.type == "cuda", persistent_workers=workers > 0,
                                generator=torch.Generator().manual_seed(0))
            count, started = 0, None
            for i, b in enumerate(loader):
                if with_step:
                    b = {k: v.to(device, non_blocking=True) for k, v in b.items()}
                    b = step(b) if step is not None else b
                    sync(device)
                if i == 1:  # the first batch pays the worker's start
                    started, count = time.perf_counter(), 0
                elif started is not None:
                    count += int(b["label"].shape[0])
            row[stage] = count / (time.perf_counter() - started)
        out[name] = row
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--image-size", type=int, default=None, help="training step inputs (default: 224 on CUDA, "
                                                                     "64 on the CPU)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--short", type=int, default=None, help="steps of the short run (default 40 CUDA, 6 CPU)")
    parser.add_argument("--long", type=int, default=None, help="steps of the long run (default 240 CUDA, 26 CPU)")
    parser.add_argument("--workers", default=None, help="data.num_workers of the gate runs (default: the config's)")
    parser.add_argument("--repeats", type=int, default=None, help="short/long pairs per encoder, the median marginal "
                                                                  "kept (default 1 on CUDA, 2 on the CPU)")
    parser.add_argument("--encoders", nargs="+", default=list(ENCODERS))
    parser.add_argument("--loader-size", type=int, default=224)
    parser.add_argument("--loader-batches", type=int, default=30)
    parser.add_argument("--only", choices=("step", "loader"), default=None)
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    args = parser.parse_args()
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if args.device == "auto" else args.device))
    cuda = device.type == "cuda"
    size = args.image_size or (224 if cuda else 64)
    short, long = args.short or (40 if cuda else 6), args.long or (240 if cuda else 26)
    args.repeats = args.repeats or (1 if cuda else 2)
    name = torch.cuda.get_device_name(device) if cuda else f"CPU ({torch.get_num_threads()} threads)"
    print(f"[bench_step] device {name}; torch {torch.__version__}; batch {args.batch}")
    results: dict = {"device": name, "batch": args.batch}
    if args.only in (None, "step"):
        print(f"\ntraining step at {size} px: plain loop vs gate-run's marginal step ({short} → {long} steps)")
        print(f"  {'encoder':<20} {'plain ms':>9} {'gate ms':>9} {'ratio':>6}  gate facts")
        for encoder in args.encoders:
            plain = plain_loop(encoder, size, args.batch, max(20, long - short), device)
            gate = gate_marginal(encoder, size, args.batch, short, long, args.workers, device, args.repeats)
            ratio = plain["step_seconds"] / gate["step_seconds"]
            results[encoder] = {"plain": plain, "gate": gate, "ratio": ratio, "image_size": size}
            print(f"  {encoder:<20} {plain['step_seconds'] * 1e3:9.1f} {gate['step_seconds'] * 1e3:9.1f} "
                  f"{ratio:6.2f}  {json.dumps(gate['facts'])}", flush=True)
    if args.only in (None, "loader"):
        print(f"\ninput pipeline alone at {args.loader_size} px, one worker, batch {args.batch}, made model-ready "
              f"on {device.type}:")
        rates = loader_rate(args.loader_size, args.batch, args.loader_batches, device)
        print(f"  {'path':<32} {'loader':>10} {'+ ready on ' + device.type:>16}  crosses to the device")
        for label, r in rates.items():
            print(f"  {label:<32} {r['loader']:10.0f} {r['model_ready']:16.0f}  {r['bytes_per_batch'] / 2**20:6.2f} MiB "
                  f"a batch")
        old, new = rates.values()
        print(f"  samples/s per worker, uint8 / PIL: loader {new['loader'] / old['loader']:.1f}x, model-ready on "
              f"{device.type} {new['model_ready'] / old['model_ready']:.1f}x (on the CPU the per-batch step is CPU work)")
        results["loader"] = rates
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
