"""gate-analysis: tables, tier summaries, score-vs-accuracy correlations, figures and an HTML report (composed by
Hydra from conf/analysis.yaml; its row of :data:`gate.cli.commands.COMMANDS`). A bad input is one line on stderr
and exit code 2."""

from gate.cli.common import gate_command

main = gate_command("gate-analysis")

if __name__ == "__main__":
    main()
