"""The bench's Python clients of a kernel, in plain blocking receive loops (no event loop).

- `zmq CONNECTION_FILE`: pyzmq straight to the kernel, the fastest floor. It signs what it sends (the
  kernel checks) and checks no signature of what it receives.
- `ws URL FRAMING`: websocket-client (Debian's python3-websocket) through a server's
  /api/kernels/{id}/channels, in the `legacy` or `v1` framing: the same client over a server, neutral
  between them (nothing of either server's code).

Both parse the header, parent_header and content of every message they read, as every client of the
bench does. Commands arrive on stdin, one JSON object a line; each is answered with one JSON object a
line on stdout. `npm run bench` (kernel-gateway/src/bench/python-client.ts) drives them.
"""

import hashlib
import hmac
import json
import struct
import sys
import time
import urllib.parse
import uuid
from datetime import datetime, timezone

DELIMITER = b"<IDS|MSG>"
V1_SUBPROTOCOL = "v1.kernel.websocket.jupyter.org"


class Message:
    """What the measurements read of a message."""

    __slots__ = ("channel", "msg_type", "parent_id", "content")

    def __init__(self, channel, header, parent, content):
        self.channel = channel
        self.msg_type = header["msg_type"]
        self.parent_id = parent.get("msg_id")
        self.content = content

    @property
    def is_idle(self):
        return self.msg_type == "status" and self.content.get("execution_state") == "idle"


def new_header(msg_type, session):
    return {
        "msg_id": str(uuid.uuid4()),
        "msg_type": msg_type,
        "session": session,
        "username": "bench",
        "date": datetime.now(timezone.utc).isoformat(),
        "version": "5.3",
    }


class Source:
    """One receiver of messages. It remembers the replies and idle statuses it read in passing (a
    websocket carries replies and output together), so that a later wait for them finds them."""

    def __init__(self):
        self.replies = {}
        self.idle = set()

    def read(self, timeout_s=None):
        """The next message, or None when `timeout_s` passes first."""
        message = self._read(timeout_s)
        if message is not None:
            if message.channel != "iopub" and message.msg_type.endswith("_reply"):
                self.replies[message.parent_id] = message
            elif message.is_idle:
                self.idle.add(message.parent_id)
        return message

    def wait(self, msg_id, reply=False, idle=False, on_iopub=None, timeout_s=None):
        """Read until the reply to `msg_id` and/or its idle status were seen; returns the reply.
        Output of `msg_id` read meanwhile goes to `on_iopub`. Raises TimeoutError."""
        until = None if timeout_s is None else time.monotonic() + timeout_s
        got = self.replies.pop(msg_id, None)
        seen_idle = msg_id in self.idle
        self.idle.discard(msg_id)
        while (reply and got is None) or (idle and not seen_idle):
            left = None if until is None else until - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"no answer to {msg_id}")
            message = self.read(left)
            if message is None or message.parent_id != msg_id:
                continue
            if message.channel == "iopub" and on_iopub:
                on_iopub(message)
            if message.channel != "iopub" and message.msg_type.endswith("_reply"):
                got = self.replies.pop(msg_id)
            elif message.is_idle:
                self.idle.discard(msg_id)
                seen_idle = True
        return got

    def close(self):
        pass


class ZmqSource(Source):
    def __init__(self, socket, channel):
        super().__init__()
        self.socket = socket
        self.channel = channel
        self.timeout_s = None

    def _read(self, timeout_s):
        import zmq

        if timeout_s != self.timeout_s:
            self.timeout_s = timeout_s
            self.socket.setsockopt(zmq.RCVTIMEO, -1 if timeout_s is None else int(timeout_s * 1000))
        try:
            frames = self.socket.recv_multipart()
        except zmq.Again:
            return None
        at = frames.index(DELIMITER)
        return Message(
            self.channel,
            json.loads(frames[at + 2]),
            json.loads(frames[at + 3]),
            json.loads(frames[at + 5]),
        )

    def close(self):
        self.socket.close(linger=0)


