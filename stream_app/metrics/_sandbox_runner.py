"""Runs inside the sandbox (`python -I`): reads {source, entry_point, kwargs} as JSON on stdin,
calls the function, writes one JSON result line. Standard library only; never imported by the
service. Spawning processes, signalling and sockets are refused by an audit hook, so such calls
become a recorded error instead of an escape; resource limits and the network namespace are set
by the parent before this starts."""

from __future__ import annotations

import base64
import io
import json
import math
import sys
from typing import Any

MARKER = "__evalstream_sandbox_result__"
REFUSED = (
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.kill",
    "os.killpg",
    "subprocess.Popen",
    "pty.spawn",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.getaddrinfo",
    "ctypes.dlopen",
)


def refuse(event: str, _args: tuple[Any, ...]) -> None:
    if event.startswith(REFUSED):
        raise PermissionError(f"sandbox: {event} is not allowed")


def encode(value: Any, depth: int = 0) -> Any:
    """JSON with tags for what JSON cannot say (tuples, sets, bytes, non-finite floats)."""
    if depth > 100:
        raise ValueError("output nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, (list, tuple)):
        items = [encode(v, depth + 1) for v in value]
        return items if isinstance(value, list) else {"__tuple__": items}
    if isinstance(value, (set, frozenset)):
        return {"__set__": [encode(v, depth + 1) for v in value]}
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        return {
            "__dict__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]
        }
    kind = type(value).__name__
    if kind == "DataFrame" and hasattr(value, "to_dict"):
        return {"__dataframe__": encode(value.to_dict(orient="split"), depth + 1)}
    if kind == "Series" and hasattr(value, "to_dict"):
        return {"__series__": encode({"index": list(value.index), "data": list(value)}, depth + 1)}
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return encode(value.tolist(), depth + 1)
    raise TypeError(f"output of type {kind} cannot leave the sandbox")


def main() -> None:
    real_stdout = sys.stdout
    payload = json.loads(sys.stdin.buffer.read())
    sys.stdout = io.StringIO()  # the function's prints must not mix with the result
    try:
        code = compile(payload["source"], "<generated>", "exec")
        sys.addaudithook(refuse)
        namespace: dict[str, Any] = {"__name__": "__sandbox__"}
        exec(code, namespace)
        function = namespace[payload["entry_point"]]
        value = function(**payload["kwargs"])
        result: dict[str, Any] = {"ok": True, "value": encode(value)}
    except BaseException as exc:  # everything the code can do wrong is a result
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    real_stdout.write(MARKER + json.dumps(result) + "\n")
    real_stdout.flush()


if __name__ == "__main__":
    main()
