"""A pickle machine for files that are not trusted.

Python's unpickler trusts a file with its memory and its C stack even when
every global is refused: a memo id of 2^30 sizes a 16 GiB table, and a tuple
nested a million deep, used as a dict key, overflows the stack when it is
hashed. `Machine` runs the pickle opcodes of protocols 0 to 5 itself, with
every cost bounded as the opcodes are read:

* **Time linear in the file.** Each opcode does a constant amount of work
  plus work in proportion to the bytes it carries; no value is ever walked.
* **Memory bounded by the file.** The memo holds ids 0, 1, 2, ... (what a
  pickler writes) in a list and any other id in a dict, so an id costs one
  entry whatever its value. Containers nest at most `MAX_DEPTH` deep, and
  the depth stays true because a container, once inside another, cannot
  change (a pickler fills a container before anything refers to it), which
  also rules out a structure that holds itself. Sets, and whatever the
  `Policy` makes (`Machine.charge`), draw on a budget of twice the file, so
  a DAG of shared references cannot multiply what the file holds.
* **No hash the file can choose, many times.** Dict keys and set items are
  names (str, bytes: hashed with Python's per-process random key) or at most
  `MAX_FIXED_HASH_KEYS` numbers per file (whose hashes a file could make
  collide, for quadratic inserts); anything else (a tuple) is refused.
* **Messages are bounded.** `describe` shows a value by its kind and length,
  never by walking it; long text is cut.

The machine knows no global. What GLOBAL / STACK_GLOBAL name, what REDUCE
calls and what BUILD fills is up to a `Policy`; every opcode that would build
an arbitrary object (INST, OBJ, NEWOBJ, NEWOBJ_EX), a persistent id, an
extension code or an out-of-band buffer is refused. `safe_pickle` is the
policy for numpy's arrays.
"""
from __future__ import annotations

import codecs
import struct
from typing import Any, Protocol

#: How deep containers may nest (Paddle's files nest 4 or 5 levels: dict, array
#: state, shape; a dygraph file's dict of dicts of lists).
MAX_DEPTH = 100
#: How many dict keys or set items per file may be numbers (int, float, bool, None).
MAX_FIXED_HASH_KEYS = 1000
#: What a set costs against the budget: an empty one takes 216 bytes for one byte of file.
SET_COST = 256


class Refused(Exception):
    """Something the pickle asks for that this reader will not do."""


class Malformed(Exception):
    """Bytes that are not a pickle this reader can follow."""


class Opaque:
    """A value a `Policy` makes; `described` is how a message shows it."""

    __slots__ = ()

    def described(self) -> str:
        return "an object"


class Policy(Protocol):
    """What a global is, what calling one makes, and what BUILD may fill."""

    def find(self, module: str, name: str) -> Any: ...        # raises Refused
    def call(self, func: Any, args: tuple, machine: "Machine") -> Any: ...
    def build(self, target: Any, state: Any, machine: "Machine") -> None: ...


# --------------------------------------------------------------------------
# What a value looks like in a message: bounded, never recursive
# --------------------------------------------------------------------------
_KIND_NAMES = {tuple: "tuple", list: "list", dict: "dict", set: "set", frozenset: "frozenset"}


def describe(value: Any, width: int = 40) -> str:
    """A short text for `value` in a message: scalars as they are (long text
    and bytes cut after `width` characters, huge ints by their size), a
    container by its kind and length (a short tuple of scalars by its items),
    anything else by its kind. Its length is bounded whatever the value."""
    kind = type(value)
    if value is None or kind is bool or kind is float:
        return repr(value)
    if kind is int:
        return repr(value) if -10**30 < value < 10**30 else f"an int of {value.bit_length()} bits"
    if kind in (str, bytes, bytearray):
        return repr(value[:width]) + (f"... ({len(value)} long)" if len(value) > width else "")
    if kind is tuple and len(value) <= 8 and all(type(v) not in _KIND_NAMES for v in value):
        return "(" + ", ".join(describe(v, 12) for v in value) + ("," if len(value) == 1 else "") + ")"
    if kind in _KIND_NAMES:
        return f"a {_KIND_NAMES[kind]} of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, Opaque):
        return value.described()[:200]
    return "an object"


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------
_CONTAINERS = (tuple, list, dict, set, frozenset)
_NAME_KEYS = (str, bytes)                     # hashed with the per-process random key
_NUMBER_KEYS = (int, float, bool, type(None))  # hashes the file could choose
_I32, _U16, _U32, _U64, _F64 = (struct.Struct(f) for f in ("<i", "<H", "<I", "<Q", ">d"))


