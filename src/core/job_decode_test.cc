#include "core/job_decode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/graph.h"
#include "core/job_json.h"
#include "core/task_kind.h"

namespace baton {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> Problems(std::string_view text,
                                  DocumentFormat format = DocumentFormat::kYaml) {
  JobParseResult result = ParseJob(text, format);
  std::vector<std::string> out;
  for (const auto& d : result.problems) out.push_back(d.ToString());
  EXPECT_EQ(result.job.has_value(), result.problems.empty());
  return out;
}

// A valid job whose one task gets the extra lines given (indented under the task).
std::string WithTask(std::string_view task_lines) {
  return "name: j\ntasks:\n  - name: t\n" + std::string(task_lines);
}

TEST(JobDecodeTest, ParsesAFullJob) {
  auto result = ParseJob(R"(
name: hello job
description: says hello
tags: [a, b]
inputs:
  who: world
secrets:
  token: s3cret
output: "{{ tasks.greeting }}"
timeout: 1h
wait:
  timeout: 30s
autoDelete:
  after: 10m
defaults:
  retry: {limit: 2}
  limits: {cpus: 1, memory: 64m}
  timeout: 5m
  queue: default
  priority: 3
webhooks:
  - url: http://example.com/hook
    headers: {X-Key: abc}
    event: job.StateChange
tasks:
  - name: say hello
    var: greeting
    env:
      WHO: "{{ inputs.who }}"
    run: echo -n "hello $WHO" > $BATON_OUTPUT
    retry:
      limit: 3
      initialDelay: 1s
      scalingFactor: 2
      maxDelay: 10s
    timeout: 30s
    limits: {cpus: "0.5", memory: 1Gi}
    pre:
      - name: prepare
        run: echo pre
    mounts:
      - type: volume
        target: /data
      - type: bind
        source: /tmp
        target: /host-tmp
  - name: fan out
    each:
      list: "{{ sequence(1, 4) }}"
      var: n
      concurrency: 2
      task:
        name: square {{ n.value }}
        run: echo
  - name: together
    parallel:
      tasks:
        - name: a
          run: echo a
        - name: b
          run: echo b
  - name: child
    subjob:
      name: child job
      output: "{{ tasks.x }}"
      detached: false
      tasks:
        - name: x
          var: x
          run: echo x
)",
                         DocumentFormat::kYaml);
  ASSERT_TRUE(result.ok()) << result.Message();
  const Job& job = *result.job;
  EXPECT_EQ(job.name, "hello job");
  EXPECT_EQ(job.tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(job.inputs.at("who"), "world");
  EXPECT_EQ(job.secrets.at("token"), "s3cret");
  EXPECT_EQ(job.timeout, std::chrono::hours(1));
  EXPECT_EQ(job.wait_timeout, std::chrono::seconds(30));
  EXPECT_EQ(job.auto_delete->after, std::chrono::minutes(10));
  EXPECT_EQ(job.defaults->retry->limit, 2);
  EXPECT_EQ(job.defaults->limits->memory, 64LL << 20);
  EXPECT_EQ(job.defaults->priority, 3);
  EXPECT_EQ(job.webhooks[0].headers.at("X-Key"), "abc");
  ASSERT_EQ(job.tasks.size(), 4u);
  const Task& t0 = job.tasks[0];
  EXPECT_EQ(t0.var, "greeting");
  EXPECT_EQ(t0.retry->limit, 3);
  EXPECT_EQ(t0.retry->initial_delay, std::chrono::seconds(1));
  EXPECT_EQ(t0.retry->scaling_factor, 2.0);
  EXPECT_EQ(t0.limits->cpus, 0.5);
  EXPECT_EQ(t0.limits->memory, 1LL << 30);
  EXPECT_EQ(t0.pre[0].name, "prepare");
  EXPECT_EQ(t0.mounts[1].type, MountType::kBind);
  EXPECT_EQ(job.tasks[1].each->var, "n");
  EXPECT_EQ(job.tasks[1].each->concurrency, 2);
  EXPECT_EQ(job.tasks[1].each->task->name, "square {{ n.value }}");
  EXPECT_EQ(job.tasks[2].parallel->tasks.size(), 2u);
  EXPECT_EQ(job.tasks[3].subjob->tasks[0].var, "x");
}

TEST(JobDecodeTest, JsonAndYamlGiveTheSameJob) {
  auto yaml = ParseJob("name: j\ntasks:\n  - name: t\n    run: echo hi\n    retry: {limit: 2}\n",
                       DocumentFormat::kYaml);
  auto json = ParseJob(R"({"name":"j","tasks":[{"name":"t","run":"echo hi","retry":{"limit":2}}]})",
                       DocumentFormat::kJson);
  ASSERT_TRUE(yaml.ok()) << yaml.Message();
  ASSERT_TRUE(json.ok()) << json.Message();
  EXPECT_EQ(*yaml.job, *json.job);
}

TEST(JobDecodeTest, ReportsUnknownFieldsWithAHint) {
  EXPECT_THAT(Problems(WithTask("    rnu: echo\n    colour: red\n")),
              ElementsAre("4:5: tasks[0].rnu: unknown field \"rnu\" (did you mean \"run\"?)",
                          "5:5: tasks[0].colour: unknown field \"colour\""));
}

TEST(JobDecodeTest, ReportsDuplicateFields) {
  EXPECT_THAT(Problems(WithTask("    run: a\n    run: b\n")),
              ElementsAre("5:5: tasks[0].run: duplicate field \"run\""));
}

// A `files` name is written into the task's directory, and an env key becomes a variable:
// both are refused at submission, where they are, instead of failing the task later.
TEST(JobDecodeTest, RefusesFileNamesThatLeaveTheTaskDirectoryAndBadEnvNames) {
  auto problems = Problems(WithTask(
      "    run: 'true'\n    files: {'../up': x, '/etc/y': x, '..': x, '.baton-output': x, ok: x}\n"
      "    env: {'A=B': x, GOOD: y}\n"));
  ASSERT_EQ(problems.size(), 5u) << testing::PrintToString(problems);
  EXPECT_THAT(problems[0], HasSubstr("tasks[0].files.../up: a file name may not"));
  EXPECT_THAT(problems[1], HasSubstr("tasks[0].files./etc/y: a file name may not"));
  EXPECT_THAT(problems[3], HasSubstr("tasks[0].files..baton-output: a file name may not"));
  EXPECT_THAT(problems[4], HasSubstr("tasks[0].env.A=B: an environment variable name may not"));
  EXPECT_THAT(
      Problems(WithTask("    run: 'true'\n    pre: [{name: p, run: 'true', files: {'a/b': x}}]\n")),
      ElementsAre(HasSubstr("tasks[0].pre[0].files.a/b: a file name may not")));
}

TEST(JobDecodeTest, JobNeedsANameAndTasks) {
  EXPECT_THAT(
      Problems("description: nothing\n"),
      ElementsAre("1:1: name: a job needs a name", "1:1: tasks: a job needs at least one task"));
  EXPECT_THAT(Problems("name: j\ntasks: []\n"),
              ElementsAre("2:8: tasks: a job needs at least one task"));
}

TEST(JobDecodeTest, TaskNeedsAName) {
  EXPECT_THAT(Problems("name: j\ntasks:\n  - run: echo\n"),
              ElementsAre("3:5: tasks[0].name: a task needs a name"));
}

TEST(JobDecodeTest, DocumentMustBeAMap) {
  EXPECT_THAT(Problems("- a\n- b\n"), ElementsAre("1:1: expected a map, got list"));
  EXPECT_THAT(Problems("just text"), ElementsAre("1:1: expected a map, got string \"just text\""));
}

TEST(JobDecodeTest, RefusesMixedCompositeKinds) {
  EXPECT_THAT(
      Problems(
          WithTask("    parallel:\n      tasks:\n        - {name: a, run: echo}\n"
                   "    each:\n      list: \"{{ [1] }}\"\n      task: {name: b, run: echo}\n")),
      ElementsAre("7:5: tasks[0].each: a task can be only one of parallel, each, subjob, switch, "
                  "loop or wait, but this one also has parallel"));
}

TEST(JobDecodeTest, RefusesRunnableFieldsOnCompositeTasks) {
  EXPECT_THAT(
      Problems(WithTask("    run: echo\n    subjob:\n      name: s\n      tasks:\n"
                        "        - {name: a, run: echo}\n    retry: {limit: 1}\n")),
      ElementsAre(
          "4:5: tasks[0].run: a subjob task cannot have run: it belongs on the tasks it runs",
          "9:5: tasks[0].retry: a subjob task cannot have retry: it belongs on the tasks "
          "it runs"));
}

TEST(JobDecodeTest, RetryLimitMustBeOneToTen) {
  EXPECT_THAT(Problems(WithTask("    run: x\n    retry:\n      limit: 12\n")),
              ElementsAre("6:14: tasks[0].retry.limit: must be between 1 and 10, got 12"));
  EXPECT_THAT(Problems(WithTask("    run: x\n    retry:\n      limit: 0\n")),
              ElementsAre("6:14: tasks[0].retry.limit: must be between 1 and 10, got 0"));
  EXPECT_THAT(Problems(WithTask("    run: x\n    retry:\n      initialDelay: 1s\n")),
              ElementsAre("6:7: tasks[0].retry.limit: is required (between 1 and 10)"));
  EXPECT_THAT(
      Problems(WithTask("    run: x\n    retry: {limit: 2, scalingFactor: 0.5}\n")),
      ElementsAre("5:38: tasks[0].retry.scalingFactor: must be between 1 and 100, got 0.5"));
}

TEST(JobDecodeTest, PriorityMustBeZeroToNine) {
  EXPECT_THAT(Problems(WithTask("    run: x\n    priority: 10\n")),
              ElementsAre("5:15: tasks[0].priority: must be between 0 and 9, got 10"));
  EXPECT_THAT(Problems(WithTask("    run: x\n    priority: -1\n")),
              ElementsAre("5:15: tasks[0].priority: must be between 0 and 9, got -1"));
  EXPECT_THAT(Problems(WithTask("    run: x\n    priority: high\n")),
              ElementsAre("5:15: tasks[0].priority: expected an integer, got string \"high\""));
}

TEST(JobDecodeTest, EachConcurrencyMustBeInRange) {
  EXPECT_THAT(
      Problems(WithTask("    each:\n      list: \"{{ [1] }}\"\n      concurrency: 100000\n"
                        "      task: {name: c, run: echo}\n")),
      ElementsAre("6:20: tasks[0].each.concurrency: must be between 0 and 99999, got 100000"));
}

TEST(JobDecodeTest, EachNeedsAListAndATask) {
  EXPECT_THAT(Problems(WithTask("    each:\n      concurrency: 1\n")),
              ElementsAre("5:7: tasks[0].each.list: an each needs a list",
                          "5:7: tasks[0].each.task: an each needs a task"));
}

TEST(JobDecodeTest, VarIsAtMost64Characters) {
  std::string var(65, 'v');
  EXPECT_THAT(Problems(WithTask("    run: x\n    var: " + var + "\n")),
              ElementsAre("5:10: tasks[0].var: must be at most 64 characters, got 65"));
  EXPECT_THAT(Problems(WithTask("    run: x\n    var: " + std::string(64, 'v') + "\n")), IsEmpty());
}

TEST(JobDecodeTest, RefusesEngineQueues) {
  EXPECT_THAT(
      Problems(WithTask("    run: x\n    queue: x-jobs\n")),
      ElementsAre("5:12: tasks[0].queue: queue \"x-jobs\" is reserved for the engine (names "
                  "starting with x- and the engine's own queues cannot carry tasks)"));
  EXPECT_THAT(
      Problems(WithTask("    run: x\n    queue: completed\n")),
      ElementsAre("5:12: tasks[0].queue: queue \"completed\" is reserved for the engine "
                  "(names starting with x- and the engine's own queues cannot carry tasks)"));
  EXPECT_THAT(Problems(WithTask("    run: x\n    queue: gpu\n")), IsEmpty());
  EXPECT_THAT(Problems("name: j\ndefaults:\n  queue: x-y\ntasks:\n  - {name: t, run: x}\n"),
              ElementsAre("3:10: defaults.queue: queue \"x-y\" is reserved for the engine (names "
                          "starting with x- and the engine's own queues cannot carry tasks)"));
}

TEST(JobDecodeTest, ChecksMounts) {
  EXPECT_THAT(
      Problems(WithTask("    run: x\n    mounts:\n"
                        "      - {type: volume, source: /a, target: /data}\n"
                        "      - {type: bind, target: /data}\n"
                        "      - {type: tmpfs, target: /tork}\n"
                        "      - {type: nfs, target: /x}\n"
                        "      - {type: volume, target: relative}\n")),
      ElementsAre(
          "6:32: tasks[0].mounts[0].source: a volume mount cannot have a source",
          "7:9: tasks[0].mounts[1].source: a bind mount needs a source",
          "8:31: tasks[0].mounts[2].target: \"/tork\" is reserved for the engine's own files",
          "9:16: tasks[0].mounts[3].type: unknown mount type \"nfs\" (expected volume, bind "
          "or tmpfs)",
          "10:32: tasks[0].mounts[4].target: must be an absolute path, got \"relative\""));
  EXPECT_THAT(
      Problems(WithTask("    run: x\n    mounts:\n      - {type: volume, target: /baton/x}\n")),
      ElementsAre("6:32: tasks[0].mounts[0].target: \"/baton/x\" is reserved for the "
                  "engine's own files"));
  // Tork's character set for sources and targets.
  EXPECT_THAT(Problems(WithTask("    run: x\n    mounts:\n"
                                "      - {type: bind, source: \"/a;rm -rf\", target: /data}\n"
                                "      - {type: volume, target: \"/data,ro\"}\n"
                                "      - {type: bind, source: /srv/a_b-c.d, target: /x=y z}\n")),
              ElementsAre("6:30: tasks[0].mounts[0].source: \"/a;rm -rf\" may hold only letters, "
                          "digits, space and - . _ / = (as Tork's mounts)",
                          "7:32: tasks[0].mounts[1].target: \"/data,ro\" may hold only letters, "
                          "digits, space and - . _ / = (as Tork's mounts)"));
}

TEST(JobDecodeTest, ChecksDurationsAndMemorySizes) {
  EXPECT_THAT(
      Problems(WithTask("    run: x\n    timeout: 10\n    limits: {memory: 64x, cpus: none}\n")),
      ElementsAre("5:14: tasks[0].timeout: invalid duration \"10\": missing unit (use e.g. 500ms, "
                  "30s, 1m30s, 2h)",
                  "6:22: tasks[0].limits.memory: invalid memory size \"64x\": unknown unit \"x\" "
                  "(use e.g. 512k, 64m, 1g, 64Mi)",
                  "6:33: tasks[0].limits.cpus: expected a number, got string \"none\""));
  EXPECT_THAT(Problems("name: j\ntimeout: soon\ntasks:\n  - {name: t, run: x}\n"),
              ElementsAre("2:10: timeout: invalid duration \"soon\": expected a number (use e.g. "
                          "500ms, 30s, 1m30s, 2h)"));
}

TEST(JobDecodeTest, ChecksTemplates) {
  EXPECT_THAT(Problems(WithTask("    run: x\n    env:\n      A: \"{{ inputs.a\"\n")),
              ElementsAre("6:10: tasks[0].env.A: malformed template: unclosed \"{{\" at offset 0"));
  EXPECT_THAT(Problems("name: j\noutput: \"{{ 1 + }}\"\ntasks:\n  - {name: t, run: x}\n"),
              testing::Contains(testing::StartsWith("2:9: output: malformed template: ")));
}

TEST(JobDecodeTest, AnEachListWithoutBracesIsCheckedAsAnExpression) {
  const std::string each =
      "name: j\ntasks:\n  - name: e\n    each:\n      list: LIST\n      task: {name: t, run: x}\n";
  auto with = [&](const std::string& list) {
    std::string yaml = each;
    yaml.replace(yaml.find("LIST"), 4, list);
    return Problems(yaml);
  };
  EXPECT_THAT(with("\"[1, 2, 3]\""), testing::IsEmpty());
  EXPECT_THAT(with("inputs.items"), testing::IsEmpty());
  EXPECT_THAT(with("\"{{ sequence(1, 3) }}\""), testing::IsEmpty());
  EXPECT_THAT(with("\"[1, 2,\""),
              ElementsAre(testing::StartsWith("5:13: tasks[0].each.list: malformed expression: ")));
  EXPECT_THAT(with("\"{{ [1, 2, }}\""),
              ElementsAre(testing::StartsWith("5:13: tasks[0].each.list: malformed template: ")));
}

TEST(JobDecodeTest, WebhookNeedsAUrl) {
  EXPECT_THAT(Problems("name: j\nwebhooks:\n  - headers: {a: b}\ntasks:\n  - {name: t, run: x}\n"),
              ElementsAre("3:5: webhooks[0].url: a webhook needs a url"));
  EXPECT_THAT(
      Problems("name: j\nwebhooks:\n  - url: ftp://x\ntasks:\n  - {name: t, run: x}\n"),
      ElementsAre("3:5: webhooks[0].url: must be an http:// or https:// URL, got \"ftp://x\""));
}

TEST(JobDecodeTest, WebhookEventMustBeOneOfTorksFour) {
  EXPECT_THAT(Problems("name: j\nwebhooks:\n  - {url: 'http://h/x', event: job.Done}\n"
                       "tasks:\n  - {name: t, run: x}\n"),
              ElementsAre("3:32: webhooks[0].event: \"job.Done\" is not an event: use "
                          "job.StateChange, job.Progress, task.StateChange or task.Progress"));
  EXPECT_THAT(Problems("name: j\nwebhooks:\n  - {url: 'http://h/x', event: task.Progress, "
                       "secret: '{{ secrets.k }}'}\ntasks:\n  - {name: t, run: x}\n"),
              testing::IsEmpty());
}

TEST(JobDecodeTest, AliasBombInInputsIsRefused) {
  std::string text = "name: j\ninputs:\n  a: &big " + std::string(1 << 20, 'x') + "\n";
  for (int i = 0; i < 10; ++i) text += "  b" + std::to_string(i) + ": *big\n";
  text += "tasks:\n  - {name: t, run: echo}\n";
  JobParseResult result = ParseJob(text, DocumentFormat::kYaml);
  EXPECT_FALSE(result.job.has_value());
  EXPECT_THAT(Problems(text),
              ElementsAre(::testing::HasSubstr("it expands to more than 8388608 bytes")));
}

TEST(JobDecodeTest, ReportsEveryProblemAtOnceInDocumentOrder) {
  auto problems = Problems(R"(name: three mistakes
tasks:
  - name: first
    run: echo
    retry:
      limit: 11
  - name: second
    run: echo
    timeout: forever
  - name: third
    run: echo
    priority: 12
)");
  EXPECT_THAT(problems,
              ElementsAre("6:14: tasks[0].retry.limit: must be between 1 and 10, got 11",
                          "9:14: tasks[1].timeout: invalid duration \"forever\": expected a number "
                          "(use e.g. 500ms, 30s, 1m30s, 2h)",
                          "12:15: tasks[2].priority: must be between 0 and 9, got 12"));
}

TEST(JobDecodeTest, JsonProblemsHaveLinesToo) {
  auto problems = Problems(R"({
  "name": "j",
  "tasks": [
    {"name": "t", "run": "x", "priority": 42},
    {"nmae": "u", "run": "x"}
  ]
})",
                           DocumentFormat::kJson);
  EXPECT_THAT(problems,
              ElementsAre("4:43: tasks[0].priority: must be between 0 and 9, got 42",
                          "5:5: tasks[1].name: a task needs a name",
                          "5:6: tasks[1].nmae: unknown field \"nmae\" (did you mean \"name\"?)"));
}

