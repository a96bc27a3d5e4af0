"""Listening TCP sockets of a process tree, read from /proc (Linux; no psutil needed).

Used by the Ctrl-C drill (tests/test_fault_drill.py): which addresses a local sweep's Ray
processes listen on.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

LISTEN = "0A"  # TCP state code of a listening socket in /proc/net/tcp*


def _decode(address: str, family: int) -> tuple[str, int]:
    host, port = address.split(":")
    raw = bytes.fromhex(host)
    if family == socket.AF_INET:
        ip = socket.inet_ntop(family, struct.pack("<I", struct.unpack(">I", raw)[0]))
    else:  # four little-endian 32-bit words
        words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
        ip = socket.inet_ntop(family, b"".join(words))
    return ip, int(port, 16)


def _listening_inodes() -> dict[str, tuple[str, int]]:
    found: dict[str, tuple[str, int]] = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        table = Path("/proc/net") / name
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == LISTEN:
                found[parts[9]] = _decode(parts[1], family)
    return found


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children.get(current, []))
    return out


def listening_sockets(root_pid: int) -> set[tuple[str, str, int]]:
    """``{(process name, ip, port)}`` of the TCP sockets that ``root_pid``'s tree listens on."""
    inodes = _listening_inodes()
    result: set[tuple[str, str, int]] = set()
    for pid in descendants(root_pid):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        for link in links:
            if link.startswith("socket:[") and link[8:-1] in inodes:
                ip, port = inodes[link[8:-1]]
                result.add((name, ip, port))
    return result


def is_loopback(ip: str) -> bool:
    return ip.startswith("127.") or ip == "::1"
