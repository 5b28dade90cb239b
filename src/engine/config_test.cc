#include "engine/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "engine/engine.h"

namespace baton {
namespace {

using ::testing::HasSubstr;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("baton-config-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& text) {
    auto path = (dir_ / "baton.toml").string();
    std::ofstream(path) << text;
    return path;
  }

  std::function<const char*(const char*)> Env() {
    return [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
  }

  std::filesystem::path dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(ConfigTest, DefaultsWithoutAFile) {
  auto config = LoadConfig("", Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->coordinator_address, "localhost:8000");
  EXPECT_EQ(config->broker_type, "inmemory");
  EXPECT_TRUE(config->worker_queues.empty());
}

// Tasks run in directories of their own: every path derived from the data directory
// must be absolute, whatever the default or the configuration said.
TEST_F(ConfigTest, DataDirAndSqlitePathAreMadeAbsolute) {
  auto defaults = LoadConfig("", Env());
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults->data_dir, (std::filesystem::current_path() / ".baton").string());

  env_["BATON_DATA_DIR"] = "./data/../state/";
  env_["BATON_DATASTORE_SQLITE_PATH"] = "db/baton.db";
  auto relative = LoadConfig("", Env());
  ASSERT_TRUE(relative.ok()) << relative.status().message();
  EXPECT_EQ(relative->data_dir, (std::filesystem::current_path() / "state").string());
  EXPECT_EQ(relative->sqlite_path, (std::filesystem::current_path() / "db/baton.db").string());

  env_["BATON_DATA_DIR"] = "";
  auto empty = LoadConfig("", Env());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("data_dir"), std::string::npos);
}

TEST_F(ConfigTest, MakePathsAbsoluteResolvesALaterDataDir) {
  Config config;
  config.data_dir = "flag-dir";
  ASSERT_TRUE(MakePathsAbsolute(config).ok());
  EXPECT_EQ(config.data_dir, (std::filesystem::current_path() / "flag-dir").string());
  EXPECT_EQ(config.sqlite_path, "");  // still: <data_dir>/baton.db
}

TEST_F(ConfigTest, ReadsTheDockerRuntimeKeys) {
  auto config = LoadConfig(Write(R"(
[runtime]
type = "auto"
[runtime.docker]
host = "unix:///run/podman/podman.sock"
image = "localhost/busybox:latest"
config = "/etc/baton/docker.json"
[runtime.docker.binds]
allowed = true
sources = "/srv/data, /mnt/shared"
)"),
                           Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->runtime_type, "auto");
  EXPECT_EQ(config->docker_host, "unix:///run/podman/podman.sock");
  EXPECT_EQ(config->docker_image, "localhost/busybox:latest");
  EXPECT_EQ(config->docker_config, "/etc/baton/docker.json");
  EXPECT_TRUE(config->docker_allow_binds);
  EXPECT_EQ(config->docker_bind_sources, (std::vector<std::string>{"/srv/data", "/mnt/shared"}));

  env_["BATON_RUNTIME_DOCKER_BINDS_SOURCES"] = "relative/path";
  auto bad = LoadConfig("", Env());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("runtime.docker.binds.sources"), std::string::npos);
}

TEST_F(ConfigTest, ReadsEveryKindOfKey) {
  auto config = LoadConfig(Write(R"(
data_dir = "/var/lib/baton"
[coordinator]
address = "0.0.0.0:9000"
[worker]
queues = { default = 4, gpu = 1 }
[datastore.sqlite]
path = "/tmp/x.db"
[logging]
level = "debug"
format = "json"
)"),
                           Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->data_dir, "/var/lib/baton");
  EXPECT_EQ(config->coordinator_address, "0.0.0.0:9000");
  EXPECT_EQ(config->worker_queues, (std::map<std::string, int>{{"default", 4}, {"gpu", 1}}));
  EXPECT_EQ(config->sqlite_path, "/tmp/x.db");
  EXPECT_EQ(config->log_level, log::Level::kDebug);
  EXPECT_EQ(config->log_format, log::Format::kJson);
}

