"""What the store refuses, as exceptions every layer may catch without importing the store:
the service raises them through, the API answers them (404, 409), the CLI words them."""

from __future__ import annotations


class UnknownJob(KeyError):
    def __init__(self, job_id: int) -> None:
        super().__init__(job_id)
        self.job_id = job_id

    def __str__(self) -> str:
        return f"no job with id {self.job_id}"


class UnknownProject(KeyError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no project named {self.name}"


class ProjectExists(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"project {name} already exists (change it with `gpupool project set`)")
        self.name = name


class ProjectInUse(ValueError):
    """A project that cannot be deleted: the default one, or one with active jobs."""


class UnknownToken(KeyError):
    def __init__(self, token_id: int) -> None:
        super().__init__(token_id)
        self.token_id = token_id

    def __str__(self) -> str:
        return f"no API token with id {self.token_id}"
