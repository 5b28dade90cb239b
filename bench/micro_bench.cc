// Micro benchmarks of Baton's hot paths. Run by `make bench` (bench/run.sh); alone:
//   build/bench/bench/baton_micro_bench [--benchmark_filter=Sqlite]
// The PostgreSQL and RabbitMQ cases run when BATON_TEST_POSTGRES_DSN /
// BATON_TEST_RABBITMQ_URL name a server (scripts/test-services/ starts throwaway ones),
// and report "skipped" otherwise.
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "broker/inmemory/inmemory_broker.h"
#include "broker/rabbitmq/rabbitmq_broker.h"
#include "core/job_decode.h"
#include "core/job_json.h"
#include "core/record_json.h"
#include "core/records.h"
#include "crypto/keyring.h"
#include "datastore/postgres/postgres_datastore.h"
#include "datastore/sql/rows.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "expr/expr.h"
#include "runtime/shell/shell_runtime.h"

namespace baton {
namespace {

constexpr const char* kJobYaml = R"(name: hello job
inputs:
  who: world
output: "{{ tasks.greeting }}"
tasks:
  - name: say hello
    var: greeting
    env:
      WHO: "{{ inputs.who }}"
    run: echo -n "hello $WHO" > $BATON_OUTPUT
  - name: fan out
    each:
      list: "{{ sequence(1, 4) }}"
      concurrency: 2
      task:
        name: square {{ item.value }}
        env: { N: "{{ item.value }}" }
        run: echo $((N * N)) > $BATON_OUTPUT
  - name: both
    parallel:
      tasks:
        - name: a
          run: "true"
        - name: b
          run: "true"
)";

Job SampleJob() {
  JobParseResult parsed = ParseJob(kJobYaml, DocumentFormat::kYaml);
  if (!parsed.ok()) std::abort();
  return *parsed.job;
}

void BM_ParseJobYaml(benchmark::State& state) {
  for (auto _ : state) {
    JobParseResult parsed = ParseJob(kJobYaml, DocumentFormat::kYaml);
    benchmark::DoNotOptimize(parsed);
  }
}
BENCHMARK(BM_ParseJobYaml);

void BM_DecodeStoredJobJson(benchmark::State& state) {
  std::string text = ToJson(SampleJob()).dump();
  for (auto _ : state) {
    auto job = DecodeJobJson(text, DecodeMode::kStored);
    benchmark::DoNotOptimize(job);
  }
}
BENCHMARK(BM_DecodeStoredJobJson);

TaskRecord SampleTask(const std::string& job_id) {
  TaskRecord task;
  task.id = NewId();
  task.job_id = job_id;
  task.position = 1;
  task.state = TaskState::kScheduled;
  task.created_at = Now();
  task.task.name = "say hello";
  task.task.run = "echo -n \"hello $WHO\" > $BATON_OUTPUT";
  task.task.env = {{"WHO", "world"}};
  return task;
}

// A task row as the datastore writes (encode) and reads (decode) it (sql/rows.h), with
// secrets encrypted at rest (arg 1) or without a key (arg 0), for a task whose env holds
// two secret-looking values: what encryption adds to each row written and read.
Task SecretTask() {
  Task task = SampleTask(NewId()).task;
  task.env["API_TOKEN"] = "tok-3c1d9e0a5b7f";
  task.env["DB_PASSWORD"] = "pw-8e2a61f4c0d9";
  return task;
}
const crypto::Keyring* BenchKeys(benchmark::State& state) {
  static const crypto::Keyring ring = *crypto::Keyring::Make({*crypto::GenerateKey()});
  return state.range(0) == 1 ? &ring : nullptr;
}

void BM_StoredTaskWrite(benchmark::State& state) {
  const Task task = SecretTask();
  const crypto::Keyring* keys = BenchKeys(state);
  for (auto _ : state) {
    Result<std::string> text = sql::EncodeTask(task, keys);
    benchmark::DoNotOptimize(text);
  }
}
BENCHMARK(BM_StoredTaskWrite)->Arg(0)->Arg(1);

void BM_StoredTaskRead(benchmark::State& state) {
  const crypto::Keyring* keys = BenchKeys(state);
  const std::string text = *sql::EncodeTask(SecretTask(), keys);
  for (auto _ : state) {
    Result<Task> task = sql::DecodeStoredTask(text, keys);
    benchmark::DoNotOptimize(task);
  }
}
BENCHMARK(BM_StoredTaskRead)->Arg(0)->Arg(1);

// A task message as the broker carries it: encode + decode.
void BM_TaskMessageRoundTrip(benchmark::State& state) {
  TaskRecord task = SampleTask(NewId());
  for (auto _ : state) {
    std::string body = ToJson(task).dump();
    auto decoded = TaskRecordFromJson(nlohmann::json::parse(body));
    benchmark::DoNotOptimize(decoded);
  }
}
BENCHMARK(BM_TaskMessageRoundTrip);

void BM_EvaluateTemplate(benchmark::State& state) {
  nlohmann::json vars = {{"inputs", {{"who", "world"}}},
                         {"item", {{"index", 3}, {"value", 42}}},
                         {"tasks", {{"greeting", "hello"}}}};
  for (auto _ : state) {
    auto text =
        expr::EvaluateTemplate("square {{ item.value * item.value }} for {{ inputs.who }}", vars);
    benchmark::DoNotOptimize(text);
  }
}
BENCHMARK(BM_EvaluateTemplate);

// One task transition (read-modify-write of a row) against `store`, from `threads`
// callers at once (group commit batches them).
void TaskTransitions(benchmark::State& state, Datastore& store, std::vector<std::string>& ids) {
  const std::string& id = ids[static_cast<std::size_t>(state.thread_index())];
  int i = 0;
  for (auto _ : state) {
    Status s = store.UpdateTask(id, [&](TaskRecord& t) {
      t.state = (++i % 2) ? TaskState::kRunning : TaskState::kScheduled;
      t.node_id = "node";
      return Status::Ok();
    });
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}

std::vector<std::string> SeedTasks(Datastore& store, int n) {
  JobRecord job;
  job.id = NewId();
  job.created_at = Now();
  job.job = SampleJob();
  job.task_count = static_cast<int>(job.job.tasks.size());
  if (!store.CreateJob(job).ok()) std::abort();
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    TaskRecord task = SampleTask(job.id);
    if (!store.CreateTask(task).ok()) std::abort();
    ids.push_back(task.id);
  }
  return ids;
}

struct SqliteFixture {
  std::filesystem::path dir;
  std::unique_ptr<SqliteDatastore> store;
  std::vector<std::string> ids;
  SqliteFixture() {
    dir = std::filesystem::temp_directory_path() / ("baton-bench-" + NewId());
    SqliteOptions options;
    options.path = (dir / "baton.db").string();
    auto opened = SqliteDatastore::Open(options);
    if (!opened.ok()) std::abort();
    store = std::move(*opened);
    ids = SeedTasks(*store, 64);
  }
  ~SqliteFixture() {
    store.reset();
    std::filesystem::remove_all(dir);
  }
};

SqliteFixture& Sqlite() {
  static SqliteFixture fixture;
  return fixture;
}

void BM_SqliteTaskTransition(benchmark::State& state) {
  TaskTransitions(state, *Sqlite().store, Sqlite().ids);
}
BENCHMARK(BM_SqliteTaskTransition)->Threads(1)->Threads(8)->UseRealTime();

void BM_SqliteGetTask(benchmark::State& state) {
  auto& f = Sqlite();
  for (auto _ : state) {
    auto task = f.store->GetTask(f.ids[0]);
    benchmark::DoNotOptimize(task);
  }
}
BENCHMARK(BM_SqliteGetTask);

Datastore* Postgres() {
  static std::unique_ptr<PostgresDatastore> store;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* dsn = std::getenv("BATON_TEST_POSTGRES_DSN");
    if (dsn == nullptr || *dsn == 0) return;
    PostgresOptions options;
    options.dsn = dsn;
    auto opened = PostgresDatastore::Open(options);
    if (opened.ok()) store = std::move(*opened);
  });
  return store.get();
}

