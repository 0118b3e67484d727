"""The keeper: a small process that ends a server the harness started (or
deletes this process's proxies on a user's server) once the harness is gone."""

from __future__ import annotations

#: run as ``python -I -S -c KEEPER server BINARY HOST PORT LOG`` or
#: ``... proxies API_URL PREFIX``; stdin: the pipe only the owner writes
KEEPER = r"""
import ctypes, json, os, signal, subprocess, sys, urllib.request
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
mode, args = sys.argv[1], sys.argv[2:]
proc = None
if mode == "server":
    binary, host, port, log = args
    me = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)
    def die_with_keeper():
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != me:
            os._exit(1)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [binary, "-host", host, "-port", port], stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, preexec_fn=die_with_keeper,
            env=dict(os.environ, LOG_LEVEL="warn"),
        )
    os.write(1, b"%d\n" % proc.pid)
os.close(1)
try:
    while os.read(0, 4096):
        pass
except OSError:
    pass
if proc is not None:
    proc.kill()
    proc.wait()
    try:
        os.unlink(args[3])
    except OSError:
        pass
else:
    api, prefix = args
    try:
        with urllib.request.urlopen(api + "/proxies", timeout=10) as r:
            names = list(json.load(r))
        for name in names:
            if name.startswith(prefix):
                req = urllib.request.Request(api + "/proxies/" + name, method="DELETE")
                urllib.request.urlopen(req, timeout=10).close()
    except Exception:
        pass
"""
