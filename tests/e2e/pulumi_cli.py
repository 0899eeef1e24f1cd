"""The real Pulumi CLI and engine, run in a scratch copy of the project.

Plain commands (`stack init`, `config set`, `stack output`) run the CLI; preview, up, destroy and
refresh run the project's program through the Automation API in a fresh process each time
(`tests/e2e/engine.py` says why). State lives in a file backend, secrets are encrypted with a
passphrase, and no plugin is ever downloaded: the provider comes from `scripts/e2e-tools.sh`,
found on PATH.

Every command runs as users are told to run Pulumi: through `scripts/private-tmpdir.sh`, so the
engine and the provider get a private TMPDIR that is removed when the command ends (the provider
leaves each cluster's kubeconfig there; docs/your-own-cluster.md, "Credentials on disk").
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PASSPHRASE = "modelplane-e2e-passphrase"
STOP_GRACE = 15.0  # seconds between SIGTERM and SIGKILL for a command that timed out
STACK = "e2e"


@dataclass
class Run:
    """One CLI command: its output, wall time and the peak resident memory of the processes it started."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss: dict[str, int] = field(default_factory=dict)  # process name -> bytes
    cpu: dict[str, float] = field(default_factory=dict)  # process name -> CPU seconds (user + system), all its processes
    reaped: list[str] = field(default_factory=list)  # processes of the command still running after it, then killed

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def result(self) -> dict:
        """An engine operation's JSON document (`tests/e2e/engine.py`)."""
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError:
            return {"ok": False, "error": self.tail(), "events": []}

    def json(self):
        return json.loads(self.stdout)

    def tail(self, lines: int = 25) -> str:
        text = (self.stdout + "\n" + self.stderr).strip().splitlines()
        return "\n".join(text[-lines:])


def _signal_group(group: int, sig: signal.Signals) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass  # every process of the group has ended


class MemorySampler(threading.Thread):
    """Peak RSS and CPU seconds per process name of a process and its descendants, sampled every 0.2 s from /proc.

    CPU is each process's last sampled user + system time, summed per name: a process that ends
    between two samples loses at most its last 0.2 s.
    """

    def __init__(self, root: int):
        super().__init__(daemon=True)
        self.root, self.peak, self.done = root, {}, threading.Event()
        self.cpu_of: dict[int, tuple[str, float]] = {}

    def run(self) -> None:
        while not self.done.wait(0.2):
            for pid, name, rss, cpu in _descendants(self.root):
                self.peak[name] = max(self.peak.get(name, 0), rss)
                self.cpu_of[pid] = (name, cpu)

    @property
    def cpu(self) -> dict[str, float]:
        total: dict[str, float] = {}
        for name, seconds in self.cpu_of.values():
            total[name] = total.get(name, 0.0) + seconds
        return total


TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
ENGINE = "engine (pulumi)"  # what the samples call the Pulumi CLI's process


def _group_members(group: int) -> list[str]:
    """`name pid` of every process in process group `group`."""
    return [f"{name} {pid}" for pid, name, fields in _every_process() if int(fields[2]) == group]  # pgrp


