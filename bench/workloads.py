#!/usr/bin/env python3
"""Baton's whole-system workloads (issue 7), each against its baseline.

Every workload runs Baton and its baseline in the same run, alternating (the order flips
each repetition), and reports the median of the repetitions and the ratio Baton /
baseline. The table is printed and, with --results FILE, appended to FILE with the
machine, the date, the commit and the command.

Usage: bench/workloads.py --baton build/baton [--reps 5] [--only W1,W2] [--results FILE]
                          [--distributed] [--services-dir DIR]

This is a benchmark, not a test: nothing here decides whether `make test` passes.
"""

import argparse
import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sh(command):
    """Runs a shell command; returns its wall time in seconds."""
    start = time.perf_counter()
    subprocess.run(["sh", "-c", command], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def rss_kb(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Client:
    """HTTP/1.1 with keep-alive to one Baton API."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=900)

    def request(self, method, path, body=None):
        headers = {"Content-Type": "application/json"} if body is not None else {}
        data = json.dumps(body) if body is not None else None
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                text = resp.read()
                return resp.status, json.loads(text) if text else None
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
                if attempt:
                    raise
        raise RuntimeError("unreachable")

    def submit(self, job):
        status, body = self.request("POST", "/jobs", job)
        if status != 200:
            raise RuntimeError(f"POST /jobs: HTTP {status}: {body}")
        return body

    def run(self, job):
        """Submits with `wait` (POST blocks until the job is terminal); returns seconds."""
        job = dict(job, wait={"timeout": "30m"})
        start = time.perf_counter()
        body = self.submit(job)
        elapsed = time.perf_counter() - start
        if body.get("state") != "COMPLETED":
            raise RuntimeError(f"job {body.get('id')} ended {body.get('state')}: {body.get('error')}")
        return elapsed

    def job_state(self, name):
        """State of the newest job named `name` (a unique word), through the job list."""
        status, body = self.request("GET", f"/jobs?q={name}&size=1")
        items = (body or {}).get("items") or []
        return items[0]["state"] if items else None

    def count(self, word):
        status, body = self.request("GET", f"/jobs?q={word}&size=1")
        return body["totalItems"]


class Process:
    def __init__(self, args, env, log_path):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(args, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def wait_health(port, proc, what):
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.proc.poll() is not None:
            raise RuntimeError(f"{what} exited at start-up (see {proc.log.name})")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not answer /health within 60 s")


def wait_tls(port, proc):
    """Until the TLS port accepts a handshake and answers GET /health."""
    import ssl
    context = ssl._create_unverified_context()
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.proc.poll() is not None:
            raise RuntimeError(f"baton run standalone (TLS) exited at start (see {proc.log.name})")
        try:
            c = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=context)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("baton run standalone (TLS) did not answer /health within 60 s")


class Standalone:
    """`baton run standalone` on a free port with a fresh data directory."""

    def __init__(self, baton, work, concurrency, extra_env=None):
        self.dir = tempfile.mkdtemp(prefix="standalone.", dir=work)
        self.port = free_port()
        env = dict(os.environ, BATON_WORKER_QUEUES=f"default:{concurrency}",
                   BATON_LOGGING_LEVEL="warn", BATON_RUNTIME_TYPE="shell", **(extra_env or {}))
        self.proc = Process([baton, "run", "standalone", "--address", f"127.0.0.1:{self.port}",
                             "--data-dir", self.dir + "/data"], env, self.dir + "/server.log")
        if extra_env and "BATON_API_TLS_CERT" in extra_env:
            wait_tls(self.port, self.proc)
        else:
            wait_health(self.port, self.proc, "baton run standalone")
        self.client = Client(self.port)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        self.proc.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Distributed:
    """One coordinator and two workers over RabbitMQ and PostgreSQL (a database and a
    virtual host of their own)."""

    def __init__(self, baton, work, per_worker, services, tls=False):
        self.dir = tempfile.mkdtemp(prefix="distributed.", dir=work)
        name = "baton_bench_" + uuid.uuid4().hex[:8]
        dsn = services["BATON_TEST_POSTGRES_DSN"]
        subprocess.run(["psql", dsn.replace("dbname=baton", "dbname=postgres"), "-qc",
                        f"CREATE DATABASE {name} OWNER baton"], check=True)
        vhost = subprocess.run([SRC + "/scripts/test-services/rabbitmq.sh", "vhost", name]
                               + (["tls"] if tls else []),
                               check=True, capture_output=True, text=True,
                               env=dict(os.environ, **services)).stdout.strip()
        if tls:
            # Every broker and database connection over TLS, with client certificates
            # (the test services' TLS listeners: scripts/test-services).
            dsn = services["BATON_TEST_POSTGRES_TLS_DSN"]
            certs = services["BATON_TEST_TLS_DIR"]
        env = dict(os.environ, BATON_BROKER_TYPE="rabbitmq", BATON_BROKER_RABBITMQ_URL=vhost,
                   BATON_DATASTORE_TYPE="postgres",
                   BATON_DATASTORE_POSTGRES_DSN=dsn.replace("dbname=baton", f"dbname={name}"),
                   BATON_LOGGING_LEVEL="warn", BATON_RUNTIME_TYPE="shell")
        if tls:
            env.update(BATON_BROKER_RABBITMQ_TLS_CA=f"{certs}/ca.pem",
                       BATON_BROKER_RABBITMQ_TLS_CERT=f"{certs}/client.pem",
                       BATON_BROKER_RABBITMQ_TLS_KEY=f"{certs}/client.key")
        self.port = free_port()
        self.procs = [Process([baton, "run", "coordinator", "--address", f"127.0.0.1:{self.port}",
                               "--data-dir", self.dir + "/c"], env, self.dir + "/coordinator.log")]
        wait_health(self.port, self.procs[0], "baton run coordinator")
        for w in (1, 2):
            self.procs.append(Process([baton, "run", "worker", "--queue", f"default:{per_worker}",
                                       "--data-dir", f"{self.dir}/w{w}"], env,
                                      f"{self.dir}/worker{w}.log"))
        self.client = Client(self.port)
        deadline = time.time() + 30
        while time.time() < deadline:
            _, nodes = self.client.request("GET", "/nodes")
            if len([n for n in nodes if n.get("name") == "worker"]) >= 2:
                return
            time.sleep(0.2)
        raise RuntimeError("two workers did not register")

    @property
    def pid(self):
        return self.procs[0].pid

    def stop(self):
        for p in reversed(self.procs):
            p.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- Jobs --------------------------------------------------------------------------

def each_job(name, n, run="true", concurrency=0):
    each = {"list": f"{{{{ sequence(0, {n}) }}}}", "task": {"name": "t", "run": run}}
    if concurrency:
        each["concurrency"] = concurrency
    return {"name": name, "tasks": [{"name": "fan out", "each": each}]}


def chain_job(name, n):
    return {"name": name, "tasks": [{"name": f"step {i}", "run": "true"} for i in range(n)]}


def fan_in_job(name, n):
    return {"name": name, "tasks": [
        {"name": "first", "run": "true"},
        {"name": "fan", "parallel": {"tasks": [{"name": f"p{i}", "run": "true"} for i in range(n)]}},
        {"name": "last", "run": "true"},
    ]}


# ---- Measuring ---------------------------------------------------------------------

class Row:
    def __init__(self, workload, unit, baseline_label, baseline, baton, target, met, note=""):
        self.workload = workload
        self.unit = unit
        self.baseline_label = baseline_label
        self.baseline = baseline
        self.baton = baton
        self.target = target
        self.met = met
        self.note = note

    @property
    def ratio(self):
        if self.baseline in (None, 0) or self.baton is None:
            return None
        return self.baton / self.baseline


def alternate(reps, baseline, baton, reference=None):
    """Runs baseline() and baton() (and reference(), when given) `reps` times each,
    alternating (the order rotates each repetition); returns the medians of baseline and
    baton, and of the reference (None without one)."""
    b, x, r = [], [], []
    runs = [(baseline, b), (baton, x)] + ([(reference, r)] if reference else [])
    for i in range(reps):
        k = i % len(runs)
        for fn, out in runs[k:] + runs[:k]:
            out.append(fn())
    log(f"    baseline {fmt_list(b)}  baton {fmt_list(x)}" + (f"  reference {fmt_list(r)}" if r else ""))
    return statistics.median(b), statistics.median(x), statistics.median(r) if r else None


def fmt_list(values):
    return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"


def w1(args, engine_factory, label, concurrency, n=1000):
    rows = []
    engine = engine_factory(concurrency)
    try:
        engine.client.run(each_job("warmup", 10))
        # The shell runtime runs scripts with bash, which starts slower than sh (dash):
        # the same xargs with bash is shown as a reference.
        base, bat, ref = alternate(
            args.reps,
            lambda: sh(f"seq {n} | xargs -P {concurrency} -I{{}} sh -c true"),
            lambda: engine.client.run(each_job("w1", n)),
            lambda: sh(f"seq {n} | xargs -P {concurrency} -I{{}} bash -c true"))
    finally:
        engine.stop()
    limit = 3.0 if "distributed" in label else 1.5
    ratio = bat / base
    rows.append(Row(f"{label} fan-out {n} × true, c={concurrency}", "s",
                    f"xargs -P {concurrency}", base, bat, f"≤ {limit} × baseline",
                    ratio <= limit,
                    f"{1000 * bat / n:.2f} ms/task; xargs with bash -c: {ref:.3f} s "
                    f"(Baton / that: {bat / ref:.2f})"))
    return rows


def side_by_side(args, make_baseline, make_baton, name, n):
    """W1's job of n `true` tasks on two engines up at once (the baseline's made first),
    runs alternating: (baseline seconds, Baton seconds), medians."""
    baseline = make_baseline()
    try:
        baton = make_baton()
        try:
            for engine in (baseline, baton):
                engine.client.run(each_job("warmup", 10))
            base, bat, _ = alternate(args.reps, lambda: baseline.client.run(each_job(name, n)),
                                     lambda: baton.client.run(each_job(name, n)))
        finally:
            baton.stop()
    finally:
        baseline.stop()
    return base, bat


def w1x(args, engine_factory, concurrency=2, n=1000):
    """The isolation cost: W1 on a server whose shell tasks run sandboxed (the default: a
    mount namespace per step hiding the data directory, Landlock) against one without
    (runtime.shell.sandbox = false)."""
    base, bat = side_by_side(
        args, lambda: engine_factory(concurrency, {"BATON_RUNTIME_SHELL_SANDBOX": "false"}),
        lambda: engine_factory(concurrency), "w1x", n)
    return [Row(f"W1X fan-out {n} × true, c={concurrency}, sandboxed", "s",
                "the same, runtime.shell.sandbox = false", base, bat, "≤ 1.2 × baseline",
                bat / base <= 1.2, f"{1000 * (bat - base) / n:+.2f} ms/task for the sandbox")]


def d1s(args, services, concurrency=2, n=1000):
    """TLS's cost across machines: D1 (W1 over RabbitMQ and PostgreSQL) with every broker
    and database connection TLS (amqps with a client certificate, sslmode=verify-full with
    one) against the same deployment in the clear."""
    per_worker = max(1, concurrency // 2)
    base, bat = side_by_side(
        args, lambda: Distributed(args.baton, args.work, per_worker, services.values),
        lambda: Distributed(args.baton, args.work, per_worker, services.values, tls=True),
        "d1s", n)
    return [Row(f"D1S distributed fan-out {n} × true, c={concurrency}, TLS to RabbitMQ and "
                "PostgreSQL", "s", "the same in the clear", base, bat, "≤ 1.2 × baseline",
                bat / base <= 1.2, f"{1000 * (bat - base) / n:+.2f} ms/task for TLS")]


def w2(args, engine_factory, label, n=200):
    engine = engine_factory(2)
    try:
        engine.client.run(chain_job("warmup", 3))
        base, bat, ref = alternate(
            args.reps,
            lambda: sh(f"for i in $(seq {n}); do sh -c true; done"),
            lambda: engine.client.run(chain_job("w2", n)),
            lambda: sh(f"for i in $(seq {n}); do bash -c true; done"))
    finally:
        engine.stop()
    added_ms = 1000 * (bat - base) / n
    target_ms = 1.0
    return [Row(f"{label} chain of {n} × true", "s", "shell loop", base, bat,
                f"≤ {target_ms:g} ms added/step", added_ms <= target_ms,
                f"{added_ms:.2f} ms added/step; {1000 * (bat - ref) / n:.2f} ms over a "
                f"loop of bash -c ({ref:.3f} s)")]


def w3(args, engine_factory, n=500, concurrency=2):
    work = tempfile.mkdtemp(prefix="w3.", dir=args.work)
    mids = " ".join(f"p{i}" for i in range(n))
    # The same graph with bash as the recipes' command is shown as a reference (Baton's
    # shell runtime runs bash).
    for name, shell in (("Makefile", "sh"), ("Makefile.bash", "bash")):
        with open(os.path.join(work, name), "w") as f:
            f.write(f".PHONY: first last {mids}\n")
            f.write("last: " + mids + f"\n\t@{shell} -c true\n")
            f.write(f"{mids}: first\n\t@{shell} -c true\n")
            f.write(f"first:\n\t@{shell} -c true\n")
    engine = engine_factory(concurrency)
    try:
        engine.client.run(fan_in_job("warmup", 3))
        base, bat, ref = alternate(
            args.reps,
            lambda: sh(f"make -s -j{concurrency} -C {work} last"),
            lambda: engine.client.run(fan_in_job("w3", n)),
            lambda: sh(f"make -s -j{concurrency} -C {work} -f Makefile.bash last"))
    finally:
        engine.stop()
    ratio = bat / base
    return [Row(f"W3 1 → parallel {n} → 1, c={concurrency}", "s", f"make -j{concurrency}", base, bat,
                "≤ 1.5 × baseline", ratio <= 1.5,
                f"make with bash -c: {ref:.3f} s (Baton / that: {bat / ref:.2f})")]


def w4(args, engine_factory, n=100, concurrency=8):
    ideal = n * 0.1 / concurrency
    engine = engine_factory(concurrency)
    try:
        engine.client.run(each_job("warmup", 8, "sleep 0.1"))
        base, bat, _ = alternate(
            args.reps,
            lambda: sh(f"seq {n} | xargs -P {concurrency} -I{{}} sleep 0.1"),
            lambda: engine.client.run(each_job("w4", n, "sleep 0.1")))
    finally:
        engine.stop()
    return [Row(f"W4 {n} × sleep 0.1, c={concurrency}", "s", "ideal", ideal, bat,
                "≤ 1.1 × ideal", bat / ideal <= 1.1, f"xargs -P {concurrency}: {base:.3f} s")]


WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = '{"name":"w5job","tasks":[{"name":"t","run":"true"}]}'
wrk.headers["Content-Type"] = "application/json"
"""


def wrk(url, seconds, connections, script=None):
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s"]
    if script:
        cmd += ["-s", script]
    out = subprocess.run(cmd + [url], check=True, capture_output=True, text=True).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: .*", out)
    if bad:
        raise RuntimeError(f"wrk: {bad.group(1)} non-2xx responses:\n{out}")
    return total, rate, errors.group(0) if errors else ""


def w5(args, engine_factory, seconds=3, connections=8, concurrency=2):
    script = os.path.join(args.work, "post_job.lua")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT)
    accepted, completed, health, floor = [], [], [], []
    for i in range(args.reps):
        def baton_run():
            engine = engine_factory(concurrency)
            try:
                start = time.perf_counter()
                total, rate, errors = wrk(f"http://127.0.0.1:{engine.port}/jobs", seconds,
                                          connections, script)
                if errors:
                    log("    wrk:", errors)
                # Every accepted job completes; end to end = jobs / time to the last one.
                deadline = time.time() + 600
                while engine.client.count("COMPLETED") < total:
                    if time.time() > deadline:
                        raise RuntimeError("W5: jobs did not complete within 600 s")
                    time.sleep(0.05)
                elapsed = time.perf_counter() - start
                accepted.append(rate)
                completed.append(total / elapsed)
                # The floor of the same HTTP stack: a no-op request.
                _, h, _ = wrk(f"http://127.0.0.1:{engine.port}/health", seconds, connections)
                health.append(h)
            finally:
                engine.stop()

        def floor_run():
            floor.append(1000 / sh(f"seq 1000 | xargs -P {concurrency} -I{{}} sh -c true"))

        for fn in ([floor_run, baton_run] if i % 2 == 0 else [baton_run, floor_run]):
            fn()
    log(f"    accepted/s {fmt_list(accepted)}  completed/s {fmt_list(completed)}  "
        f"GET /health/s {fmt_list(health)}  xargs tasks/s {fmt_list(floor)}")
    acc, comp = statistics.median(accepted), statistics.median(completed)
    h, fl = statistics.median(health), statistics.median(floor)
    return [
        Row(f"W5 jobs accepted/s (wrk -c{connections}, keep-alive)", "/s", "GET /health", h, acc,
            "≥ 5000 /s", acc >= 5000),
        Row(f"W5 one-task jobs completed/s, c={concurrency}", "/s",
            f"xargs -P {concurrency} tasks/s", fl, comp, "≥ 1000 /s", comp >= 1000),
    ]


