#!/usr/bin/env python3
"""U1: the web UI's first screen over a big history (issue 17).

Stores N jobs (default 1,000,000), each with one task row, in a standalone server's SQLite
datastore, then measures the server time (the `Server-Timing: app;dur=` header every API
answer carries: the API's own handling, from the parsed request to the answer) of the
requests the UI's jobs page makes for its first screen: the page, /whoami,
GET /jobs?page=1&size=20, GET /metrics (its cards, messages waiting included). The first screen's
server time is the sum of those. Reported: the first request of each after a restart
(cold caches), and the median and worst of --reps warm rounds; then the other list views
(a state filter, a tag search, a free-text search, a deep page) for comparison.

The jobs are made by copying one real job's row (submitted through the API and run to
its end) with new ids, names, tags, states and times, in SQL, so that 1,000,000 take
seconds instead of the hours submitting them would; every row is one the server itself
wrote, but for those columns.

Usage: bench/ui_bench.py --baton build/bench/src/cli/baton [--jobs 1000000] [--reps 20]
                         [--results bench/RESULTS.md]
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, baton, data_dir, port):
        self.port = port
        self.log = open(os.path.join(os.path.dirname(data_dir), "server.log"), "ab")
        self.proc = subprocess.Popen(
            [baton, "run", "standalone", "--data-dir", data_dir,
             "--address", f"127.0.0.1:{port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"baton exited with {self.proc.returncode}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        sys.exit("baton did not start within 120 s")

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        timing = r.getheader("Server-Timing") or ""
        conn.close()
        dur = None
        if "dur=" in timing:
            dur = float(timing.split("dur=")[1].split(";")[0].split(",")[0])
        return r.status, data, dur

    def get(self, path):
        return self.request("GET", path)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def populate(db_path, n):
    """Copies the one stored job (and its task row) n times."""
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    job_cols = [r[1] for r in db.execute("PRAGMA table_info(jobs)")]
    task_cols = [r[1] for r in db.execute("PRAGMA table_info(tasks)")]
    (created,) = db.execute("SELECT created_at FROM jobs").fetchone()
    override_job = {
        # 32 hex characters, apart from the server's own ids (which start with a time).
        "id": "printf('f%031x', n.i)",
        "state": "CASE WHEN n.i % 50 = 0 THEN 'FAILED' WHEN n.i % 97 = 0 THEN 'CANCELLED' "
                 "ELSE 'COMPLETED' END",
        "name": "'nightly report ' || n.i",
        "description": "'copy ' || n.i || ' of a real job'",
        "tags": "CASE WHEN n.i % 10 = 0 THEN '[\"blue\",\"nightly\"]' ELSE '[\"nightly\"]' END",
        "created_at": f"{created} - n.i * 1000",
        "started_at": f"{created} - n.i * 1000 + 10",
        "completed_at": f"CASE WHEN n.i % 50 = 0 OR n.i % 97 = 0 THEN NULL "
                        f"ELSE {created} - n.i * 1000 + 900 END",
        "failed_at": f"CASE WHEN n.i % 50 = 0 THEN {created} - n.i * 1000 + 900 ELSE NULL END",
    }
    override_task = {
        "id": "printf('e%031x', n.i)",
        "job_id": "printf('f%031x', n.i)",
        "created_at": f"{created} - n.i * 1000 + 5",
    }
    job_select = ", ".join(override_job.get(c, f"t.{c}") for c in job_cols)
    task_select = ", ".join(override_task.get(c, f"t.{c}") for c in task_cols)
    batch = 100_000
    for start in range(1, n + 1, batch):
        end = min(n, start + batch - 1)
        gen = (f"WITH RECURSIVE n(i) AS (SELECT {start} UNION ALL SELECT i + 1 FROM n "
               f"WHERE i < {end}) ")
        db.execute(gen + f"INSERT INTO jobs ({', '.join(job_cols)}) SELECT {job_select} "
                   f"FROM n, (SELECT * FROM jobs WHERE id NOT LIKE 'f%' LIMIT 1) t")
        db.execute(gen + f"INSERT INTO tasks ({', '.join(task_cols)}) SELECT {task_select} "
                   f"FROM n, (SELECT * FROM tasks WHERE id NOT LIKE 'e%' LIMIT 1) t")
        db.commit()
        print(f"  stored {end:,} jobs", file=sys.stderr, flush=True)
    db.execute("ANALYZE")
    db.commit()
    db.close()


FIRST_SCREEN = [
    ("page /", "/"),
    ("GET /whoami", "/whoami"),
    ("GET /jobs?page=1&size=20", "/jobs?page=1&size=20"),
    ("GET /metrics", "/metrics"),
]
OTHER_VIEWS = [
    ("GET /queues", "/queues"),
    ("GET /nodes", "/nodes"),
    ("GET /jobs?state=FAILED", "/jobs?page=1&size=20&state=FAILED"),
    ("GET /jobs?state=RUNNING", "/jobs?page=1&size=20&state=RUNNING"),
    ("GET /jobs?q=tag:blue", "/jobs?page=1&size=20&q=tag:blue"),
    ("GET /jobs?q=report 4242", "/jobs?page=1&size=20&q=report%204242"),
    ("GET /jobs?page=500", "/jobs?page=500&size=20"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baton", required=True)
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--results", help="append the table to this file")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="baton-ui-bench-")
    data = os.path.join(work, "data")
    try:
        port = free_port()
        print(f"U1: storing {args.jobs:,} jobs under {work}", file=sys.stderr)
        s = Server(args.baton, data, port)
        job = {"name": "nightly report", "tags": ["nightly"],
               "tasks": [{"name": "build", "run": "echo built"}]}
        status, body, _ = s.request("POST", "/jobs", json.dumps(job),
                                    {"Content-Type": "application/json"})
        assert status == 200, body
        jid = json.loads(body)["id"]
        deadline = time.time() + 60
        while json.loads(s.get(f"/jobs/{jid}")[1])["state"] != "COMPLETED":
            if time.time() > deadline:
                sys.exit("the template job did not complete")
            time.sleep(0.1)
        s.stop()
        t0 = time.time()
        populate(os.path.join(data, "baton.db"), args.jobs)
        print(f"  in {time.time() - t0:.0f} s", file=sys.stderr)

        s = Server(args.baton, data, port)
        rows = []
        cold = {}
        for label, path in FIRST_SCREEN + OTHER_VIEWS:
            status, body, dur = s.get(path)
            assert status == 200, (path, status, body[:200])
            cold[label] = dur
        total = json.loads(s.get("/jobs?page=1&size=20")[1])["totalItems"]
        assert total == args.jobs + 1, total
        warm = {label: [] for label, _ in FIRST_SCREEN + OTHER_VIEWS}
        for _ in range(args.reps):
            for label, path in FIRST_SCREEN + OTHER_VIEWS:
                warm[label].append(s.get(path)[2])
        s.stop()
        for label, _ in FIRST_SCREEN + OTHER_VIEWS:
            rows.append((label, cold[label], statistics.median(warm[label]), max(warm[label])))
        first = [r for r in rows if r[0] in dict(FIRST_SCREEN)]
        sums = ("first screen (sum)", sum(r[1] for r in first), sum(r[2] for r in first),
                sum(r[3] for r in first))
        lines = [
            f"U1: the UI's first screen over {total:,} stored jobs (one task row each), "
            f"server time from `Server-Timing` in ms; cold = first request after a restart, "
            f"then median and worst of {args.reps} warm rounds "
            f"(`bench/ui_bench.py --baton {args.baton} --jobs {args.jobs} --reps {args.reps}`):",
            "",
            "| request | cold | warm median | warm worst |",
            "|---|---:|---:|---:|",
        ]
        for r in first + [sums]:
            lines.append(f"| {r[0]} | {r[1]:.1f} | {r[2]:.1f} | {r[3]:.1f} |")
        lines.append("| *other views* | | | |")
        for r in rows:
            if r[0] not in dict(FIRST_SCREEN):
                lines.append(f"| {r[0]} | {r[1]:.1f} | {r[2]:.1f} | {r[3]:.1f} |")
        lines.append("")
        lines.append(f"Target (issue 17): the first screen under 300 ms of server time: "
                     f"{'met' if sums[1] < 300 and sums[3] < 300 else 'NOT met'} "
                     f"(cold {sums[1]:.0f} ms, warm worst {sums[3]:.0f} ms).")
        text = "\n".join(lines)
        print(text)
        if args.results:
            with open(args.results, "a") as f:
                f.write("\n" + text + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
