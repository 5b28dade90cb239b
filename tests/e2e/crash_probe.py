#!/usr/bin/env python3
"""The crash suite's client (crash_test.sh): a burst of concurrent submissions that kills
the server part-way, and the check that every acknowledged job completed with each of
its tasks run at least once.

  crash_probe.py burst URL MARKS COUNT KILL_AFTER PID OUT
      POSTs COUNT jobs from 32 threads; once KILL_AFTER of them are acknowledged (HTTP
      200), sends SIGKILL to PID while the other posts are still in flight. Writes OUT:
      a JSON list of [index, job id] of every acknowledged job.
  crash_probe.py check URL MARKS ACKED SECONDS
      Waits up to SECONDS for every job in ACKED to end; prints each one that did not
      COMPLETE (its state, its error and its failed rows' errors) and each task that left
      no mark, then a summary line; exits 1 when any job or task is missing.

Job i's tasks leave a file MARKS/<i>.<task>.<pid>-<ns> per run, at its end (after 0.2 s,
so that some are running at the kill): "a", then a parallel of
"p1" and "p2" (every other job), then an each over three items "e1".."e3" (every third).
"""
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request


def job_of(i, marks):
    def mark(name):
        # `run` is not templated: the mark's name reaches the script through env.
        return {"name": name, "env": {"M": marks, "T": "%d.%s" % (i, name)},
                "run": 'sleep 0.2; touch "$M/$T.$$-$(date +%s%N)"'}
    tasks = [mark("a")]
    names = ["a"]
    if i % 2 == 0:
        tasks.append({"name": "p", "parallel": {"tasks": [mark("p1"), mark("p2")]}})
        names += ["p1", "p2"]
    if i % 3 == 0:
        each = mark("e{{ item.value }}")
        tasks.append({"name": "e", "each": {"list": "{{ sequence(1, 4) }}", "task": each}})
        names += ["e1", "e2", "e3"]
    return {"name": "crash %d" % i, "tasks": tasks}, names


def expected(i):
    return job_of(i, "")[1]


def request(method, url, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, urllib.error.URLError):
        return 0, b""


def burst(url, marks, count, kill_after, pid, out):
    lock = threading.Lock()
    acked = []
    next_index = [0]
    killed = [False]

    def worker():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= count:
                return
            status, body = request("POST", url + "/jobs", job_of(i, marks)[0])
            if status != 200:
                continue
            with lock:
                acked.append([i, json.loads(body)["id"]])
                if len(acked) >= kill_after and not killed[0]:
                    killed[0] = True
                    os.kill(pid, signal.SIGKILL)

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(out, "w") as f:
        json.dump(acked, f)
    print("posted %d, acknowledged %d, killed after %d acknowledgements: %s"
          % (count, len(acked), kill_after, killed[0]))


def check(url, marks, acked_file, seconds):
    with open(acked_file) as f:
        acked = json.load(f)
    runs = {}
    deadline = time.time() + seconds
    pending = {job_id: i for i, job_id in acked}
    ended = {}
    while pending and time.time() < deadline:
        for job_id in list(pending):
            status, body = request("GET", url + "/jobs/" + job_id)
            if status != 200:
                continue
            job = json.loads(body)
            if job["state"] in ("COMPLETED", "FAILED", "CANCELLED"):
                ended[job_id] = job
                del pending[job_id]
        if pending:
            time.sleep(0.5)
    for name in os.listdir(marks):
        key = name.rsplit(".", 1)[0]
        runs[key] = runs.get(key, 0) + 1
    bad = 0
    for i, job_id in acked:
        job = ended.get(job_id)
        if job is None:
            print("job %d (%s): not ended within %ds" % (i, job_id, seconds))
            bad += 1
        elif job["state"] != "COMPLETED":
            errors = ["%s: %s" % (t.get("name"), t.get("error", ""))
                      for t in job.get("execution", []) if t.get("state") == "FAILED"]
            print("job %d (%s): %s: %s; failed rows: %s"
                  % (i, job_id, job["state"], job.get("error", ""), errors))
            bad += 1
        for name in expected(i):
            if runs.get("%d.%s" % (i, name), 0) == 0:
                print("job %d (%s): task %s never ran" % (i, job_id, name))
                bad += 1
    completed = sum(1 for j in ended.values() if j["state"] == "COMPLETED")
    reruns = sum(runs.values()) - len(runs)
    print("acknowledged %d, completed %d, problems %d, tasks run again %d"
          % (len(acked), completed, bad, reruns))
    return 1 if bad else 0


def main():
    mode = sys.argv[1]
    if mode == "burst":
        url, marks, count, kill_after, pid, out = sys.argv[2:8]
        burst(url, marks, int(count), int(kill_after), int(pid), out)
        return 0
    if mode == "check":
        url, marks, acked, seconds = sys.argv[2:6]
        return check(url, marks, acked, int(seconds))
    raise SystemExit("usage: crash_probe.py burst|check ...")


if __name__ == "__main__":
    sys.exit(main())