def w5s(args, engine_factory, seconds=3, connections=8, concurrency=2):
    """W5 over HTTPS: the same submissions and GET /health with wrk over keep-alive TLS
    connections (a certificate made here), beside the same over plain HTTP; the
    difference is what HTTPS costs a request."""
    script = os.path.join(args.work, "post_job.lua")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT)
    cert, key = os.path.join(args.work, "tls.crt"), os.path.join(args.work, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    rates = {"http": ([], []), "https": ([], [])}
    for i in range(args.reps):
        for scheme in (["http", "https"] if i % 2 == 0 else ["https", "http"]):
            tls = {"BATON_API_TLS_CERT": cert, "BATON_API_TLS_KEY": key} if scheme == "https" else {}
            engine = engine_factory(concurrency, tls)
            try:
                _, acc, _ = wrk(f"{scheme}://127.0.0.1:{engine.port}/jobs", seconds, connections, script)
                _, h, _ = wrk(f"{scheme}://127.0.0.1:{engine.port}/health", seconds, connections)
                rates[scheme][0].append(acc)
                rates[scheme][1].append(h)
            finally:
                engine.stop()
    med = {k: (statistics.median(a), statistics.median(h)) for k, (a, h) in rates.items()}
    log(f"    http: accepted/s {fmt_list(rates['http'][0])}  GET /health/s {fmt_list(rates['http'][1])}")
    log(f"    https: accepted/s {fmt_list(rates['https'][0])}  GET /health/s {fmt_list(rates['https'][1])}")
    cost = lambda k: 1e6 / med["https"][k] - 1e6 / med["http"][k]  # noqa: E731
    return [
        Row(f"W5S jobs accepted/s over HTTPS (wrk -c{connections}, keep-alive)", "/s",
            "the same over HTTP", med["http"][0], med["https"][0], "≥ 0.7 × HTTP",
            med["https"][0] >= 0.7 * med["http"][0],
            f"HTTPS adds {cost(0):.0f} µs a submission"),
        Row(f"W5S GET /health/s over HTTPS (wrk -c{connections}, keep-alive)", "/s",
            "the same over HTTP", med["http"][1], med["https"][1], "≥ 0.5 × HTTP",
            med["https"][1] >= 0.5 * med["http"][1],
            f"HTTPS adds {cost(1):.0f} µs a request"),
    ]


def wait_count(client, word, n, timeout=600):
    deadline = time.time() + timeout
    while client.count(word) < n:
        if time.time() > deadline:
            raise RuntimeError(f"fewer than {n} jobs {word} after {timeout} s")
        time.sleep(0.1)


def w6(args, engine_factory, concurrency=2):
    idle, loaded, peak = [], [], []
    reps = max(1, min(args.reps, 3))
    for _ in range(reps):
        engine = engine_factory(concurrency)
        try:
            time.sleep(1.0)
            idle.append(rss_kb(engine.pid) / 1024)
            for i in range(1000):
                engine.client.submit({"name": "w6done", "tasks": [{"name": "t", "run": "true"}]})
            wait_count(engine.client, "COMPLETED", 1000)
            job = engine.client.submit(each_job("w6queued", 10000, "sleep 600"))
            # Measured once the 10,000 rows are stored and published: all but the
            # `concurrency` running ones wait in the queue.
            deadline = time.time() + 600
            while True:
                _, queue = engine.client.request("GET", "/queues/default")
                if queue and queue.get("size", 0) + queue.get("unacked", 0) >= 10000 - concurrency:
                    break
                if time.time() > deadline:
                    raise RuntimeError(f"W6: the 10,000 tasks were not queued within 600 s: {queue}")
                time.sleep(0.1)
            time.sleep(0.5)
            loaded.append(rss_kb(engine.pid) / 1024)
            peak.append(rss_kb(engine.pid, "VmHWM") / 1024)
            engine.client.request("PUT", f"/jobs/{job['id']}/cancel")
        finally:
            engine.stop()
    log(f"    idle MB {fmt_list(idle)}  loaded MB {fmt_list(loaded)}  peak MB {fmt_list(peak)}")
    i, l = statistics.median(idle), statistics.median(loaded)
    return [
        Row("W6 RSS idle", "MB", "target", 30, i, "≤ 30 MB", i <= 30),
        Row("W6 RSS, 10,000 queued + 1,000 finished jobs", "MB", "target", 200, l, "≤ 200 MB",
            l <= 200, f"peak {statistics.median(peak):.0f} MB"),
    ]


def w7(args, engine_factory, n=20000, concurrency=8):
    plan, total, peak, base = [], [], [], []
    reps = args.w7_reps or args.reps
    for i in range(reps):
        def baton_run():
            engine = engine_factory(concurrency)
            try:
                name = "w7" + uuid.uuid4().hex[:8]
                # Planning (the each's 20,000 rows stored) is over when the first child
                # runs: children are published only once all rows are stored. The first
                # one to run leaves a mark (a shell builtin, no extra process).
                mark = os.path.join(engine.dir, "first-child-ran")
                job = each_job(name, n, run=f"[ -e {mark} ] || : > {mark}")
                start = time.perf_counter()
                job = engine.client.submit(job)
                deadline = time.time() + 600
                while not os.path.exists(mark):
                    if time.time() > deadline:
                        raise RuntimeError("W7: no child ran within 600 s")
                    time.sleep(0.005)
                plan.append(time.perf_counter() - start)
                deadline = time.time() + 1200
                while True:
                    state = engine.client.job_state(name)
                    if state in ("COMPLETED", "FAILED", "CANCELLED"):
                        break
                    if time.time() > deadline:
                        raise RuntimeError("W7 did not finish in 1200 s")
                    time.sleep(0.05)
                if state != "COMPLETED":
                    raise RuntimeError(f"W7 job {job['id']} ended {state}")
                total.append(time.perf_counter() - start)
                peak.append(rss_kb(engine.pid, "VmHWM") / 1024)
            finally:
                engine.stop()

        def base_run():
            base.append(sh(f"seq {n} | xargs -P {concurrency} -I{{}} sh -c true"))

        for fn in ([base_run, baton_run] if i % 2 == 0 else [baton_run, base_run]):
            fn()
    log(f"    plan {fmt_list(plan)}  total {fmt_list(total)}  xargs {fmt_list(base)}  "
        f"peak MB {fmt_list(peak)}")
    p, t, b, m = (statistics.median(v) for v in (plan, total, base, peak))
    return [
        Row(f"W7 plan each of {n} (POST → all rows stored, first child runs)", "s", "target", 1.0, p, "≤ 1 s",
            p <= 1.0),
        Row(f"W7 peak RSS, each of {n}", "MB", "target", 300, m, "≤ 300 MB", m <= 300),
        Row(f"W7 each of {n} × true, c={concurrency}", "s", f"xargs -P {concurrency}", b, t,
            "≤ 1.5 × baseline", t / b <= 1.5),
    ]


def w8(args, engine_factory, sizes=(200, 2000, 20000)):
    """Chains of 200, 2,000 and 20,000 `true` steps on one engine (durable defaults): ms
    per step for each, and the engine's RSS idle before the first and a few seconds after
    the last. A decision should cost the same in a job of 20 tasks and of 20,000, and
    what a job held should go when it ends."""
    per_step, idle, after = {n: [] for n in sizes}, [], []
    reps = args.w8_reps or 1
    for _ in range(reps):
        engine = engine_factory(2)
        try:
            engine.client.run(chain_job("warmup", 3))
            time.sleep(2.0)
            idle.append(rss_kb(engine.pid) / 1024)
            for n in sizes:
                seconds = engine.client.run(chain_job(f"w8c{n}", n))
                per_step[n].append(1000 * seconds / n)
                log(f"    chain of {n}: {per_step[n][-1]:.2f} ms/step, RSS "
                    f"{rss_kb(engine.pid) / 1024:.0f} MB")
            time.sleep(5.0)
            after.append(rss_kb(engine.pid) / 1024)
        finally:
            engine.stop()
    med = {n: statistics.median(v) for n, v in per_step.items()}
    i, a = statistics.median(idle), statistics.median(after)
    spread = max(med.values()) / min(med.values())
    log(f"    ms/step {', '.join(f'{n}: {fmt_list(v)}' for n, v in per_step.items())}  "
        f"idle MB {fmt_list(idle)}  after MB {fmt_list(after)}")
    rows = [Row(f"W8 chain of {n} × true", "ms/step", f"chain of {sizes[0]}", med[sizes[0]],
                med[n], "≤ 1.1 × the shortest's", med[n] <= 1.1 * med[sizes[0]],
                f"{med[n]:.2f} ms/step")
            for n in sizes]
    rows.append(Row(f"W8 RSS 5 s after the chains", "MB", "idle before", i, a,
                    "≤ idle + 10 MB", a <= i + 10, f"steps' spread {spread:.2f}×"))
    return rows


# ---- Services for distributed mode --------------------------------------------------

class Services:
    def __init__(self, directory):
        self.dir = directory
        os.makedirs(directory, mode=0o755, exist_ok=True)
        self.env = dict(os.environ, BATON_SERVICES_DIR=directory, BATON_TEST_POSTGRES_DURABLE="1")
        self.values = {}
        for service in ("postgres", "rabbitmq"):
            subprocess.run([SRC + f"/scripts/test-services/{service}.sh", "start"], check=True,
                           env=self.env, stdout=subprocess.DEVNULL)
            with open(f"{directory}/{service}.env") as f:
                for line in f:
                    m = re.match(r"export (\w+)=(.*)", line.strip())
                    if m:
                        self.values[m.group(1)] = m.group(2).strip("'\"")
        self.values["BATON_SERVICES_DIR"] = directory
        self.check_postgres_durable()

    def check_postgres_durable(self):
        # The benchmarks measure what a user runs: PostgreSQL with fsync,
        # synchronous_commit and full_page_writes on (postgres.sh turns them off for tests
        # unless BATON_TEST_POSTGRES_DURABLE=1, which __init__ sets).
        dsn = self.values["BATON_TEST_POSTGRES_DSN"]
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            value = subprocess.run(["psql", dsn, "-qAtc", f"SHOW {setting}"], check=True,
                                   capture_output=True, text=True).stdout.strip()
            if value != "on":
                raise RuntimeError(f"PostgreSQL for the benchmarks: {setting} is {value}, not on")

    def stop(self):
        for service in ("rabbitmq", "postgres"):
            subprocess.run([SRC + f"/scripts/test-services/{service}.sh", "stop"], env=self.env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---- Report -------------------------------------------------------------------------

def fmt_value(v, unit):
    if v is None:
        return "—"
    if unit == "s":
        return f"{v:.3f} s"
    if unit == "MB":
        return f"{v:.0f} MB"
    if unit == "ms/step":
        return f"{v:.2f} ms/step"
    if unit == "/s":
        return f"{v:.0f} /s"
    return f"{v:g}"


def table(rows):
    lines = ["| workload | baseline | Baton | Baton / baseline | target | met | note |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "—"
        lines.append(f"| {r.workload} | {r.baseline_label}: {fmt_value(r.baseline, r.unit)} | "
                     f"{fmt_value(r.baton, r.unit)} | {ratio} | {r.target} | "
                     f"{'yes' if r.met else '**no**'} | {r.note} |")
    return "\n".join(lines)


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.node()}: {os.cpu_count()} × {cpu}, {mem:.0f} GiB, Linux {platform.release()}"


def commit():
    try:
        rev = subprocess.run(["git", "-C", SRC, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", SRC, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--baton", default=os.path.join(SRC, "build/baton"))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--w7-reps", type=int, default=0, help="repetitions of W7 (default --reps)")
    p.add_argument("--w8-reps", type=int, default=0, help="repetitions of W8 (default 1)")
    p.add_argument("--only", default="", help="comma-separated: W1,W1X,W2,W3,W4,W5,W5S,W6,W7,W8,D1,D2,D1S")
    p.add_argument("--results", default="", help="append the table to this Markdown file")
    p.add_argument("--distributed", action="store_true", help="also D1/D2 (RabbitMQ + PostgreSQL)")
    p.add_argument("--label", default="", help="what was measured, when not the checked-out commit")
    p.add_argument("--extra", default="", help="text added to the results entry (micro benches)")
    p.add_argument("--invoked-as", default="",
                   help="the command recorded in the results entry (default: this one's arguments)")
    p.add_argument("--micro", default="", help="micro benchmark binary: its PostgreSQL and "
                   "RabbitMQ cases run once the services are up")
    args = p.parse_args()
    args.baton = os.path.abspath(args.baton)
    only = {w.strip().upper() for w in args.only.split(",") if w.strip()}
    want = lambda w: not only or w in only  # noqa: E731
    for tool in ("wrk", "make", "xargs"):
        if not shutil.which(tool):
            sys.exit(f"workloads.py: {tool} is missing (scripts/install-deps.sh bench installs it)")

    args.work = tempfile.mkdtemp(prefix="baton-bench.")
    os.chmod(args.work, 0o755)  # PostgreSQL runs as its own user under it
    standalone = lambda c, env=None: Standalone(args.baton, args.work, c, env)  # noqa: E731
    rows = []
    started = time.time()
    try:
        steps = [
            ("W1", lambda: w1(args, standalone, "W1", 2) + w1(args, standalone, "W1", 8)),
            ("W1X", lambda: w1x(args, standalone)),
            ("W2", lambda: w2(args, standalone, "W2")),
            ("W3", lambda: w3(args, standalone)),
            ("W4", lambda: w4(args, standalone)),
            ("W5", lambda: w5(args, standalone)),
            ("W5S", lambda: w5s(args, standalone)),
            ("W6", lambda: w6(args, standalone)),
            ("W7", lambda: w7(args, standalone)),
            ("W8", lambda: w8(args, standalone)),
        ]
        for name, step in steps:
            if want(name):
                log(f"== {name}")
                t = time.time()
                rows += step()
                log(f"   ({time.time() - t:.0f} s)")
        if args.distributed and (want("D1") or want("D2") or want("D1S")):
            log("== starting PostgreSQL and RabbitMQ")
            services = Services(os.path.join(args.work, "services"))
            try:
                if args.micro:
                    log("== micro benchmarks against PostgreSQL and RabbitMQ")
                    out = subprocess.run([args.micro, "--benchmark_filter=Postgres|RabbitMq",
                                          "--benchmark_min_time=0.2"], capture_output=True,
                                         text=True, env=dict(os.environ, **services.values)).stdout
                    log(out)
                    lines = [l for l in out.splitlines() if l.startswith(("BM_", "-", "Bench"))]
                    args.extra += ("\n\nWith PostgreSQL and RabbitMQ (`BATON_TEST_POSTGRES_DSN`, "
                                   "`BATON_TEST_RABBITMQ_URL` set):\n\n```\n" + "\n".join(lines) +
                                   "\n```\n")
                dist = lambda c: Distributed(args.baton, args.work, max(1, c // 2),  # noqa: E731
                                             services.values)
                if want("D1"):
                    log("== D1")
                    rows += w1(args, dist, "D1 distributed", 2) + w1(args, dist, "D1 distributed", 8)
                if want("D2"):
                    log("== D2")
                    rows += w2(args, dist, "D2 distributed")
                if want("D1S"):
                    log("== D1S")
                    rows += d1s(args, services)
            finally:
                services.stop()
    finally:
        shutil.rmtree(args.work, ignore_errors=True)

    out = table(rows)
    print(out)
    if args.results:
        command = args.invoked_as
        if not command:
            shown, skip = [], False
            for arg in sys.argv[1:]:  # the --extra text is written below, not in the command
                if skip or arg == "--extra" or arg.startswith("--extra="):
                    skip = arg == "--extra"
                    continue
                shown.append(arg)
            command = " ".join(["bench/workloads.py"] + shown).replace(SRC + "/", "")
        with open(args.results, "a") as f:
            what = args.label or f"commit {commit()}"
            f.write(f"\n## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} — {what}\n\n")
            f.write(f"- machine: {machine()}\n")
            f.write(f"- command: `{command}` (medians of {args.reps} alternating repetitions; "
                    f"took {time.time() - started:.0f} s)\n\n")
            f.write(out + "\n")
            if args.extra:
                f.write("\n" + args.extra + "\n")


if __name__ == "__main__":
    main()
