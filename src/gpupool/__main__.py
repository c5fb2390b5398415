import sys

from gpupool.cli.main import main

sys.exit(main())
