"""gate-run: fine-tune an encoder on a dataset (composed by Hydra from conf/run.yaml; its row of
:data:`gate.cli.commands.COMMANDS`)."""

from gate.cli.common import gate_command

main = gate_command("gate-run")

if __name__ == "__main__":
    main()