TEST(JobDecodeTest, SyntaxErrorsAreProblemsNotCrashes) {
  auto yaml = Problems("name: j\ntasks:\n  - name: [unclosed\n");
  ASSERT_EQ(yaml.size(), 1u);
  EXPECT_THAT(yaml[0], testing::HasSubstr("YAML syntax error"));
  auto json = Problems("{\"name\": \"j\",\n \"tasks\": [}", DocumentFormat::kJson);
  ASSERT_EQ(json.size(), 1u);
  EXPECT_THAT(json[0], testing::StartsWith("2:"));
  EXPECT_THAT(json[0], testing::HasSubstr("JSON syntax error"));
}

TEST(JobDecodeTest, TypeErrorsSayWhatWasExpected) {
  EXPECT_THAT(Problems("name: j\ntasks:\n  name: t\n"),
              ElementsAre("3:3: tasks: expected a list, got map"));
  EXPECT_THAT(Problems(WithTask("    run: x\n    env: [a]\n")),
              ElementsAre("5:10: tasks[0].env: expected a map of strings, got list"));
  EXPECT_THAT(Problems(WithTask("    run: x\n    cmd: echo\n")),
              ElementsAre("5:10: tasks[0].cmd: expected a list of strings, got string \"echo\""));
}

TEST(JobDecodeTest, AuxTasksNeedANameAndSidecarsTakeAProbe) {
  EXPECT_THAT(Problems(WithTask("    run: x\n    pre:\n      - run: echo\n")),
              ElementsAre("6:9: tasks[0].pre[0].name: is required"));
  EXPECT_THAT(
      Problems(WithTask("    image: alpine\n    sidecars:\n      - name: web\n"
                        "        image: nginx\n        probe: {path: /health, port: 70000}\n")),
      ElementsAre("8:38: tasks[0].sidecars[0].probe.port: must be between 1 and 65535, "
                  "got 70000"));
  EXPECT_THAT(
      Problems(WithTask("    run: x\n    pre:\n      - name: p\n        probe: {port: 80}\n")),
      ElementsAre("7:9: tasks[0].pre[0].probe: unknown field \"probe\""));
}

