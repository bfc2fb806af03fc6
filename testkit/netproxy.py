"""A userspace TCP proxy between Kafka clients and the broker, for network faults.

The local broker has a second listener that advertises the proxy's port (infra/kafka/config.py,
`proxied_port` / `proxy_port`), so a client bootstrapped through the proxy makes every later
connection through it too, while the harness itself reads the topics directly.

Faults, each healed by `heal()`:
- `cut()`: every open connection is reset and new ones are reset on accept (a partition that
  clients see at once);
- `stall()`: connections stay open but no byte moves either way (a hung link that clients
  only notice by their own timeouts); bytes are held, not dropped, so healing a stall resumes
  the streams intact. A stall followed by `cut()` is a hung link that finally dies;
- `delay(seconds)`: every chunk is forwarded that much later (a slow link).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class NetProxy:
    listen_port: int
    upstream_port: int
    host: str = "127.0.0.1"
    _loop: asyncio.AbstractEventLoop = field(init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _server: asyncio.Server | None = field(default=None, init=False, repr=False)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set, init=False, repr=False)
    _flowing: asyncio.Event = field(init=False, repr=False)
    _refusing: bool = field(default=False, init=False)
    _delay_s: float = field(default=0.0, init=False)
    connections: int = field(default=0, init=False)
    """Connections accepted so far (a test sees that clients really came through here)."""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.listen_port}"

    def start(self) -> NetProxy:
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self._open())
            except BaseException as e:  # reported to the caller below
                failure.append(e)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="netproxy", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise RuntimeError(f"netproxy cannot listen on {self.address}: {failure[0]}")
        return self

    async def _open(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, self.host, self.listen_port)

    def stop(self) -> None:
        if self._thread is None:
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            self._reset_all()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._thread = None

    # -- faults -------------------------------------------------------------------------------

    def cut(self) -> None:
        self._call(self._cut)

    def stall(self) -> None:
        self._call(self._flowing.clear)

    def delay(self, seconds: float) -> None:
        def set_delay() -> None:
            self._delay_s = seconds

        self._call(set_delay)

    def heal(self) -> None:
        def heal() -> None:
            self._refusing = False
            self._delay_s = 0.0
            self._flowing.set()

        self._call(heal)

    def _call(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the proxy's loop (its state is only touched there) and wait for it."""

        async def run() -> None:
            fn()

        asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def _cut(self) -> None:
        self._refusing = True
        self._reset_all()

    def _reset_all(self) -> None:
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    # -- forwarding ---------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        self._writers |= {writer, up_writer}
        await asyncio.gather(
            self._pump(reader, up_writer, writer), self._pump(up_reader, writer, up_writer)
        )

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, src_writer: asyncio.StreamWriter
    ) -> None:
        """One direction: a reader stamps each chunk with the time it may leave, a sender
        forwards in order once that time has come and the link flows (latency, not a throttle)."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def send() -> None:
            try:
                while True:
                    leave_at, data = await queue.get()
                    if not data:
                        return
                    await asyncio.sleep(max(0.0, leave_at - loop.time()))
                    await self._flowing.wait()
                    if dst.transport.is_closing():
                        break
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            src_writer.transport.abort()  # the far side is gone: end the reading side too

        sender = asyncio.create_task(send())
        try:
            while data := await src.read(65536):
                queue.put_nowait((loop.time() + self._delay_s, data))
            queue.put_nowait((0.0, b""))
            await sender
        except (ConnectionError, OSError):
            pass
        finally:
            sender.cancel()
            for w in (dst, src_writer):
                self._writers.discard(w)
                with contextlib.suppress(Exception):
                    w.transport.abort()
