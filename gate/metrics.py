"""The one registry of metric names: which way each points, its range, and where it comes from.

Every number gate records is named here, and its direction is read from here by the adapters (what is
recorded, which way checkpoints are ranked), the transferability scores (``gate-score``) and the analysis
stage (tables, tier means, correlations). A metric not in the registry has no known direction:
:func:`higher_is_better` raises, so a silently flipped sign cannot happen. Only for foreign CSVs without a
direction column does the analysis fall back to :func:`guess_higher_is_better` (a name pattern), and it
warns when it does.

Recorded names may carry qualifiers around a registered base name; :func:`lookup` strips them:

* a ``val/`` / ``test/`` / ``train/`` stage prefix;
* an ``ensemble_<k>/`` prefix (the ensemble of the top-k checkpoints);
* a ``/<qualifier>`` suffix: per class (``auc/<class>``) or per answer type (``acc@1/<answer type>``).
"""

from __future__ import annotations

import dataclasses
import math
import re

__all__ = ["MetricInfo", "METRICS", "lookup", "higher_is_better", "monitor_mode", "guess_higher_is_better",
           "register"]


@dataclasses.dataclass(frozen=True)
class MetricInfo:
    """What is known about one metric name."""

    name: str
    higher_is_better: bool
    low: float = -math.inf  # the range of valid values (inclusive)
    high: float = math.inf
    citation: str = ""
    description: str = ""
    no_skill: float | None = None  # what a predictor without information about the target scores, where it is a
                                   # constant of the metric (r2 0, AUC 0.5); None where it depends on the data


METRICS: dict[str, MetricInfo] = {}


def register(name: str, higher_is_better: bool, low: float = -math.inf, high: float = math.inf,
             citation: str = "", description: str = "", no_skill: float | None = None) -> MetricInfo:
    """Add a metric name (a user's own adapter or score registers its metrics the same way)."""
    info = MetricInfo(name, bool(higher_is_better), low, high, citation, description, no_skill)
    known = METRICS.get(name)
    if known is not None and known.higher_is_better != info.higher_is_better:
        raise ValueError(f"metric {name!r} is already registered as "
                         f"{'higher' if known.higher_is_better else 'lower'}-is-better")
    METRICS[name] = info
    return info


# --- fine-tuning metrics (recorded by the task adapters) -------------------------------------------------
register("loss", False, 0.0, description="the adapter's training objective on the split")
for _k in (1, 5):
    register(f"acc@{_k}", True, 0.0, 1.0, description=f"top-{_k} accuracy")
    register(f"img2txt_acc@{_k}", True, 0.0, 1.0, description=f"image-to-text retrieval top-{_k} accuracy")
    register(f"txt2img_acc@{_k}", True, 0.0, 1.0, description=f"text-to-image retrieval top-{_k} accuracy")
_WINOGROUND = "Thrush et al., CVPR 2022 (Winoground)"
register("winoground_text", True, 0.0, 1.0, citation=_WINOGROUND,
         description="fraction of examples where both images score their own caption above the other caption")
register("winoground_image", True, 0.0, 1.0, citation=_WINOGROUND,
         description="fraction of examples where both captions score their own image above the other image")
register("winoground_group", True, 0.0, 1.0, citation=_WINOGROUND,
         description="fraction of examples meeting both the text and the image score")
register("acc@1_ci95", False, 0.0, 1.0,
         citation="Meta-Dataset (Triantafillou et al., ICLR 2020): meta_dataset/trainer.py, 1.96 * np.std / sqrt(n)",
         description="few-shot: half-width of the 95% confidence interval of the mean per-episode accuracy, "
                     "1.96 * std (ddof 0) / sqrt(episodes); lower = a more precise estimate")
register("auc", True, 0.0, 1.0, description="area under the ROC curve (one class)", no_skill=0.5)
register("auc_macro", True, 0.0, 1.0, description="area under the ROC curve, macro-averaged over classes",
         no_skill=0.5)
register("aps", True, 0.0, 1.0, description="average precision (one class)")
register("aps_macro", True, 0.0, 1.0, description="average precision, macro-averaged over classes")
register("auc_classes", True, 0.0, description="how many classes entered auc_macro and aps_macro: those with at least "
                                               "one positive and one negative example in the split (a count)")
register("brier", False, 0.0, 1.0, description="Brier score (one class)")
register("brier_macro", False, 0.0, 1.0, description="Brier score, macro-averaged over classes")
register("miou", True, 0.0, 1.0, description="mean intersection over union over classes")
register("mean_acc", True, 0.0, 1.0, description="per-class pixel accuracy, averaged over classes")
register("overall_acc", True, 0.0, 1.0, description="pixel accuracy")
register("dice", True, 0.0, 1.0, description="Dice coefficient (F1 of the masks)")
register("mae", False, 0.0, description="mean absolute error")
register("mse", False, 0.0, description="mean squared error")
register("r2", True, high=1.0, citation="coefficient of determination (torchmetrics.R2Score)",
         description="1 - MSE / variance of the split's targets: 1 perfect, 0 no better than predicting the split's "
                     "mean, negative worse", no_skill=0.0)

