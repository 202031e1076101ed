"""How long the reviewer's workbench takes on a fresh clone, and with nothing changed.

What a new reviewer does, timed: `git clone` this checkout's HEAD into a temporary
directory, `uv sync --frozen` there (timed on its own: it depends on uv's cache, not on us),
then `uv run sessiongen workbench` (every notebook executed, every evidence table measured,
the site built), then the same command again with nothing changed, then
`uv run sessiongen workbench --skip-notebooks` (the site only). The clone sits beside a
`shared` link to this checkout's `../shared`, so notebook 03 finds the Mooncake traces as it
does in a real checkout (and, as there, runs on the generated trace without them).

Last, `uv run sessiongen workbench --serve --skip-notebooks --skip-evidence` serves that build
(the seconds until it announces the address), and docs/questions.md is edited at once: the
seconds until the served page shows the edit.

Figures: the wall seconds of each run, the CPU seconds of the first (all its processes:
notebooks run in parallel, one per core), and the 1-minute load average when it started (a
busy machine lengthens the wall time, never the CPU time). Targets: the first run at most
90 s, the second at most 15 s, the edit served within 5 s (issue 21).

Run: uv run python benchmarks/workbench_times.py [--quick]
`run(quick=True)` times only `--skip-notebooks --skip-evidence` twice (the site build and the
no-change check), in under a minute.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one command; it must succeed."""
    cpu, start = _children_cpu(), time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-10:]
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n" + "\n".join(tail))
    return wall, _children_cpu() - cpu


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _edit_served(
    clone: Path, env: dict[str, str], say: Callable[[str], None]
) -> tuple[float, float]:
    """Seconds from starting `--serve` on the unchanged build to its announcing the address
    (which answers by then), and from an edit of docs/questions.md made at once to the page
    served changed; says the server's own line on what it rebuilt."""
    port = _free_port()
    started = time.monotonic()
    cmd = ["uv", "run", "sessiongen", "workbench", "--serve", "--skip-notebooks"]
    cmd += ["--skip-evidence", "--port", str(port)]
    proc = subprocess.Popen(
        cmd, cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if "serving" in line:
                break
        else:
            raise SystemExit("workbench --serve ended without announcing its address")
        announced = time.monotonic() - started
        url = re.search(r"on (http://\S+/) ", line)
        assert url is not None, line
        page = clone / "docs" / "questions.md"
        marker = f"edited-{time.monotonic_ns()}"
        edited = time.monotonic()
        page.write_text(page.read_text(encoding="utf-8") + f"\n\n{marker}\n", encoding="utf-8")
        while time.monotonic() - edited < 120:
            try:
                with urllib.request.urlopen(url.group(1) + "questions.html", timeout=60) as got:
                    if marker in got.read().decode():
                        served = time.monotonic() - edited
                        # printed before the rebuilt page is served, so already there
                        say(f"  --serve said: {proc.stdout.readline().strip()}")
                        return announced, served
            except OSError:  # the server may hold a request while it rebuilds
                continue
            time.sleep(0.05)
        raise SystemExit("the edited page was not served within 120 s")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        subprocess.run(["git", "checkout", "--quiet", "docs/questions.md"], cwd=clone, check=True)


def run(quick: bool = False, echo: Callable[[str], None] | None = None) -> dict[str, float]:
    say = echo or (lambda line: None)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["UV_PROJECT_ENVIRONMENT"] = ".venv"  # the clone's own, as a reviewer's would be
    with tempfile.TemporaryDirectory(prefix="workbench-times-") as tmp:
        clone = Path(tmp) / "sessiongen"
        shared = ROOT.parent / "shared"
        if shared.is_dir():
            (Path(tmp) / "shared").symlink_to(shared)
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        sync, _ = _timed(["uv", "sync", "--frozen", "--quiet"], clone, env)
        say(f"uv sync --frozen: {sync:.1f} s")
        load = os.getloadavg()[0]
        first = ["uv", "run", "sessiongen", "workbench"]
        if quick:
            first += ["--skip-notebooks", "--skip-evidence"]
        fresh, fresh_cpu = _timed(first, clone, env)
        say(
            f"{' '.join(first)}, fresh: {fresh:.1f} s wall, {fresh_cpu:.1f} s CPU (load {load:.2f})"
        )
        again, _ = _timed(first, clone, env)
        say(f"the same, nothing changed: {again:.1f} s")
        figures = {
            "fresh_s": fresh,
            "unchanged_s": again,
            "fresh_cpu_s": fresh_cpu,
            "load_at_start": load,
            "sync_s": sync,
        }
        if not quick:
            site, _ = _timed([*first, "--skip-notebooks"], clone, env)
            say(f"--skip-notebooks, nothing changed: {site:.1f} s")
            figures["skip_notebooks_s"] = site
        figures["serve_announced_s"], figures["edit_served_s"] = _edit_served(clone, env, say)
        say(f"--serve: address announced after {figures['serve_announced_s']:.1f} s")
        say(f"--serve: an edited page served {figures['edit_served_s']:.1f} s after the edit")
    return {k: round(v, 2) for k, v in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the site only, no notebooks")
    args = parser.parse_args()
    for key, value in run(quick=args.quick, echo=print).items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
