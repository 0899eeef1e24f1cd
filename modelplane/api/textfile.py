"""Read a file a user names (a stack file, a previous placement, a mirrored manifest) without trusting it.

Only a regular file is read (a folder, a FIFO or a device is refused before any read, so `/dev/zero`
cannot stream forever and a FIFO cannot block), at most `limit` bytes, decoded strictly as UTF-8,
and characters YAML and JSON do not allow (NUL and other control characters) are refused. Every
refusal is a ModelplaneError naming the file, and for bad bytes the line, column and byte offset.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import unicodedata
from pathlib import Path

from .errors import ModelplaneError

# YAML 1.1's printable set (what PyYAML accepts): tab, LF, CR, and everything printable.
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def mebibytes(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def read_text(
    path: Path, what: str, limit: int, limit_note: str = "", error: type[ModelplaneError] = ModelplaneError
) -> str:
    """The text of the regular file `path`; `what` names it in errors ("stack file")."""
    return decode_text(read_bytes(path, what, limit, limit_note, error), f"{what} {path}", error)


def read_bytes(
    path: Path, what: str, limit: int, limit_note: str = "", error: type[ModelplaneError] = ModelplaneError
) -> bytes:
    """The bytes of the regular file `path` (at most `limit`; a FIFO, a device or a folder is refused unread)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except OSError as problem:
        raise error(f"cannot read {what} {path}: {problem.strerror or problem}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{what} {path} is a folder; name the file itself")
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {path} is not a regular file (a pipe or a device); name a file")
        if info.st_size > limit:
            raise error(_too_large(path, what, info.st_size, limit, limit_note))
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # the file grew while it was read
            raise error(_too_large(path, what, None, limit, limit_note))
    except OSError as problem:
        raise error(f"cannot read {what} {path}: {problem.strerror or problem}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _too_large(path: Path, what: str, size: int | None, limit: int, note: str) -> str:
    how_big = f"{size:,} bytes" if size is not None else f"larger than {limit:,} bytes"
    return f"{what} {path} is {how_big}; the limit is {mebibytes(limit)}" + (f" ({note})" if note else "")


def decode_text(data: bytes, name: str, error: type[ModelplaneError] = ModelplaneError) -> str:
    """Strict UTF-8 (a leading byte-order mark is dropped), with no control characters but tab, LF and CR."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise error(f"{name} is UTF-16 text; save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as problem:
        line, column = position(data, problem.start)
        raise error(
            f"{name} is not UTF-8 text: byte 0x{data[problem.start]:02x} at line {line}, column {column} "
            f"(byte offset {problem.start}) {problem.reason}; save the file as UTF-8"
        ) from None
    if (bad := _NOT_PRINTABLE.search(text)) is not None:
        offset = len(text[: bad.start()].encode("utf-8")) + (3 if data.startswith(codecs.BOM_UTF8) else 0)
        line, column = position(data, offset)
        raise error(
            f"{name} contains the control character {character_name(bad.group())} at line {line}, "
            f"column {column} (byte offset {offset}); remove it (inside double quotes, write an escape "
            f"such as \\t instead)"
        )
    return text


def position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of a byte offset."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def character_name(char: str) -> str:
    name = unicodedata.name(char, "") or {"\x00": "NUL", "\x7f": "DEL", "\x1b": "ESC"}.get(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")