class Machine:
    """Runs one pickle (`run`): a stack, a memo, and the checks that bound them."""

    def __init__(self, data: bytes, policy: Policy):
        self.data = data
        self.policy = policy
        self.pos = 0
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo_list: list[Any] = []        # ids 0, 1, 2, ...
        self.memo_dict: dict[int, Any] = {}   # any other id
        # Depth of the containers that hold containers (by id; others are 1), and the
        # mutable ones already inside another. Reset when a new container takes an id.
        self.depth: dict[int, int] = {}
        self.nested: set[int] = set()
        self.budget = 2 * len(data) + (1 << 16)
        self.number_keys = 0

    def run(self) -> Any:
        """The object the pickle makes (its STOP's value)."""
        data, ops = self.data, _OPS
        while True:
            if self.pos >= len(data):
                raise Malformed("the file ends before the pickle's STOP: truncated?")
            code = data[self.pos]
            self.pos += 1
            op = ops.get(code)
            if op is None:
                raise Malformed(f"unknown opcode 0x{code:02x} at byte {self.pos - 1}")
            if op is _stop:
                return self.pop()
            op(self)

    def charge(self, n: int) -> None:
        """Take `n` bytes from the budget of what the file may make (twice its size)."""
        self.budget -= n
        if self.budget < 0:
            raise Refused("its arrays, strings and sets take more memory than twice the file "
                          "(shared data used over and over?)")

    # -- reading the file ---------------------------------------------------
    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise Malformed("the file ends inside an opcode: truncated?")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def line(self) -> bytes:
        end = self.data.find(b"\n", self.pos)
        if end < 0:
            raise Malformed("the file ends inside an opcode: truncated?")
        out = self.data[self.pos:end]
        self.pos = end + 1
        return out

    # -- the stack ----------------------------------------------------------
    def pop(self) -> Any:
        if not self.stack or (self.marks and len(self.stack) <= self.marks[-1]):
            raise Malformed("an opcode takes a value from an empty stack")
        return self.stack.pop()

    def top(self) -> Any:
        if not self.stack or (self.marks and len(self.stack) <= self.marks[-1]):
            raise Malformed("an opcode takes a value from an empty stack")
        return self.stack[-1]

    def pop_mark(self) -> list[Any]:
        if not self.marks:
            raise Malformed("an opcode needs a MARK that is not there")
        at = self.marks.pop()
        items = self.stack[at:]
        del self.stack[at:]
        return items

    # -- containers ---------------------------------------------------------
    def made(self, container: Any, items: Any) -> Any:
        """Record a new container holding `items` (its depth; they are now nested)."""
        key = id(container)
        self.nested.discard(key)        # the id may be one a container that is gone had
        depth = self._holding(container, 1, items)
        if depth > 1:
            self.depth[key] = depth
        else:
            self.depth.pop(key, None)
        return container

    def _holding(self, container: Any, depth: int, items: Any) -> int:
        """The depth `container` has once it holds `items` too; marks them nested."""
        get = self.depth.get
        for item in items:
            if type(item) in _CONTAINERS:
                if item is container:
                    raise Refused("a container that holds itself (a cycle; Paddle's files have none)")
                d = get(id(item), 1) + 1
                if d > depth:
                    depth = d
                self.nested.add(id(item))
        if depth > MAX_DEPTH:
            raise Refused(f"containers nested more than {MAX_DEPTH} deep (Paddle's files nest a few levels)")
        return depth

    def grow(self, container: Any, kind: type, items: Any) -> None:
        """Check that `items` may go into the mutable `container` (of `kind`) now."""
        if type(container) is not kind:
            raise Malformed(f"an opcode that fills a {kind.__name__} finds {describe(container)}")
        if id(container) in self.nested:
            raise Refused(f"a {kind.__name__} changed after it was put inside another container "
                          "(a pickler never writes that)")
        self.depth[id(container)] = self._holding(container, self.depth.get(id(container), 1), items)

    def key(self, k: Any) -> Any:
        """`k` as a dict key or set item: a name, or one of a few numbers per file."""
        kind = type(k)
        if kind in _NAME_KEYS:
            return k
        if kind in _NUMBER_KEYS:
            self.number_keys += 1
            if self.number_keys > MAX_FIXED_HASH_KEYS:
                raise Refused(f"more than {MAX_FIXED_HASH_KEYS} dict keys or set items that are numbers "
                              "(a parameter file's keys are names)")
            return k
        raise Refused(f"a dict key or set item that is {describe(k)}: only names and numbers are read")

    def set_items(self, target: Any, pairs: list[Any]) -> None:
        if len(pairs) % 2:
            raise Malformed("SETITEMS with an odd number of values")
        self.grow(target, dict, pairs[1::2])
        for i in range(0, len(pairs), 2):
            target[self.key(pairs[i])] = pairs[i + 1]

    # -- the memo -----------------------------------------------------------
    def memo_get(self, key: int) -> None:
        if 0 <= key < len(self.memo_list):
            self.stack.append(self.memo_list[key])
        elif key in self.memo_dict:
            self.stack.append(self.memo_dict[key])
        else:
            raise Malformed(f"memo id {describe(key)} is used before it is set")

    def memo_put(self, key: int) -> None:
        value, dense = self.top(), self.memo_list
        if 0 <= key < len(dense):
            dense[key] = value
        elif key == len(dense):
            dense.append(value)
            self.memo_dict.pop(key, None)
        else:
            self.memo_dict[key] = value


