import sys

from sniffsync.cli.main import main

sys.exit(main())
