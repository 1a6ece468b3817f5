"""bench/process_cpu.py: a process's CPU is found under its command line."""

from __future__ import annotations

import subprocess
import sys
import threading

from bench.process_cpu import Sampled, sample

#: waits for a word, burns a fixed amount of CPU, says so, then waits again (alive, its CPU
#: final) until its input closes
BURNER = ("# process-cpu-marker\nimport sys\nsys.stdin.readline()\n"
          "s = 0\nfor i in range(3_000_000): s += i\nprint('done', flush=True)\n"
          "sys.stdin.readline()")


def test_a_burning_process_is_reported_under_its_command_line() -> None:
    proc = subprocess.Popen([sys.executable, "-c", BURNER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    finished = threading.Event()
    started = threading.Event()
    out: list[Sampled] = []
    sampler = threading.Thread(
        target=lambda: out.append(sample(finished.is_set, every=0.05, started=started)))
    sampler.start()
    try:
        started.wait()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"
    finally:
        finished.set()
        sampler.join()
        proc.stdin.close()
        proc.wait()
    result = out[0]
    mine = [cpu for key, cpu in result.by_command if "process-cpu-marker" in key]
    # the burn (a fraction of a second on any machine) counted, under the burner's own line
    assert len(mine) == 1 and mine[0] >= 0.05, result.by_command
    assert result.sampled_cpu_s >= mine[0]
