"""The drift check, split into its parts (see ``check.py`` for how they compose) with its config, reference
files and the offline data-file reader."""
