"""The old home of `Progress` (scripts and tests import it from here); the
CLI's shared helpers live in `common`."""
from .common import Progress, info, quiet_option  # noqa: F401
