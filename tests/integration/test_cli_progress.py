"""Long-running commands show progress on a terminal and stay silent when piped:
`ottla produce` of a large file, `ottla consume` of a big topic, `ottla dump-log` of a
large segment. The terminal is a real pseudo-terminal (pty) on stderr."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading

import pytest

LINES = 100_000


def run(args: list[str], *, stdin_path: str | None = None, stderr_tty: bool, tmp_path) -> tuple[int, str, bytes]:
    """(exit code, what reached stderr, stdout) of `ottla ARGS`, stdout into a file and
    stderr into a pty (as at a terminal) or a pipe."""
    out_path = tmp_path / f"stdout-{len(os.listdir(tmp_path))}"
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    with open(out_path, "wb") as out:
        if not stderr_tty:
            done = subprocess.run([sys.executable, "-m", "ottla.tools.cli", *args], stdin=stdin, stdout=out,
                                  stderr=subprocess.PIPE, timeout=300)
            err = done.stderr.decode()
            code = done.returncode
        else:
            master, slave = pty.openpty()
            process = subprocess.Popen([sys.executable, "-m", "ottla.tools.cli", *args], stdin=stdin, stdout=out,
                                       stderr=slave)
            os.close(slave)
            chunks: list[bytes] = []

            def drain() -> None:
                while True:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:  # EIO: the child closed its end
                        return
                    if not chunk:
                        return
                    chunks.append(chunk)

            reader = threading.Thread(target=drain)
            reader.start()
            code = process.wait(timeout=300)
            reader.join(10)
            os.close(master)
            err = b"".join(chunks).decode()
    if stdin_path:
        stdin.close()
    return code, err, out_path.read_bytes()


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("input") / "records.txt"
    path.write_bytes(b"".join(b"record number %08d with some payload to make it longer\n" % i for i in range(LINES)))
    return str(path)


def test_produce_consume_and_dump_log_show_progress_on_a_terminal_only(fresh_broker, topic_name, big_file, tmp_path):
    # The line is first drawn a quarter second into a command: the terminal runs have
    # their first Produce and first Fetch held back half a second (the admin endpoint's
    # delay fault), so that a fast machine cannot finish before it and draw nothing.
    broker = fresh_broker(admin_port=0)
    bootstrap = ["--bootstrap-server", broker.bootstrap]
    produce = ["produce", *bootstrap, "--topic", topic_name, "--partition", "0"]

    code, err, _ = run(produce, stdin_path=big_file, stderr_tty=False, tmp_path=tmp_path)
    assert code == 0 and err == f"Produced {LINES} record(s) to {topic_name}.\n"  # piped: nothing more

    broker.admin.add_fault(kind="delay", api="Produce", count=1, delay_ms=500)
    code, err, _ = run(produce, stdin_path=big_file, stderr_tty=True, tmp_path=tmp_path)
    assert code == 0
    assert f"\rproducing to {topic_name}: " in err and " MiB of " in err and "%" in err and " records" in err
    assert err.endswith(f"\r\x1b[KProduced {LINES} record(s) to {topic_name}.\r\n")  # the line erased at the end

    consume = ["consume", *bootstrap, "--topic", topic_name, "--from-beginning", "--max-messages", str(2 * LINES)]
    code, err, out = run(consume, stderr_tty=False, tmp_path=tmp_path)
    assert code == 0 and err == f"Processed a total of {2 * LINES} messages\n"
    assert out.count(b"\n") == 2 * LINES

    broker.admin.add_fault(kind="delay", api="Fetch", count=1, delay_ms=500)
    code, err, out = run(consume, stderr_tty=True, tmp_path=tmp_path)
    assert code == 0 and out.count(b"\n") == 2 * LINES
    assert f"\rconsuming {topic_name}: " in err and f" of {2 * LINES:,} records (" in err
    assert err.endswith(f"Processed a total of {2 * LINES} messages\r\n")

    segment = os.path.join(broker.data_dir, f"{topic_name}-0", "00000000000000000000.log")
    code, err, out = run(["dump-log", segment], stderr_tty=False, tmp_path=tmp_path)
    assert code == 0 and err == "" and out.count(b"| offset: ") == 2 * LINES
    code, err, out = run(["dump-log", segment], stderr_tty=True, tmp_path=tmp_path)
    assert code == 0 and out.count(b"| offset: ") == 2 * LINES
    assert "\rdumping 00000000000000000000.log: " in err and "%" in err
