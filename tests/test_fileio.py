"""Files the tool writes, streams it must not wait on, signals, and the
subprocesses it runs (engine/fileio.py; issue 20, items 2, 3, 10 and 11).

Behaviour first: an interrupted or failed write leaves the old file intact,
with real signals sent to a real `hma-policy audit -o` and a full disk.
Then two checks over the source of engine/: every file written goes through
fileio.atomic_write, and every user value given to a subprocess comes after
`--end-of-options` or `--`."""

from __future__ import annotations

import ast
import errno
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hma_policy import cli, fileio
from hma_policy.fileio import Interrupted, NotRegularFile, atomic_write, escape_name, open_regular

REPO = Path(__file__).resolve().parents[1]
ENGINE = REPO / "engine"
EXAMPLE = REPO / "examples" / "multi-mixed.json"
FLEET = REPO / "examples" / "fleet"


def leftovers(directory: Path) -> list[str]:
    """Temporary files atomic_write would have left."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# -- atomic_write --------------------------------------------------------------

def test_a_write_replaces_the_file_whole_and_keeps_its_permissions(tmp_path):
    target = tmp_path / "report.json"
    target.write_bytes(b"old")
    target.chmod(0o600)
    with atomic_write(target) as stream:
        stream.write(b"new ")
        assert target.read_bytes() == b"old"  # nothing is visible before the rename
        assert len(leftovers(tmp_path)) == 1
        stream.write(b"content")
    assert target.read_bytes() == b"new content"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert leftovers(tmp_path) == []


def test_a_new_file_gets_the_permissions_open_would_give(tmp_path):
    previous = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "new") as stream:
            stream.write(b"x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o640


def test_a_link_to_a_file_stays_a_link_and_its_file_is_replaced(tmp_path):
    real = tmp_path / "real.html"
    real.write_bytes(b"old")
    link = tmp_path / "link.html"
    link.symlink_to(real)
    with atomic_write(link) as stream:
        stream.write(b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), Interrupted(signal.SIGTERM)])
def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path, failure):
    target = tmp_path / "report.json"
    target.write_bytes(b"the previous report")
    with pytest.raises(type(failure)) as info:
        with atomic_write(target) as stream:
            stream.write(b"half of the new report")
            raise failure
    assert target.read_bytes() == b"the previous report"
    assert leftovers(tmp_path) == []
    if isinstance(failure, Interrupted):
        assert info.value.unwritten == [str(target)]


def test_a_full_disk_at_the_fsync_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_bytes(b"old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(fileio.os, "fsync", full)
    with pytest.raises(OSError):
        with atomic_write(target) as stream:
            stream.write(b"new")
    assert target.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_a_device_is_written_in_place_and_a_directory_refused(tmp_path):
    with atomic_write(os.devnull) as stream:
        stream.write(b"gone")
    assert Path(os.devnull).is_char_device()  # written to, not renamed over (as root, a rename would succeed)
    with pytest.raises(OSError) as info:
        with atomic_write("/dev/full") as stream:
            stream.write(b"x")
            stream.flush()
    assert info.value.errno == errno.ENOSPC
    with pytest.raises(IsADirectoryError):
        with atomic_write(tmp_path):
            pass


def test_a_signal_in_a_deferred_section_is_raised_when_it_ends():
    events = []
    with fileio.interrupt_on_signals():
        with pytest.raises(Interrupted) as info:
            with fileio.deferred_signals():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler runs here, and defers
                events.append("the section ran to its end")
    assert events == ["the section ran to its end"]
    assert (info.value.signum, info.value.exit_status, info.value.name) == (signal.SIGTERM, 143, "SIGTERM")
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # put back


# -- the command line: -o under a full disk and real signals ---------------------------------------

def test_audit_o_on_a_full_disk_keeps_the_old_report(tmp_path, monkeypatch, capsys):
    # ENOSPC in the middle of the report: the old code had already truncated it.
    from hma_policy.audit import report as report_module

    real = report_module.write

    def full_disk(report, fmt, stream):
        stream.write(b"the first part of the new report")
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(report_module, "write", full_disk)
    out = tmp_path / "fleet.json"
    out.write_bytes(b"the previous report")
    code = cli.main(["audit", str(EXAMPLE), "--format", "json", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err == f"hma-policy: {out}: audit.output: cannot write the report: No space left on device\n"
    assert out.read_bytes() == b"the previous report" and leftovers(tmp_path) == []
    monkeypatch.setattr(report_module, "write", real)
    assert cli.main(["audit", str(EXAMPLE), "--format", "json", "-o", str(out)]) == 0
    assert out.read_bytes().startswith(b'{\n  "kind": "hma-policy-audit"')


def test_output_to_a_full_device_is_a_clear_error_not_an_internal_one(tmp_path):
    with open("/dev/full", "wb") as full:
        decided = subprocess.run([sys.executable, "-m", "hma_policy", "decide", str(EXAMPLE)], stdout=full,
                                 stderr=subprocess.PIPE, text=True, timeout=120)
    assert (decided.returncode, decided.stderr) == (2, "hma-policy: cannot write the output: No space left on device\n")
    audited = subprocess.run([sys.executable, "-m", "hma_policy", "audit", str(EXAMPLE), "-o", "/dev/full"],
                             capture_output=True, text=True, timeout=120)
    assert (audited.returncode, audited.stdout) == (2, "")
    assert audited.stderr == "hma-policy: /dev/full: audit.output: cannot write the report: No space left on device\n"


# The console command, with report.write made slow: it writes part of the
# report, says so in a file, and waits, so that a signal arrives mid-write.
SLOW_WRITE = """
import os, sys, time
from hma_policy.audit import report
real = report.write
def slow(rep, fmt, stream):
    stream.write(b"the first part of the new report")
    stream.flush()
    open(os.environ["HMA_TEST_WRITING"], "w").close()
    time.sleep(120)
    real(rep, fmt, stream)
