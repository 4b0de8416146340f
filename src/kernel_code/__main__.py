"""``python -m kernel_code``: the same as the ``kernel-code`` command."""

from kernel_code.cli import main

raise SystemExit(main())
