from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dsv4ops.clock import SystemClock
from dsv4ops.errors import RemoteCommandError, TargetError
from dsv4ops.remote.ssh import SSHExecutor, build_command
from testing.ports import free_port
from testing.remote_sshd import SshdServer

pytestmark = pytest.mark.ssh
PY = sys.executable
ECHO_ARGS = "import sys, json; print(json.dumps(sys.argv[1:]))"


# ---------------------------------------------------------------- pure command building


def test_build_command_quotes_every_element() -> None:
    argv = ["prog", "a b", "x; rm -rf /", "$(id)", "it's"]
    cmd = build_command(argv, cwd=None, python="python3", with_env=False)
    assert shlex.split(cmd) == argv


def test_build_command_cwd_and_env_bootstrap_carry_no_values() -> None:
    cmd = build_command(["prog", "--flag"], cwd="/srv/my dir", python="python3", with_env=True)
    words = shlex.split(cmd)
    assert words[:3] == ["cd", "/srv/my dir", "&&"]
    assert words[3:5] == ["python3", "-c"] and words[-2:] == ["prog", "--flag"]


# ---------------------------------------------------------------- a real OpenSSH server


def test_hostile_values_stay_single_arguments_over_ssh(sshd: SshdServer, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    args = ["a b", f"x; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", "it's"]
    with sshd.executor() as ex:
        res = ex.run([PY, "-c", ECHO_ARGS, *args])
    assert json.loads(res.stdout) == args
    assert not marker.exists()
    assert res.host == "127.0.0.1"


def test_env_stdin_and_cwd_over_ssh_keep_secrets_off_the_command_line(
    sshd: SshdServer, tmp_path: Path
) -> None:
    secret = "tok-0123456789"
    code = (
        "import os, sys; cmdline = open('/proc/self/cmdline').read();"
        "print(os.environ['HF_TOKEN'] == sys.argv[1][::-1], os.environ['PLAIN'], os.getcwd(),"
        " os.environ['HF_TOKEN'] in cmdline, sys.stdin.read())"
    )
    with sshd.executor() as ex:
        res = ex.run(
            [PY, "-c", code, secret[::-1]],
            env={"HF_TOKEN": secret, "PLAIN": "p v"},
            cwd=str(tmp_path),
            stdin="line1",
        )
    assert res.stdout.split() == ["True", "p", "v", str(tmp_path), "False", "line1"]
    assert secret not in " ".join(res.argv)


def test_failure_and_timeout_over_ssh(sshd: SshdServer) -> None:
    with sshd.executor() as ex:
        with pytest.raises(RemoteCommandError, match="exited 5"):
            ex.run([PY, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(5)"])
        res = ex.run([PY, "-c", "import time; time.sleep(20)"], timeout=0.5, check=False)
        assert res.timed_out
        assert ex.run(["echo", "still usable"]).stdout.strip() == "still usable"


def test_command_killed_by_a_signal_is_a_command_failure_not_a_drop(sshd: SshdServer) -> None:
    with sshd.executor() as ex:
        with pytest.raises(RemoteCommandError, match="terminated by a signal"):
            ex.run([PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
        assert ex.run(["true"]).ok  # same connection, still fine


def test_put_and_get_over_sftp(sshd: SshdServer, tmp_path: Path) -> None:
    src = tmp_path / "up.txt"
    src.write_text("over sftp")
    with sshd.executor() as ex:
        ex.put(src, str(tmp_path / "remote.txt"))
        ex.get(str(tmp_path / "remote.txt"), tmp_path / "down.txt")
        with pytest.raises(TargetError, match="download"):
            ex.get(str(tmp_path / "missing.txt"), tmp_path / "x.txt")
    assert (tmp_path / "down.txt").read_text() == "over sftp"


def test_unknown_host_key_is_refused_by_default(sshd: SshdServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(TargetError, match=r"root@127\.0\.0\.1:\d+: host key is not in") as info:
        sshd.executor(known_hosts=str(empty)).run(["true"])
    assert info.value.hint and "first-use" in info.value.hint


def test_missing_known_hosts_file_is_refused(sshd: SshdServer, tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="does not exist"):
        sshd.executor(known_hosts=str(tmp_path / "nope")).run(["true"])


def test_changed_host_key_is_refused_even_with_first_use_trust(
    sshd: SshdServer, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    key_type, key_b64 = (tmp_path / "other.pub").read_text().split()[:2]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {key_type} {key_b64}\n")
    for tofu in (False, True):
        with pytest.raises(TargetError, match="host key does not match"):
            sshd.executor(known_hosts=str(kh), trust_on_first_use=tofu).run(["true"])


def test_first_use_trust_records_the_key(sshd: SshdServer, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    unrelated = "@cert-authority *.example.org " + " ".join(sshd.host_key_line.split()[1:])
    kh.write_text(unrelated + "\n")
    with sshd.executor(known_hosts=str(kh), trust_on_first_use=True) as ex:
        assert ex.run(["echo", "hi"]).stdout.strip() == "hi"
    lines = kh.read_text().splitlines()
    assert lines == [unrelated, sshd.host_key_line]  # appended; the operator's lines untouched
    with sshd.executor(known_hosts=str(kh)) as ex:  # now trusted without the option
        assert ex.run(["true"]).ok
    missing = tmp_path / "new" / "known_hosts"  # first use may also create the file
    with sshd.executor(known_hosts=str(missing), trust_on_first_use=True) as ex:
        assert ex.run(["true"]).ok


def test_connection_refused_names_the_target() -> None:
    port = free_port()
    ex = SSHExecutor(
        "127.0.0.1", port=port, user="ops", known_hosts="/dev/null", connect_timeout_s=3
    )
    with pytest.raises(TargetError, match=rf"ops@127\.0\.0\.1:{port}: cannot connect"):
        ex.run(["true"])


def test_wrong_user_key_is_an_authentication_error(sshd: SshdServer, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    with pytest.raises(TargetError, match="authentication failed"):
        sshd.executor(key=str(stranger)).run(["true"])


def test_connection_dropped_mid_command_is_a_target_error_then_reconnects(sshd: SshdServer) -> None:
    clock = SystemClock()
    ex = sshd.executor()
    ex.run(["true"])  # connected
    # prints until its stdout breaks, so it ends by itself once the session is gone
    loop = "import time\nfor i in range(300):\n    print(i, flush=True)\n    time.sleep(0.05)"
    errors: list[BaseException] = []

    def run_long() -> None:
        try:
            ex.run([PY, "-c", loop], timeout=30)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    t0 = clock.monotonic()
    worker = threading.Thread(target=run_long)
    worker.start()
    clock.sleep(0.6)
    assert sshd.drop_connections() >= 1
    worker.join(timeout=20)
    assert not worker.is_alive()
    assert clock.monotonic() - t0 < 15
    assert len(errors) == 1 and isinstance(errors[0], TargetError), errors
    assert "connection dropped" in str(errors[0]) and f"127.0.0.1:{sshd.port}" in str(errors[0])
    assert ex.run(["echo", "back"]).stdout.strip() == "back"  # the next call reconnects
    ex.close()


def test_known_hosts_lines_paramiko_cannot_parse_are_skipped(
    sshd: SshdServer, tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(
        f"[127.0.0.1]:1 ssh-ed25519 not-base64!\n@revoked * ssh-ed25519 AAAA\n{sshd.host_key_line}\n"
    )
    with sshd.executor(known_hosts=str(kh)) as ex:
        assert ex.run(["true"]).ok


def test_unreadable_known_hosts_is_a_target_error(sshd: SshdServer, tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="cannot read known_hosts"):
        sshd.executor(known_hosts=str(tmp_path)).run(["true"])  # a directory