TEST(JobDecodeTest, AcceptsTorkPermissions) {
  EXPECT_THAT(Problems("name: j\npermissions:\n  - role: admins\n  - user: ann\ntasks:\n"
                       "  - {name: t, run: x}\n"),
              IsEmpty());
  EXPECT_THAT(
      Problems("name: j\npermissions:\n  - {role: a, user: b}\ntasks:\n  - {name: t, run: x}\n"),
      ElementsAre("3:5: permissions[0]: a permission names either a role or a user"));
}

TEST(JobDecodeTest, NullFieldsCountAsAbsent) {
  EXPECT_THAT(Problems(WithTask("    run: x\n    env:\n    retry:\n")), IsEmpty());
}

TEST(JobDecodeTest, CapsTheNumberOfProblems) {
  std::string text = "name: j\ntasks:\n";
  for (int i = 0; i < 300; ++i) text += "  - {name: t, run: x, bogus: 1}\n";
  JobParseResult result = ParseJob(text, DocumentFormat::kYaml);
  EXPECT_EQ(result.problems.size(), kMaxProblems);
}

TEST(JobDecodeTest, ParsesNeedsTriggerRulesAndTheMode) {
  auto result = ParseJob(R"(
name: diamond
mode: dag
tasks:
  - name: a
    run: "true"
  - name: b
    needs: [a]
    run: "true"
  - name: c
    needs: [a]
    run: "true"
  - name: d
    needs: [b, c]
    triggerRule: none_failed
    subjob:
      name: inner
      mode: dag
      tasks:
        - {name: x, run: "true"}
        - {name: y, run: "true", needs: [x], triggerRule: all_done}
)",
                         DocumentFormat::kYaml);
  ASSERT_TRUE(result.job) << result.Message();
  EXPECT_EQ(result.job->mode, TaskOrder::kDag);
  EXPECT_THAT(result.job->tasks[3].needs, ElementsAre(Need{"b", ""}, Need{"c", ""}));
  EXPECT_EQ(result.job->tasks[3].trigger_rule, TriggerRule::kNoneFailed);
  EXPECT_EQ(result.job->tasks[3].subjob->mode, TaskOrder::kDag);
  EXPECT_EQ(result.job->tasks[3].subjob->tasks[1].trigger_rule, TriggerRule::kAllDone);
}