TEST_F(ConfigTest, EnvironmentOverridesTheFile) {
  env_["BATON_DATASTORE_SQLITE_PATH"] = "/env.db";
  env_["BATON_WORKER_QUEUES"] = "default:2,gpu:1";
  env_["BATON_DATA_DIR"] = "/data";
  auto config = LoadConfig(Write("[datastore.sqlite]\npath = \"/file.db\"\n"), Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->sqlite_path, "/env.db");
  EXPECT_EQ(config->data_dir, "/data");
  EXPECT_EQ(config->worker_queues, (std::map<std::string, int>{{"default", 2}, {"gpu", 1}}));
}

TEST_F(ConfigTest, UnknownKeysAndBadValuesNameTheKey) {
  std::string path = Write("[datastore]\ntpye = \"sqlite\"\n");
  EXPECT_EQ(LoadConfig(path, Env()).status().message(),
            path + ": unknown configuration key datastore.tpye");
  path = Write("[broker]\ntype = \"kafka\"\n");
  EXPECT_EQ(LoadConfig(path, Env()).status().message(),
            path + ": broker.type: \"kafka\" is not one of inmemory, rabbitmq");
  env_["BATON_LOGGING_LEVEL"] = "loud";
  EXPECT_EQ(LoadConfig("", Env()).status().message(),
            "BATON_LOGGING_LEVEL: logging.level: \"loud\" is not one of debug, info, warn, error");
}

TEST_F(ConfigTest, LeaseAndHeartbeatAreDurations) {
  env_["BATON_COORDINATOR_LEASE"] = "3s";
  env_["BATON_COORDINATOR_TIMEOUT_GRACE"] = "45s";
  env_["BATON_WORKER_HEARTBEAT"] = "500ms";
  auto config = LoadConfig("", Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->coordinator_lease, std::chrono::seconds(3));
  EXPECT_EQ(config->coordinator_timeout_grace, std::chrono::seconds(45));
  EXPECT_EQ(config->worker_heartbeat, std::chrono::milliseconds(500));
  env_["BATON_COORDINATOR_LEASE"] = "soon";
  EXPECT_FALSE(LoadConfig("", Env()).ok());
}

TEST_F(ConfigTest, ReadsTheBrokersTlsFilesAsAbsolutePaths) {
  std::string path = Write(R"(
[broker.rabbitmq]
url = "amqps://u:p@rabbit:5671/"
[broker.rabbitmq.tls]
ca = "/etc/baton/ca.pem"
cert = "client.pem"
)");
  env_["BATON_BROKER_RABBITMQ_TLS_KEY"] = "/etc/baton/client.key";
  auto config = LoadConfig(path, Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->rabbitmq_url, "amqps://u:p@rabbit:5671/");
  EXPECT_EQ(config->rabbitmq_tls_ca, "/etc/baton/ca.pem");
  EXPECT_EQ(config->rabbitmq_tls_cert,
            (std::filesystem::current_path() / "client.pem").lexically_normal().string());
  EXPECT_EQ(config->rabbitmq_tls_key, "/etc/baton/client.key");
}

TEST_F(ConfigTest, ReadsTheDistributedKeys) {
  std::string path = Write(R"(
[coordinator]
max_redeliveries = 5
[broker.rabbitmq]
management_url = "http://rabbit:15672"
)");
  auto config = LoadConfig(path, Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->coordinator_max_redeliveries, 5);
  EXPECT_EQ(config->rabbitmq_management_url, "http://rabbit:15672");
  env_["BATON_COORDINATOR_MAX_REDELIVERIES"] = "1";
  config = LoadConfig(path, Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->coordinator_max_redeliveries, 1);
  env_["BATON_COORDINATOR_MAX_REDELIVERIES"] = "many";
  config = LoadConfig(path, Env());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("BATON_COORDINATOR_MAX_REDELIVERIES"), std::string::npos)
      << config.status().message();
}

