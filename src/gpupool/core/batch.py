"""How many jobs one batch submission holds at most (POST /v1/jobs/batch; engine/batch_submit.py):
a bound on one request's time and one transaction, shared by the daemon and the SDK."""

MAX_BATCH = 1000
