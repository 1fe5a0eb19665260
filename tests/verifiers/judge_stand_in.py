"""A stand-in for a judge model's chat-completions endpoint on a local HTTP server (stdlib http.server), for the
judge verifier's tests."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeJudge:
    """Answers each request with the next scripted behaviour (the last one repeats): ("reply", text), ("raw",
    body), ("status", code), ("hang", seconds), or ("grade", fn): the reply is ``fn(the prompt)``."""

    def __init__(self):
        self.script = [("reply", "Score: 5")]
        self.requests = []
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                kind, arg = fake.script.pop(0) if len(fake.script) > 1 else fake.script[0]
                if kind == "hang":
                    fake.release.wait(arg)  # longer than the client's timeout
                    return
                if kind == "status":
                    self.send_response(arg)
                    self.end_headers()
                    self.wfile.write(b"error")
                    return
                if kind == "grade":
                    kind, arg = "reply", arg(body["messages"][0]["content"])
                payload = (arg.encode() if kind == "raw" else
                           json.dumps({"choices": [{"message": {"role": "assistant", "content": arg}}]}).encode())
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