# --------------------------------------------------------------------------
# The opcodes
# --------------------------------------------------------------------------
def _stop(m: Machine) -> None:   # handled in the loop
    raise AssertionError


def _push(value_of):
    def op(m: Machine) -> None:
        m.stack.append(value_of(m))
    return op


def _int_line(m: Machine) -> int:
    text = m.line()
    if text == b"00":
        return False
    if text == b"01":
        return True
    return int(text[:-1] if text.endswith(b"L") else text, 0)


def _string(m: Machine) -> str:
    line = m.line()
    if len(line) < 2 or line[:1] != line[-1:] or line[:1] not in (b"'", b'"'):
        raise Malformed("a STRING opcode whose text is not quoted")
    return codecs.escape_decode(line[1:-1])[0].decode("ascii")


def _sized(m: Machine, size: struct.Struct) -> bytes:
    (n,) = size.unpack(m.take(size.size))
    return m.take(n)


def _long1(m: Machine) -> int:
    return int.from_bytes(m.take(m.take(1)[0]), "little", signed=True)


def _long4(m: Machine) -> int:
    (n,) = _I32.unpack(m.take(4))
    if n < 0:
        raise Malformed("LONG4 with a negative size")
    return int.from_bytes(m.take(n), "little", signed=True)


def _utf8(b: bytes) -> str:
    return b.decode("utf-8", "surrogatepass")


def _ascii(b: bytes) -> str:
    return b.decode("ascii")


def _pop(m: Machine) -> None:
    if m.stack and (not m.marks or len(m.stack) > m.marks[-1]):
        m.stack.pop()
    else:
        m.pop_mark()


def _tuple_n(n: int):
    def op(m: Machine) -> None:
        t = tuple([m.pop() for _ in range(n)][::-1])
        m.stack.append(m.made(t, t))
    return op


def _tuple(m: Machine) -> None:
    t = tuple(m.pop_mark())
    m.stack.append(m.made(t, t))


def _list(m: Machine) -> None:
    items = m.pop_mark()
    m.stack.append(m.made(items, items))


def _dict(m: Machine) -> None:
    pairs = m.pop_mark()
    d: dict = m.made({}, ())
    m.set_items(d, pairs)
    m.stack.append(d)


def _empty(kind: type):
    def op(m: Machine) -> None:
        m.stack.append(m.made(kind(), ()))
    return op


def _empty_set(m: Machine) -> None:
    m.charge(SET_COST)
    m.stack.append(m.made(set(), ()))


def _append(m: Machine) -> None:
    item = m.pop()
    target = m.top()
    m.grow(target, list, (item,))
    target.append(item)


def _appends(m: Machine) -> None:
    items = m.pop_mark()
    target = m.top()
    m.grow(target, list, items)
    target.extend(items)


def _setitem(m: Machine) -> None:
    value = m.pop()
    key = m.pop()
    m.set_items(m.top(), [key, value])


def _setitems(m: Machine) -> None:
    pairs = m.pop_mark()
    m.set_items(m.top(), pairs)


def _additems(m: Machine) -> None:
    items = m.pop_mark()
    target = m.top()
    m.grow(target, set, ())
    target.update(m.key(k) for k in items)


def _frozenset(m: Machine) -> None:
    m.charge(SET_COST)
    items = frozenset(m.key(k) for k in m.pop_mark())
    m.stack.append(m.made(items, ()))


def _global(m: Machine, module: Any, name: Any) -> None:
    if type(module) is not str or type(name) is not str:
        raise Malformed("STACK_GLOBAL of names that are not text")
    m.stack.append(m.policy.find(module, name))


def _inst(m: Machine) -> None:
    module, name = _utf8(m.line()), _utf8(m.line())
    m.policy.find(module, name)         # refuses a global the policy does not know, by its name
    raise Refused(f"it builds an object of {describe(module + '.' + name, 80)} with INST")


def _reduce(m: Machine) -> None:
    args = m.pop()
    func = m.pop()
    if type(args) is not tuple:
        raise Malformed("REDUCE with arguments that are not a tuple")
    m.stack.append(m.policy.call(func, args, m))


