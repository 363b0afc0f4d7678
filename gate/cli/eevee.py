"""gate-eevee: EEVEE benchmark-subset search (composed by Hydra from conf/eevee.yaml)."""

from __future__ import annotations

import re
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

_K_LIST = re.compile(r"^(\+?k)=(\d+(?:,\d+)+)$")


def k_values(k) -> list[int]:
    """``k`` as a list: 8, [1, 2, 3], "1,2,3" or "1-8" (a range, both ends included)."""
    if isinstance(k, (list, tuple)):
        return [int(v) for v in k]
    text = str(k).strip()
    if re.fullmatch(r"\d+-\d+", text):
        lo, hi = (int(v) for v in text.split("-"))
        return list(range(lo, hi + 1))
    try:
        return [int(v) for v in text.strip("[]").split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"k must be an integer, a list [1,2,3], 1,2,3 or a range 1-8; got {k!r}") from None


def rewrite_argv(argv: list[str]) -> list[str]:
    """Hydra reads ``k=1,2,3`` as a sweep; gate-eevee runs one search per k itself, so make it a list."""
    return [_K_LIST.sub(r"\1=[\2]", a) for a in argv]


@hydra.main(version_base=None, config_path="pkg://gate.conf", config_name="eevee")
def _main(cfg: DictConfig) -> None:
    from pathlib import Path

    from gate.analysis.eevee import EeveeConfig, run_eevee  # heavy imports after Hydra has parsed the command line

    plain = OmegaConf.to_container(cfg, resolve=True)
    if plain.get("threads"):
        import torch

        torch.set_num_threads(int(plain["threads"]))
    ks = k_values(plain["k"])
    table = Path(plain["table"])
    out = Path(plain["out"]) if plain.get("out") else table.parent / "eevee"
    ecfg = EeveeConfig(
        hidden=plain["hidden"], epochs=plain["epochs"], lr=plain["lr"], weight_decay=plain["weight_decay"],
        n_splits=plain["n_splits"], val_fraction=plain["val_fraction"], seed=plain["seed"],
        population=plain["population"], keep=plain["keep"], children=plain["children"],
        generations=plain["generations"], chunk=plain["chunk"], workers=plain["workers"], missing=plain["missing"],
        progress=bool(plain["progress"]),
    )
    run = run_eevee(table, ks, out, ecfg, with_importance=bool(plain["importance"]), figures=bool(plain["figures"]))
    for row in run.summary.itertuples(index=False):
        print(f"[gate] k={row.k}: best subset {row.best_subset.replace(';', ', ')} "
              f"(validation MSE {row.best_fitness:.4f}; {row.n_evaluated} subsets in {row.seconds:.1f}s)")
    for name in sorted(run.files):
        print(f"  {name}")
    print(f"[gate] results: {out}")


def main() -> None:
    sys.argv = rewrite_argv(sys.argv)
    _main()


if __name__ == "__main__":
    main()
