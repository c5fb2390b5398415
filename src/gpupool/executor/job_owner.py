"""Who a job runs as, for supervisor.py: the owner's passwd identity, Popen's arguments
to become it, and entering the working directory with its permissions.

Standard library only: supervisor.py runs as a script (``python -I -S``) and imports this
module as its sibling, never gpupool.
"""

import os

TYPE_CHECKING = False  # as in supervisor.py: typing is not imported at run time
if TYPE_CHECKING:
    from typing import TypedDict

    class Identity(TypedDict, total=False):
        """Popen's arguments to run the job as another user."""

        user: int
        group: int
        extra_groups: list[int]


class Owner:
    """The Unix user a job runs as, from its passwd entry, with the groups login(1) would
    give it (initgroups). KeyError: no such user."""

    def __init__(self, name: str) -> None:
        import pwd  # only in shared mode, off the personal launch path

        pw = pwd.getpwnam(name)
        self.name = pw.pw_name
        self.uid = pw.pw_uid
        self.gid = pw.pw_gid
        self.groups = os.getgrouplist(pw.pw_name, pw.pw_gid)
        self.env = {
            "HOME": pw.pw_dir,
            "USER": pw.pw_name,
            "LOGNAME": pw.pw_name,
            "SHELL": pw.pw_shell or "/bin/sh",
        }


def identity(owner: Owner | None) -> "Identity":
    """Popen arguments to run as ``owner`` (None, or we are not root: as we are). Dropping
    root takes root's gid and supplementary groups away too: the owner's own replace them."""
    if owner is None or os.geteuid() != 0:
        return {}
    return {"user": owner.uid, "group": owner.gid, "extra_groups": owner.groups}


def enter(workdir: str, owner: Owner | None) -> str | None:
    """chdir into ``workdir`` with the owner's permissions; None, or why it cannot be.

    Done here, in the supervisor with its effective ids switched to the owner's, not by
    Popen's ``cwd`` (which chdirs while still root): a job must not start in a directory its
    owner could not reach, nor learn what root could see there. The child inherits the
    directory; the supervisor goes back to "/" after the spawn.
    """
    switch = owner is not None and os.geteuid() == 0 and owner.uid != 0
    groups, egid = os.getgroups(), os.getegid()
    try:
        if owner is not None and switch:
            os.setgroups(owner.groups)
            os.setegid(owner.gid)
            os.seteuid(owner.uid)
        os.chdir(workdir)
    except (FileNotFoundError, NotADirectoryError):
        return f"working directory does not exist: {workdir}"
    except OSError as exc:
        who = "" if owner is None else f" as {owner.name}"
        return f"cannot enter working directory {workdir}{who}: {exc.strerror}"
    except ValueError as exc:  # a NUL byte
        return f"invalid working directory {workdir!r}: {exc}"
    finally:
        if switch:
            os.seteuid(0)  # the saved set-user-ID is 0: we may take it back
            os.setegid(egid)
            os.setgroups(groups)
    return None
