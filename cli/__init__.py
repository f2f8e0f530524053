"""The `pybackward` command line (installed as the `pybackward_cli` package)."""