TEST(JobDecodeTest, AGraphsUnknownNeedIsNamedWithItsLineAndColumn) {
  EXPECT_THAT(Problems("name: j\nmode: dag\ntasks:\n  - name: build\n    run: x\n"
                       "  - name: test\n    needs: [biuld]\n    run: x\n"),
              ElementsAre("7:13: tasks[1].needs[0]: no task of tasks is named \"biuld\" (did "
                          "you mean \"build\"?)"));
}

TEST(JobDecodeTest, AGraphsDuplicateNameIsRefused) {
  EXPECT_THAT(Problems("name: j\ntasks:\n  - name: a\n    run: x\n  - name: a\n"
                       "    run: x\n  - name: b\n    needs: [a]\n    run: x\n"),
              ElementsAre("5:11: tasks[1].name: \"a\" names tasks[0] too: the tasks of a "
                          "graph need unique names"));
  // Tork's sequences may repeat names.
  EXPECT_THAT(Problems("name: j\ntasks:\n  - name: a\n    run: x\n  - name: a\n    run: x\n"),
              IsEmpty());
}

TEST(JobDecodeTest, ACycleOfNeedsIsRefusedAlongItsTasks) {
  EXPECT_THAT(Problems("name: j\nmode: dag\ntasks:\n  - name: a\n    needs: [c]\n    run: x\n"
                       "  - name: b\n    needs: [a]\n    run: x\n"
                       "  - name: c\n    needs: [b]\n    run: x\n"),
              ElementsAre("5:5: tasks[0].needs: the tasks' needs form a cycle: \"a\" -> \"c\" "
                          "-> \"b\" -> \"a\""));
  EXPECT_THAT(Problems(R"({"name": "j", "mode": "dag", "tasks": [
    {"name": "a", "run": "x", "needs": ["a"]}]})",
                       DocumentFormat::kJson),
              ElementsAre(HasSubstr("tasks[0].needs: the tasks' needs form a cycle: \"a\" -> "
                                    "\"a\"")));
}

