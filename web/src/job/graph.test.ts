import { describe, expect, it } from "vitest";
import type { Plan, TaskRow } from "../api";
import { attemptsOf, buildGraph, eachSummary, groupAttempts, isGraphJob, jobGraph, layoutGraph, nodeOfTask } from "./graph";
import { realJob } from "./testdata";

function edges(g: { edges: { from: string; to: string }[] }) { return g.edges.map((e) => `${e.from}->${e.to}`); }

describe("buildGraph", () => {
  it("links top-level tasks in sequence and colours each by its row's state", () => {
    const g = buildGraph(realJob("conditions"));
    expect(g.nodes.map((n) => [n.id, n.label, n.state])).toEqual([
      ["1", "decide", "COMPLETED"], ["2", "skipped", "SKIPPED"], ["3", "runs", "COMPLETED"]]);
    expect(edges(g)).toEqual(["1->2", "2->3"]);
    expect(g.nodes[1].detail).toBe("skipped (if false)");
  });

  it("dims tasks not yet reached", () => {
    const job = realJob("conditions");
    job.execution = job.execution.filter((r) => r.position === 1);
    const g = buildGraph(job);
    expect(g.nodes.map((n) => n.state)).toEqual(["COMPLETED", "NOT_REACHED", "NOT_REACHED"]);
    expect(g.nodes[1].attempts).toEqual([]);
  });

  it("forks a parallel into its children, matched by name, and joins them before the next task", () => {
    const g = buildGraph(realJob("parallel"));
    const byId = Object.fromEntries(g.nodes.map((n) => [n.id, n]));
    expect(byId["2"].kind).toBe("parallel");
    expect(byId["2"].detail).toBe("parallel · 6");
    expect(["2/p0", "2/p1", "2/p2", "2/p3", "2/p4", "2/p5"].map((id) => byId[id].label))
      .toEqual(["sleep 1", "sleep 0.5", "quick 1", "quick 2", "sleep 0.2", "quick 3"]);
    expect(byId["2/p0"].attempts[0].run).toBe("sleep 1");
    expect(edges(g)).toContain("1->2");
    expect(edges(g)).toContain("2->2/p3");
    expect(edges(g)).toContain("2/p3->2/join");
    expect(edges(g)).toContain("2/join->3");
    expect(g.nodes.every((n) => n.state === "COMPLETED")).toBe(true);
  });

  it("shows a parallel not reached with its children from the definition, dimmed", () => {
    const job = realJob("parallel");
    job.execution = job.execution.filter((r) => r.position === 1);
    const g = buildGraph(job);
    expect(g.nodes.filter((n) => n.id.startsWith("2/p")).map((n) => n.state)).toEqual(Array(6).fill("NOT_REACHED"));
  });

  it("expands a small each into its children in item order with counts on the each node", () => {
    const g = buildGraph(realJob("each"));
    const each = g.nodes.find((n) => n.id === "1")!;
    expect(each.kind).toBe("each");
    expect(each.detail).toBe("each · 4: 4 ✓");
    expect(each.counts).toEqual({ COMPLETED: 4 });
    expect(g.nodes.filter((n) => n.id.startsWith("1/e")).map((n) => n.label))
      .toEqual(["item 0", "item 1", "item 2", "item 3"]);
    expect(edges(g)).toContain("1/join->2");
  });

  it("keeps a large each as one node with counts per state", () => {
    const job = realJob("each");
    const each = job.execution.find((r) => r.each && r.position === 1)!;
    const child = job.execution.find((r) => r.parentId === each.id)!;
    job.execution = job.execution.filter((r) => r.position !== 1 || r.id === each.id);
    each.each!.size = 10000;
    each.state = "RUNNING";
    for (let i = 0; i < 10000; i++) {
      job.execution.push({ ...child, id: `c${i}`, name: `item ${i}`,
                           state: i < 9990 ? "COMPLETED" : i < 9995 ? "FAILED" : "RUNNING" });
    }
    const t0 = performance.now();
    const model = jobGraph(job);
    expect(performance.now() - t0).toBeLessThan(1000);
    const n = model.nodes.find((x) => x.id === "1")!;
    expect(n.detail).toBe("each · 10,000: 9,990 ✓ 5 ✗ 5 ▶");
    expect(model.nodes.filter((x) => x.id.startsWith("1/")).length).toBe(0);
    expect(model.nodes.length).toBe(2 + 4 + 1); // two each nodes, the second expanded (4 + join)
  });

  it("makes a subjob a node that links to the child job", () => {
    const g = buildGraph(realJob("subjob"));
    const first = g.nodes.find((n) => n.id === "1")!;
    expect(first.kind).toBe("subjob");
    expect(first.subjobId).toBe("01a23bab6acb69f7b772671d8a880691");
    expect(first.detail).toBe("sub-job · child job");
    const second = g.nodes.find((n) => n.label === "second child")!;
    expect(second.subjobId).toBe("01a23bab6d089d53aa898fb2bd7e788f");
    expect(second.id).toBe("2/p1");
  });

  it("chains a loop's steps after it in the order they ran, with the iterations in its detail", () => {
    const g = buildGraph(realJob("loop"));
    const byId = Object.fromEntries(g.nodes.map((n) => [n.id, n]));
    expect(byId["1"].kind).toBe("loop");
    expect(byId["1"].detail).toBe("loop · 3 of at most 10");
    expect(["1/s0", "1/s1", "1/s2"].map((id) => byId[id].label)).toEqual(["check 0", "check 1", "check 2"]);
    expect(byId["2"].detail).toBe("loop · 2 of at most 2");
    expect(edges(g)).toEqual(["1->1/s0", "1/s0->1/s1", "1/s1->1/s2", "2->2/s0", "2/s0->2/s1", "1/s2->2"]);
  });

  it("chains a switch's case after it and hangs its branches not taken beside it, skipped", () => {
    const g = buildGraph(realJob("switch"));
    const byId = Object.fromEntries(g.nodes.map((n) => [n.id, n]));
    expect(byId["2"].kind).toBe("switch");
    expect(byId["2"].detail).toBe("switch · csv");
    expect(["2/s0", "2/s1"].map((id) => byId[id].label)).toEqual(["parse csv", "load"]);
    expect(["2/n0", "2/n1"].map((id) => [byId[id].label, byId[id].state, byId[id].detail]))
      .toEqual([["parse json", "SKIPPED", "branch not taken"], ["unknown kind", "SKIPPED", "branch not taken"]]);
    // The skipped branches hang off the switch; the case taken is the chain out of it.
    expect(edges(g)).toEqual(["2->2/n0", "2->2/n1", "2->2/s0", "2/s0->2/s1", "1->2"]);
  });

  it("puts a task's fallback after it, on an edge 'on failure', its tasks chained, the job's finally last", () => {
    const g = buildGraph(realJob("fallback"));
    const byId = Object.fromEntries(g.nodes.map((n) => [n.id, n]));
    // The task's own node: its two attempts, FAILED.
    expect([byId["1"].kind, byId["1"].state, byId["1"].attempts.length]).toEqual(["task", "FAILED", 2]);
    expect([byId["1/f"].kind, byId["1/f"].label, byId["1/f"].state, byId["1/f"].detail])
      .toEqual(["cleanup", "fetch prices", "COMPLETED", "onFailure · continue"]);
    expect(byId["1/f/s0"].label).toBe("use yesterday's prices");
    expect([byId["c0"].label, byId["c0"].detail]).toEqual(["finally", "however the job ends"]);
    expect(byId["c0/s0"].label).toBe("clean up");
    expect(edges(g)).toEqual(["1/f->1/f/s0", "1->1/f", "1/f/s0->2", "c0->c0/s0", "2->c0"]);
    expect(g.edges.find((e) => e.to === "1/f")?.label).toBe("on failure");
  });

  it("chains a failed job's onFailure, then its finally, after its tasks", () => {
    const g = buildGraph(realJob("cleanup"));
    const byId = Object.fromEntries(g.nodes.map((n) => [n.id, n]));
    expect(["1", "2", "3"].map((id) => byId[id].state)).toEqual(["COMPLETED", "FAILED", "NOT_REACHED"]);
    expect([byId["c0"].label, byId["c0"].detail, byId["c0"].state])
      .toEqual(["onFailure", "if the job fails", "COMPLETED"]);
    expect([byId["c1"].label, byId["c1/s0"].label]).toEqual(["finally", "release the lock"]);
    expect(edges(g).filter((e) => e.includes("c"))).toEqual(["c0->c0/s0", "3->c0", "c1->c1/s0", "c0/s0->c1"]);
  });

  it("draws a graph job's top-level edges from its plan, labelled with rules and conditions", () => {
    const job = {
      mode: "dag",
      tasks: [{ name: "a", run: "x" }, { name: "b", run: "x", needs: ["a"] },
              { name: "c", run: "x", needs: [{ task: "a", when: "{{ inputs.on }}" }] },
              { name: "d", run: "x", needs: ["b", "c"], triggerRule: "all_done" }],
      execution: [],
    };
    // Until the plan is read, no edge between them (not the list's order, which is wrong).
    expect(edges(buildGraph(job))).toEqual([]);
    const plan: Plan = {
      name: "j", mode: "dag", graph: true, stages: [["a"], ["b", "c"], ["d"]],
      tasks: [
        { name: "a", kind: "runnable", stage: 1, needs: [], triggerRule: "all_success" },
        { name: "b", kind: "runnable", stage: 2, needs: ["a"], triggerRule: "all_success" },
        { name: "c", kind: "runnable", stage: 2, needs: ["a"], triggerRule: "all_success", when: { a: "{{ inputs.on }}" } },
        { name: "d", kind: "runnable", stage: 3, needs: ["b", "c"], triggerRule: "all_done" },
      ],
    };
    const g = buildGraph(job, plan);
    expect(edges(g)).toEqual(["1->2", "1->3", "2->4", "3->4"]);
    expect(g.edges.map((e) => e.label ?? "")).toEqual(["", "when {{ inputs.on }}", "all_done", "all_done"]);
    const laid = layoutGraph(g);
    expect(laid.edges.find((e) => e.to === "3")!.labelAt).toBeDefined();
    // b and c side by side, between a and d.
    const y = Object.fromEntries(laid.nodes.map((n) => [n.id, n.y]));
    expect(y["2"]).toBe(y["3"]);
    expect(y["1"]).toBeLessThan(y["2"]);
    expect(y["4"]).toBeGreaterThan(y["3"]);
  });

  it("draws a parallel's needs as edges between its tasks, labelled with rules and conditions", () => {
    const job = {
      tasks: [{ name: "p", parallel: { tasks: [
        { name: "fetch", run: "x" }, { name: "lint", run: "x" },
        { name: "build", run: "x", needs: [{ task: "fetch", when: "{{ inputs.on }}" }] },
        { name: "report", run: "x", needs: ["build", "lint"], triggerRule: "all_done" }] } }],
      execution: [],
    };
    const g = buildGraph(job);
    expect(edges(g)).toEqual(["1->1/p0", "1->1/p1", "1/p0->1/p2", "1/p2->1/p3", "1/p1->1/p3", "1/p3->1/join"]);
    expect(g.edges.map((e) => e.label ?? "")).toEqual(["", "", "when {{ inputs.on }}", "all_done", "all_done", ""]);
    const y = Object.fromEntries(layoutGraph(g).nodes.map((n) => [n.id, n.y]));
    expect(y["1/p2"]).toBeGreaterThan(y["1/p0"]);
    expect(y["1/p3"]).toBeGreaterThan(y["1/p2"]);
    expect(y["1/p3"]).toBeGreaterThan(y["1/p1"]);
  });

  it("keeps a Tork sequence's order without asking for a plan", () => {
    expect(isGraphJob(realJob("conditions"))).toBe(false);
    expect(isGraphJob({ tasks: [{ name: "a" }, { name: "b", triggerRule: "all_done" }] })).toBe(true);
  });

  it("groups retries of a task into one node with its attempts in order", () => {
    const job = realJob("retry");
    const g = buildGraph(job);
    expect(g.nodes.length).toBe(1);
    const n = g.nodes[0];
    expect(n.attempts.map((a) => a.retry?.attempts ?? 0)).toEqual([0, 1, 2]);
    expect(n.state).toBe("FAILED");
    expect(n.detail).toBe("3 attempts");
    expect(nodeOfTask(g, job.execution[1].id)).toBe(n);
    expect(attemptsOf(job.execution, job.execution[2].id).map((r) => r.id)).toEqual(job.execution.map((r) => r.id));
  });

  it("takes the state of the last attempt: a retry that completes makes the slot COMPLETED", () => {
    const job = realJob("retry");
    job.execution[2].state = "COMPLETED";
    expect(buildGraph(job).nodes[0].state).toBe("COMPLETED");
  });

  it("attaches pre and post steps to their task", () => {
    const g = buildGraph(realJob("files-pre-post"));
    expect(g.nodes[0].pre).toEqual(["prepare"]);
    expect(g.nodes[0].post).toEqual(["clean up"]);
  });
});

