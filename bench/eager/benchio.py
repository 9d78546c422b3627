"""Shared by the scripts in bench/eager/: results written whole or not at all."""
import json
import os


def write_json(path, obj, indent=2):
    """Writes obj as JSON to path through a temporary file renamed over it."""
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=indent)
        f.write("\n")
    os.replace(path + ".tmp", path)
