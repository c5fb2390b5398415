#!/usr/bin/env bash
# System packages the test suite runs for real (not mocks): PostgreSQL for the store tests,
# systemd's systemd-analyze to verify the unit `gpupool server install-service` writes,
# Prometheus (prometheus, promtool) to scrape and check the daemon's /metrics.
# Chromium for the web dashboard's tests (driven by Playwright through executable_path:
# Playwright's own browser download does not work on CI's machines).
# podman (with catatonit for --init, runc where crun cannot run containers) and busybox-static
# for the container tests, which build their image from busybox (docs/containers.md).
# Slurm (slurmctld, slurmd, the client commands) and munge for the Slurm backend's tests and
# bench/vs_slurm.py: the tests start a real controller and two nodes (docs/backends.md).
# Installed with apt-get when run as root and missing; otherwise says what is missing and
# leaves it to the tests (which fail under GPUPOOL_REQUIRE_ALL=1 if they cannot run).
set -u
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v prometheus >/dev/null || missing+=(prometheus)
command -v chromium >/dev/null || missing+=(chromium)
command -v podman >/dev/null || missing+=(podman)
[ -x /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null || missing+=(catatonit)
command -v runc >/dev/null || missing+=(runc)
command -v busybox >/dev/null || missing+=(busybox-static)
command -v slurmctld >/dev/null || missing+=(slurmctld)
command -v slurmd >/dev/null || missing+=(slurmd)
command -v sbatch >/dev/null || missing+=(slurm-client)
command -v munged >/dev/null || missing+=(munge)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing system packages for the tests: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "note: not root: cannot install ${missing[*]}; the tests that need them will not run" >&2
fi
exit 0