describe("groupAttempts", () => {
  const row = (id: string, name: string, attempts?: number, createdAt = "2026-01-01T00:00:00Z"): TaskRow =>
    ({ id, jobId: "j", name, position: 1, state: "FAILED", createdAt, progress: 0, redelivered: 0,
       ...(attempts !== undefined ? { retry: { limit: 2, attempts } } : {}) });

  it("keeps same-named rows without a retry link as separate slots", () => {
    expect(groupAttempts([row("a", "x"), row("b", "x")]).map((g) => g.map((r) => r.id))).toEqual([["a"], ["b"]]);
  });

  it("chains each retry to a slot whose last attempt is one lower", () => {
    const groups = groupAttempts([row("r2", "x", 2), row("a", "x"), row("b", "y"), row("r1", "x", 1)]);
    expect(groups.map((g) => g.map((r) => r.id))).toEqual([["a", "r1", "r2"], ["b"]]);
  });
});

describe("layout", () => {
  it("places nodes top to bottom in sequence", () => {
    const m = jobGraph(realJob("conditions"));
    const [a, b, c] = m.nodes;
    expect(a.y).toBeLessThan(b.y);
    expect(b.y).toBeLessThan(c.y);
    expect(m.width).toBeGreaterThan(0);
    expect(m.edges[0].points.length).toBeGreaterThan(1);
  });

  it("lays parallel children side by side on one rank", () => {
    const m = jobGraph(realJob("parallel"));
    const kids = m.nodes.filter((n) => n.id.startsWith("2/p"));
    expect(new Set(kids.map((n) => n.y)).size).toBe(1);
    expect(new Set(kids.map((n) => n.x)).size).toBe(6);
  });
});

describe("eachSummary", () => {
  it("names the size and the counts per state", () => {
    expect(eachSummary(10000, { COMPLETED: 9990, FAILED: 10 })).toBe("each · 10,000: 9,990 ✓ 10 ✗");
    expect(eachSummary(undefined, {})).toBe("each · ?");
    expect(eachSummary(5, { CREATED: 2, SCHEDULED: 1, CANCELLED: 1, SKIPPED: 1 })).toBe("each · 5: 3 queued 1 ■ 1 ⤼");
  });
});
