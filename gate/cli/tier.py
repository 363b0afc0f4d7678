"""gate-tier: a tier into jobs (composed by Hydra from conf/tier_run.yaml; its row of
:data:`gate.cli.commands.COMMANDS`, its stage :mod:`gate.tiers.stage`), then the tier's report.

    gate-tier                                                  # demo tier: efficientnet_lite0 vs resnet18_scratch
    gate-tier tier=small encoder=my_encoder launch=commands    # one gate-run command per pending experiment
    gate-tier tier=demo encoder=efficientnet_lite0,efficientnet_lite1,resnet18_scratch

``encoder=a,b`` (Hydra's sweep syntax) is read as the list ``encoders=[a,b]`` and ``tier=<path>.yaml`` as a tier
file, before Hydra parses the command line (:func:`gate.cli.arguments.normalise_args`): gate-tier runs its
experiments itself, never as a Hydra sweep.
"""

from gate.cli.common import gate_command

main = gate_command("gate-tier")

if __name__ == "__main__":
    main()