class ZmqTransport:
    """Straight to the kernel: DEALER sockets for shell and control, SUB sockets for iopub."""

    def __init__(self, connection_file):
        import zmq

        with open(connection_file) as file:
            info = json.load(file)
        self.zmq = zmq
        self.context = zmq.Context()
        self.key = info["key"].encode()
        self.session = str(uuid.uuid4())
        self.url = lambda port: f"{info['transport']}://{info['ip']}:{port}"
        self.iopub_port = info["iopub_port"]
        self.sockets = {
            "shell": self._dealer(info["shell_port"]),
            "control": self._dealer(info["control_port"]),
        }
        # Replies come on the socket of the request.
        self.request_sources = {
            channel: ZmqSource(socket, channel) for channel, socket in self.sockets.items()
        }
        self.main = self.new_listener()

    def _dealer(self, port):
        socket = self.context.socket(self.zmq.DEALER)
        socket.setsockopt(self.zmq.LINGER, 0)
        socket.setsockopt(self.zmq.IDENTITY, self.session.encode())
        socket.connect(self.url(port))
        return socket

    def new_listener(self):
        socket = self.context.socket(self.zmq.SUB)
        socket.setsockopt(self.zmq.LINGER, 0)
        # No receive limit: the I/O thread keeps reading while Python is busy with another socket.
        socket.setsockopt(self.zmq.RCVHWM, 0)
        socket.setsockopt(self.zmq.SUBSCRIBE, b"")
        socket.connect(self.url(self.iopub_port))
        return ZmqSource(socket, "iopub")

    def send(self, channel, msg_type, content):
        header = new_header(msg_type, self.session)
        parts = [json.dumps(header).encode(), b"{}", b"{}", json.dumps(content).encode()]
        signature = hmac.new(self.key, digestmod=hashlib.sha256)
        for part in parts:
            signature.update(part)
        self.sockets[channel].send_multipart([DELIMITER, signature.hexdigest().encode(), *parts])
        return header["msg_id"]

    def collect(self, channel, msg_id, idle=True, on_iopub=None, timeout_s=None):
        """With `idle`, the output of `msg_id` as it comes, up to its idle status; then its reply
        (queued meanwhile on its own socket)."""
        if idle:
            self.main.wait(msg_id, idle=True, on_iopub=on_iopub, timeout_s=timeout_s)
        return self.request_sources[channel].wait(msg_id, reply=True, timeout_s=timeout_s)

    def close(self):
        self.context.destroy(linger=0)


class WsSource(Source):
    def __init__(self, url, framing):
        import websocket

        super().__init__()
        self.websocket = websocket
        self.framing = framing
        self.socket = websocket.create_connection(
            url,
            subprotocols=[V1_SUBPROTOCOL] if framing == "v1" else None,
            # json.loads checks the UTF-8 (websocket-client's own check is pure Python).
            skip_utf8_validation=True,
        )
        if framing == "v1" and self.socket.getsubprotocol() != V1_SUBPROTOCOL:
            raise RuntimeError(f"server did not accept {V1_SUBPROTOCOL}")
        self.timeout_s = None

    def _read(self, timeout_s):
        if timeout_s != self.timeout_s:
            # Only when it changes: switching between blocking and not costs system calls.
            self.timeout_s = timeout_s
            self.socket.settimeout(timeout_s)
        try:
            _, data = self.socket.recv_data()
        except self.websocket.WebSocketTimeoutException:
            return None
        if self.framing == "v1":
            count = struct.unpack_from("<Q", data)[0]
            offsets = struct.unpack_from(f"<{count}Q", data, 8)
            return Message(
                data[offsets[0] : offsets[1]].decode(),
                json.loads(data[offsets[1] : offsets[2]]),
                json.loads(data[offsets[2] : offsets[3]]),
                json.loads(data[offsets[4] : offsets[5]]),
            )
        if data[:1] != b"{":
            # The legacy binary form (messages with buffers): uint32 BE count and offsets, JSON first.
            count, start = struct.unpack_from(">II", data)
            end = struct.unpack_from(">I", data, 8)[0] if count > 1 else len(data)
            data = data[start:end]
        message = json.loads(data)
        return Message(
            message["channel"], message["header"], message["parent_header"], message["content"]
        )

    def send(self, channel, header, content):
        if self.framing == "v1":
            parts = [channel.encode(), json.dumps(header).encode(), b"{}", b"{}"]
            parts.append(json.dumps(content).encode())
            offsets = []
            at = 8 * (len(parts) + 2)
            for part in parts:
                offsets.append(at)
                at += len(part)
            offsets.append(at)
            table = struct.pack(f"<{len(offsets) + 1}Q", len(offsets), *offsets)
            self.socket.send_binary(table + b"".join(parts))
        else:
            self.socket.send(
                json.dumps(
                    {
                        "header": header,
                        "parent_header": {},
                        "metadata": {},
                        "content": content,
                        "channel": channel,
                        "buffers": [],
                    }
                )
            )

    def close(self):
        self.socket.close()


class WsTransport:
    """Through a server: one websocket carries requests, replies and output; listeners are more."""

    def __init__(self, url, framing):
        self.url = url
        self.framing = framing
        self.session = str(uuid.uuid4())
        self.main = WsSource(url, framing)

    def new_listener(self):
        # A session of its own: jupyter_server closes the older of two websockets of one session.
        parts = urllib.parse.urlsplit(self.url)
        query = dict(urllib.parse.parse_qsl(parts.query))
        query["session_id"] = str(uuid.uuid4())
        url = parts._replace(query=urllib.parse.urlencode(query)).geturl()
        return WsSource(url, self.framing)

    def send(self, channel, msg_type, content):
        header = new_header(msg_type, self.session)
        self.main.send(channel, header, content)
        return header["msg_id"]

    def collect(self, channel, msg_id, idle=True, on_iopub=None, timeout_s=None):
        return self.main.wait(msg_id, reply=True, idle=idle, on_iopub=on_iopub, timeout_s=timeout_s)

    def close(self):
        self.main.close()