report.write = slow
from hma_policy.cli import run
sys.argv[0] = "hma-policy"
run()
"""


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_audit_o_leaves_the_old_report_and_says_so(tmp_path, signum, status):
    out = tmp_path / "reports" / "fleet.html"
    out.parent.mkdir()
    out.write_bytes(b"the previous report")
    writing = tmp_path / "writing"
    process = subprocess.Popen([sys.executable, "-c", SLOW_WRITE, "audit", str(FLEET), "--format", "html", "-o", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "HMA_TEST_WRITING": str(writing)})
    try:
        deadline = time.monotonic() + 120
        while not writing.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.02)
        assert len(leftovers(out.parent)) == 1  # mid-write: the new report is in its temporary file
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    name = signal.Signals(signum).name
    assert (process.returncode, stdout) == (status, "")
    assert stderr == f"hma-policy: interrupted by {name}; `{out}` was not written and is as it was\n"
    assert out.read_bytes() == b"the previous report"
    assert leftovers(out.parent) == []


# -- reading: FIFOs and devices -----------------------------------------------------------------

def test_open_regular_refuses_a_fifo_and_a_device_without_waiting(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    for path, kind in ((fifo, "a FIFO"), ("/dev/zero", "a character device")):
        with pytest.raises(NotRegularFile) as info:
            open_regular(path)
        assert info.value.strerror == f"{kind}, not a regular file"
    assert time.monotonic() - started < 5
    with pytest.raises(IsADirectoryError):
        open_regular(tmp_path)
    (tmp_path / "file").write_bytes(b"data")
    with open_regular(tmp_path / "file") as handle:
        assert handle.read() == b"data"


def test_escape_name_writes_undecodable_bytes_as_hex():
    latin1 = os.fsdecode(b"caf\xe9.json")
    assert latin1 == "caf\udce9.json"
    assert escape_name(latin1) == "caf\\xe9.json"
    assert escape_name("ok/é.json") == "ok/é.json"
    assert escape_name("dep-\ud800") == "dep-\ud800"  # not a byte: a document's own escape stays


# -- every file written, atomically: a check over the source -------------------------------------

WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
WRITING_CALLS = {"os.replace", "os.rename", "os.renames", "os.truncate", "os.ftruncate", "os.link", "os.symlink",
                 "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.move",
                 "tempfile.TemporaryFile", "tempfile.NamedTemporaryFile", "tempfile.SpooledTemporaryFile",
                 "tempfile.mkstemp", "tempfile.TemporaryDirectory", "tempfile.mkdtemp"}
WRITING_METHODS = {"write_text", "write_bytes", "extractall", "extract"}

# Each place in engine/ that creates or changes a file other than through
# atomic_write, and why that is right. A new one fails the test until it
# goes through fileio.atomic_write or is argued for here.
ALLOWED_WRITES = {
    ("engine/fileio.py", "atomic_write", "open"): "a device or a pipe as the target: written in place, nothing to keep",
    ("engine/fileio.py", "atomic_write", "os.fdopen"): "the temporary file, renamed into place",
    ("engine/fileio.py", "atomic_write", "os.replace"): "the rename into place",
    ("engine/fileio.py", "_create_beside", "os.open"): "the temporary file, created exclusively",
    ("engine/fileio.py", "write_tree", "open"): "a file of the staged folder, created exclusively, before the folder is renamed into place",
    ("engine/fileio.py", "write_tree", "os.rename"): "the staged folder renamed into place whole",
    ("engine/policyref.py", "opened", "tempfile.TemporaryDirectory"): "rules extracted from git, removed after the command",
    ("engine/audit/declog.py", "DecisionLog._open", "os.open"):
        "the decision log is appended to, not replaced: a record per write, fsync'd, its head written atomically",
    ("engine/policyref.py", "rules_from_git", ".extractall"): "into that temporary directory",
    ("engine/isolation.py", "_serve", "os.fdopen"): "the worker's answers, on a duplicate of its standard output (a pipe)",
    ("engine/server/run.py", "serve", "tempfile.TemporaryDirectory"):
        "the service's workers' metrics files (prometheus_client) and rules copies, removed when it stops",
    ("engine/server/snapshot.py", "Snapshots.copy", "tempfile.mkdtemp"):
        "a new directory for a copy of the rules, which nothing reads until it is published",
    ("engine/server/snapshot.py", "_copy_tree", "shutil.copyfile"): "a file of that copy, before it is published",
    ("engine/server/snapshot.py", "_copy_tree", "os.symlink"): "a link of that copy, before it is published",
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _dotted(node.value) + "." + node.attr
    return "?"


def _scopes(tree: ast.Module):
    """(qualified name of the enclosing function or class, node) for every node."""
    stack = [(tree, "")]
    while stack:
        node, scope = stack.pop()
        yield scope, node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.append((child, f"{scope}.{child.name}" if scope else child.name))
            else:
                stack.append((child, scope))


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """Each function by its qualified name (_scopes gives a function its own name as its scope)."""
    return {scope: node for scope, node in _scopes(tree) if isinstance(node, ast.FunctionDef)}


def _names_in(node: ast.AST, assignments: dict[str, ast.AST], depth: int = 0) -> set[str]:
    """Every name and attribute an expression is made of, through the assignments of its names."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.Name):
            found.add(sub.id)
            if sub.id in assignments and depth < 5:
                found |= _names_in(assignments[sub.id], assignments, depth + 1)
    return found


