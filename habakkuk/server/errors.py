"""The error every HTTP handler raises for a client mistake."""

from __future__ import annotations


class ApiError(Exception):
    """An error answered as `{"error": message}` with `status`.

    `param` names the request field at fault; /v1 answers carry it in OpenAI's
    error shape.
    """

    def __init__(self, status: int, message: str, *, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
