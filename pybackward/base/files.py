"""Reading input files and writing output files: the one discipline every file goes through.

Inputs are read only from regular files (a FIFO, a device or a socket is
refused without blocking on it), up to a size limit checked before reading.
Outputs are written atomically: a temporary file in the target directory,
flushed and fsynced, then renamed over the target, so the path holds the old
file or the complete new one and never a partial one. Both IRs and Paddle's
tensor files use these.
"""
from __future__ import annotations

import os
import stat
import tempfile
from typing import Union

from .errors import ArgumentError, ArgumentTypeError, OutputError

PathLike = Union[str, os.PathLike]

def input_source(source: "PathLike | bytes", text: bool | None = None, fn: str = "load") -> "str | bytes":
    """What a loader was given, type-checked: the bytes, or the path as a str.

    `text` (the loader's text-format switch) must be True, False or None."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if not isinstance(source, (str, os.PathLike)):
        raise ArgumentTypeError(f"{fn}() takes a path (str or os.PathLike) or bytes, not {type(source).__name__}")
    if text is not None and not isinstance(text, bool):
        raise ArgumentTypeError(f"{fn}(text=...) takes True, False or None, not {type(text).__name__}")
    name = os.fspath(source)
    if not isinstance(name, str):
        raise ArgumentTypeError(f"{fn}() takes a str path, not a {type(name).__name__} path")
    return name


#: The default input limit: protobuf's 2 GiB message limit, the largest file any reader here takes.
MAX_INPUT_BYTES = 2**31 - 1


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "not a regular file"


def check_regular_input(path: PathLike, error: type = ArgumentError, what: str = "file") -> int:
    """Refuse anything but a regular file (by `os.stat`, which never blocks);
    returns its size. A directory, FIFO, device or socket raises `error`."""
    name = os.fspath(path)
    if not name:
        raise error("an empty path names no file")
    try:
        st = os.stat(name)
    except FileNotFoundError:
        raise error(f"{name}: no such file") from None
    except OSError as e:
        raise error(f"{name}: cannot read: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{name}: is a directory, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{name}: is {_kind(st.st_mode)}, not a regular file: pybackward reads a {what} "
                    "only from a regular file")
    return st.st_size


#: Files from this size on are read into one buffer (`read_input_file`).
ONE_BUFFER_FROM = 1 << 30


def read_input_file(path: PathLike, error: type = ArgumentError, what: str = "file",
                    limit: int = MAX_INPUT_BYTES, too_big: str | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else
    raises `error` naming the file (`too_big`: the message for a file past
    the limit, after the file's name and size).

    The kind is checked before opening and again on the open descriptor, which
    is opened with O_NONBLOCK, so a FIFO with no writer never blocks and a
    device such as /dev/zero is never read from.
    """
    name = os.fspath(path)
    size = check_regular_input(name, error, what)
    if size > limit:
        raise error(f"{name}: {size} bytes {too_big or f'is past the limit of {limit}'}")
    fd, st = _open_regular(name, error)
    try:
        if st.st_size >= ONE_BUFFER_FROM:
            # One buffer of the file's size, filled in place: reads of at most 2 GiB
            # (Linux's limit for one read) joined would hold the file twice.
            with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
                data = f.readall()
            if len(data) > limit:
                raise error(f"{name}: more than {limit} bytes (the file grew while it was read)")
            return data
        chunks, total = [], 0
        want = st.st_size + 1                    # one byte more: did the file grow?
        while True:
            chunk = os.read(fd, max(1, min(max(want, 1 << 16), limit + 1 - total)))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            want = 1 << 20
            if total > limit:
                raise error(f"{name}: more than {limit} bytes (the file grew while it was read)")
        return b"".join(chunks)
    except OSError as e:
        raise error(f"{name}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)


def read_input_head(path: PathLike, n: int, error: type = ArgumentError, what: str = "file") -> bytes:
    """The first `n` bytes (fewer if the file is shorter) of a regular file,
    checked as `read_input_file` checks it (a FIFO never blocks, a device is
    never read): what a reader sniffs a format from before reading it all."""
    name = os.fspath(path)
    check_regular_input(name, error, what)
    fd, _ = _open_regular(name, error)
    try:
        chunks, total = [], 0
        while total < n:
            chunk = os.read(fd, n - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise error(f"{name}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _open_regular(name: str, error: type) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file `name`, opened with O_NONBLOCK and its kind
    checked again on the descriptor (the path may have been replaced since the stat)."""
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise error(f"{name}: cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise error(f"{name}: cannot read: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise error(f"{name}: is {_kind(st.st_mode)}, not a regular file")
    return fd, st


#: Temporary files are `.pybackward-<8 random chars>.tmp` beside the target.
#: The name does not grow with the target's, so every valid output name works.
TEMP_PREFIX, TEMP_SUFFIX = ".pybackward-", ".tmp"


def write_atomic(path: PathLike, data: bytes | list[bytes]) -> None:
    """Write bytes (or a list of pieces, in order) to `path` so that it never holds a partial file.

    A unique temporary file in the target's directory is written, fsynced and
    renamed over the target, so concurrent writers never share a file and
    nothing but the target is ever touched. A symlink is written through (the
    link stays); a character device or FIFO (/dev/null, a pipe) cannot be
    replaced, so it is written to directly, as a shell redirection would. A
    name ending in '/', a directory, a missing directory or any OSError raise
    OutputError naming the path.
    """
    name = os.fspath(path)
    if not isinstance(name, str):
        raise ArgumentTypeError(f"an output path must be a str, not {type(name).__name__}")
    if not name:
        raise OutputError("an empty output path names no file")
    if name.endswith("/") or name.endswith(os.sep) or (os.altsep and name.endswith(os.altsep)):
        raise OutputError(f"{name}: names a directory (it ends with '{name[-1]}'): give the output "
                          "file's name")
    if os.path.islink(name):
        name = os.path.realpath(name)
    try:
        st = os.stat(name)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(f"{name}: cannot write: {e.strerror or e}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{name}: is a directory: give the output file's name")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            _write_through(name, data)
            return
        raise OutputError(f"{name}: is {_kind(st.st_mode)}, not a regular file")
    directory = os.path.dirname(name) or "."
    if not os.path.isdir(directory):
        raise OutputError(f"{name}: cannot write: the directory '{directory}' does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=directory)
    except OSError as e:
        raise OutputError(f"{name}: cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            _write(f, data)
            f.flush()
            os.fsync(f.fileno())
        if st is not None:
            try:
                os.chmod(tmp, st.st_mode & 0o7777)
            except OSError:
                pass
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, name)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise OutputError(f"{name}: cannot write: {e.strerror or e}") from None
        raise


def _write(f, data: bytes | list[bytes]) -> None:
    for piece in ([data] if isinstance(data, bytes) else data):
        f.write(piece)


def _write_through(name: str, data: bytes | list[bytes]) -> None:
    try:
        with open(name, "wb") as f:
            _write(f, data)
    except OSError as e:
        raise OutputError(f"{name}: cannot write: {e.strerror or e}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
