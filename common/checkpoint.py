"""Atomic checkpoint files with clear errors. A checkpoint is a plain dict (tensors and plain values: loading uses
`weights_only=True`) written to a temporary file and moved into place, so a crash, a Ctrl-C or a full disk mid-write
never leaves a truncated file where a good one was. It names its script: given to another, it is a one-line error."""

import os
import pickle
import sys
import tempfile
import warnings
import zipfile

import torch


class SaveError(Exception):
    """A checkpoint could not be written (e.g. the disk is full); the file it would replace is intact."""


SCRIPTS = ("a2c_cartpole", "ppo_tetris", "ppo_puffer_async")
RESUME_KEYS = "model optimizer args global_step update num_updates run_name world_size schedule rates torch_rng_state"
# Every checkpoint says how its losses/value_loss is computed (its "value_loss" entry, which common/run.py writes).
VALUE_LOSS_CONVENTION = "0.5 x squared error"


def save_checkpoint(path: str, payload: dict) -> None:
    """Writes `payload` to `path` atomically; an OS error (a full disk) is a one-line SaveError, a Ctrl-C mid-write a
    KeyboardInterrupt, the temporary file removed and any previous file at `path` untouched either way."""
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


def describe_unreadable(path: str, error: Exception) -> str:
    """Why torch.load could not read `path`, in plain words, from the file's size and first bytes (the rest of
    "checkpoint PATH ..."): torch's own messages name internals and talk about `weights_only`."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(512)
    text = head.decode("utf-8", errors="replace").rstrip("\ufffd")  # a character cut at byte 512 is still text
    text = text if "\ufffd" not in text and all(c.isprintable() or c.isspace() for c in text) else None
    if size == 0:
        why = "it is empty (0 bytes)"
    elif head.startswith(b"PK\x03\x04") and not zipfile.is_zipfile(path):  # a zip's directory sits at its end
        why = f"it is truncated (the file ends early, after {size:,} bytes)"
    elif head.startswith(b"PK\x03\x04") and isinstance(error, pickle.UnpicklingError):  # weights_only refused it
        return "holds Python objects other than tensors and plain values, which these scripts never save"
    elif head.startswith(b"PK\x03\x04"):
        why = "it is a zip archive that torch cannot read (damaged, or another program's zip)"
    elif head.startswith(b"\x80"):
        why = "it is a Python pickle, not a torch zip archive (or a damaged old-format checkpoint)"
    elif text is not None:
        why = f"it is text, beginning {text.strip().splitlines()[0][:40]!r}" if text.strip() else "it is text (blank)"
    else:
        why = "its bytes are neither a torch zip archive nor a pickle"
    return f"is not a torch checkpoint file: {why}"


def load_run_checkpoint(path: str, script: str, flag: str, resume: bool, required=()) -> dict:
    """A checkpoint `script` saved, for `flag` (--resume needs the whole run, --eval-checkpoint the model and its
    flags); anything else is one line that names the flag, and the right script when another one wrote the file."""
    payload = None
    keys = (RESUME_KEYS.split() if resume else ["model", "args"]) + list(required)
    if os.path.isdir(path):
        problem = f"checkpoint {path} is a directory, not a file"
    elif not os.path.isfile(path) or not os.access(path, os.R_OK):
        problem = f"checkpoint not found: {path}" if not os.path.isfile(path) else f"checkpoint {path} cannot be read"
    else:
        try:
            with warnings.catch_warnings():  # torch warns about odd pickle protocols: the error says it all
                warnings.simplefilter("ignore")
                payload = torch.load(path, map_location="cpu", weights_only=True)
            kind = type(payload).__name__
            problem = None if kind == "dict" else f"checkpoint {path} holds a {kind}, not the dict these scripts save"
        except Exception as e:  # torch raises many types (EOFError, RuntimeError, UnpicklingError) for bad files
            problem = f"checkpoint {path} {describe_unreadable(path, e)}"
    if problem is None and (other := payload.get("script")) in SCRIPTS and other != script:
        raise ValueError(
            f"{flag}: {path} was saved by {other}.py, not {script}.py; use python {other}.py {flag} {path}"
        )
    if problem is None and (missing := [key for key in keys if key not in payload]):
        problem = f"checkpoint {path} lacks the entries {', '.join(missing)}: it was not written by this script"
    if problem is not None:
        raise ValueError(f"{flag}: {problem}; pass a runs/<run>/{script}.pt that this script saved")
    return payload


class RunCheckpoint:
    """runs/<run>/<script>.pt. `entries`: what every save holds besides the step, plain values or objects with a
    state_dict() read at each save. `main`: this process writes (under torchrun, rank 0 alone). When to save is the
    script's line; this only writes, atomically, and keeps the step of the last good file."""

    def __init__(self, path: str, update_size: int, main: bool = True, saved_step=None, **entries):
        self.path = path
        self.update_size = update_size
        self.main = main
        self.saved_step = saved_step
        self.run_dir = os.path.dirname(path)
        self.entries = entries

    def save(self, update: int, final: bool = False) -> None:
        """Writes the run as it is after `update`. A periodic save that fails (a full disk) warns and training goes
        on; a final one raises SaveError. Either way the previous file is intact."""
        if not self.main:
            return
        step = update * self.update_size
        payload = {key: v.state_dict() if hasattr(v, "state_dict") else v for key, v in self.entries.items()}
        payload.update(update=update, global_step=step, torch_rng_state=torch.get_rng_state())
        try:
            save_checkpoint(self.path, payload)
            self.saved_step = step
        except SaveError as e:
            if final:
                raise SaveError(f"{e}; {self.kept()}") from None
            print(f"warning: {e}; {self.kept()}; training goes on", file=sys.stderr, flush=True)

    def kept(self, hint: bool = False) -> str:
        """What the file holds now, in words for a message; `hint`: and how to go on from it."""
        if self.saved_step is None:
            return "no checkpoint of this run exists yet"
        more = f"; continue with --resume {self.path}" if hint else ""
        return f"the checkpoint of step {self.saved_step:,} is kept{more}"
