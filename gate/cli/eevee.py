"""gate-eevee: EEVEE benchmark-subset search (composed by Hydra from conf/eevee.yaml).

``k`` is one subset size (``k=8``), a list (``k=[1,2,3]``) or a range (``k=1-8``, both ends included); one
search per k. (A bare ``k=1,2,3`` is Hydra's sweep syntax and is refused by Hydra without ``-m``.)
A bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import re
from typing import Any

import hydra
from omegaconf import DictConfig

from gate.cli.common import hydra_entry, prepare_process, run_cli
from gate.engine.validate import validate_command_config
from gate.settings import EEVEE_COMMAND


def k_values(k) -> list[int]:
    """``k`` as a list: 8, [1, 2, 3], "1-8" (a range, both ends included) or "1,2,3"."""
    if isinstance(k, bool):
        raise ValueError(f"k must be an integer, a list [1,2,3] or a range 1-8; got {k!r}")
    if isinstance(k, (list, tuple)):
        try:
            return [int(v) for v in k]
        except (TypeError, ValueError):
            raise ValueError(f"k must be an integer, a list [1,2,3] or a range 1-8; got {k!r}") from None
    text = str(k).strip()
    if re.fullmatch(r"\d+\s*-\s*\d+", text):
        lo, hi = (int(v) for v in text.split("-"))
        if lo > hi:
            raise ValueError(f"k range {text!r} is empty: write it low-high, e.g. 1-8")
        return list(range(lo, hi + 1))
    try:
        return [int(v) for v in text.strip("[]").split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"k must be an integer, a list [1,2,3] or a range 1-8; got {k!r}") from None


def search(plain: dict[str, Any]):
    from pathlib import Path

    from gate.analysis.eevee import EeveeConfig, run_eevee  # heavy imports after Hydra has parsed the command line

    ks = k_values(plain["k"])
    table = Path(plain["table"])
    out = Path(plain["out"]) if plain.get("out") else table.parent / "eevee"
    ecfg = EeveeConfig.from_settings(plain)
    run = run_eevee(table, ks, out, ecfg, with_importance=bool(plain["importance"]), figures=bool(plain["figures"]))
    return run, out


@hydra.main(version_base=None, config_path="pkg://gate.conf", config_name="eevee")
def _main(cfg: DictConfig) -> None:
    prepare_process(cfg)  # temp files and matplotlib's cache under paths.root
    plain = run_cli("gate-eevee", validate_command_config, cfg, EEVEE_COMMAND, "gate-eevee config")
    run, out = run_cli("gate-eevee", search, plain)
    for row in run.summary.itertuples(index=False):
        print(f"[gate] k={row.k}: best subset {row.best_subset.replace(';', ', ')} "
              f"(validation MSE {row.best_fitness:.4f}; {row.n_evaluated} subsets in {row.seconds:.1f}s)")
    for name in sorted(run.files):
        print(f"  {name}")
    print(f"[gate] results: {out}")


def main() -> None:
    hydra_entry("gate-eevee", _main)  # an unknown key or an unparsable override: one line, not Hydra's report


if __name__ == "__main__":
    main()
