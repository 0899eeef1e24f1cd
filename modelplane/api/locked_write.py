"""Replace a file a user edits through modelplane: under a lock, atomically, keeping its owner and mode.

The writing side of `textfile` (which reads a file a user names without trusting it). The CLI holds
`locked(path)` from reading a stack file to replacing it, so concurrent `scale`/`drain`/`undrain`
commands on one file queue up instead of losing an edit; `write_atomically` writes a checked new
file next to it and renames it over, leaving the old file byte for byte untouched on any failure.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeVar

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from .errors import ModelplaneError, StackFileError

T = TypeVar("T")

LOCK_TIMEOUT = 30.0  # seconds an edit waits for another modelplane command editing the same folder's stack files


def read_for_edit(path: Path) -> str:
    """The file's exact text (line endings kept), for editing."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise StackFileError(f"stack file {path} does not exist") from None
    except UnicodeDecodeError as error:
        raise StackFileError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise StackFileError(f"cannot read stack file {path}: {error.strerror}") from None


@contextmanager
def locked(path: Path, timeout: float | None = None) -> Iterator[None]:
    """Hold the edit lock of stack file `path` for read -> check -> write; wait at most `timeout` seconds for it.

    Two `scale`/`drain`/`undrain` commands on one file would otherwise both read the old text and
    the second rename would drop the first edit. The lock is `flock` on the folder holding the file
    (after symlinks), not on the file: `write_atomically` renames a new file over it, so a lock on
    the file's inode would stay on the replaced file while the next command locks the new one. The
    folder's inode survives every edit, and locking it leaves nothing behind: a sidecar
    `.Pulumi.<stack>.yaml.lock` could never be deleted (removing it races with a command waiting on
    it) and would show up in `git status` next to the stacks. The price, serializing edits of every
    stack file in that folder, is nothing: an edit holds the lock for well under a second. Where a
    folder cannot be locked (NFS emulates flock with write locks, which need a file opened for
    writing) the sidecar file is the fallback. flock locks go away with the process, so a killed
    command never leaves a stale lock. Only modelplane takes the lock: an editor or `pulumi config
    set` writing meanwhile is still caught by `write_atomically`'s compare.
    """
    timeout = LOCK_TIMEOUT if timeout is None else timeout
    if fcntl is None:  # no flock (Windows): the compare in write_atomically is all there is
        yield
        return
    target = Path(os.path.realpath(path))
    try:
        fd = os.open(target.parent, os.O_RDONLY)
    except FileNotFoundError:
        raise StackFileError(f"stack file {path} does not exist") from None
    except OSError as error:
        raise StackFileError(f"cannot open the folder of stack file {path}: {error.strerror}") from None
    try:
        _wait_for_lock(fd, path, timeout)
    except OSError as error:
        os.close(fd)
        if isinstance(error, BlockingIOError) or error.errno not in _FOLDER_NOT_LOCKABLE:
            raise
        fd = _lock_sidecar(target, path, timeout)
    except BaseException:
        os.close(fd)
        raise
    try:
        yield
    finally:
        os.close(fd)  # releases the lock


# What flock on a folder fails with where folders cannot be locked (NFS): the sidecar file is the fallback.
_FOLDER_NOT_LOCKABLE = (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)


def _lock_sidecar(target: Path, path: Path, timeout: float) -> int:
    """The locked descriptor of `.<file>.lock` beside the file (opened, created when missing)."""
    lock_file = target.parent / f".{target.name}.lock"
    try:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as error:
        raise _cannot_lock(path, lock_file, error) from None
    try:
        _wait_for_lock(fd, path, timeout)
    except OSError as error:
        os.close(fd)
        raise _cannot_lock(path, lock_file, error) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _cannot_lock(path: Path, lock_file: Path, error: OSError) -> ModelplaneError:
    return ModelplaneError(
        f"cannot lock {path} for editing ({lock_file}: {error.strerror}); nothing "
        "changed: make its folder writable, or edit with `pulumi config set`"
    )


