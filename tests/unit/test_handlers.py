"""The invariant that lets a connection serve most requests straight from data_received:
only the handlers of MAY_WAIT ever wait on anything."""

from __future__ import annotations

import ast
import inspect
import textwrap

from ottla.broker.handlers import HANDLERS, MAY_WAIT


def _waits(handler: object) -> bool:
    tree = ast.parse(textwrap.dedent(inspect.getsource(handler)))  # type: ignore[arg-type]
    return any(isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)) for node in ast.walk(tree))


def test_only_the_handlers_marked_may_wait_wait() -> None:
    waiting = {api_key for api_key, handler in HANDLERS.items() if _waits(handler)}
    assert waiting <= MAY_WAIT, f"handlers that wait but are not in MAY_WAIT: {sorted(waiting - MAY_WAIT)}"
    # And MAY_WAIT holds no stale entries: each of them does wait.
    assert waiting == MAY_WAIT