def _stat(pid: str) -> tuple[str, list[str]] | None:
    """A process's name and the fields of /proc/<pid>/stat after it (from `state`, field 3 of proc(5)); None once it
    has ended. One short line per process: cheap enough to read for every process every 0.2 s."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1].split()  # the name may hold spaces


def _every_process():
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(entry)) is not None:
            yield entry, *stat


def _cpu_seconds(pid: str) -> float:
    stat = _stat(pid)
    return 0.0 if stat is None else (int(stat[1][11]) + int(stat[1][12])) / TICKS  # utime, stime


def _descendants(root: int) -> list[tuple[int, str, int, float]]:
    """(pid, name, RSS bytes, CPU seconds) of `root` and its descendants.

    It runs every 0.2 s during an operation, over every process of the machine (the local fleet's 60 and more too),
    so it reads only each one's `stat` line: 1.9 ms a sample with 67 processes, 3.8 ms when it parsed each `status`
    as well."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[str, int, float]] = {}
    for entry, name, fields in _every_process():
        pid, ppid = int(entry), int(fields[1])
        if name.startswith("python"):  # the program's process (Automation API host)
            name = "program (python)"
        elif name.startswith("pulumi-resource"):  # /proc truncates names to 15 characters
            name = "provider"
        elif name == "pulumi":
            name = ENGINE
        children.setdefault(ppid, []).append(pid)
        # utime and stime in clock ticks, rss in pages: fields 14, 15 and 24 of proc(5)
        info[pid] = (name, int(fields[21]) * PAGE_SIZE, (int(fields[11]) + int(fields[12])) / TICKS)
    out, stack = [(root, *info[root])] if root in info else [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append((child, *info[child]))
            stack.append(child)
    return out


class PulumiProject:
    """A scratch copy of the project: Pulumi.yaml (pointing at the e2e venv), __main__.py, stacks/Pulumi.e2e.yaml."""

    def __init__(self, repo: Path, work: Path, bin_dir: Path, venv: Path):
        self.repo, self.python = repo, venv / "bin" / "python"
        self.dir = work / "project"
        self.state = work / "state"
        self.home = work / "pulumi-home"
        for folder in (self.dir / "stacks", self.state, self.home):
            folder.mkdir(parents=True, exist_ok=True)
        project = yaml.safe_load((repo / "Pulumi.yaml").read_text())
        project["runtime"]["options"]["virtualenv"] = str(venv)
        (self.dir / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
        shutil.copy(repo / "__main__.py", self.dir / "__main__.py")
        self.stack_file = self.dir / "stacks" / f"Pulumi.{STACK}.yaml"
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}:{venv / 'bin'}:{os.environ.get('PATH', '')}",
            "PULUMI_HOME": str(self.home),
            "PULUMI_BACKEND_URL": f"file://{self.state}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            # the provider is installed into PULUMI_HOME at its exact version (below), not taken from PATH
            "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
            "VIRTUAL_ENV": str(venv),
        }
        self.runs: list[Run] = []
        self.bin_dir = bin_dir

    def install_provider(self, version: str) -> None:
        """The locally built provider as plugin `resource kubernetes <version>`: what the SDK asks for, exactly."""
        run = self.run("plugin", "install", "resource", "kubernetes", version,
                       "--file", str(self.bin_dir / "pulumi-resource-kubernetes"))
        if not run.ok:
            raise RuntimeError(f"pulumi plugin install failed: {run.tail()}")

    def run(self, *args: str, timeout: float = 600, stdin: str | None = None) -> Run:
        """A plain CLI command in the project folder."""
        return self._spawn(["pulumi", *args, "--non-interactive"], self.dir, timeout, stdin)

    def modelplane(self, *args: str, timeout: float = 1800) -> Run:
        """The `modelplane` command in the project folder, as a user runs it (`modelplane up` runs `pulumi` itself)."""
        return self._spawn([str(self.python), "-m", "modelplane", *args], self.dir, timeout, None)

    def urns(self) -> list[str]:
        """Every resource URN in the stack's state file."""
        state = json.loads(self.state_file().read_text())
        return [r["urn"] for r in state.get("checkpoint", {}).get("latest", {}).get("resources") or []]

    def engine(self, op: str, *, expect_no_changes: bool = False, timeout: float = 1800,
               env: dict[str, str] | None = None, kill_engine_after: int | None = None, kill_matching: str = "",
               kill_outside: str = "", events: bool = True) -> Run:
        """preview / up / destroy / refresh of the stack with the project's program (`kill_engine_after`: a crash,
        once that many steps matching `kill_matching` are done, and none matching `kill_outside` is in flight)."""
        command = [str(self.python), "-m", "tests.e2e.engine", op, str(self.dir)]
        if expect_no_changes:
            command.append("--expect-no-changes")
        if not events:
            command.append("--no-events")
        if kill_engine_after:
            command += ["--kill-engine-after", str(kill_engine_after), "--kill-matching", kill_matching,
                        "--kill-outside", kill_outside]
        return self._spawn(command, self.repo, timeout, None, env, reap=bool(kill_engine_after))

    def _spawn(self, command: list[str], cwd: Path, timeout: float, stdin: str | None,
               env: dict[str, str] | None = None, reap: bool = False) -> Run:
        """`reap`: kill what of the command's process group outlives it (a killed engine's providers keep running)."""
        start = time.monotonic()
        wrapped = ["bash", str(self.repo / "scripts" / "private-tmpdir.sh"), *command]
        # its own process group: a timed-out command is stopped as a whole, so the wrapper still removes its folder
        process = subprocess.Popen(wrapped, cwd=cwd, env={**self.env, **(env or {})}, text=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, stdin=subprocess.PIPE if stdin is not None else None,
                                   start_new_session=True)
        sampler = MemorySampler(process.pid)
        sampler.start()
        try:
            stdout, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                stdout, stderr = process.communicate(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                stdout, stderr = process.communicate()
            stderr += f"\n(timed out after {timeout:.0f} s)"
        sampler.done.set()
        sampler.join()
        run = Run(command, process.returncode, stdout, stderr, time.monotonic() - start, dict(sampler.peak), sampler.cpu)
        if reap:
            run.reaped = _group_members(process.pid)
            _signal_group(process.pid, signal.SIGKILL)
        self.runs.append(run)
        return run

    def state_file(self) -> Path:
        return self.state / ".pulumi" / "stacks" / "modelplane" / f"{STACK}.json"

    def outputs(self) -> dict:
        run = self.run("stack", "output", "--json", "--stack", STACK)
        if not run.ok:
            raise RuntimeError(f"pulumi stack output failed: {run.tail()}")
        return run.json()