void BM_PostgresTaskTransition(benchmark::State& state) {
  static std::vector<std::string> ids;
  Datastore* store = Postgres();
  if (store == nullptr) {
    state.SkipWithError("skipped: BATON_TEST_POSTGRES_DSN is not set");
    for (auto _ : state) {
    }
    return;
  }
  static std::once_flag once;
  std::call_once(once, [&] { ids = SeedTasks(*store, 64); });
  TaskTransitions(state, *store, ids);
}
BENCHMARK(BM_PostgresTaskTransition)->Threads(1)->Threads(8)->UseRealTime();

// Publish one message and wait until the subscriber has it.
void BrokerRoundTrip(benchmark::State& state, Broker& broker) {
  std::mutex mu;
  std::condition_variable cv;
  std::int64_t received = 0;
  std::string queue = "bench-" + NewId();
  auto sub = broker.Subscribe(queue, 1, [&](std::unique_ptr<Delivery> d) {
    (void)d->Ack();
    {
      std::lock_guard lock(mu);
      ++received;
    }
    cv.notify_one();
  });
  if (!sub.ok()) {
    state.SkipWithError(sub.status().message().c_str());
    for (auto _ : state) {
    }
    return;
  }
  std::string body = ToJson(SampleTask(NewId())).dump();
  std::int64_t sent = 0;
  for (auto _ : state) {
    Status s = broker.Publish(queue, body);
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      break;
    }
    ++sent;
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return received == sent; });
  }
  (*sub)->Close();
}

