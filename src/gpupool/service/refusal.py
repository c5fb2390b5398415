"""The refusal every use case of the API raises for a request that can never succeed."""

from __future__ import annotations


class RequestRefused(ValueError):
    """A request that can never succeed (refused at submit, exit code 2 in the CLI): `code`
    for the API's error shape, `message` in words."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
