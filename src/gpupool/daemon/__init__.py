"""The daemon: the composition root (store, engine, executor, backends, monitor, service,
HTTP app are made and wired here, and only here) and its lifecycle: preflight, the lease,
recovery, serving, shutdown."""
