"""gate-eevee: EEVEE benchmark-subset search (composed by Hydra from conf/eevee.yaml; its row of
:data:`gate.cli.commands.COMMANDS`).

``k`` is one subset size (``k=8``), a list (``k=[1,2,3]``) or a range (``k=1-8``, both ends included); one
search per k (:func:`gate.analysis.stage.k_values`). (A bare ``k=1,2,3`` is Hydra's sweep syntax and is refused by
Hydra without ``-m``.) A bad input is one line on stderr and exit code 2.
"""

from gate.cli.common import gate_command

main = gate_command("gate-eevee")

if __name__ == "__main__":
    main()