TEST_F(ConfigTest, MaxLoopIterationsIsAThousandUnlessChosenAndBounded) {
  auto config = LoadConfig("", Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->coordinator_max_loop_iterations, 1000);
  config = LoadConfig(Write("[coordinator]\nmax_loop_iterations = 50000\n"), Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->coordinator_max_loop_iterations, 50000);
  for (const char* bad : {"0", "100001", "lots"}) {
    env_["BATON_COORDINATOR_MAX_LOOP_ITERATIONS"] = bad;
    config = LoadConfig("", Env());
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.status().message().find("is not a count 1..100000"), std::string::npos)
        << config.status().message();
  }
}

TEST_F(ConfigTest, SqliteSynchronousIsFullUnlessChosen) {
  auto config = LoadConfig("", Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->sqlite_synchronous, "full");
  config = LoadConfig(Write("[datastore.sqlite]\nsynchronous = \"normal\"\n"), Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->sqlite_synchronous, "normal");
  env_["BATON_DATASTORE_SQLITE_SYNCHRONOUS"] = "off";
  config = LoadConfig("", Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->sqlite_synchronous, "off");
}

TEST_F(ConfigTest, AnUnknownSqliteSynchronousNamesTheKey) {
  std::string path = Write("[datastore.sqlite]\nsynchronous = \"extra\"\n");
  EXPECT_EQ(LoadConfig(path, Env()).status().message(),
            path + ": datastore.sqlite.synchronous: \"extra\" is not one of full, normal, off");
  env_["BATON_DATASTORE_SQLITE_SYNCHRONOUS"] = "FULL";
  EXPECT_EQ(LoadConfig("", Env()).status().message(),
            "BATON_DATASTORE_SQLITE_SYNCHRONOUS: datastore.sqlite.synchronous: \"FULL\" is not "
            "one of full, normal, off");
}

TEST_F(ConfigTest, AutoDeleteIntervalIsADuration) {
  auto config = LoadConfig("", Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->auto_delete_interval, std::chrono::seconds(60));
  config = LoadConfig(Write("[coordinator.auto_delete]\ninterval = \"250ms\"\n"), Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->auto_delete_interval, std::chrono::milliseconds(250));
  env_["BATON_COORDINATOR_AUTO_DELETE_INTERVAL"] = "0s";
  EXPECT_EQ(LoadConfig("", Env()).status().message(),
            "BATON_COORDINATOR_AUTO_DELETE_INTERVAL: coordinator.auto_delete.interval: must be "
            "more than 0");
}

TEST_F(ConfigTest, ScheduleLookIntervalsAreDurations) {
  auto config = LoadConfig("", Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->schedules.interval, std::chrono::seconds(1));
  EXPECT_EQ(config->schedules.max_idle, std::chrono::seconds(30));
  config = LoadConfig(Write("[coordinator.schedules]\ninterval = \"250ms\"\nmax_idle = \"2m\"\n"),
                      Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->schedules.interval, std::chrono::milliseconds(250));
  EXPECT_EQ(config->schedules.max_idle, std::chrono::minutes(2));
  env_["BATON_COORDINATOR_SCHEDULES_MAX_IDLE"] = "0s";
  EXPECT_EQ(LoadConfig("", Env()).status().message(),
            "BATON_COORDINATOR_SCHEDULES_MAX_IDLE: coordinator.schedules.max_idle: must be "
            "more than 0");
}

// The API server's keys (api.*), and the one rule between them.
TEST_F(ConfigTest, ReadsTheApiServerKeys) {
  auto config = LoadConfig(Write(R"(
[api]
max_connections = 64
max_waits = 16
keep_alive = "2s"
request_timeout = "3s"
handler_threads = 4
max_buffered_bytes = 16777216
)"),
                           Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->api_max_connections, 64);
  EXPECT_EQ(config->api_max_waits, 16);
  EXPECT_EQ(config->api_keep_alive, std::chrono::seconds(2));
  EXPECT_EQ(config->api_request_timeout, std::chrono::seconds(3));
  EXPECT_EQ(config->api_handler_threads, 4);
  EXPECT_EQ(config->api_max_buffered_bytes, 16u << 20);
  env_["BATON_API_MAX_WAITS"] = "10000";
  config = LoadConfig("", Env());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("api.max_waits (10000) must be less than "
                                           "api.max_connections (10000)"),
            std::string::npos)
      << config.status().message();
  env_["BATON_API_MAX_WAITS"] = "none";
  config = LoadConfig("", Env());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("BATON_API_MAX_WAITS"), std::string::npos);
  env_.erase("BATON_API_MAX_WAITS");
  env_["BATON_API_MAX_BUFFERED_BYTES"] = "1000";
  config = LoadConfig("", Env());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("at least 8388608"), std::string::npos)
      << config.status().message();
}

