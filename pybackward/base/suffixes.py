"""File suffixes that say what a file is, so a program is never written
under a name that says an image, JSON or arrays (`out.png`, `out.npz`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Union

from .errors import ArgumentError

#: Suffix -> what it names, for every suffix a program must not be written to.
NOT_PROGRAM = {
    ".png": "a PNG image", ".svg": "an SVG image", ".jpg": "a JPEG image", ".jpeg": "a JPEG image",
    ".gif": "a GIF image", ".pdf": "a PDF document", ".dot": "a Graphviz graph", ".html": "a web page",
    ".json": "JSON", ".yaml": "YAML", ".yml": "YAML", ".csv": "a CSV table", ".md": "Markdown",
    ".py": "Python source", ".npz": "NumPy arrays", ".npy": "a NumPy array",
    ".pdparams": "Paddle parameters (a pickle)", ".pdopt": "Paddle optimizer state (a pickle)",
    ".pdiparams": "Paddle parameters (combined tensors)", ".pkl": "a Python pickle",
    ".pickle": "a Python pickle", ".onnx": "an ONNX model", ".zip": "a zip archive",
    ".gz": "a gzip file", ".tar": "a tar archive",
}


#: Suffix -> the array file format it names (`tensors.paddle_files` reads and writes them).
ARRAY_SUFFIXES = {".npz": "npz", ".pdparams": "pickle", ".pdopt": "pickle", ".pdiparams": "combined"}


def is_array_path(path: Union[str, os.PathLike]) -> bool:
    """True when the path names an array file by its suffix, or is a directory. Here, not only
    in `tensors.paddle_files`, so a command can tell without importing NumPy."""
    text = os.fspath(path)
    return Path(text).suffix.lower() in ARRAY_SUFFIXES or os.path.isdir(text)


def check_program_path(path: Union[str, os.PathLike]) -> None:
    """Refuse to write a program to a path whose suffix names another format."""
    suffix = Path(os.fspath(path)).suffix.lower()
    what = NOT_PROGRAM.get(suffix)
    if what is not None:
        raise ArgumentError(f"{os.fspath(path)}: the suffix {suffix} says {what}, not a program; write "
                            "programs to .pb or .pdmodel (binary) or .pbtxt (text)")