void BM_InMemoryBrokerRoundTrip(benchmark::State& state) {
  InMemoryBroker broker;
  BrokerRoundTrip(state, broker);
}
BENCHMARK(BM_InMemoryBrokerRoundTrip)->UseRealTime();

void BM_RabbitMqRoundTrip(benchmark::State& state) {
  const char* url = std::getenv("BATON_TEST_RABBITMQ_URL");
  if (url == nullptr || *url == 0) {
    state.SkipWithError("skipped: BATON_TEST_RABBITMQ_URL is not set");
    for (auto _ : state) {
    }
    return;
  }
  RabbitMqOptions options;
  options.url = url;
  options.queue_expires = std::chrono::seconds(60);
  auto broker = RabbitMqBroker::Connect(options);
  if (!broker.ok()) {
    state.SkipWithError(broker.status().message().c_str());
    for (auto _ : state) {
    }
    return;
  }
  BrokerRoundTrip(state, **broker);
}
BENCHMARK(BM_RabbitMqRoundTrip)->UseRealTime();

// One `true` task through the shell runtime: the CPU time is the runtime's own (the
// calling thread: directory, cgroups, spawn, supervision), the real time includes bash.
void BM_ShellRuntimeTrueTask(benchmark::State& state) {
  class NullObserver : public RunObserver {
   public:
    void OnLog(std::string_view) override {}
    void OnProgress(double) override {}
  } observer;
  std::filesystem::path base = std::filesystem::temp_directory_path() / ("baton-bench-" + NewId());
  {
    ShellRuntimeOptions options;
    options.base_dir = base.string();
    ShellRuntime runtime(options);
    RunRequest request;
    request.task_id = "bench";
    request.job_id = "bench";
    request.task.run = "true";
    for (auto _ : state) {
      Result<RunOutcome> outcome = runtime.Run(request, observer, {});
      if (!outcome.ok() || outcome->state != RunOutcome::State::kCompleted) {
        state.SkipWithError("the task failed");
        break;
      }
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(base, ec);
}
BENCHMARK(BM_ShellRuntimeTrueTask)->UseRealTime();

}  // namespace
}  // namespace baton

BENCHMARK_MAIN();