def _wait_for_lock(fd: int, path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ModelplaneError(
                    f"another modelplane command is editing {path} (waited {timeout:g}s for it); "
                    "nothing changed: run this command again once it has finished"
                ) from None
            time.sleep(0.02)


def check_writable(path: Path) -> os.stat_result:
    """The stat of the file `path` resolves to; a ModelplaneError when an edit could not (or must not) replace it.

    An edit writes a new file next to the old one and renames it over: that needs a writable folder,
    and would succeed on a read-only file (and as root, everywhere), so a file without any write bit,
    or one this user may not write (another owner, an immutable file, a read-only mount) is refused
    here rather than replaced behind its mode.
    """
    target = Path(os.path.realpath(path))
    try:
        info = os.stat(target)
        folder = os.stat(target.parent)
    except FileNotFoundError:
        raise StackFileError(f"stack file {path} does not exist") from None
    except OSError as error:
        raise StackFileError(f"cannot read stack file {path}: {error.strerror}") from None
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o222:
        raise ModelplaneError(
            f"{path} is read-only (mode {mode:04o}); nothing written: make it writable "
            f"(chmod u+w {shlex.quote(str(target))}) and run the command again, or edit it by hand"
        )
    if not os.access(target, os.W_OK):
        raise ModelplaneError(
            f"{path} is not writable by this user (owner uid {info.st_uid}, mode {mode:04o}; or it "
            "is immutable, or on a read-only file system); nothing written: run the command as a "
            "user who may write it, or fix its permissions"
        )
    if not stat.S_IMODE(folder.st_mode) & 0o222 or not os.access(target.parent, os.W_OK | os.X_OK):
        raise ModelplaneError(
            f"the folder {target.parent} is read-only; nothing written to {path}: the edit writes a "
            "new file there and renames it over the old one, so make the folder writable (for "
            f"example chmod u+w {shlex.quote(str(target.parent))}) and run the command again"
        )
    return info


def write_atomically(path: Path, text: str, old_text: str, check: Callable[[Path], T]) -> T:
    """Write `text` to a temporary file next to `path`, `check` it, then `os.replace` it over `path`.

    If `check` raises (for example a ConfigError), writing fails (a full disk, an interrupt) or
    `path` no longer holds `old_text`, the temporary file is removed and `path` is byte for byte
    untouched. The new file keeps the old one's owner, group and mode; a symlink keeps pointing at
    the edited file. Call it inside `locked(path)`, which keeps other modelplane edits out.
    """
    target = Path(os.path.realpath(path))
    info = check_writable(path)
    try:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as error:
        raise ModelplaneError(f"cannot write next to {path}: {error.strerror}; nothing changed") from None
    replaced = False
    try:
        _write_and_close(fd, text, info, path)
        result = check(Path(temp))
        if read_for_edit(target) != old_text:
            raise ModelplaneError(f"{path} changed while it was being edited; nothing written, run the command again")
        try:
            os.replace(temp, target)
        except OSError as error:
            raise ModelplaneError(f"cannot replace {path}: {error.strerror or error}; nothing changed") from None
        replaced = True
    except BaseException:  # KeyboardInterrupt too: never leave the temporary file behind
        if not replaced:
            with suppress(OSError):
                os.unlink(temp)
        raise
    _sync_folder(target.parent)
    return result


def _write_and_close(fd: int, text: str, info: os.stat_result, path: Path) -> None:
    """Write `text` to the new file `fd` with the old file's owner, group and mode, durably; close it."""
    try:
        try:
            data = memoryview(text.encode("utf-8"))
            while data:
                data = data[os.write(fd, data) :]
            _keep_owner_and_mode(fd, info, path)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise ModelplaneError(f"cannot write {path}: {error.strerror or error}; nothing changed") from None


def _keep_owner_and_mode(fd: int, info: os.stat_result, path: Path) -> None:
    """Give the new file the old one's owner, group and mode (chown first: it may clear set-id bits)."""
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) != (info.st_uid, info.st_gid):
        try:
            os.fchown(fd, info.st_uid, info.st_gid)
        except PermissionError:
            raise ModelplaneError(
                f"cannot keep the owner and group of {path} (uid {info.st_uid}, gid {info.st_gid}) "
                "on the edited file; nothing changed: run the command as its owner (or root), or "
                "edit it by hand"
            ) from None
    os.fchmod(fd, stat.S_IMODE(info.st_mode))


def _sync_folder(folder: Path) -> None:
    """Make the rename durable; best effort (not every file system can fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
