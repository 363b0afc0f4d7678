"""gate-score: transferability scores of one encoder on one dataset split (composed from conf/score.yaml; its row
of :data:`gate.cli.commands.COMMANDS`)."""

from gate.cli.common import gate_command

main = gate_command("gate-score")

if __name__ == "__main__":
    main()
