from modelplane.cli import run

run()