def _mode(call: ast.Call, position: int) -> ast.AST | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg in ("mode", "flags")), None)


def write_sites() -> dict[tuple[str, str, str], list[int]]:
    """Every call in engine/ that may create or change a file: (module, scope, call) -> lines."""
    sites: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted(ENGINE.rglob("*.py")):
        module = path.relative_to(REPO).as_posix()
        for (scope, kind), lines in _writes_in(ast.parse(path.read_text(encoding="utf-8"))).items():
            sites[module, scope, kind] = lines
    return sites


def _writes_in(tree: ast.Module) -> dict[tuple[str, str], list[int]]:
    """The calls of a module that may create or change a file: (scope, call) -> lines."""
    functions = _functions(tree)

    def assigned(within: ast.AST) -> dict[str, ast.AST]:
        return {t.id: n.value for n in ast.walk(within) if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)}
    module_level = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
                    for t in n.targets if isinstance(t, ast.Name)}
    sites: dict[tuple[str, str], list[int]] = {}
    for scope, node in _scopes(tree):
        if not isinstance(node, ast.Call):
            continue
        # A name in the flags of os.open: the function's own assignment, else the module's.
        assignments = {**module_level, **(assigned(functions[scope]) if scope in functions else {})}
        name = _dotted(node.func)
        kind = None
        if node.args and _dotted(node.args[0]) == "os.devnull":
            continue  # the null device
        if name in ("open", "io.open", "os.fdopen") or name.endswith(".open") and name not in ("os.open", "tarfile.open"):
            mode = _mode(node, 1)
            if mode is not None and not (isinstance(mode, ast.Constant) and not set(str(mode.value)) & set("wax+")):
                kind = name if name in ("open", "io.open", "os.fdopen") else ".open"
        elif name == "os.open":
            flags = _mode(node, 1)
            if flags is None or _names_in(flags, assignments) & WRITE_FLAGS:
                kind = name
        elif name in WRITING_CALLS:
            kind = name
        elif isinstance(node.func, ast.Attribute) and node.func.attr in WRITING_METHODS:
            kind = "." + node.func.attr
        if kind is not None:
            sites.setdefault((scope, kind), []).append(node.lineno)
    return sites


def test_every_file_the_tool_writes_is_written_atomically():
    sites = write_sites()
    unexplained = {site: lines for site, lines in sites.items() if site not in ALLOWED_WRITES}
    assert not unexplained, ("files written other than through fileio.atomic_write (use it, or argue for the "
                             f"exception in ALLOWED_WRITES): {unexplained}")
    stale = set(ALLOWED_WRITES) - set(sites)
    assert not stale, f"ALLOWED_WRITES names writes that are gone: {stale}"


