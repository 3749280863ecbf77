"""Slow HTTP clients, for the broker's HTTP servers (broker/http_site.py: the admin
endpoint and the schema registry): one that sends its headers a byte a second, one
whose body stops arriving."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable


def trickle_headers_while(address: tuple[str, int], request: bytes,
                          serve_others: Callable[[], None]) -> tuple[bool, int]:
    """Send `request` a byte a second on one connection while `serve_others()` runs again
    and again on others. Returns whether the server closed the slow connection before
    the last byte, and how many times `serve_others` ran meanwhile."""
    closed = threading.Event()
    sent: list[int] = []

    def trickle() -> None:
        with socket.create_connection(address, timeout=60) as sock:
            try:
                for byte in request:
                    sock.sendall(bytes([byte]))
                    sent.append(byte)
                    time.sleep(1)
                    sock.setblocking(False)
                    try:
                        if sock.recv(1) == b"":
                            closed.set()
                            return
                    except BlockingIOError:
                        pass
                    finally:
                        sock.setblocking(True)
            except (BrokenPipeError, ConnectionResetError):
                closed.set()

    slow = threading.Thread(target=trickle)
    slow.start()
    served = 0
    while slow.is_alive():
        serve_others()
        served += 1
        slow.join(0.5)
    return closed.is_set() and len(sent) < len(request), served


def send_part_of_a_body(address: tuple[str, int], head_and_part: bytes) -> bytes:
    """Send a request whose Content-Length promises more than follows, and read the
    answer until the server closes."""
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(head_and_part)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer
