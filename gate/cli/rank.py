"""gate-rank: a pool of encoders ranked on a tier at a fraction of the full tier's compute (conf/rank.yaml; its row of
:data:`gate.cli.commands.COMMANDS`, its stage :mod:`gate.ranking.stage`).

    gate-rank encoder=efficientnet_lite0,efficientnet_lite1,resnet18_scratch              # demo tier, budget 0.1
    gate-rank tier=small encoder=a,b,c,d budget=0.05 proxy_seeds=7,8

``encoder=a,b,c`` is read as the list ``encoders=[a,b,c]``, ``proxy_seeds=7,8`` as ``proxy_seeds=[7,8]`` and
``tier=<path>.yaml`` as a tier file, before Hydra parses the command line (:func:`gate.cli.arguments.normalise_args`);
v1's keys (``seed``, ``cost_probe_steps``, ``overhead_steps``) are refused naming what replaced them.
"""

from gate.cli.common import gate_command

main = gate_command("gate-rank")

if __name__ == "__main__":
    main()