TEST(JobDecodeTest, ANeedMayBeAnEdgeWithAWhen) {
  auto result = ParseJob(R"(
name: branch
mode: dag
tasks:
  - {name: check, var: kind, run: x}
  - name: fast
    needs: [{task: check, when: "{{ tasks.kind == 'small' }}"}]
    run: x
)",
                         DocumentFormat::kYaml);
  ASSERT_TRUE(result.job) << result.Message();
  EXPECT_THAT(result.job->tasks[1].needs,
              ElementsAre(Need{"check", "{{ tasks.kind == 'small' }}"}));
  EXPECT_THAT(Problems("name: j\nmode: dag\ntasks:\n  - {name: a, run: x}\n"
                       "  - {name: b, run: x, needs: [{task: z, when: \"{{ true }}\"}, {when: x}, "
                       "{task: a, if: y}]}\n"),
              ElementsAre("5:38: tasks[1].needs[0]: no task of tasks is named \"z\"",
                          "5:62: tasks[1].needs[1].task: a need names a task",
                          "5:83: tasks[1].needs[2].if: unknown field \"if\""));
}

TEST(JobDecodeTest, OptionalIsABoolean) {
  auto result = ParseJob(WithTask("    run: x\n    optional: true\n"), DocumentFormat::kYaml);
  ASSERT_TRUE(result.job) << result.Message();
  EXPECT_TRUE(result.job->tasks[0].optional);
  EXPECT_THAT(Problems(WithTask("    run: x\n    optional: maybe\n")),
              ElementsAre("5:15: tasks[0].optional: expected true or false, got string \"maybe\""));
}

TEST(JobDecodeTest, AnUnknownTriggerRuleOrModeIsRefused) {
  EXPECT_THAT(Problems(WithTask("    run: x\n    triggerRule: always\n")),
              ElementsAre("5:18: tasks[0].triggerRule: unknown trigger rule \"always\" (expected "
                          "one of all_success, all_done, all_failed, one_success, one_failed, "
                          "none_failed, none_failed_min_one_success)"));
  EXPECT_THAT(Problems("name: j\nmode: graph\ntasks:\n  - name: a\n    run: x\n"),
              ElementsAre("2:7: mode: unknown mode \"graph\" (expected sequence or dag)"));
}

TEST(JobDecodeTest, NeedsInsideAnEachIsRefused) {
  EXPECT_THAT(Problems(WithTask("    each:\n      list: \"{{ [1] }}\"\n      task:\n"
                                "        name: x\n        run: y\n"
                                "        triggerRule: all_done\n")),
              ElementsAre("9:9: tasks[0].each.task.triggerRule: triggerRule orders the tasks of a "
                          "job, a subjob or a parallel, not of an each"));
}

