"""Atomic checkpoint files with clear errors.

A checkpoint is a plain dict saved with `torch.save`. It is written to a temporary file in the same
directory and moved into place with `os.replace`, so a crash or Ctrl-C mid-write never leaves a
truncated file where a good one used to be. Loading uses `weights_only=True`: store tensors and
plain Python values (ints, floats, strings, lists, dicts) only.
"""

import os
import pickle
import tempfile
import warnings
import zipfile

import torch


class CheckpointError(Exception):
    """The checkpoint is missing, unreadable, or not one this script wrote."""


NOT_TORCH = "is not a torch checkpoint file"


def save_checkpoint(path: str, payload: dict) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def describe_unreadable(path: str, error: Exception) -> str:
    """Why torch.load could not read `path`, in plain words, from the file's size and first bytes
    (the rest of "checkpoint PATH ...").

    torch's own messages are long, name internals ("failed finding central directory", "Unsupported
    operand 101") and talk about `weights_only`, which tells a user nothing about their file.
    """
    size = os.path.getsize(path)
    if size == 0:
        return f"{NOT_TORCH}: it is empty (0 bytes)"
    with open(path, "rb") as f:
        head = f.read(512)
    if head.startswith(b"PK\x03\x04"):  # torch.save writes a zip archive
        if not zipfile.is_zipfile(path):  # a zip's directory sits at the very end of the file
            return f"{NOT_TORCH}: it is truncated (the file ends early, after {size:,} bytes)"
        if isinstance(error, pickle.UnpicklingError):  # weights_only refused what the archive holds
            return "holds Python objects other than tensors and plain values, which these scripts never save"
        return f"{NOT_TORCH}: it is a zip archive that torch cannot read (damaged, or another program's zip)"
    if head.startswith(b"\x80"):
        return f"{NOT_TORCH}: it is a Python pickle, not a torch zip archive (or a damaged old-format checkpoint)"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:  # a multi-byte character cut at byte 512 is still text
        text = head[:-4].decode("utf-8", errors="replace") if len(head) == 512 else None
    if text is not None and all(c.isprintable() or c.isspace() for c in text):
        first = text.strip().splitlines()[0][:40] if text.strip() else ""
        return f"{NOT_TORCH}: it is text, beginning {first!r}" if first else f"{NOT_TORCH}: it is text (blank)"
    return f"{NOT_TORCH}: its bytes are neither a torch zip archive nor a pickle"


def load_checkpoint(path: str, required_keys=(), map_location="cpu") -> dict:
    """Loads a checkpoint, raising CheckpointError with a one-line reason on any problem."""
    if os.path.isdir(path):
        raise CheckpointError(f"checkpoint {path} is a directory, not a file")
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint not found: {path}")
    if not os.access(path, os.R_OK):
        raise CheckpointError(f"checkpoint {path} cannot be read (permission denied)")
    try:
        with warnings.catch_warnings():  # torch warns about odd pickle protocols: the error says it all
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises many types (EOFError, RuntimeError, UnpicklingError) for bad files
        raise CheckpointError(f"checkpoint {path} {describe_unreadable(path, e)}") from e
    if not isinstance(payload, dict):
        raise CheckpointError(f"checkpoint {path} holds a {type(payload).__name__}, not the dict these scripts save")
    missing = [k for k in required_keys if k not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks the entries {', '.join(missing)}: "
                              "it was not written by this script")
    return payload
