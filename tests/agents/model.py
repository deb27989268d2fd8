"""A scripted model endpoint for agent command-line programs in the guest.

Answers the Anthropic Messages API (`POST /v1/messages`, streamed or not)
and the OpenAI Responses and Chat Completions APIs (`POST /v1/responses`,
`POST /v1/chat/completions`) with one fixed reply, so that an agent's
program runs a whole turn without a network: `python3 model.py PORT
[COMMAND]`. With a COMMAND, a Messages request that offers the `Bash` tool
and carries no tool result yet is answered with a call of that tool running
COMMAND, and so is a Responses request that offers a shell tool (one taking
a `cmd` or `command`) and carries no output yet: the agent's program runs it
as it runs any command, in its sandbox when it has one. The request that
carries the result gets the fixed reply.
Every request is appended to `requests.jsonl` in the working directory.
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = "hello from the scripted model"


def sse(events):
    """Server-sent events: (name, data) pairs, data as JSON."""
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append(f"data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


COMMAND = sys.argv[2] if len(sys.argv) > 2 else None


def wants_command(body):
    """Whether to answer with a call of the Bash tool: a command is
    scripted, the request offers the tool, and no tool result came yet."""
    if COMMAND is None or not any(t.get("name") == "Bash" for t in body.get("tools") or []):
        return False
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content
        ):
            return False
    return True


def shell_tool(body):
    """The Responses request's shell tool, if it offers one: (name, the
    arguments running COMMAND) for a function tool whose parameters take a
    command as a string (`cmd`, `command`) or as an argument vector."""
    for tool in body.get("tools") or []:
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        params = (tool.get("parameters") or (tool.get("function") or {}).get("parameters") or {}).get("properties") or {}
        for key in ("cmd", "command"):
            kind = (params.get(key) or {}).get("type")
            if kind == "string":
                return name, {key: COMMAND}
            if kind == "array":
                return name, {key: ["bash", "-lc", COMMAND]}
    return None


def responses_wants_command(body):
    """Whether to answer a Responses request with a call of its shell tool:
    a command is scripted, a shell tool is offered, no output came yet."""
    if COMMAND is None or shell_tool(body) is None:
        return False
    items = body.get("input") if isinstance(body.get("input"), list) else []
    return not any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)


def anthropic_stream(message, block, delta, stop_reason, output_tokens):
    """A streamed Messages answer of one content block: `block` starts it,
    `delta` fills it, and the message stops for `stop_reason`."""
    return sse(
        [
            ("message_start", {"type": "message_start", "message": message}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def anthropic(body):
    model = body.get("model", "scripted")
    message = {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 0},
    }
    if body.get("stream") and wants_command(body):
        call = {"command": COMMAND, "description": "Run the scripted command"}
        return "text/event-stream", anthropic_stream(
            message,
            {"type": "tool_use", "id": "toolu_scripted", "name": "Bash", "input": {}},
            {"type": "input_json_delta", "partial_json": json.dumps(call)},
            "tool_use",
            12,
        )
    if not body.get("stream"):
        message["content"] = [{"type": "text", "text": REPLY}]
        message["stop_reason"] = "end_turn"
        message["usage"]["output_tokens"] = 6
        return "application/json", json.dumps(message).encode()
    return "text/event-stream", anthropic_stream(
        message,
        {"type": "text", "text": ""},
        {"type": "text_delta", "text": REPLY},
        "end_turn",
        6,
    )


def responses(body):
    if responses_wants_command(body):
        name, arguments = shell_tool(body)
        item = {
            "id": "fc_scripted",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_scripted",
            "name": name,
            "arguments": json.dumps(arguments),
        }
        # A call comes whole: no deltas.
        added, deltas = item, []
    else:
        item = {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": REPLY, "annotations": []}],
        }
        added = {**item, "status": "in_progress", "content": []}
        deltas = [
            (
                "response.output_text.delta",
                {"type": "response.output_text.delta", "item_id": "msg_scripted", "output_index": 0, "content_index": 0, "delta": REPLY},
            )
        ]
    response = {
        "id": "resp_scripted",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model", "scripted"),
        "output": [item],
        "usage": {"input_tokens": 10, "output_tokens": 6, "total_tokens": 16},
    }
    return "text/event-stream", sse(
        [
            ("response.created", {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": added}),
            *deltas,
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": response}),
        ]
    )


def chat(body):
    chunk = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": REPLY}, "finish_reason": None}],
    }
    done = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return "text/event-stream", sse([(None, chunk), (None, done)]) + b"data: [DONE]\n\n"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        with open("requests.jsonl", "a") as log:
            log.write(
                json.dumps(
                    {
                        "path": self.path,
                        "model": body.get("model"),
                        "command": wants_command(body) or responses_wants_command(body),
                        "tools": [t.get("name") or t.get("type") for t in body.get("tools") or []],
                    }
                )
                + "\n"
            )
        path = self.path.split("?")[0]
        if path.endswith("/messages"):
            kind, payload = anthropic(body)
        elif path.endswith("/responses"):
            kind, payload = responses(body)
        elif path.endswith("/chat/completions"):
            kind, payload = chat(body)
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        with open("requests.jsonl", "a") as log:
            log.write(json.dumps({"path": self.path, "method": "GET"}) + "\n")
        self.send_error(404)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
