import sys

from racing_orchestration.cli import main

sys.exit(main())
