"""ConfigError apart from the config models: the command line catches it around every command, and importing
the models (pydantic) would cost each command a tenth of a second, `kerneltui history` and `--help` included."""


class ConfigError(Exception):
    """The config file is not valid; the message names the file and the key."""
