"""The functions a shared library exports, read from its ELF dynamic symbol table (what
``nm -D --defined-only`` lists), without a dependency.

HAMi-core enforces only what its wrappers intercept, and a build without them exported
(``-DCMAKE_BUILD_TYPE=Release`` compiles with ``-fvisibility=hidden``) loads, logs and
enforces nothing. So the agent reads the symbols before it hands the library to any
container (:mod:`vgpu_nodeagent.isolation.hami_library`).

The file is the node's, possibly damaged or not a library at all: every offset is checked
against the file's size, and anything unreadable is a :class:`ElfError` that says what,
never an ``IndexError`` or a ``struct.error``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from vgpu.errors import LibraryError

ELF_MAGIC = b"\x7fELF"
_CLASS_64 = 2
_DATA = {1: "<", 2: ">"}
ET_DYN = 3
SHT_DYNSYM = 11
_SHN_UNDEF = 0
_STB_GLOBAL, _STB_WEAK = 1, 2
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_STV_DEFAULT, _STV_PROTECTED = 0, 3
_SYM_SIZE = 24
_SECTION_SIZE = 64
#: ``e_machine`` of the architectures vgpu's image is built for.
MACHINES = {"x86_64": 62, "aarch64": 183}


class ElfError(LibraryError):
    """The file is not a 64-bit ELF shared object this reader can read."""


@dataclass(frozen=True)
class SharedObject:
    machine: int
    #: Functions it defines and exports (global or weak, default or protected visibility).
    exported: frozenset[str]


def _unpack(fmt: str, data: bytes, offset: int, what: str) -> tuple[int, ...]:
    size = struct.calcsize(fmt)
    if offset < 0 or offset + size > len(data):
        raise ElfError(f"truncated: {what} at byte {offset} is past the end of the file "
                       f"({len(data)} bytes)")
    return struct.unpack_from(fmt, data, offset)


def _name(strings: bytes, offset: int) -> str:
    end = strings.find(b"\0", offset)
    if offset >= len(strings) or end < 0:
        raise ElfError(f"a symbol's name at {offset} is outside its string table")
    return strings[offset:end].decode("ascii", "replace")


def read(data: bytes) -> SharedObject:
    """The exported functions of the shared object ``data``; raises :class:`ElfError`."""
    if data[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    if len(data) < 64 or data[4] != _CLASS_64:
        raise ElfError("not a 64-bit ELF file")
    order = _DATA.get(data[5])
    if order is None:
        raise ElfError(f"unknown byte order {data[5]}")
    e_type, machine = _unpack(f"{order}HH", data, 16, "the header")
    if e_type != ET_DYN:
        raise ElfError(f"ELF type {e_type} is not a shared object ({ET_DYN})")
    (shoff,) = _unpack(f"{order}Q", data, 40, "the header")
    shentsize, shnum = _unpack(f"{order}HH", data, 58, "the header")
    if shnum == 0 or shentsize < _SECTION_SIZE:
        raise ElfError("no section headers (stripped with sstrip?): the dynamic symbols "
                       "cannot be found")
    sections = [_unpack(f"{order}IIQQQQIIQQ", data, shoff + i * shentsize, f"section {i}")
                for i in range(shnum)]
    tables = [s for s in sections if s[1] == SHT_DYNSYM]
    if not tables:
        raise ElfError("no dynamic symbol table: it exports nothing")
    exported: set[str] = set()
    for table in tables:
        exported.update(_exported(data, order, sections, table))
    return SharedObject(machine, frozenset(exported))


def _exported(data: bytes, order: str, sections: list[tuple[int, ...]],
              table: tuple[int, ...]) -> set[str]:
    """The exported functions of one dynamic symbol table (a section header's fields)."""
    offset, size, link, entsize = table[4], table[5], table[6], table[9]
    if link >= len(sections):
        raise ElfError(f"the dynamic symbols name string table {link}, which is missing")
    strings_at, strings_size = sections[link][4], sections[link][5]
    if strings_at + strings_size > len(data):
        raise ElfError("the dynamic string table is past the end of the file")
    strings = data[strings_at:strings_at + strings_size]
    step = entsize or _SYM_SIZE
    if step < _SYM_SIZE:
        raise ElfError(f"dynamic symbol entries of {step} bytes (expected {_SYM_SIZE})")
    out: set[str] = set()
    for at in range(offset, offset + size - step + 1, step):
        name_at, info, other, shndx, _value, _size = _unpack(
            f"{order}IBBHQQ", data, at, "a dynamic symbol")
        bind, kind = info >> 4, info & 0xF
        if (shndx != _SHN_UNDEF and bind in (_STB_GLOBAL, _STB_WEAK)
                and kind in (_STT_FUNC, _STT_GNU_IFUNC)
                and other & 3 in (_STV_DEFAULT, _STV_PROTECTED)):
            out.add(_name(strings, name_at))
    return out
