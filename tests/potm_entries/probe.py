#!/usr/bin/env python3
# Hostile: tries one way out of the sandbox, named by its file name (probe-CHECK.py; the tests
# make the copies) and prints YYYYY if it got anywhere, NNNNN if everything was closed, then on
# its next run "done" (not a guess, so the word ends at once). The checks:
#   dict     a dictionary or word list (the 1999 rules: no dictionary, no spell files)
#   others   another entry's program or files (the victim holds POTM-VICTIM-SECRET)
#   network  the host's PostgreSQL (TCP and its Unix socket), an abstract Unix socket of the test
#   reaper   the sandbox's PID 1: ptrace, its memory, environment, descriptors, signals
#   fds      any descriptor but stdin, stdout, stderr
#   env      any environment variable but PATH, HOME, TMPDIR, LC_ALL, PWD
#   system   /sys, /run, /var, /home, /root, the host's /tmp, the referee's processes
#   write    any writable place but its own directory
#   caps     any capability, or no no_new_privs
#   userns   a user namespace of its own (to become root in it)
import ctypes
import os
import signal
import socket
import stat
import sys
import traceback

check = os.path.basename(sys.argv[0])[6:-3]
if len(sys.stdin.readline().split()) != 1:
    print("done")
    sys.exit(0)
MARK = "POTM-VICTIM-" + "SECRET"  # joined here so that this file does not contain it


def readable(path, limit=1 << 20):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def found_dict():
    places = ["/usr/share/dict", "/usr/share/hunspell", "/usr/share/myspell", "/usr/share/aspell",
              "/usr/lib/aspell", "/usr/lib/ispell", "/var/lib/dictionaries-common",
              "/etc/dictionaries-common", "/var/cache/cracklib", "/usr/share/doc",
              os.path.expanduser("~/.cache/moo-arena"), "/root/.cache/moo-arena"]
    for d in places:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            data = readable(os.path.join(d, name))
            if data and data.count(b"\n") > 1000:
                return True
    return False


def found_others():
    here = os.path.dirname(os.path.realpath(sys.argv[0]))
    tops = ["/potm", "/potm/entry", "/tmp", "..", here]
    for up in ("..", os.path.dirname(here)):  # the referee's layout is no secret
        tops += [f"{up}/prog-{i}" for i in range(4)] + [f"{up}/work-{i}" for i in range(4)]
    try:
        with open("/proc/self/mountinfo") as f:  # the host paths of what is mounted here
            for line in f:
                root = line.split()[3]
                tops += [root, os.path.dirname(root), os.path.dirname(os.path.dirname(root))]
    except OSError:
        pass
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            tops += [f"/proc/{pid}/root/potm/entry", f"/proc/{pid}/cwd"]
    me = os.path.realpath(sys.argv[0])
    for top in tops:
        try:
            if os.path.realpath(top) in ("/", "/usr", "/etc", "/proc", "/dev"):
                continue
        except OSError:
            continue
        for dirpath, dirs, files in os.walk(top):
            if dirpath.count("/") >= top.count("/") + 2:
                dirs[:] = []
            for name in files:
                path = os.path.join(dirpath, name)
                if path != me and not path.endswith("/" + os.path.basename(me)):
                    data = readable(path)
                    if data and MARK.encode() in data:
                        return True
    return False


def found_network():
    # only this machine's addresses (its loopback is the host's outside a sandbox)
    tries: list[tuple[int, tuple[str, int] | str]] = [
        (socket.AF_INET, ("127.0.0.1", 5432)), (socket.AF_UNIX, "\0moo-potm-probe"),
        (socket.AF_UNIX, "/run/postgresql/.s.PGSQL.5432")]
    for family, addr in tries:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(1)
        try:
            s.connect(addr)
            return True
        except OSError:
            pass
        finally:
            s.close()
    return False


def found_reaper():
    parent = os.getppid()  # the reaper
    got = parent != 1
    for f in ("mem", "environ", "maps"):
        data = readable(f"/proc/{parent}/{f}", 64)
        got = got or bool(data)
    try:
        got = got or bool(os.listdir(f"/proc/{parent}/fd"))
    except OSError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, parent, 0, 0) == 0:  # PTRACE_ATTACH
        got = True
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGSTOP):
        try:
            os.kill(parent, sig)  # as PID 1 of the namespace the reaper never receives these
        except OSError:
            pass
    return got


def found_fds():
    fds = set(os.listdir("/proc/self/fd"))  # one of them is the listing's own
    return len(fds) > 4 or not {"0", "1", "2"} <= fds


def found_env():
    return set(os.environ) - {"PATH", "HOME", "TMPDIR", "LC_ALL", "PWD"} != set()


def found_system():
    for d in ("/sys/fs", "/run", "/var", "/home", "/root", "/srv", "/opt", "/work"):
        try:
            if os.listdir(d):
                return True
        except OSError:
            pass
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    return len(pids) > 3  # the reaper, this probe and at most one more


def found_write():
    for d in ("/", "/var/tmp", "/dev/shm", "/dev", "/run", "/usr", "/etc", "/potm",
              "/potm/entry", "/usr/share", "/proc"):
        path = os.path.join(d, "potm-probe-write")
        try:
            with open(path, "w") as f:
                f.write("x")
        except OSError:
            continue
        # /dev/shm is its own directory again (for POSIX semaphores): not another place
        elsewhere = not os.path.exists("/tmp/potm-probe-write")
        os.unlink(path)
        if elsewhere:
            return True
    return False


def found_caps():
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    return int(status["CapEff"], 16) != 0 or status["NoNewPrivs"].strip() != "1"


def found_userns():
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(0x10000000) == 0  # CLONE_NEWUSER


try:
    print("YYYYY" if globals()["found_" + check]() else "NNNNN")
except Exception:  # a broken probe must not pass for a closed door: its error is the output
    print(traceback.format_exc(limit=1).replace("\n", " "))
