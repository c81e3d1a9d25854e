"""Atomic checkpoint files with clear errors.

A checkpoint is a plain dict saved with `torch.save`. It is written to a temporary file in the same
directory and moved into place with `os.replace`, so a crash or Ctrl-C mid-write never leaves a
truncated file where a good one used to be. Loading uses `weights_only=True`: store tensors and
plain Python values (ints, floats, strings, lists, dicts) only.
"""

import os
import tempfile

import torch


class CheckpointError(Exception):
    """The checkpoint is missing, unreadable, or not one this script wrote."""


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


def load_checkpoint(path: str, required_keys=(), map_location="cpu") -> dict:
    """Loads a checkpoint, raising CheckpointError with a one-line reason on any problem."""
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises many types for truncated/garbage files
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CheckpointError(f"checkpoint {path} is corrupt or not a torch file ({first_line[:120]})") from e
    if not isinstance(payload, dict):
        raise CheckpointError(f"checkpoint {path} holds a {type(payload).__name__}, expected a dict")
    missing = [k for k in required_keys if k not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing}: it was not written by this script")
    return payload
