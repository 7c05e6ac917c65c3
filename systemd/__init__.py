"""Service templates shipped inside the wheel as occd.systemd (read with importlib.resources)."""
