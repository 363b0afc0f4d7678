"""Writes imagenet_cnns_percent.csv: a published table in percent, as a user would bring it to gate-analysis.

Fine-tuned top-1 accuracy (%) of 11 ImageNet-supervised CNNs on six target datasets: the table the SFDA
(Shao et al., ECCV 2022) and NCTI (Wang et al., ICCV 2023) evaluations rank encoders against, as their authors'
evaluation scripts list it (``finetune_acc``; fine-tuned under Kornblith et al.'s CVPR 2019 protocol). Only the
datasets that protocol scores by top-1 accuracy are kept (Aircraft, Caltech-101, Flowers and Pets are scored by
mean per-class accuracy, VOC 2007 by mAP: other metrics than ``acc@1``).

Two zero-training predictors per encoder, as ``kind=score`` rows: its ImageNet top-1 (%, ``source_top1``) and its
parameter count (``params``), read from torchvision's weight metadata (``<Model>_Weights.IMAGENET1K_V1.meta``), the
weights that table fine-tuned.

    python experiments/imagenet_cnns/make_table.py
"""

import csv
from pathlib import Path

import torchvision.models as tvm

FINETUNED = {  # dataset -> encoder -> fine-tuned top-1 accuracy, %
    "cars": {"resnet34": 88.63, "resnet50": 89.09, "resnet101": 89.47, "resnet152": 89.88, "densenet121": 89.34,
             "densenet169": 89.02, "densenet201": 89.44, "mnasnet1_0": 72.58, "mobilenet_v2": 86.44,
             "googlenet": 87.76, "inception_v3": 87.74},
    "cifar10": {"resnet34": 96.12, "resnet50": 96.28, "resnet101": 97.39, "resnet152": 97.53, "densenet121": 96.45,
                "densenet169": 96.77, "densenet201": 97.02, "mnasnet1_0": 92.59, "mobilenet_v2": 94.74,
                "googlenet": 95.54, "inception_v3": 96.18},
    "cifar100": {"resnet34": 81.94, "resnet50": 82.8, "resnet101": 84.88, "resnet152": 85.66, "densenet121": 82.75,
                 "densenet169": 84.26, "densenet201": 84.88, "mnasnet1_0": 72.04, "mobilenet_v2": 78.11,
                 "googlenet": 79.84, "inception_v3": 81.49},
    "dtd": {"resnet34": 72.96, "resnet50": 74.72, "resnet101": 74.8, "resnet152": 76.44, "densenet121": 74.18,
            "densenet169": 74.72, "densenet201": 76.04, "mnasnet1_0": 70.12, "mobilenet_v2": 71.72,
            "googlenet": 72.53, "inception_v3": 72.85},
    "food": {"resnet34": 81.99, "resnet50": 84.45, "resnet101": 85.58, "resnet152": 86.28, "densenet121": 84.99,
             "densenet169": 85.84, "densenet201": 86.71, "mnasnet1_0": 71.35, "mobilenet_v2": 81.12,
             "googlenet": 79.3, "inception_v3": 81.76},
    "sun397": {"resnet34": 61.02, "resnet50": 63.54, "resnet101": 63.76, "resnet152": 64.82, "densenet121": 63.26,
               "densenet169": 64.1, "densenet201": 64.57, "mnasnet1_0": 56.56, "mobilenet_v2": 60.29,
               "googlenet": 59.89, "inception_v3": 59.98},
}
WEIGHTS = {"resnet34": tvm.ResNet34_Weights, "resnet50": tvm.ResNet50_Weights, "resnet101": tvm.ResNet101_Weights,
           "resnet152": tvm.ResNet152_Weights, "densenet121": tvm.DenseNet121_Weights,
           "densenet169": tvm.DenseNet169_Weights, "densenet201": tvm.DenseNet201_Weights,
           "mnasnet1_0": tvm.MNASNet1_0_Weights, "mobilenet_v2": tvm.MobileNet_V2_Weights,
           "googlenet": tvm.GoogLeNet_Weights, "inception_v3": tvm.Inception_V3_Weights}


def main() -> None:
    rows = []
    for dataset, accs in FINETUNED.items():
        for encoder, acc in accs.items():
            meta = WEIGHTS[encoder].IMAGENET1K_V1.meta
            rows.append(("finetune", encoder, dataset, "Img Class", "acc@1", acc, "true"))
            rows.append(("score", encoder, dataset, "Img Class", "source_top1",
                         meta["_metrics"]["ImageNet-1K"]["acc@1"], "true"))
            rows.append(("score", encoder, dataset, "Img Class", "params", meta["num_params"], "true"))
    out = Path(__file__).with_name("imagenet_cnns_percent.csv")
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["kind", "encoder", "dataset", "paper_group", "metric", "value", "higher_is_better"])
        writer.writerows(rows)
    print(f"wrote {out}: {len(rows)} rows")


if __name__ == "__main__":
    main()