class Client:
    """The measurements, the same over either transport."""

    def __init__(self, transport):
        self.transport = transport
        self.listeners = [transport.main]

    def execute(self, code, on_iopub=None):
        msg_id = self.transport.send(
            "shell",
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": False,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        reply = self.transport.collect("shell", msg_id, on_iopub=on_iopub)
        if reply.content.get("status") != "ok":
            raise RuntimeError(f"execution failed: {reply.content}")

    def round_trips(self, count, max_ms):
        """Round trips of `pass`, ms: from sending until both the reply and idle arrived."""
        samples = []
        deadline = time.perf_counter() + max_ms / 1000
        while len(samples) < count and time.perf_counter() < deadline:
            sent = time.perf_counter()
            self.execute("pass")
            samples.append((time.perf_counter() - sent) * 1000)
        return {"samples": samples}

    def throughput(self, mb):
        """MiB/s of a cell printing `mb` MiB in 1 MiB writes, from the first output to idle."""
        code = (
            f"import sys\nfor _ in range({mb}):\n"
            "    sys.stdout.write('x' * (1 << 20))\n    sys.stdout.flush()"
        )
        counted = {"bytes": 0, "first": 0.0}

        def on_iopub(message):
            if message.msg_type == "stream":
                counted["first"] = counted["first"] or time.perf_counter()
                counted["bytes"] += len(message.content["text"])

        self.execute(code, on_iopub)
        idle_at = time.perf_counter()
        return {
            "mbps": counted["bytes"] / 2**20 / (idle_at - counted["first"]),
            "complete": counted["bytes"] == mb * 2**20,
        }

    def open_listeners(self, count):
        """Make `count` receivers of the output in all (this client's included), each receiving."""
        while len(self.listeners) < count:
            self.listeners.append(self.transport.new_listener())
        self.until_listening(self.listeners)
        return {}

    def until_listening(self, sources, timeout_s=30):
        """Ask for kernel_info until every source saw the status of one of those requests."""
        asked = set()
        deaf = list(sources)
        deadline = time.monotonic() + timeout_s
        while deaf:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(deaf)} listeners received nothing within {timeout_s} s")
            msg_id = self.transport.send("shell", "kernel_info_request", {})
            asked.add(msg_id)
            try:
                # A kernel still starting may miss a request: ask again after a second.
                self.transport.collect("shell", msg_id, idle=False, timeout_s=1)
            except TimeoutError:
                continue
            deaf = [source for source in deaf if not self._heard(source, asked, 0.1)]

    def _heard(self, source, asked, timeout_s):
        until = time.monotonic() + timeout_s
        while True:
            left = until - time.monotonic()
            message = source.read(left) if left > 0 else None
            if message is None:
                return False
            if message.msg_type == "status" and message.parent_id in asked:
                return True

    def fan_out(self, lines, lost_after_s=20):
        """A cell prints `lines` lines, flushing each: ms until every listener has every line."""
        code = f"for i in range({lines}):\n    print(f'line {{i}}', flush=True)"
        lost = 0
        sent = time.perf_counter()
        msg_id = self.transport.send(
            "shell",
            "execute_request",
            {"code": code, "silent": False, "store_history": False, "stop_on_error": True},
        )
        # One listener after the other: each one's messages queue meanwhile (ZeroMQ's I/O thread, the
        # server's socket), so the last line reaches the last listener no later than in any other order.
        for source in self.listeners:
            count = 0
            while count < lines:
                # Lines still missing after this long without a message are lost.
                message = source.read(lost_after_s)
                if message is None:
                    lost += lines - count
                    break
                if message.parent_id == msg_id and message.msg_type == "stream":
                    count += message.content["text"].count("\n")
        done = time.perf_counter()
        self.transport.collect("shell", msg_id, timeout_s=60)
        return {"ms": (done - sent) * 1000 if lost == 0 else None, "lost": lost}

    def shutdown(self):
        """Ask the kernel to shut down (straight to it; a server's kernel is deleted by its API)."""
        if isinstance(self.transport, ZmqTransport):
            msg_id = self.transport.send("control", "shutdown_request", {"restart": False})
            try:
                self.transport.collect("control", msg_id, idle=False, timeout_s=3)
            except TimeoutError:
                pass
        return {}

    def close(self):
        for source in self.listeners[1:]:
            source.close()
        self.transport.close()


def main():
    if sys.argv[1] == "zmq":
        transport = ZmqTransport(sys.argv[2])
    else:
        transport = WsTransport(sys.argv[2], sys.argv[3])
    client = Client(transport)
    commands = {
        "ready": lambda _: client.until_listening([transport.main], 60) or {},
        "round_trips": lambda c: client.round_trips(c["count"], c.get("max_ms", 1e12)),
        "throughput": lambda c: client.throughput(c["mb"]),
        "open_listeners": lambda c: client.open_listeners(c["count"]),
        "fan_out": lambda c: client.fan_out(c["lines"]),
        "shutdown": lambda _: client.shutdown(),
    }
    try:
        for line in sys.stdin:
            command = json.loads(line)
            try:
                answer = commands[command["op"]](command)
            except Exception as error:  # Told to the bench, which drops this path.
                answer = {"error": f"{type(error).__name__}: {error}"}
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
            if command["op"] == "shutdown":
                break
    finally:
        client.close()


if __name__ == "__main__":
    main()
