"""The bench's fastest floor: a client speaking the Jupyter wire protocol straight to a kernel with pyzmq.

It signs what it sends (the kernel checks), does not check the signatures of what it receives, and
parses the header, parent_header and content of every message it reads (as every client of the
bench does), in plain blocking receive loops: no event loop, no poller where one socket will do.

Usage: floor_client.py CONNECTION_FILE. Commands arrive on stdin, one JSON object a line; each is
answered with one JSON object a line on stdout. `npm run bench` (kernel-gateway/src/bench/floor.ts)
drives it.
"""

import hashlib
import hmac
import json
import sys
import time
import uuid
from datetime import datetime, timezone

import zmq

DELIMITER = b"<IDS|MSG>"


class Message:
    """What the measurements read of a message."""

    __slots__ = ("msg_type", "parent_id", "content")

    def __init__(self, frames):
        at = frames.index(DELIMITER)
        header = json.loads(frames[at + 2])
        parent = json.loads(frames[at + 3])
        self.msg_type = header["msg_type"]
        self.parent_id = parent.get("msg_id")
        self.content = json.loads(frames[at + 5])


class Client:
    def __init__(self, info):
        self.context = zmq.Context()
        self.key = info["key"].encode()
        self.session = str(uuid.uuid4())
        self.url = lambda port: f"{info['transport']}://{info['ip']}:{port}"
        self.iopub_port = info["iopub_port"]
        self.shell = self._dealer(info["shell_port"])
        self.control = self._dealer(info["control_port"])
        self.iopub = self._subscriber()
        self.listeners = [self.iopub]

    def _dealer(self, port):
        socket = self.context.socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.IDENTITY, self.session.encode())
        socket.connect(self.url(port))
        return socket

    def _subscriber(self):
        socket = self.context.socket(zmq.SUB)
        socket.setsockopt(zmq.LINGER, 0)
        # No receive limit: the I/O thread keeps reading while Python is busy with another socket.
        socket.setsockopt(zmq.RCVHWM, 0)
        socket.setsockopt(zmq.SUBSCRIBE, b"")
        socket.connect(self.url(self.iopub_port))
        return socket

    def send(self, socket, msg_type, content):
        msg_id = str(uuid.uuid4())
        header = {
            "msg_id": msg_id,
            "msg_type": msg_type,
            "session": self.session,
            "username": "bench",
            "date": datetime.now(timezone.utc).isoformat(),
            "version": "5.3",
        }
        parts = [json.dumps(header).encode(), b"{}", b"{}", json.dumps(content).encode()]
        signature = hmac.new(self.key, digestmod=hashlib.sha256)
        for part in parts:
            signature.update(part)
        socket.send_multipart([DELIMITER, signature.hexdigest().encode(), *parts])
        return msg_id

    def execute(self, code):
        return self.send(
            self.shell,
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

    def reply(self, socket, msg_id, timeout_ms=None):
        """Receive on `socket` until the reply to `msg_id` (None if `timeout_ms` passes first)."""
        until = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        while True:
            if until is not None:
                left = until - time.monotonic()
                if left <= 0 or not socket.poll(int(left * 1000) + 1):
                    return None
            message = Message(socket.recv_multipart())
            if message.parent_id == msg_id and message.msg_type.endswith("_reply"):
                return message

    def until_idle(self, socket, msg_id, on_message=None):
        """Receive iopub on `socket` until the idle status of `msg_id`."""
        while True:
            message = Message(socket.recv_multipart())
            if message.parent_id != msg_id:
                continue
            if on_message:
                on_message(message)
            if message.msg_type == "status" and message.content.get("execution_state") == "idle":
                return

    def round_trips(self, count, max_ms):
        """Round trips of `pass`, ms: from sending until both the reply and idle arrived."""
        samples = []
        deadline = time.perf_counter() + max_ms / 1000
        while len(samples) < count and time.perf_counter() < deadline:
            sent = time.perf_counter()
            msg_id = self.execute("pass")
            reply = self.reply(self.shell, msg_id)
            self.until_idle(self.iopub, msg_id)
            samples.append((time.perf_counter() - sent) * 1000)
            if reply.content.get("status") != "ok":
                raise RuntimeError(f"execution failed: {reply.content}")
        return {"samples": samples}

    def throughput(self, mb):
        """MiB/s of a cell printing `mb` MiB in 1 MiB writes, from the first output to idle."""
        code = (
            f"import sys\nfor _ in range({mb}):\n"
            "    sys.stdout.write('x' * (1 << 20))\n    sys.stdout.flush()"
        )
        counted = {"bytes": 0, "first": 0.0}

        def on_message(message):
            if message.msg_type == "stream":
                counted["first"] = counted["first"] or time.perf_counter()
                counted["bytes"] += len(message.content["text"])

        msg_id = self.execute(code)
        self.until_idle(self.iopub, msg_id, on_message)
        idle_at = time.perf_counter()
        self.reply(self.shell, msg_id)
        return {
            "mbps": counted["bytes"] / 2**20 / (idle_at - counted["first"]),
            "complete": counted["bytes"] == mb * 2**20,
        }

    def open_listeners(self, count):
        """Make `count` iopub receivers in all (this client's included), each receiving."""
        while len(self.listeners) < count:
            self.listeners.append(self._subscriber())
        self.until_listening(self.listeners)
        return {}

    def until_listening(self, sockets, timeout_s=30):
        """Ask for kernel_info until every socket saw the status of one of those requests."""
        asked = set()
        deaf = list(sockets)
        deadline = time.monotonic() + timeout_s
        while deaf:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(deaf)} listeners received nothing within {timeout_s} s")
            msg_id = self.send(self.shell, "kernel_info_request", {})
            asked.add(msg_id)
            # A kernel still starting may miss a request: ask again after a second.
            if self.reply(self.shell, msg_id, 1000) is None:
                continue
            deaf = [socket for socket in deaf if not self._heard(socket, asked, 100)]

    def _heard(self, socket, asked, timeout_ms):
        until = time.monotonic() + timeout_ms / 1000
        while True:
            left = until - time.monotonic()
            if left <= 0 or not socket.poll(int(left * 1000) + 1):
                return False
            message = Message(socket.recv_multipart())
            if message.msg_type == "status" and message.parent_id in asked:
                return True

    def fan_out(self, lines, lost_after_s=20):
        """A cell prints `lines` lines, flushing each: ms until every listener has every line."""
        code = f"for i in range({lines}):\n    print(f'line {{i}}', flush=True)"
        lost = 0
        sent = time.perf_counter()
        msg_id = self.execute(code)
        # One socket after the other: every message is queued by ZeroMQ's I/O thread meanwhile, so
        # the last line reaches the last listener no later than with any other order.
        for socket in self.listeners:
            socket.setsockopt(zmq.RCVTIMEO, lost_after_s * 1000)
            count = 0
            try:
                while count < lines:
                    message = Message(socket.recv_multipart())
                    if message.parent_id == msg_id and message.msg_type == "stream":
                        count += message.content["text"].count("\n")
            except zmq.Again:
                lost += lines - count
            finally:
                socket.setsockopt(zmq.RCVTIMEO, -1)
        done = time.perf_counter()
        self.reply(self.shell, msg_id)
        self.until_idle(self.iopub, msg_id)
        return {"ms": (done - sent) * 1000 if lost == 0 else None, "lost": lost}

    def shutdown(self):
        msg_id = self.send(self.control, "shutdown_request", {"restart": False})
        self.reply(self.control, msg_id, 3000)
        return {}

    def close(self):
        self.context.destroy(linger=0)


def main():
    with open(sys.argv[1]) as file:
        client = Client(json.load(file))
    commands = {
        "ready": lambda _: client.until_listening([client.iopub], 60) or {},
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