// The configuration files shipped in configs/ load as they are.
TEST_F(ConfigTest, ShippedConfigurationsLoad) {
  for (const char* name : {"sample.toml", "distributed.toml"}) {
    auto config = LoadConfig(std::string(BATON_SOURCE_DIR) + "/configs/" + name, Env());
    EXPECT_TRUE(config.ok()) << name << ": " << config.status().message();
  }
  auto distributed = LoadConfig(std::string(BATON_SOURCE_DIR) + "/configs/distributed.toml", Env());
  ASSERT_TRUE(distributed.ok());
  EXPECT_EQ(distributed->broker_type, "rabbitmq");
  EXPECT_EQ(distributed->datastore_type, "postgres");
  EXPECT_EQ(distributed->worker_queues.at("default"), 8);
}

TEST_F(ConfigTest, ShellSandboxAndTaskUserKeys) {
  auto defaults = LoadConfig("", Env());
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->shell_sandbox);
  EXPECT_EQ(defaults->shell_uid, "");
  std::string path = Write("[runtime.shell]\nsandbox = false\nuid = 65534\ngid = \"nogroup\"\n");
  auto config = LoadConfig(path, Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_FALSE(config->shell_sandbox);
  EXPECT_EQ(config->shell_uid, "65534");
  EXPECT_EQ(config->shell_gid, "nogroup");
  auto bad = LoadConfig(Write("[runtime.shell]\nsandbox = \"maybe\"\n"), Env());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(
      bad.status().message().find("runtime.shell.sandbox: \"maybe\" is not one of true, false"),
      std::string::npos)
      << bad.status().message();
}

TEST_F(ConfigTest, TomlSyntaxErrorsHaveAPosition) {
  std::string path = Write("[coordinator\naddress = 1\n");
  auto config = LoadConfig(path, Env());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message().rfind(path + ":1:", 0), 0u) << config.status().message();
}

TEST_F(ConfigTest, WebhooksRefusePrivateAddressesUnlessAllowed) {
  auto defaults = LoadConfig("", Env());
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->webhooks.allow_private);
  EXPECT_TRUE(defaults->webhooks.allowed_networks.empty());
  std::string path = Write(
      "[webhooks]\nallow_private = true\nallowed_networks = \"127.0.0.1, 10.0.0.0/8, fd00::/8\"\n");
  auto config = LoadConfig(path, Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_TRUE(config->webhooks.allow_private);
  ASSERT_EQ(config->webhooks.allowed_networks.size(), 3u);
  EXPECT_EQ(config->webhooks.allowed_networks[1].bits, 8);
  EXPECT_EQ(config->webhooks.allowed_networks[2].size, 16u);
}

TEST_F(ConfigTest, AWrongAllowedNetworkNamesTheKeyAndTheItem) {
  env_["BATON_WEBHOOKS_ALLOWED_NETWORKS"] = "127.0.0.1, hooks.example.com";
  EXPECT_EQ(LoadConfig("", Env()).status().message(),
            "BATON_WEBHOOKS_ALLOWED_NETWORKS: webhooks.allowed_networks: item 2: "
            "\"hooks.example.com\" is not an IP address or "
            "CIDR network");
  env_.erase("BATON_WEBHOOKS_ALLOWED_NETWORKS");
  env_["BATON_WEBHOOKS_ALLOW_PRIVATE"] = "yes";
  EXPECT_THAT(LoadConfig("", Env()).status().message(), HasSubstr("webhooks.allow_private"));
}

