"""gate's commands as one table: each row names its config (``conf/<config>.yaml``), the one parse of the composed
config into what its stage takes, the stage (``gate/<area>/stage.py``-style functions whose result has
``report() -> exit code``), what the stage is and what to lower when memory runs out, the command line's comma-list
keys and the keys that were replaced. :func:`gate.cli.common.gate_command` turns a row into the console script.

Entries are ``"module:attr"`` strings, imported when the command runs: listing the commands imports no stage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gate.registry import load_object


@dataclasses.dataclass(frozen=True)
class Command:
    name: str
    config: str                            # conf/<config>.yaml
    parse: str                             # "module:attr": composed config -> the checked request
    stage: str                             # "module:attr": request -> a result with report() -> exit code
    doing: str                             # the stage, as a user reads it ("memory ran out during ...")
    memory_hint: str                       # what to lower when memory runs out
    list_keys: Mapping[str, str] = dataclasses.field(default_factory=dict)  # key=a,b -> list key=[a,b]
    retired: str | None = None             # "module:attr": {old key: what replaced it}, refused before Hydra
    front: str | None = None               # "module:attr": argv -> (argv for Hydra, keywords the parse takes too)

    def load(self, field: str) -> Any:
        return load_object(str(getattr(self, field)))


_TIER_LISTS = {"encoder": "encoders", "encoders": "encoders", "seeds": "seeds", "seed": "seeds"}
_RANK_LISTS = {"encoder": "encoders", "encoders": "encoders", "prior": "prior", "static": "static",
               "baseline_scores": "baseline_scores", "proxy_seeds": "proxy_seeds", "history": "history"}

COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("gate-run", "run", "gate.engine.validate:parse_run", "gate.engine.training.finetune:run_finetune",
            "fine-tuning", "data.batch_size and data.eval_batch_size (the batches), image_size, or "
            "data.max_train_samples"),
    Command("gate-score", "score", "gate.engine.validate:parse_score", "gate.scoring.stage:run_score",
            "scoring (the feature pass and the scores)",
            "max_samples (the rows whose features are held at once) or batch_size (the feature pass's batch)"),
    Command("gate-tier", "tier_run", "gate.tiers.stage:parse", "gate.tiers.stage:run",
            "the tier (its runs, scores and report)",
            "the jobs' data.batch_size or image_size (overrides=[...]), or launcher.workers (jobs at once)",
            list_keys=_TIER_LISTS),
    Command("gate-rank", "rank", "gate.ranking.stage:parse", "gate.ranking.stage:rank",
            "ranking (its short runs and scores)", "the runs' data.batch_size or image_size (overrides=[...])",
            list_keys=_RANK_LISTS, retired="gate.ranking.request:RETIRED"),
    Command("gate-eevee", "eevee", "gate.analysis.stage:EeveeRequest.parse", "gate.analysis.stage:search",
            "the subset search", "population or chunk (the candidates trained at once), or workers"),
    Command("gate-analysis", "analysis", "gate.analysis.stage:AnalysisRequest.parse", "gate.analysis.stage:analyse",
            "the analysis", "the table (filters=... keeps part of it)"),
    # gate-data takes an action first (list | prepare | verify): its front takes it (and list's datasets) off the
    # command line before Hydra reads it
    Command("gate-data", "data", "gate.engine.prepare:parse_data", "gate.engine.prepare:run_data",
            "the dataset's preparation",
            "nothing gate sets: the dataset's preparation needs more memory than this machine has free",
            front="gate.cli.data:front"),
)}
