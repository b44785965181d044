"""A loopback TCP proxy whose link can be cut: closes every connection and refuses new ones until
restored. Runs its own event loop in a thread; stopped by the test that starts it."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from stream_app.ports import free_port


class TcpProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.connections = 0

    def start(self) -> TcpProxy:
        self.thread.start()
        self._call(self._listen())
        return self

    def cut(self) -> None:
        """Drop every connection and stop accepting."""
        self._call(self._cut())

    def restore(self) -> None:
        self._call(self._listen())

    def stop(self) -> None:
        self._call(self._cut())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)  # type: ignore[arg-type]

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True
        )

    async def _cut(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def _handle(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                "127.0.0.1", self.target_port
            )
        except OSError:
            client_writer.transport.abort()
            return
        self.connections += 1
        self.writers |= {client_writer, upstream_writer}

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            writer.transport.abort()

        await asyncio.gather(
            pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer)
        )
        self.writers -= {client_writer, upstream_writer}
