"""occd: the OpenClaw context-cleaner daemon."""

# The one place the version is written: pyproject.toml reads it ([tool.setuptools.dynamic]), so the installed
# metadata (importlib.metadata.version("occd")), `occd --version` and every --json envelope say the same.
__version__ = "0.2.0"
