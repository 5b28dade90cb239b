#!/usr/bin/env python3
"""Tork's own web UI (github.com/runabol/tork-web) against Baton: the requests it sends,
as it sends them (paths, query strings, bodies, content types, taken from its
app/api/*/route.ts and pages), and the fields of each answer it reads (its model/*.ts),
with the five places where Baton once answered otherwise:

  1. GET /nodes: each node's `version` is Baton's version, not "";
  2. GET /scheduled-jobs: `size` is the number of items on the page (tork-web shows
     "Showing 1 to <size> of <totalItems>"), not the size asked for;
  3. GET /jobs/{id}: `execution` is ordered as Tork orders it (position, then startedAt,
     rows not started last), so a parallel's children come in the order they started;
  4. a restarted job's `startedAt` and
  5. a cancelled task's `completedAt`: deliberate differences (docs/api.md), checked as
     documented.

Usage: tork_web.py URL
"""
import json
import sys
import time
import urllib.error
import urllib.request

URL = sys.argv[1]
failures = 0


def check(ok, what):
    global failures
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures += 1


def call(method, path, body=None, content_type=None):
    """One request as tork-web's server-side fetch sends it; (status, parsed JSON)."""
    data = body.encode() if body is not None else None
    req = urllib.request.Request(URL + path, data=data, method=method)
    if content_type:
        req.add_header("content-type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def post_job(yaml_text):
    """app/api/jobs/route.ts: a body with "cron" after its start goes to /scheduled-jobs."""
    path = "/scheduled-jobs" if yaml_text.find("cron") > 0 else "/jobs"
    return call("POST", path, yaml_text, "text/yaml")


def has(obj, fields, what):
    """Each field of tork-web's model is present with the JSON type it reads."""
    missing = [f"{name} ({types})" for name, types in fields.items()
               if not isinstance(obj.get(name), types)]
    check(not missing, f"{what} has tork-web's fields" + (f"; missing or mistyped: {missing}" if missing else ""))


def wait_state(job_id, states, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        _, job = call("GET", f"/jobs/{job_id}")
        if job and job.get("state") in states:
            return job
        time.sleep(0.1)
    _, job = call("GET", f"/jobs/{job_id}")
    return job


STR, NUM, LIST, DICT = str, (int, float), list, dict

# The metrics above the jobs page (app/jobs/page.tsx, model/stats.ts).
status, metrics = call("GET", "/metrics")
check(status == 200, "GET /metrics answers 200")
check(isinstance(metrics.get("jobs", {}).get("running"), NUM)
      and isinstance(metrics.get("tasks", {}).get("running"), NUM)
      and isinstance(metrics.get("nodes", {}).get("online"), NUM)
      and isinstance(metrics.get("nodes", {}).get("cpuPercent"), NUM),
      "GET /metrics has jobs.running, tasks.running, nodes.online and nodes.cpuPercent")

# The create page's own placeholder, posted as text/yaml (app/jobs/create/page.tsx).
status, created = post_job("""name: my job
tasks:
  - name: my first task
    image: alpine:3.18.3
    run: echo -n hello world
""")
check(status == 200 and isinstance(created.get("id"), STR), f"the create page's job is accepted ({status})")
job = wait_state(created["id"], {"COMPLETED", "FAILED"})
check(job["state"] == "COMPLETED", f"the create page's job completes ({job['state']}: {job.get('error')})")
has(job, {"id": STR, "name": STR, "state": STR, "createdAt": STR, "startedAt": STR,
          "completedAt": STR, "execution": LIST, "tasks": LIST, "position": NUM,
          "taskCount": NUM}, "GET /jobs/{id}")
task = job["execution"][0]
has(task, {"id": STR, "name": STR, "state": STR, "createdAt": STR, "startedAt": STR,
           "completedAt": STR, "run": STR}, "an execution row")

# The jobs list (app/jobs/page.tsx sends page and q, q empty when not searching).
for query in ("/jobs?page=1&q=", "/jobs?page=1&q=my%20job"):
    status, page = call("GET", query)
    check(status == 200, f"GET {query} answers 200")
    has(page, {"items": LIST, "size": NUM, "number": NUM, "totalPages": NUM, "totalItems": NUM},
        f"GET {query}")
    check(page["size"] == len(page["items"]) and created["id"] in [j["id"] for j in page["items"]],
          f"GET {query} lists the job, size = items on the page")

# The logs (app/api/jobs/[id]/log and tasks/[id]/log: page and size=50).
for path in (f"/jobs/{job['id']}/log?page=1&size=50", f"/tasks/{task['id']}/log?page=1&size=50"):
    status, page = call("GET", path)
    check(status == 200 and isinstance(page.get("items"), LIST), f"GET {path} answers a page")
    check(any("hello world" in p.get("contents", "") for p in page["items"])
          and all(isinstance(p.get("createdAt"), STR) for p in page["items"]),
          f"GET {path} has the task's output as contents with createdAt")

# Duplicate (app/jobs/duplicate/page.tsx): the job's fields, as read, submitted again.
fields = ("name", "description", "tags", "inputs", "secrets", "output", "tasks", "defaults", "webhooks")
again = {k: job[k] for k in fields if k in job}
status, dup = post_job(json.dumps(again))
check(status == 200, f"a duplicated job is accepted ({status}: {dup})")
if status == 200:
    check(wait_state(dup["id"], {"COMPLETED", "FAILED"})["state"] == "COMPLETED", "the duplicate completes")

# Nodes and queues (model/node.ts, model/queue.ts); difference 1: a node's version.
status, nodes = call("GET", "/nodes")
check(status == 200 and len(nodes) >= 1, "GET /nodes lists the standalone node")
for node in nodes:
    has(node, {"id": STR, "name": STR, "hostname": STR, "startedAt": STR, "cpuPercent": NUM,
               "lastHeartbeatAt": STR, "status": STR, "taskCount": NUM, "version": STR}, "a node")
    check(node.get("version", "") != "", f"node {node.get('name')} reports its version ({node.get('version')!r})")
status, queues = call("GET", "/queues")
check(status == 200 and isinstance(queues, LIST), "GET /queues answers a list")
for queue in queues:
    has(queue, {"name": STR, "size": NUM, "subscribers": NUM, "unacked": NUM}, f"queue {queue.get('name')}")

# Difference 3: rows of one position in the order they started. An each of three items,
# one at a time, whose first item fails once and is retried: its items' rows are created
# together, the retry's later, but the retry runs before the second item.
marker = f"/tmp/tork-web-{time.time_ns()}"
status, par = post_job(f"""name: ordered
tasks:
  - name: before
    run: echo before
  - name: items
    each:
      list: "{{{{ [1, 2, 3] }}}}"
      concurrency: 1
      task:
        name: "item {{{{ item.value }}}}"
        env: {{ V: "{{{{ item.value }}}}" }}
        retry: {{ limit: 1 }}
        run: test "$V" != 1 || test -f {marker} || {{ touch {marker}; exit 1; }}
  - name: after
    run: echo after
""")
check(status == 200, f"the each job is accepted ({status}: {par})")
par = wait_state(par["id"], {"COMPLETED", "FAILED"})
rows = par["execution"]
by_start = [(r["position"], r.get("startedAt") is None, r.get("startedAt") or "") for r in rows]
by_creation = sorted(rows, key=lambda r: (r["position"], r["createdAt"]))
shown = [(r["name"], r["position"], r.get("startedAt")) for r in rows]
check(par["state"] == "COMPLETED" and len(rows) == 7, f"the each job completes with 7 rows ({par['state']})")
check(by_start == sorted(by_start), f"execution is ordered by position, then startedAt ({shown})")
check([r["id"] for r in by_creation] != [r["id"] for r in rows],
      "the check above tells the orders apart: by creation the rows come otherwise")

# Cancel and restart (components/cancel-job.tsx, restart-job.tsx: PUT, no body).
status, slow = post_job("""name: slow
tasks:
  - name: wait
    run: sleep 30
""")
running = wait_state(slow["id"], {"RUNNING"})
time.sleep(0.5)
status, answer = call("PUT", f"/jobs/{slow['id']}/cancel")
check(status == 200 and answer == {"status": "OK"}, f"PUT /jobs/{{id}}/cancel answers OK ({status} {answer})")
cancelled = wait_state(slow["id"], {"CANCELLED"})
check(cancelled["state"] == "CANCELLED", "the job is cancelled")
row = cancelled["execution"][0]
# Difference 5 (docs/api.md): Baton records when a cancel ended the task.
check(row["state"] == "CANCELLED" and isinstance(row.get("completedAt"), STR),
      "a cancelled task has its state and, as documented, the time it ended as completedAt")
first_start = cancelled["startedAt"]
time.sleep(0.05)
status, answer = call("PUT", f"/jobs/{slow['id']}/restart")
check(status == 200 and answer == {"status": "OK"}, f"PUT /jobs/{{id}}/restart answers OK ({status} {answer})")
restarted = wait_state(slow["id"], {"RUNNING"})
# Difference 4 (docs/api.md): startedAt is the current run's start.
check(restarted["startedAt"] > first_start,
      f"a restarted job's startedAt is its new run's, as documented ({first_start} → {restarted['startedAt']})")
call("PUT", f"/jobs/{slow['id']}/cancel")

# Scheduled jobs (app/scheduled/page.tsx and its buttons); difference 2: size.
status, sched = post_job("""name: every five minutes
schedule:
  cron: "*/5 * * * *"
tasks:
  - name: tick
    run: echo tick
""")
check(status == 200 and isinstance(sched.get("id"), STR), f"a job with a cron is scheduled ({status}: {sched})")
status, page = call("GET", "/scheduled-jobs")
check(status == 200, "GET /scheduled-jobs answers 200")
has(page, {"items": LIST, "size": NUM, "number": NUM, "totalPages": NUM, "totalItems": NUM}, "GET /scheduled-jobs")
check(page["size"] == len(page["items"]) == 1,
      f"GET /scheduled-jobs: size is the number of items ({page['size']} for {len(page['items'])})")
if page["items"]:
    has(page["items"][0], {"id": STR, "name": STR, "createdAt": STR, "cron": STR, "state": STR}, "a scheduled job")
for action, state in (("pause", "PAUSED"), ("resume", "ACTIVE")):
    status, answer = call("PUT", f"/scheduled-jobs/{sched['id']}/{action}")
    check(status == 200, f"PUT /scheduled-jobs/{{id}}/{action} answers 200 ({answer})")
    _, page = call("GET", "/scheduled-jobs")
    check(page["items"][0]["state"] == state, f"after {action} the list shows it {state}")
status, answer = call("DELETE", f"/scheduled-jobs/{sched['id']}")
check(status == 200, f"DELETE /scheduled-jobs/{{id}} answers 200 ({answer})")
_, page = call("GET", "/scheduled-jobs")
check(page["items"] == [] and page["size"] == 0, "the deleted scheduled job is gone, size 0")

print(f"{failures} failure(s)" if failures else "all tork-web checks passed")
sys.exit(1 if failures else 0)
