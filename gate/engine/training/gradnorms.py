"""Gradient norms by depth: one metric family ``grad_norm/<group>``, every N optimizer steps.

Thousands of per-parameter keys help nobody; what a fine-tuning run needs is how the gradient is spread over
the depth of the network. The model's parameters are put into a few groups, input to output:

* ``encoder/stem``: the encoder's parameters before its main stack of blocks (patch or conv stem, embeddings);
* ``encoder/depth1`` … ``encoder/depthK``: the blocks of that stack in K contiguous buckets (K = ``depth_groups``);
* ``encoder/top``: what comes after the stack (final norm, head conv, source classifier);
* ``adapter``: the task adapter (head, decoder, text tower).

The main stack is the encoder's largest ``ModuleList``/``Sequential`` of blocks (EfficientNet's ``_blocks``,
a ViT's ``blocks``, BERT's ``encoder.layer``). An encoder without one that holds at least half of its
parameter tensors is bucketed by parameter order instead (no stem/top groups). Each group's value is the L2 norm of
all its parameters' gradients; ``grad_norm/total`` is that of the whole model. Gradients are read in
``on_before_optimizer_step``: after backward and, under mixed precision, after unscaling.
"""

from __future__ import annotations

from collections.abc import Iterable

import lightning as L
import torch
from torch import nn


def _main_stack(encoder: nn.Module) -> tuple[str, nn.Module] | None:
    """The encoder's (name, module) list of blocks holding the most parameter tensors (layers), if it holds at
    least half of them. Counted in tensors, not elements: a large embedding table is one layer, not most of a
    text model."""
    total = len(list(encoder.parameters()))
    best: tuple[int, str, nn.Module] | None = None
    for name, module in encoder.named_modules():
        if isinstance(module, (nn.ModuleList, nn.Sequential)) and len(module) >= 2:
            size = len(list(module.parameters()))
            if best is None or size > best[0] or (size == best[0] and len(module) > len(best[2])):
                best = (size, name, module)
    if best is None or total == 0 or best[0] * 2 < total:
        return None
    return best[1], best[2]


def _buckets(count: int, groups: int) -> list[int]:
    """Bucket index (0-based) of each of ``count`` items in ``groups`` contiguous, near-equal buckets."""
    groups = max(1, min(groups, count))
    return [i * groups // count for i in range(count)]


def depth_groups(model: nn.Module, groups: int = 4) -> dict[str, list[nn.Parameter]]:
    """The model's parameters (those that train) by depth group, in order from input to output (see module doc).

    ``model`` is a GATEModel (``encoder`` and ``adapter`` attributes); any other module is bucketed by
    parameter order as a whole.
    """
    if groups < 1:
        raise ValueError(f"callbacks.grad_norms.depth_groups must be >= 1, got {groups}")
    out: dict[str, list[nn.Parameter]] = {}
    encoder = getattr(model, "encoder", None)
    adapter = getattr(model, "adapter", None)
    if not isinstance(encoder, nn.Module):
        encoder, adapter = model, None
    named = [(n, p) for n, p in encoder.named_parameters() if p.requires_grad]
    stack = _main_stack(encoder)
    if stack is not None:
        prefix, module = stack
        prefix = f"{prefix}." if prefix else ""
        bucket_of_block = _buckets(len(module), groups)
        block_names = [name for name, _ in module.named_children()]
        seen_stack = False
        for name, p in named:
            if name.startswith(prefix) and name[len(prefix):].split(".")[0] in block_names:
                block = block_names.index(name[len(prefix):].split(".")[0])
                key, seen_stack = f"encoder/depth{bucket_of_block[block] + 1}", True
            else:
                key = "encoder/top" if seen_stack else "encoder/stem"
            out.setdefault(key, []).append(p)
    else:
        for (_, p), bucket in zip(named, _buckets(len(named), groups)):
            out.setdefault(f"encoder/depth{bucket + 1}", []).append(p)
    if isinstance(adapter, nn.Module):
        params = [p for p in adapter.parameters() if p.requires_grad]
        if params:
            out["adapter"] = params
    order = ["encoder/stem", *[f"encoder/depth{i + 1}" for i in range(groups)], "encoder/top", "adapter"]
    return {k: out[k] for k in order if k in out}


def grad_norm(params: Iterable[nn.Parameter]) -> torch.Tensor | None:
    """L2 norm of the gradients of ``params`` (those that have one), or None when none has."""
    norms = [torch.linalg.vector_norm(p.grad.detach().float()) for p in params if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(norms)) if norms else None


class GradNormLogger(L.Callback):
    """Logs ``grad_norm/<group>`` and ``grad_norm/total`` every ``every_n_steps`` optimizer steps (from step 0)."""

    def __init__(self, every_n_steps: int = 100, depth_groups: int = 4) -> None:
        if int(every_n_steps) < 1:
            raise ValueError(f"callbacks.grad_norms.every_n_steps must be >= 1, got {every_n_steps}")
        if int(depth_groups) < 1:
            raise ValueError(f"callbacks.grad_norms.depth_groups must be >= 1, got {depth_groups}")
        self.every_n_steps = int(every_n_steps)
        self.depth_groups = int(depth_groups)
        self.groups: dict[str, list[nn.Parameter]] = {}

    def on_fit_start(self, trainer, pl_module) -> None:
        self.groups = depth_groups(pl_module, self.depth_groups)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        step = int(trainer.global_step)
        if step % self.every_n_steps or not trainer.loggers:
            return
        metrics: dict[str, float] = {}
        squares = []
        for name, params in self.groups.items():
            norm = grad_norm(params)
            if norm is not None:
                metrics[f"grad_norm/{name}"] = float(norm)
                squares.append(norm ** 2)
        if not squares:
            return
        metrics["grad_norm/total"] = float(torch.stack(squares).sum().sqrt())
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
