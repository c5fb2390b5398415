"""A container engine that really runs containers here, and a tiny image for the tests
(docs/containers.md, "Tested here").

No image can be pulled (no network): the image is made on the spot, `podman import` of a
tarball holding busybox (Debian's busybox-static) and an /etc/os-release that names it.
podman is tried as the machine configures it; where that cannot run a container, once more
with the settings docs/containers.md says this sandbox needed (runc instead of crun, file
and process limits podman may set without CAP_SYS_RESOURCE), in a containers.conf of the
test's own that the daemon gets as CONTAINERS_CONF. If neither runs, the tests are skipped
with both errors (a failure under GPUPOOL_REQUIRE_ALL=1, as in CI).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

IMAGE = "localhost/gpupool-test-busybox:1"
IMAGE_ID = "gpupool-test-busybox"  # /etc/os-release's ID in the image, and nowhere else
APPLETS = ("sh", "cat", "echo", "env", "id", "sleep", "touch", "pwd", "true", "stat", "ls")

# What docs/containers.md says this sandbox needed: crun 1.8 refuses cgroups "in hybrid
# mode" (a v1 hierarchy with an empty v2 one), and podman's default limits (1048576 open
# files) are above what a process without CAP_SYS_RESOURCE may set.
FALLBACK_CONF = """\
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]

[engine]
runtime = "runc"
"""


@dataclass(frozen=True)
class Podman:
    executable: str
    conf: Path | None  # the containers.conf the daemon needs (None: the machine's own)

    def env(self) -> dict[str, str]:
        return {} if self.conf is None else {"CONTAINERS_CONF": str(self.conf)}

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        import os

        env = {**os.environ, **self.env()}
        return subprocess.run(
            [self.executable, *args], capture_output=True, text=True, timeout=timeout, env=env
        )

    def containers(self, prefix: str) -> list[str]:
        """Names of the containers, running or not, whose name starts with `prefix`."""
        done = self.run("ps", "--all", "--format", "{{.Names}}")
        assert done.returncode == 0, done.stderr
        return [n for n in done.stdout.split() if n.startswith(prefix)]


def _rootfs_tar(busybox: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "etc", "tmp"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, "bin/busybox")
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        text = f'NAME="gpupool test image"\nID={IMAGE_ID}\n'.encode()
        info = tarfile.TarInfo("etc/os-release")
        info.size, info.mode = len(text), 0o644
        tar.addfile(info, io.BytesIO(text))
    return buf.getvalue()


def podman_that_runs(workdir: Path) -> Podman:
    """podman, with the test image imported and a container run; skips with the reason
    when podman is missing or cannot run containers here."""
    executable = shutil.which("podman")
    if executable is None:
        pytest.skip("podman is not installed (scripts/system-deps.sh installs it as root)")
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.skip("busybox is not installed (apt-get install busybox-static)")
    tarball = workdir / "rootfs.tar"
    tarball.write_bytes(_rootfs_tar(Path(busybox).resolve()))
    errors = []
    conf = workdir / "containers.conf"
    conf.write_text(FALLBACK_CONF)
    for candidate in (Podman(executable, None), Podman(executable, conf)):
        imported = candidate.run("import", str(tarball), IMAGE)
        if imported.returncode != 0:
            errors.append(f"podman import: {imported.stderr.strip()}")
            continue
        ran = candidate.run("run", "--rm", "--network=host", IMAGE, "/bin/cat", "/etc/os-release")
        if ran.returncode == 0 and IMAGE_ID in ran.stdout:
            return candidate
        how = "as configured" if candidate.conf is None else "with runc and lower limits"
        errors.append(f"podman run {how}: {ran.stderr.strip() or ran.stdout.strip()}")
    pytest.skip("podman cannot run a container here: " + "; ".join(errors))