def test_the_write_check_finds_the_writes_of_the_old_code():
    # Not vacuous: the old `audit -o` and head writer, and writes spelled otherwise.
    old = ast.parse(
        "def _audit_report(args, report):\n    with open(args.output, 'wb') as handle:\n        write(report, handle)\n"
        "FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC\n"
        "def _write_head(tmp, head):\n    fd = os.open(tmp, FLAGS, 0o644)\n    os.replace(tmp, head)\n"
        "def other(path, text):\n    path.write_text(text)\n    with path.open(mode='a') as f:\n        pass\n"
        "def reads(path):\n    flags = os.O_RDONLY\n    os.open(path, flags)\n    open(path, 'rb')\n    path.open()\n")
    assert set(_writes_in(old)) == {("_audit_report", "open"), ("_write_head", "os.open"), ("_write_head", "os.replace"),
                                    ("other", ".write_text"), ("other", ".open")}


# -- every subprocess argument from a user after `--end-of-options` or `--` -------------------------

SUBPROCESS_CALLS = {"subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call",
                    "subprocess.check_output", "asyncio.create_subprocess_exec"}
NEVER = {"os.system", "os.popen", "asyncio.create_subprocess_shell"} | {f"os.{n}" for n in (
    "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe", "spawnl", "spawnle", "spawnlp",
    "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "posix_spawn", "posix_spawnp")}
SEPARATORS = {"--", "--end-of-options"}
# Values that are not the user's: the interpreter running the tool.
TRUSTED = {"sys.executable"}


def _check_argv(elements: list[ast.AST], separated: bool, functions: dict[str, ast.FunctionDef],
                calls: dict[str, list[ast.Call]], scope: str) -> list[str]:
    """Problems with an argument list: a value not fixed in the source before the separator."""
    problems = []
    for element in elements:
        if isinstance(element, ast.Constant):
            separated = separated or element.value in SEPARATORS
        elif _dotted(element) in TRUSTED:
            pass
        elif isinstance(element, ast.Starred) and isinstance(element.value, ast.Name) and scope in functions:
            # `*arguments`, a parameter of a helper: check what each caller passes.
            function = functions[scope]
            parameters = [a.arg for a in function.args.args]
            if element.value.id not in parameters or not calls.get(function.name):
                problems.append(f"{scope}: `*{element.value.id}` is not a parameter of a helper whose callers are seen")
                continue
            index = parameters.index(element.value.id)
            for call in calls[function.name]:
                given = call.args[index] if len(call.args) > index else None
                if not isinstance(given, (ast.List, ast.Tuple)):
                    problems.append(f"{scope}: a caller at line {call.lineno} passes no literal argument list")
                else:
                    problems += _check_argv(given.elts, separated, functions, calls, f"{scope} (line {call.lineno})")
        elif not separated:
            problems.append(f"{scope}: `{ast.unparse(element)}` (line {element.lineno}) comes before `--end-of-options`/`--`")
    return problems


def subprocess_sites() -> tuple[list[str], list[str]]:
    """(the subprocess calls checked, the problems found) over engine/."""
    checked, problems = [], []
    for path in sorted(ENGINE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = path.relative_to(REPO).as_posix()
        functions = _functions(tree)
        calls: dict[str, list[ast.Call]] = {}
        for _, node in _scopes(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                calls.setdefault(node.func.id, []).append(node)
        for scope, node in _scopes(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            where = f"{module}:{scope}"
            if name in NEVER or name in SUBPROCESS_CALLS and any(
                    k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False) for k in node.keywords):
                problems.append(f"{where}: `{name}` runs a shell or replaces the process")
            elif name in SUBPROCESS_CALLS:
                checked.append(where)
                argv = node.args[0] if node.args else None
                if name == "asyncio.create_subprocess_exec":
                    elements = list(node.args)
                elif isinstance(argv, (ast.List, ast.Tuple)):
                    elements = list(argv.elts)
                else:
                    problems.append(f"{where}: the argument list is not written out in the call")
                    continue
                problems += [f"{module}:{p}" for p in _check_argv(elements, False, functions, calls, scope)]
    return checked, problems


def test_every_user_value_given_to_a_subprocess_comes_after_end_of_options():
    checked, problems = subprocess_sites()
    assert not problems, problems
    # Not vacuous: git (a user's revision and path) and the isolation worker are checked.
    assert set(checked) == {"engine/policyref.py:_git", "engine/isolation.py:_Worker.__init__"}


def test_the_subprocess_check_finds_the_old_git_call():
    tree = ast.parse('def rules_from_git(rev, sub):\n'
                     '    subprocess.run(["git", "archive", "--format=tar", rev, "--", sub], capture_output=True)\n')
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and _dotted(n.func) == "subprocess.run")
    assert _check_argv(call.args[0].elts, False, {}, {}, "rules_from_git") == [
        "rules_from_git: `rev` (line 2) comes before `--end-of-options`/`--`"]