TEST(ParseQueuesTest, ParsesNamesAndConcurrency) {
  EXPECT_EQ(*ParseQueues("default:4,gpu"),
            (std::map<std::string, int>{{"default", 4}, {"gpu", 1}}));
  EXPECT_FALSE(ParseQueues("default:0").ok());
  EXPECT_FALSE(ParseQueues(":3").ok());
  EXPECT_FALSE(ParseQueues("a:x").ok());
}

TEST_F(ConfigTest, EncryptionKeysAreCheckedAtLoadWithoutQuotingThem) {
  env_["BATON_DATASTORE_ENCRYPTION_KEY"] = std::string(64, 'a');
  env_["BATON_DATASTORE_ENCRYPTION_OLD_KEYS"] =
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=, " + std::string(64, 'b');
  env_["BATON_DATASTORE_ENCRYPTION_KEY_FILE"] = "keys/baton.key";
  auto config = LoadConfig("", Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->encryption_key, std::string(64, 'a'));
  EXPECT_EQ(config->encryption_old_keys.size(), 2u);
  EXPECT_EQ(config->encryption_key_file,
            (std::filesystem::current_path() / "keys/baton.key").string());

  env_["BATON_DATASTORE_ENCRYPTION_KEY"] = "hunter2-is-not-a-key";
  auto bad = LoadConfig("", Env());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("datastore.encryption.key"), std::string::npos);
  EXPECT_EQ(bad.status().message().find("hunter2"), std::string::npos);
  env_.erase("BATON_DATASTORE_ENCRYPTION_KEY");
  env_["BATON_DATASTORE_ENCRYPTION_OLD_KEYS"] = std::string(64, 'c') + ",hunter2";
  auto bad_old = LoadConfig("", Env());
  ASSERT_FALSE(bad_old.ok());
  EXPECT_NE(bad_old.status().message().find("datastore.encryption.old_keys: item 2"),
            std::string::npos)
      << bad_old.status().message();
  EXPECT_EQ(bad_old.status().message().find("hunter2"), std::string::npos);
}

TEST_F(ConfigTest, AuthKeysLoadFromTheFileAndFromVariablesOfKeysWithUnderscores) {
  auto defaults = LoadConfig("", Env());
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->AuthEnabled());
  EXPECT_EQ(defaults->api_auth_admin_user, "admin");
  EXPECT_EQ(defaults->api_auth_bcrypt_cost, 10);
  std::string path = Write("[api.auth]\nenabled = true\nadmin_user = \"root\"\nbcrypt_cost = 4\n");
  auto config = LoadConfig(path, Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_TRUE(config->AuthEnabled());
  EXPECT_EQ(config->api_auth_admin_user, "root");
  EXPECT_EQ(config->api_auth_bcrypt_cost, 4);
  // admin_user and admin_password contain "_": their variables resolve against the known
  // keys (Tork's cannot set such keys).
  env_["BATON_API_AUTH_ADMIN_PASSWORD"] = "from-env";
  env_["BATON_API_AUTH_ADMIN_USER"] = "boss";
  env_["BATON_API_AUTH_BCRYPT_COST"] = "5";
  env_["BATON_API_AUTH_ENABLED"] = "false";
  config = LoadConfig(path, Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->api_auth_admin_password, "from-env");
  EXPECT_EQ(config->api_auth_admin_user, "boss");
  EXPECT_EQ(config->api_auth_bcrypt_cost, 5);
  EXPECT_FALSE(config->AuthEnabled());
  // Tork's key turns it on as well.
  env_["BATON_MIDDLEWARE_WEB_BASICAUTH_ENABLED"] = "true";
  config = LoadConfig(path, Env());
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->AuthEnabled());
}