def _build(m: Machine) -> None:
    state = m.pop()
    m.policy.build(m.top(), state, m)


def _refuse(why: str):
    def op(m: Machine) -> None:
        raise Refused(why)
    return op


def _proto(m: Machine) -> None:
    version = m.take(1)[0]
    if version > 5:
        raise Malformed(f"pickle protocol {version} (this reader knows 0 to 5)")


def _frame(m: Machine) -> None:
    (n,) = _U64.unpack(m.take(8))
    if n > len(m.data) - m.pos:
        raise Malformed("a frame longer than the rest of the file: truncated?")


_PERSISTENT = "it uses a persistent id (a torch-style or custom pickle, not Paddle's)"
_EXTENSION = "it uses an extension code (copyreg), which a numpy array never does"
_BUFFER = "it uses an out-of-band buffer (protocol 5), which a file cannot carry"

_OPS: dict[int, Any] = {ord(k): v for k, v in {
    ".": _stop,
    "(": lambda m: m.marks.append(len(m.stack)),
    "0": _pop,
    "1": lambda m: m.pop_mark(),
    "2": lambda m: m.stack.append(m.top()),
    "\x80": _proto,
    "\x95": _frame,
    # numbers
    "F": _push(lambda m: float(m.line())),
    "G": _push(lambda m: _F64.unpack(m.take(8))[0]),
    "I": _push(_int_line),
    "L": _push(_int_line),
    "J": _push(lambda m: _I32.unpack(m.take(4))[0]),
    "K": _push(lambda m: m.take(1)[0]),
    "M": _push(lambda m: _U16.unpack(m.take(2))[0]),
    "\x8a": _push(_long1),
    "\x8b": _push(_long4),
    "N": _push(lambda m: None),
    "\x88": _push(lambda m: True),
    "\x89": _push(lambda m: False),
    # text and bytes (8-bit strings of protocols 0-2 as ASCII text, as pickle's default)
    "S": _push(_string),
    "V": _push(lambda m: m.line().decode("raw-unicode-escape")),
    "T": _push(lambda m: _ascii(_sized(m, _I32))),
    "U": _push(lambda m: _ascii(m.take(m.take(1)[0]))),
    "X": _push(lambda m: _utf8(_sized(m, _U32))),
    "\x8c": _push(lambda m: _utf8(m.take(m.take(1)[0]))),
    "\x8d": _push(lambda m: _utf8(_sized(m, _U64))),
    "B": _push(lambda m: _sized(m, _U32)),
    "C": _push(lambda m: m.take(m.take(1)[0])),
    "\x8e": _push(lambda m: _sized(m, _U64)),
    "\x96": _push(lambda m: bytearray(_sized(m, _U64))),
    # containers
    ")": _empty(tuple),
    "]": _empty(list),
    "}": _empty(dict),
    "\x8f": _empty_set,
    "\x85": _tuple_n(1),
    "\x86": _tuple_n(2),
    "\x87": _tuple_n(3),
    "t": _tuple,
    "l": _list,
    "d": _dict,
    "a": _append,
    "e": _appends,
    "s": _setitem,
    "u": _setitems,
    "\x90": _additems,
    "\x91": _frozenset,
    # memo
    "g": lambda m: m.memo_get(int(m.line())),
    "h": lambda m: m.memo_get(m.take(1)[0]),
    "j": lambda m: m.memo_get(_U32.unpack(m.take(4))[0]),
    "p": lambda m: m.memo_put(int(m.line())),
    "q": lambda m: m.memo_put(m.take(1)[0]),
    "r": lambda m: m.memo_put(_U32.unpack(m.take(4))[0]),
    "\x94": lambda m: m.memo_put(len(m.memo_list) + len(m.memo_dict)),
    # globals, calls, objects
    "c": lambda m: _global(m, _utf8(m.line()), _utf8(m.line())),
    "\x93": lambda m: _global(m, *reversed([m.pop(), m.pop()])),
    "R": _reduce,
    "b": _build,
    "i": _inst,
    "o": _refuse("it builds an object with OBJ (numpy's arrays never do)"),
    "\x81": _refuse("it builds an object with NEWOBJ (numpy's arrays never do)"),
    "\x92": _refuse("it builds an object with NEWOBJ_EX (numpy's arrays never do)"),
    "P": _refuse(_PERSISTENT),
    "Q": _refuse(_PERSISTENT),
    "\x82": _refuse(_EXTENSION),
    "\x83": _refuse(_EXTENSION),
    "\x84": _refuse(_EXTENSION),
    "\x97": _refuse(_BUFFER),
    "\x98": _refuse(_BUFFER),
}.items()}
