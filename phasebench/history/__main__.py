import sys

from phasebench.history.cli import main

sys.exit(main())
