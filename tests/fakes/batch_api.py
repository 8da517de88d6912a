"""The OpenAI Files and Batches protocol for the fake server (:mod:`tests.fakes.openai_server` mounts it).

Serves ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
``GET /v1/batches`` (list), ``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel``. A batch's status moves
``validating -> in_progress -> completed`` one step per ``polls_per_step`` retrievals; when it completes, every line
of its input file is answered by the server's live reply logic (the same scripted FIFO and reply policy a chat call
gets), so a batch and a live run see the same answers. Knobs (attributes, settable while running): ``fail`` (a
predicate on a line's ``custom_id``: that row goes to the error file), ``expire_after`` (the batch ends ``expired``
with only this many rows answered, the others in the error file with code ``batch_expired``; ``expire_times``: only
that many batches expire, the later ones complete), and :meth:`cancel`
(or ``POST .../cancel``) ends a batch ``cancelled`` with the rows answered before it.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any


class BatchAPI:
    """Files and batches of one fake server.

    Args:
        answer: Called with a chat-completion request body; returns (status, body) as a live call would get.
    """

    def __init__(self, answer: Callable[[dict], tuple[int, dict]]) -> None:
        self._answer = answer
        self._lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.created = 0  # POST /v1/batches answered
        self.requests = 0  # Files and Batches requests served (uploads, creations, polls, downloads)
        self.polls = 0  # GET /v1/batches/{id} answered
        self.polls_per_step = 1
        self.fail: Callable[[str], bool] = lambda custom_id: False
        self.expire_after: int | None = None
        self.expire_times: int | None = None  # None: every batch expires while expire_after is set
        self.expired = 0
        self._polls: dict[str, int] = {}

    def handle(self, method: str, path: str, raw: bytes, content_type: str) -> tuple[int, dict | bytes] | None:
        """(status, JSON body or raw bytes) for a Files/Batches request; None for a path this API does not serve."""
        parts = path.strip("/").split("/")[1:]  # without the leading "v1"
        if not parts or parts[0] not in ("files", "batches"):
            return None
        with self._lock:
            self.requests += 1
        if parts == ["files"] and method == "POST":
            return self._upload(raw, content_type)
        if parts[0] == "files" and len(parts) == 3 and parts[2] == "content" and method == "GET":
            with self._lock:
                data = self.files.get(parts[1])
            return (200, data) if data is not None else (404, _error(f"no file {parts[1]}"))
        if parts == ["batches"] and method == "POST":
            return self._create(json.loads(raw or b"{}"))
        if parts == ["batches"] and method == "GET":
            with self._lock:
                data = [dict(b) for b in self.batches.values()]
            return 200, {"object": "list", "data": data, "has_more": False,
                         "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None}
        if parts[0] == "batches" and len(parts) == 2 and method == "GET":
            return self._retrieve(parts[1])
        if parts[0] == "batches" and len(parts) == 3 and parts[2] == "cancel" and method == "POST":
            found = self.cancel(parts[1])
            return (200, found) if found is not None else (404, _error(f"no batch {parts[1]}"))
        return 404, _error(f"unknown path {path}")

    def _upload(self, raw: bytes, content_type: str) -> tuple[int, dict]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        data, filename = b"", "input.jsonl"
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "file":
                data = part.get_payload(decode=True) or b""
                filename = part.get_filename() or filename
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        with self._lock:
            self.files[file_id] = data
        return 200, _file(file_id, data, filename, "batch")

    def _create(self, body: dict) -> tuple[int, dict]:
        file_id = body.get("input_file_id")
        with self._lock:
            if file_id not in self.files:
                return 404, _error(f"no file {file_id}")
            batch_id = f"batch_{uuid.uuid4().hex[:24]}"
            total = len(self.files[file_id].splitlines())
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": body.get("endpoint"), "input_file_id": file_id,
                "completion_window": body.get("completion_window", "24h"), "status": "validating",
                "created_at": int(time.time()), "output_file_id": None, "error_file_id": None,
                "metadata": body.get("metadata"), "request_counts": {"total": total, "completed": 0, "failed": 0}}
            self.created += 1
            self._polls[batch_id] = 0
            return 200, dict(self.batches[batch_id])

    def _retrieve(self, batch_id: str) -> tuple[int, dict]:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, _error(f"no batch {batch_id}")
            self._polls[batch_id] += 1
            self.polls += 1
            steps = self._polls[batch_id] // self.polls_per_step
            status = batch["status"]
        if status == "validating" and steps >= 1:
            self._set(batch_id, status="in_progress")
        elif status == "in_progress" and steps >= 2:
            expire = self.expire_after is not None and (self.expire_times is None or self.expired < self.expire_times)
            self.expired += expire
            self._finish(batch_id, "expired" if expire else "completed", self.expire_after if expire else None)
        with self._lock:
            return 200, dict(self.batches[batch_id])

    def cancel(self, batch_id: str) -> dict | None:
        """End a batch ``cancelled``; what it answered before (nothing, unless it had finished) stays readable."""
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            done = batch["status"] in ("completed", "expired", "cancelled", "failed")
        if not done:
            self._finish(batch_id, "cancelled", 0)
        with self._lock:
            return dict(self.batches[batch_id])

    def _set(self, batch_id: str, **fields: Any) -> None:
        with self._lock:
            self.batches[batch_id].update(fields)

    def _finish(self, batch_id: str, status: str, answered: int | None) -> None:
        """Answer the batch's rows (the first ``answered`` of them, all when None) and write its output files."""
        with self._lock:
            lines = self.files[self.batches[batch_id]["input_file_id"]].splitlines()
        output, errors = [], []
        for n, line in enumerate(lines):
            row = json.loads(line)
            custom_id = row["custom_id"]
            if answered is not None and n >= answered:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                errors.append({"id": f"req-{n}", "custom_id": custom_id, "response": None,
                               "error": {"code": code, "message": f"this request was not run ({status})"}})
                continue
            if self.fail(custom_id):
                errors.append({"id": f"req-{n}", "custom_id": custom_id, "response": None,
                               "error": {"code": "server_error", "message": "the fake failed this row"}})
                continue
            code, body = self._answer(row["body"])
            output.append({"id": f"req-{n}", "custom_id": custom_id, "error": None,
                           "response": {"status_code": code, "request_id": f"r{n}", "body": body}})
        fields: dict[str, Any] = {"status": status, f"{status}_at": int(time.time()),
                                  "request_counts": {"total": len(lines), "completed": len(output),
                                                     "failed": len(errors)}}
        with self._lock:
            for name, rows in (("output_file_id", output), ("error_file_id", errors)):
                if rows:
                    file_id = f"file-{uuid.uuid4().hex[:24]}"
                    self.files[file_id] = "".join(json.dumps(r) + "\n" for r in rows).encode()
                    fields[name] = file_id
            self.batches[batch_id].update(fields)


def _file(file_id: str, data: bytes, filename: str, purpose: str) -> dict:
    return {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
            "filename": filename, "purpose": purpose, "status": "processed"}


def _error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