TEST_F(ConfigTest, BadAuthValuesNameTheKeyAndNeverTheAdminPassword) {
  env_["BATON_API_AUTH_BCRYPT_COST"] = "31";
  EXPECT_THAT(LoadConfig("", Env()).status().message(), HasSubstr("api.auth.bcrypt_cost"));
  env_.erase("BATON_API_AUTH_BCRYPT_COST");
  env_["BATON_API_AUTH_ADMIN_USER"] = "no spaces";
  EXPECT_THAT(LoadConfig("", Env()).status().message(), HasSubstr("api.auth.admin_user"));
  env_.erase("BATON_API_AUTH_ADMIN_USER");
  std::string long_password(80, 'q');
  env_["BATON_API_AUTH_ADMIN_PASSWORD"] = long_password.c_str();
  auto bad = LoadConfig("", Env());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("api.auth.admin_password"));
  EXPECT_THAT(bad.status().message(), ::testing::Not(HasSubstr(long_password)));
  env_["BATON_API_AUTH_ENABLED"] = "yes";
  env_.erase("BATON_API_AUTH_ADMIN_PASSWORD");
  EXPECT_THAT(LoadConfig("", Env()).status().message(), HasSubstr("api.auth.enabled"));
}

TEST_F(ConfigTest, TorksWebMiddlewareKeysLoadFromTheFileAndVariables) {
  auto config = LoadConfig(Write(R"(
[middleware.web]
bodylimit = "500K"
[middleware.web.cors]
enabled = true
origins = "https://a.example, https://b.example"
credentials = true
[middleware.web.ratelimit]
enabled = true
rps = 7
)"),
                           Env());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->api_max_body_bytes, 500u << 10);
  EXPECT_TRUE(config->cors_enabled);
  EXPECT_EQ(config->cors_origins,
            (std::vector<std::string>{"https://a.example", "https://b.example"}));
  EXPECT_EQ(config->cors_methods, "*");
  EXPECT_TRUE(config->cors_credentials);
  EXPECT_TRUE(config->rate_limit_enabled);
  EXPECT_EQ(config->rate_limit_rps, 7);
  // Keys with `_`-less parts and dots, as variables too.
  env_["BATON_MIDDLEWARE_WEB_BODYLIMIT"] = "2M";
  env_["BATON_MIDDLEWARE_WEB_RATELIMIT_RPS"] = "3";
  auto from_env = LoadConfig("", Env());
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ(from_env->api_max_body_bytes, 2u << 20);
  EXPECT_EQ(from_env->rate_limit_rps, 3);
  EXPECT_FALSE(from_env->rate_limit_enabled);
  auto defaults = LoadConfig("", [](const char*) -> const char* { return nullptr; });
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->api_max_body_bytes, 4u << 20);
  EXPECT_FALSE(defaults->cors_enabled);
}

TEST_F(ConfigTest, BadWebMiddlewareValuesNameTheKey) {
  env_["BATON_MIDDLEWARE_WEB_BODYLIMIT"] = "lots";
  EXPECT_THAT(LoadConfig("", Env()).status().message(), HasSubstr("middleware.web.bodylimit"));
  env_["BATON_MIDDLEWARE_WEB_BODYLIMIT"] = "200M";  // api.max_buffered_bytes is 256 MiB
  EXPECT_THAT(LoadConfig("", Env()).status().message(),
              HasSubstr("must be at least twice middleware.web.bodylimit"));
  env_.erase("BATON_MIDDLEWARE_WEB_BODYLIMIT");
  env_["BATON_MIDDLEWARE_WEB_RATELIMIT_RPS"] = "0";
  EXPECT_THAT(LoadConfig("", Env()).status().message(), HasSubstr("middleware.web.ratelimit.rps"));
  env_.erase("BATON_MIDDLEWARE_WEB_RATELIMIT_RPS");
  env_["BATON_MIDDLEWARE_WEB_CORS_ENABLED"] = "maybe";
  EXPECT_THAT(LoadConfig("", Env()).status().message(), HasSubstr("middleware.web.cors.enabled"));
}

TEST(EngineAddressTest, OnlyLocalhostAnd127AndIpv6LoopbackAreLoopback) {
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("[::1]"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("::"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("example.com"));
}

}  // namespace
}  // namespace baton