TEST(JobDecodeTest, AParallelsTasksWithNeedsFormAGraphCheckedAsAJobsAre) {
  auto result =
      ParseJob(WithTask("    parallel:\n      tasks:\n"
                        "        - {name: a, run: x}\n"
                        "        - {name: b, run: x, needs: [a], triggerRule: all_done}\n"),
               DocumentFormat::kYaml);
  ASSERT_TRUE(result.job) << result.Message();
  const Parallel& parallel = *result.job->tasks[0].parallel;
  EXPECT_TRUE(IsGraph(parallel));
  EXPECT_THAT(parallel.tasks[1].needs, ElementsAre(Need{"a", ""}));
  // The names are the parallel's: a job's task of that name is not one of them.
  EXPECT_THAT(
      Problems("name: j\ntasks:\n  - {name: z, run: x}\n  - name: p\n    parallel:\n"
               "      tasks:\n        - {name: a, run: x, needs: [z]}\n"
               "        - {name: a, run: x}\n"),
      ElementsAre("7:37: tasks[1].parallel.tasks[0].needs[0]: no task of "
                  "tasks[1].parallel.tasks is named \"z\"",
                  "8:18: tasks[1].parallel.tasks[1].name: \"a\" names "
                  "tasks[1].parallel.tasks[0] too: the tasks of a graph need unique names"));
  EXPECT_THAT(Problems(WithTask("    parallel:\n      tasks:\n"
                                "        - {name: a, run: x, needs: [b]}\n"
                                "        - {name: b, run: x, needs: [a]}\n")),
              ElementsAre("6:29: tasks[0].parallel.tasks[0].needs: the tasks' needs form a "
                          "cycle: \"a\" -> \"b\" -> \"a\""));
  // Without needs, a parallel is Tork's: duplicate names are its business.
  auto plain = ParseJob(WithTask("    parallel:\n      tasks:\n        - {name: a, run: x}\n"
                                 "        - {name: a, run: y}\n"),
                        DocumentFormat::kYaml);
  ASSERT_TRUE(plain.job) << plain.Message();
  EXPECT_FALSE(IsGraph(*plain.job->tasks[0].parallel));
}

TEST(JobDecodeTest, AWaitTakesOneOfForUntilOrSignalAndNoRunnableField) {
  auto result = ParseJob(WithTask("    wait:\n      for: 2s\n"), DocumentFormat::kYaml);
  ASSERT_TRUE(result.job) << result.Message();
  ASSERT_TRUE(result.job->tasks[0].wait);
  EXPECT_EQ(result.job->tasks[0].wait->for_, std::chrono::seconds(2));
  EXPECT_EQ(KindOf(result.job->tasks[0]), TaskKind::kWait);
  auto signal =
      ParseJob(WithTask("    wait: {signal: approved, timeout: 1h}\n"), DocumentFormat::kYaml);
  ASSERT_TRUE(signal.job) << signal.Message();
  EXPECT_EQ(signal.job->tasks[0].wait->signal, "approved");
  EXPECT_EQ(signal.job->tasks[0].wait->timeout, std::chrono::hours(1));
  // Encoded and decoded again, the same.
  auto again = ParseJob(ToJson(*signal.job).dump(), DocumentFormat::kJson);
  ASSERT_TRUE(again.job) << again.Message();
  EXPECT_EQ(*again.job, *signal.job);
  EXPECT_THAT(Problems(WithTask("    wait: {}\n")),
              ElementsAre("4:11: tasks[0].wait: a wait needs one of for, until or signal"));
  EXPECT_THAT(Problems(WithTask("    wait:\n      for: 1s\n      until: x\n")),
              ElementsAre("6:7: tasks[0].wait.until: a wait takes one of for, until or signal, "
                          "but this one also has for",
                          "6:14: tasks[0].wait.until: expected a time (RFC 3339, as "
                          "2026-01-02T15:04:05Z) or a template, got \"x\""));
  EXPECT_THAT(Problems(WithTask("    wait:\n      for: 1s\n      timeout: 5s\n")),
              ElementsAre("6:7: tasks[0].wait.timeout: only a signal wait has a timeout (a for or "
                          "until wait ends at its own time)"));
  EXPECT_THAT(Problems(WithTask("    run: echo\n    wait: {for: 1s}\n")),
              ElementsAre("4:5: tasks[0].run: a wait task cannot have run: it runs nothing"));
  EXPECT_THAT(Problems(WithTask("    wait: {signal: \"no way\"}\n")),
              ElementsAre("4:20: tasks[0].wait.signal: must be a name of letters, digits and _, "
                          "got \"no way\""));
}

TEST(JobDecodeTest, DecodesASwitchWithItsCasesSortedAndADefault) {
  auto result =
      ParseJob(WithTask("    var: picked\n    switch:\n      value: \"{{ tasks.kind }}\"\n"
                        "      cases:\n        json: []\n        csv:\n"
                        "          - name: a\n            run: x\n"
                        "          - name: b\n            run: y\n"
                        "      default:\n        - name: d\n          run: z\n"),
               DocumentFormat::kYaml);
  ASSERT_TRUE(result.ok()) << result.Message();
  const Task& t = result.job->tasks[0];
  ASSERT_TRUE(t.switch_);
  EXPECT_EQ(KindOf(t), TaskKind::kSwitch);
  EXPECT_EQ(t.switch_->value, "{{ tasks.kind }}");
  ASSERT_EQ(t.switch_->cases.size(), 2u);
  EXPECT_EQ(t.switch_->cases[0].key, "csv");
  EXPECT_EQ(t.switch_->cases[0].tasks.size(), 2u);
  EXPECT_EQ(t.switch_->cases[1].key, "json");
  EXPECT_TRUE(t.switch_->cases[1].tasks.empty());
  ASSERT_EQ(t.switch_->default_tasks.size(), 1u);
  EXPECT_EQ(&SwitchBranch(*t.switch_, "csv"), &t.switch_->cases[0].tasks);
  EXPECT_EQ(&SwitchBranch(*t.switch_, "xml"), &t.switch_->default_tasks);
  // Its JSON form decodes to the same task (as a stored definition is read back).
  auto again = DecodeTaskJson(ToJson(t).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, t);
}

