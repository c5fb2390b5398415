from gpupool.cli.main import run

run()
