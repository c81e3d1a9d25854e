"""Atomic checkpoint files with clear errors.

A checkpoint is a plain dict saved with `torch.save`. It is written to a temporary file in the same
directory and moved into place with `os.replace`, so a crash, a Ctrl-C or a full disk mid-write never
leaves a truncated file where a good one used to be. Loading uses `weights_only=True`: store tensors and
plain Python values (ints, floats, strings, lists, dicts) only. Each checkpoint names the script that
wrote it, so a checkpoint given to another script is a one-line error that names the right one.
"""

import os
import pickle
import sys
import tempfile
import warnings
import zipfile

import torch


class CheckpointError(Exception):
    """The checkpoint is missing, unreadable, or not one this script wrote."""


class SaveError(Exception):
    """A checkpoint could not be written (e.g. the disk is full); the file it would replace is intact."""


NOT_TORCH = "is not a torch checkpoint file"
SCRIPTS = ("a2c_cartpole", "ppo_tetris", "ppo_puffer_async")
RESUME_KEYS = ("model", "optimizer", "args", "global_step", "update", "run_name", "torch_rng_state")


def save_checkpoint(path: str, payload: dict) -> None:
    """Writes `payload` to `path` atomically; an OS error (a full disk, no permission) is a SaveError with
    one line, and a Ctrl-C mid-write a KeyboardInterrupt, the temporary file removed and any previous file at
    `path` untouched either way."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp_path = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp_path = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".pt")
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp_path, path)
    except BaseException as e:
        if tmp_path is not None and os.path.exists(tmp_path):
            os.remove(tmp_path)
        # torch.save reports a failed write as a RuntimeError raised while handling the real cause: an OSError
        # (a full disk), or a Ctrl-C that landed mid-write, which must stay a Ctrl-C (the run saves and exits 130).
        cause = e
        while cause is not None and not isinstance(cause, (OSError, KeyboardInterrupt)):
            cause = cause.__context__
        if isinstance(cause, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        if cause is None:
            raise
        reason = f"[Errno {cause.errno}] {cause.strerror}" if cause.errno else str(cause)
        raise SaveError(f"could not save {path}: {reason}") from None


def saved_by(payload: dict):
    """The script that wrote a checkpoint: its "script" entry, or, for older files, told from its flags."""
    if "script" in payload:
        return payload["script"]
    args = payload.get("args") if isinstance(payload.get("args"), dict) else {}
    if "horizon" in args:
        return "ppo_puffer_async"
    if "obs_rms" in payload:
        return "a2c_cartpole"
    if "num_steps" in args:
        return "ppo_tetris"
    return None


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
    check_keys(path, payload, required_keys)
    return payload


def check_keys(path: str, payload: dict, required_keys) -> None:
    missing = [k for k in required_keys if k not in payload]
    if missing:
        raise CheckpointError(
            f"checkpoint {path} lacks the entries {', '.join(missing)}: it was not written by this script"
        )


def load_run_checkpoint(path: str, script: str, flag: str, resume: bool, required=()) -> dict:
    """A checkpoint `script` saved, for `flag` (--resume needs the whole run, --eval-checkpoint the model and
    its flags); anything else is a ValueError with one line that names the flag, and the right script when
    another one wrote the file."""
    try:
        payload = load_checkpoint(path)
        other = saved_by(payload)
        if other in SCRIPTS and other != script:
            raise ValueError(
                f"{flag}: {path} was saved by {other}.py, not {script}.py; use python {other}.py {flag} {path}"
            )
        check_keys(path, payload, (RESUME_KEYS if resume else ("model", "args")) + tuple(required))
        return payload
    except CheckpointError as e:
        raise ValueError(f"{flag}: {e}; pass a runs/<run>/{script}.pt that this script saved") from None


class RunCheckpoint:
    """A training run's checkpoint file, runs/<run>/<script>.pt. `entries` are what every save holds besides
    the step: plain values, or objects with a state_dict() (the network, the optimizer, observation statistics),
    read at each save. `main`: whether this process writes (rank 0 of a torchrun job alone saves). When to save
    is the script's line to write; this only writes, atomically, and keeps the step of the last good file."""

    def __init__(self, path: str, update_size: int, main: bool = True, saved_step=None, **entries):
        self.path, self.update_size, self.main, self.saved_step = path, update_size, main, saved_step
        self.run_dir = os.path.dirname(path)
        self.entries = entries

    def save(self, update: int, final: bool = False) -> None:
        """Writes the run as it is after `update` (update x update_size agent steps). A periodic save that fails
        (a full disk) warns and training goes on; a final one raises SaveError. Either way the previous file is
        intact."""
        if not self.main:
            return
        step = update * self.update_size
        payload = {key: v.state_dict() if hasattr(v, "state_dict") else v for key, v in self.entries.items()}
        payload.update(update=update, global_step=step, torch_rng_state=torch.get_rng_state())
        try:
            save_checkpoint(self.path, payload)
            self.saved_step = step
        except SaveError as e:
            kept = (
                f"the checkpoint of step {self.saved_step:,} is kept"
                if self.saved_step is not None
                else "no checkpoint of this run exists yet"
            )
            if final:
                raise SaveError(f"{e}; {kept}") from None
            print(f"warning: {e}; {kept}; training goes on", file=sys.stderr, flush=True)

    def resume_hint(self) -> str:
        return f"saved {self.path} at step {self.saved_step:,}; continue with --resume {self.path}"