# --- transferability scores (gate-score; higher predicts better transfer) ---------------------------------
register("logme", True, citation="You et al., ICML 2021")
register("h_score", True, citation="Bao et al., ICIP 2019")
register("shrinkage_h_score", True, citation="Ibrahim et al., ECML-PKDD 2022")
register("nleep", True, high=0.0, citation="Li et al., CVPR 2021")
register("n_nleep", True, citation="Li et al. 2021; Ibrahim et al. 2022")
register("transrate", True, citation="Huang et al., ICML 2022")
register("lfc", True, -1.0, 1.0, citation="Deshpande et al. 2021")
register("rankme", True, 0.0, citation="Garrido et al., ICML 2023")
register("leep", True, high=0.0, citation="Nguyen et al., ICML 2020")
register("n_leep", True, citation="Nguyen et al. 2020; Ibrahim et al. 2022")
register("nce", True, high=0.0, citation="Tran et al., ICCV 2019")
register("n_nce", True, citation="Tran et al. 2019; Ibrahim et al. 2022")
register("sfda", True, 0.0, 1.0, citation="Shao et al., ECCV 2022",
         description="self-challenging Fisher discriminant analysis: mean true-class posterior after ConfMix")
_NCTI = "Wang et al., ICCV 2023"
register("ncti_seli", True, 0.0, citation=_NCTI, description="NCTI term: nuclear norm of the centred LDA projection")
register("ncti_ncc", True, 0.0, 1.0, citation=_NCTI, description="NCTI term: mean LDA posterior of the true class")
register("ncti_collapse", True, citation=_NCTI,
         description="NCTI term negated: -log of the summed nuclear norms of the per-class posteriors")
register("ncti", True, -1.0, 2.0, citation=_NCTI,
         description="NCTI of a pool of models: min-max normalised seli + ncc - vc (pool-relative)")
register("etran_energy", True, citation="Gholami et al., ICCV 2023",
         description="mean of the lowest 0.5% of logsumexp(features) over samples")
register("knn_acc", True, 0.0, 1.0, citation="Cover & Hart 1967 (k-NN); frozen-feature protocol of Wu et al., CVPR 2018",
         description="stratified k-fold k-NN accuracy on frozen features")
register("linear_probe_acc", True, 0.0, 1.0, citation="Kornblith et al., CVPR 2019 (logistic-regression linear evaluation)",
         description="stratified k-fold logistic-regression accuracy on standardised frozen features")
# --- unsupervised source-target discrepancies (lower = closer) --------------------------------------------
_S32 = "as defined in Ibrahim et al., ECML-PKDD 2022, supplement S3.2"
register("coral", False, 0.0, citation=f"Sun & Saenko 2016; {_S32}")
register("mmd", False, 0.0, citation=f"Gretton et al. 2012; {_S32}")
register("cmd", False, 0.0, citation=f"Zellinger et al. 2017; {_S32}")
register("ot", False, 0.0, citation=f"Flamary et al. 2021 (POT); {_S32}")
register("kld", False, 0.0, citation=f"Gaussian closed form; {_S32}")
register("wd", False, 0.0, citation=f"Gaussian closed form; {_S32}")

_STAGE = re.compile(r"^(train|val|test)/")
_ENSEMBLE = re.compile(r"^ensemble_\d+/")


def lookup(name: str) -> MetricInfo | None:
    """The registry entry of a recorded metric name (qualifiers stripped), or None when unknown."""
    base = _ENSEMBLE.sub("", _STAGE.sub("", str(name).strip()))
    if base in METRICS:
        return METRICS[base]
    head = base.split("/", 1)[0]
    return METRICS.get(head)


def higher_is_better(name: str) -> bool:
    """The direction of a recorded metric name; raises ``KeyError`` naming the known metrics when unknown."""
    info = lookup(name)
    if info is None:
        raise KeyError(f"metric {name!r} is not in the registry (gate/metrics.py); known: {sorted(METRICS)}; "
                       f"register it with gate.metrics.register(name, higher_is_better)")
    return info.higher_is_better


def monitor_mode(name: str) -> str:
    """Lightning's checkpoint mode for a validation metric: ``"max"`` or ``"min"``."""
    return "max" if higher_is_better(name) else "min"


# Only for foreign tables whose metric names gate does not know (e.g. a paper's "Loss", "BS", "MAE Score").
_LOWER_IS_BETTER = re.compile(
    r"(loss|\bmae\b|mae[ _]|\bmse\b|rmse|error|\berr\b|brier|(^|[\s_/])bs($|[\s_/])|\brank\b|\bnll\b|perplexity"
    r"|\bece\b|discrepancy|distance)",
    re.IGNORECASE,
)


def guess_higher_is_better(name: str) -> bool:
    """The registry's direction when the name is known, else a guess from the name (losses, errors, Brier
    scores, ranks and distances are lower-is-better). Callers warn when they rely on the guess."""
    info = lookup(name)
    if info is not None:
        return info.higher_is_better
    return not bool(_LOWER_IS_BETTER.search(str(name)))