TEST(JobDecodeTest, ASwitchsMistakesAreNamedWithTheirLineAndColumn) {
  EXPECT_THAT(Problems(WithTask("    switch:\n      cases:\n        a: [{name: x, run: y}]\n")),
              ElementsAre("5:7: tasks[0].switch.value: a switch needs a value"));
  EXPECT_THAT(Problems(WithTask("    switch:\n      value: \"{{ 1 }}\"\n")),
              ElementsAre("5:7: tasks[0].switch.cases: a switch needs cases or a default"));
  EXPECT_THAT(
      Problems(WithTask("    switch:\n      value: x\n      cases: [a]\n")),
      ElementsAre("6:14: tasks[0].switch.cases: expected a map of values to tasks, got list"));
  EXPECT_THAT(
      Problems(WithTask("    switch:\n      value: x\n      cases:\n        a:\n"
                        "          - name: x\n            run: y\n            needs: [z]\n")),
      ElementsAre("10:13: tasks[0].switch.cases.a[0].needs: needs orders the tasks of a job, "
                  "a subjob or a parallel, not of a switch"));
  EXPECT_THAT(Problems(WithTask("    run: echo\n    switch:\n      value: x\n      default: []\n")),
              ElementsAre("4:5: tasks[0].run: a switch task cannot have run: it belongs on the "
                          "tasks it runs"));
}

TEST(JobDecodeTest, DecodesALoopAndRoundTripsIt) {
  auto result =
      ParseJob(WithTask("    loop:\n      max: 5\n      until: \"{{ tasks.ok == 'y' }}\"\n"
                        "      tasks:\n        - name: \"check {{ loop.iteration }}\"\n"
                        "          run: x\n"),
               DocumentFormat::kYaml);
  ASSERT_TRUE(result.ok()) << result.Message();
  const Task& t = result.job->tasks[0];
  ASSERT_TRUE(t.loop);
  EXPECT_EQ(KindOf(t), TaskKind::kLoop);
  EXPECT_EQ(t.loop->max, 5);
  EXPECT_EQ(t.loop->until_expr, "{{ tasks.ok == 'y' }}");
  EXPECT_TRUE(t.loop->while_expr.empty());
  ASSERT_EQ(t.loop->tasks.size(), 1u);
  auto again = DecodeTaskJson(ToJson(t).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, t);
}

TEST(JobDecodeTest, ALoopsMaxOverTheEnginesLimitIsAProblemWhereItIs) {
  const std::string job = WithTask("    loop:\n      max: 50\n      tasks: [{name: a, run: b}]\n");
  JobParseResult result = ParseJob(job, DocumentFormat::kYaml, kMaxDocumentBytes, 10);
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_EQ(result.problems[0].ToString(),
            "5:12: tasks[0].loop.max: 50 is over this engine's limit of 10 iterations "
            "(coordinator.max_loop_iterations)");
  EXPECT_TRUE(ParseJob(job, DocumentFormat::kYaml, kMaxDocumentBytes, 50).ok());
  // A stored definition is read back whatever the limit is now.
  EXPECT_TRUE(
      DecodeTaskJson(R"({"name": "a", "loop": {"max": 50, "tasks": [{"name": "b", "run": "c"}]}})",
                     DecodeMode::kStored)
          .ok());
}

TEST(JobDecodeTest, ALoopNeedsTasksAndAMaxInRangeAndTakesWhileOrUntil) {
  EXPECT_THAT(Problems(WithTask("    loop:\n      until: \"{{ true }}\"\n")),
              ElementsAre("5:7: tasks[0].loop.tasks: a loop needs at least one task",
                          "5:7: tasks[0].loop.max: a loop needs max, the most iterations it may "
                          "run (it stops there)"));
  EXPECT_THAT(Problems(WithTask("    loop:\n      max: 0\n      tasks: [{name: a, run: b}]\n")),
              ElementsAre("5:12: tasks[0].loop.max: must be between 1 and 100000, got 0"));
  EXPECT_THAT(Problems(WithTask("    loop:\n      max: 2\n      while: \"{{ true }}\"\n"
                                "      until: \"{{ true }}\"\n      tasks: [{name: a, run: b}]\n")),
              ElementsAre("7:7: tasks[0].loop.until: a loop takes while or until, not both"));
  EXPECT_THAT(Problems(WithTask("    loop:\n      max: 2\n      until: \"{{ true \"\n"
                                "      tasks: [{name: a, run: b}]\n")),
              ElementsAre(testing::StartsWith("6:14: tasks[0].loop.until: malformed template")));
  EXPECT_THAT(Problems(WithTask("    loop:\n      max: 2\n      tasks: []\n")),
              ElementsAre("6:14: tasks[0].loop.tasks: a loop needs at least one task"));
}

TEST(JobDecodeTest, OnFailureIsAListOfTasksOrTasksWithThenAndRoundTrips) {
  auto list = ParseJob(WithTask("    run: a\n    onFailure:\n      - name: f\n        run: b\n"),
                       DocumentFormat::kYaml);
  ASSERT_TRUE(list.ok()) << list.Message();
  ASSERT_TRUE(list.job->tasks[0].on_failure);
  EXPECT_EQ(list.job->tasks[0].on_failure->then, Then::kFail);  // the default
  ASSERT_EQ(list.job->tasks[0].on_failure->tasks.size(), 1u);
  EXPECT_EQ(list.job->tasks[0].on_failure->tasks[0].name, "f");
  auto map = ParseJob(WithTask("    run: a\n    onFailure:\n      then: continue\n"
                               "      tasks: [{name: f, run: b}, {name: g, run: c}]\n"),
                      DocumentFormat::kYaml);
  ASSERT_TRUE(map.ok()) << map.Message();
  const Task& t = map.job->tasks[0];
  EXPECT_EQ(t.on_failure->then, Then::kContinue);
  EXPECT_EQ(t.on_failure->tasks.size(), 2u);
  EXPECT_EQ(KindOf(t), TaskKind::kRunnable);  // a fallback changes no kind
  auto again = DecodeTaskJson(ToJson(t).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, t);
}

