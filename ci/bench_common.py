"""What the lab's benchmark scripts share: running a client against a started server, and
reading a row of perftest's (and rdmabench's) table."""
import re
import subprocess
import sys
import time

NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?")


def client_against(server, client_cmd):
    """Runs `client_cmd` while `server` (a Popen) serves; returns the client's output, or
    ends the benchmark with it when the client failed."""
    client = subprocess.run(client_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
    if client.returncode != 0:
        sys.exit(f"bench: {' '.join(client_cmd)} failed:\n{client.stdout}")
    return client.stdout


def table_row(output, size):
    """The numbers after `#bytes #iterations` on the row of `size`. perftest sometimes
    appends a warning to the row itself ("0.000596ethernet_read_keys: ..."): each column
    gives its leading number."""
    for line in output.splitlines():
        cols = line.split()
        if cols and cols[0] == str(size) and len(cols) >= 5:
            return [float(NUMBER.match(c).group(0)) for c in cols[2:] if NUMBER.match(c)]
    sys.exit(f"bench: no {size}-byte row in:\n{output}")


def await_listening(server, port, seconds):
    """Waits until `server` (a Popen) listens on `port`, exits, or `seconds` pass."""
    deadline = time.time() + seconds
    while not listening(port) and time.time() < deadline and server.poll() is None:
        time.sleep(0.05)


def listening(port):
    """Whether a TCP socket listens on `port` (/proc/net/tcp and tcp6, state 0A)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for r in rows:
            cols = r.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False
