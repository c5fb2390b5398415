"""How many jobs one request names at most, shared by the daemon and its clients: a batch
submission (POST /v1/jobs/batch; service/batch_submit.py), a bound on one request's time and
one transaction; and the jobs listed by id (GET /v1/jobs?id=..., `gpupool queue -j`), a
query string that stays well inside the daemon's 16 KiB request head. And the one reading of
such a list of ids, for the CLI's flag and the API's query alike."""

MAX_BATCH = 1000
MAX_IDS_PER_LIST = 1000
MAX_JOB_ID = 2**63 - 1  # the store's integer


def job_ids_of(text: str) -> list[int]:
    """The job ids of a comma-separated list (`12,15`), in order; ValueError saying what is
    wrong (not a whole number from 1 to MAX_JOB_ID, none, more than MAX_IDS_PER_LIST)."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if not words:
        raise ValueError(f"no job ids in {text[:40]!r} (e.g. 12,15)")
    if len(words) > MAX_IDS_PER_LIST:
        raise ValueError(f"at most {MAX_IDS_PER_LIST} job ids at once, got {len(words)}")
    ids = []
    for word in words:
        if not (word.isascii() and word.isdigit()) or not 0 < int(word) <= MAX_JOB_ID:
            raise ValueError(f"not a job id: {word[:40]!r} (job ids are 1 to {MAX_JOB_ID})")
        ids.append(int(word))
    return ids
