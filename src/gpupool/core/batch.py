"""How many jobs one request names at most, shared by the daemon and its clients: a batch
submission (POST /v1/jobs/batch; engine/batch_submit.py), a bound on one request's time and
one transaction; and the jobs listed by id (GET /v1/jobs?id=...), a query string that
stays well inside the daemon's 16 KiB request head."""

MAX_BATCH = 1000
MAX_IDS_PER_LIST = 1000