TEST(JobDecodeTest, OnFailuresMistakesAreNamedWithTheirLineAndColumn) {
  EXPECT_THAT(Problems(WithTask("    run: a\n    onFailure:\n      then: retry\n"
                                "      tasks: [{name: f, run: b}]\n")),
              ElementsAre("6:13: tasks[0].onFailure.then: unknown then \"retry\" (expected fail "
                          "or continue)"));
  EXPECT_THAT(Problems(WithTask("    run: a\n    onFailure: []\n")),
              ElementsAre("5:16: tasks[0].onFailure: onFailure needs at least one task"));
  EXPECT_THAT(Problems(WithTask("    run: a\n    onFailure:\n      then: continue\n")),
              ElementsAre("6:7: tasks[0].onFailure.tasks: onFailure needs at least one task"));
  EXPECT_THAT(Problems(WithTask("    run: a\n    onFailure:\n      - name: f\n        run: b\n"
                                "        needs: [t]\n")),
              ElementsAre("8:9: tasks[0].onFailure[0].needs: needs orders the tasks of a job, "
                          "a subjob or a parallel, not of onFailure"));
}

TEST(JobDecodeTest, AJobsOnFailureAndFinallyAreListsOfTasks) {
  auto result = ParseJob(
      "name: j\ntasks: [{name: a, run: x}]\n"
      "onFailure: [{name: page, run: y}]\nfinally: [{name: tidy, run: z}]\n",
      DocumentFormat::kYaml);
  ASSERT_TRUE(result.ok()) << result.Message();
  ASSERT_EQ(result.job->on_failure.size(), 1u);
  EXPECT_EQ(result.job->on_failure[0].name, "page");
  ASSERT_EQ(result.job->finally.size(), 1u);
  EXPECT_EQ(result.job->finally[0].name, "tidy");
  auto json = ParseJob(ToJson(*result.job).dump(), DocumentFormat::kJson);
  ASSERT_TRUE(json.ok()) << json.Message();
  EXPECT_EQ(*json.job, *result.job);
  EXPECT_THAT(Problems("name: j\ntasks: [{name: a, run: x}]\nfinally: []\n"),
              ElementsAre("3:10: finally: finally needs at least one task"));
  auto sub = ParseJob(WithTask("    subjob:\n      name: s\n      tasks: [{name: a, run: x}]\n"
                               "      finally: [{name: tidy, run: z}]\n"),
                      DocumentFormat::kYaml);
  ASSERT_TRUE(sub.ok()) << sub.Message();
  EXPECT_EQ(sub.job->tasks[0].subjob->finally.size(), 1u);
}

TEST(JobDecodeTest, OnlyAStoredRowSaysWhatItHandles) {
  EXPECT_THAT(Problems(WithTask("    run: a\n    handles: onFailure\n")),
              ElementsAre(testing::StartsWith("5:5: tasks[0].handles: unknown field")));
  auto stored = DecodeTaskJson(R"({"name": "t", "handles": "job.finally"})", DecodeMode::kStored);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(stored->handles, Handles::kJobFinally);
  EXPECT_EQ(KindOf(*stored), TaskKind::kHandler);
  EXPECT_FALSE(DecodeTaskJson(R"({"name": "t", "handles": "x"})", DecodeMode::kStored).ok());
}

TEST(JobDecodeTest, RetryOnNamesExitCodesAndErrorsAndJitterIsADuration) {
  auto result = ParseJob(WithTask("    run: a\n    retry:\n      limit: 2\n      jitter: 250ms\n"
                                  "      on: {exitCodes: [75, 3], errors: [timeout, lost]}\n"),
                         DocumentFormat::kYaml);
  ASSERT_TRUE(result.ok()) << result.Message();
  const Retry& retry = *result.job->tasks[0].retry;
  EXPECT_EQ(retry.jitter, std::chrono::milliseconds(250));
  ASSERT_TRUE(retry.on);
  EXPECT_EQ(retry.on->exit_codes, (std::vector<int>{75, 3}));
  EXPECT_EQ(retry.on->errors, (std::vector<FailReason>{FailReason::kTimeout, FailReason::kLost}));
  auto again = DecodeTaskJson(ToJson(result.job->tasks[0]).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, result.job->tasks[0]);
}

TEST(JobDecodeTest, RetryOnsMistakesAreNamedWithTheirLineAndColumn) {
  EXPECT_THAT(
      Problems(WithTask("    run: a\n    retry:\n      limit: 2\n"
                        "      on: {exitCodes: [0, 256], errors: [exit, nap]}\n")),
      ElementsAre("7:24: tasks[0].retry.on.exitCodes[0]: must be between 1 and 255, got 0",
                  "7:27: tasks[0].retry.on.exitCodes[1]: must be between 1 and 255, got 256",
                  "7:42: tasks[0].retry.on.errors[0]: unknown error \"exit\" (expected "
                  "timeout, oom, lost or error; an exit code goes in exitCodes)",
                  "7:48: tasks[0].retry.on.errors[1]: unknown error \"nap\" (expected "
                  "timeout, oom, lost or error; an exit code goes in exitCodes)"));
  EXPECT_THAT(Problems(WithTask("    run: a\n    retry:\n      limit: 2\n      on: {}\n")),
              ElementsAre("7:11: tasks[0].retry.on: names no failure to retry: give exitCodes, "
                          "errors or both"));
  EXPECT_THAT(
      Problems(WithTask("    run: a\n    retry:\n      limit: 2\n      on: {errors: oom}\n")),
      ElementsAre("7:20: tasks[0].retry.on.errors: expected a list, got string \"oom\""));
}

}  // namespace
}  // namespace baton
