"""Service templates shipped inside the wheel as occd.launchd (read with importlib.resources)."""
