#include "runtime/docker/docker_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace baton::docker {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string VolumeName(std::size_t i) { return "vol-" + std::to_string(i); }

Mount MakeMount(MountType type, std::string source, std::string target, StringMap opts = {}) {
  Mount mount;
  mount.type = type;
  mount.source = std::move(source);
  mount.target = std::move(target);
  mount.opts = std::move(opts);
  return mount;
}

TEST(ResolveMountsTest, VolumeWithoutSourceGetsThePerTaskVolume) {
  auto mounts = ResolveMounts({MakeMount(MountType::kVolume, "", "/data")}, {}, VolumeName);
  ASSERT_TRUE(mounts.ok()) << mounts.status().ToString();
  ASSERT_EQ(mounts->size(), 1u);
  EXPECT_EQ((*mounts)[0].type, "volume");
  EXPECT_EQ((*mounts)[0].source, "vol-0");
  EXPECT_EQ((*mounts)[0].target, "/data");
}

TEST(ResolveMountsTest, BindsAreRefusedUnlessAllowed) {
  auto mounts = ResolveMounts({MakeMount(MountType::kBind, "/etc", "/host-etc")}, {}, VolumeName);
  ASSERT_FALSE(mounts.ok());
  EXPECT_THAT(mounts.status().message(),
              AllOf(HasSubstr("\"/etc\""), HasSubstr("refused"), HasSubstr("binds.allowed")));
}

TEST(ResolveMountsTest, BindsOnlyFromListedSourcesWhenListed) {
  BindPolicy policy{true, {"/srv/data"}, {}};
  auto inside =
      ResolveMounts({MakeMount(MountType::kBind, "/srv/data/in/../x", "/x")}, policy, VolumeName);
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  EXPECT_EQ((*inside)[0].source, "/srv/data/x");
  for (const char* source : {"/srv/data/../secret", "/srv/database", "/srv", "/etc"}) {
    auto outside = ResolveMounts({MakeMount(MountType::kBind, source, "/x")}, policy, VolumeName);
    ASSERT_FALSE(outside.ok()) << source;
    EXPECT_THAT(outside.status().message(), HasSubstr("not under an allowed source")) << source;
  }
  auto relative =
      ResolveMounts({MakeMount(MountType::kBind, "data", "/x")}, {true, {}, {}}, VolumeName);
  EXPECT_FALSE(relative.ok());
}

TEST(ResolveMountsTest, TheDataDirectoryIsNeverBoundWhateverTheSources) {
  BindPolicy policy{true, {}, {"/var/lib/baton"}};
  for (const char* source : {"/var/lib/baton", "/var/lib/baton/", "/var/lib/baton/tasks/x",
                             "/var/lib", "/", "/var/lib/other/../baton/baton.db"}) {
    auto refused = ResolveMounts({MakeMount(MountType::kBind, source, "/x")}, policy, VolumeName);
    ASSERT_FALSE(refused.ok()) << source;
    EXPECT_THAT(refused.status().message(),
                HasSubstr("would give the container Baton's data directory (/var/lib/baton)"))
        << source;
  }
  auto other = ResolveMounts({MakeMount(MountType::kBind, "/var/lib/baton-other", "/x")}, policy,
                             VolumeName);
  EXPECT_TRUE(other.ok()) << other.status().ToString();
}

TEST(ResolveMountsTest, ReservedTargetsAndUnknownOptionsAreRefused) {
  EXPECT_FALSE(ResolveMounts({MakeMount(MountType::kVolume, "", "/baton")}, {}, VolumeName).ok());
  EXPECT_FALSE(ResolveMounts({MakeMount(MountType::kTmpfs, "", "/tork/x")}, {}, VolumeName).ok());
  auto unknown =
      ResolveMounts({MakeMount(MountType::kTmpfs, "", "/t", {{"colour", "red"}})}, {}, VolumeName);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("colour"));
}

TEST(ResolveMountsTest, TmpfsTakesSizeAndMode) {
  auto mounts = ResolveMounts(
      {MakeMount(MountType::kTmpfs, "", "/scratch", {{"size", "16m"}, {"mode", "1777"}})}, {},
      VolumeName);
  ASSERT_TRUE(mounts.ok()) << mounts.status().ToString();
  EXPECT_EQ((*mounts)[0].tmpfs_size, 16 * 1024 * 1024);
  EXPECT_EQ((*mounts)[0].tmpfs_mode, 01777);
  EXPECT_FALSE(
      ResolveMounts({MakeMount(MountType::kTmpfs, "", "/s", {{"size", "lots"}})}, {}, VolumeName)
          .ok());
}

TEST(ParseGpusTest, AcceptsDockersForms) {
  EXPECT_EQ(ParseGpus("all")->count, -1);
  EXPECT_EQ(ParseGpus("2")->count, 2);
  EXPECT_EQ(ParseGpus("count=3")->count, 3);
  auto devices = ParseGpus("device=0,1,driver=nvidia");
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  EXPECT_THAT(devices->device_ids, ElementsAre("0", "1"));
  EXPECT_EQ(devices->driver, "nvidia");
  EXPECT_FALSE(ParseGpus("many").ok());
  EXPECT_FALSE(ParseGpus("").ok());
}

TEST(CreateBodyTest, CarriesLimitsMountsNetworksAndGpus) {
  ContainerSpec spec;
  spec.image = "localhost/busybox:latest";
  spec.cmd = std::vector<std::string>{"echo", "hi"};
  spec.env = {"A=1"};
  spec.memory = 64 * 1024 * 1024;
  spec.cpus = 0.5;
  spec.network_mode = "bridge";
  spec.networks = {"bridge", "other"};
  spec.mounts = {MountSpec{"tmpfs", "", "/t", false, 1024, std::nullopt}};
  spec.gpus = GpuRequest{-1, {}, "", {}};
  json body = json::parse(CreateBody(spec));
  EXPECT_EQ(body["Image"], "localhost/busybox:latest");
  EXPECT_FALSE(body.contains("Entrypoint"));
  EXPECT_EQ(body["Cmd"], json({"echo", "hi"}));
  EXPECT_EQ(body["HostConfig"]["Memory"], 64 * 1024 * 1024);
  EXPECT_EQ(body["HostConfig"]["MemorySwap"], 64 * 1024 * 1024);
  EXPECT_EQ(body["HostConfig"]["NanoCpus"], 500000000);
  EXPECT_EQ(body["HostConfig"]["NetworkMode"], "bridge");
  EXPECT_EQ(body["HostConfig"]["Mounts"][0]["TmpfsOptions"]["SizeBytes"], 1024);
  EXPECT_EQ(body["HostConfig"]["DeviceRequests"][0]["Count"], -1);
  EXPECT_EQ(body["HostConfig"]["DeviceRequests"][0]["Capabilities"], json::parse(R"([["gpu"]])"));
  EXPECT_TRUE(body["NetworkingConfig"]["EndpointsConfig"].contains("other"));
  EXPECT_FALSE(body["NetworkingConfig"]["EndpointsConfig"].contains("bridge"));
}

TEST(CreateBodyTest, NoNetworkByDefault) {
  ContainerSpec spec;
  spec.image = "x";
  json body = json::parse(CreateBody(spec));
  EXPECT_EQ(body["HostConfig"]["NetworkMode"], "none");
  EXPECT_FALSE(body.contains("NetworkingConfig"));
}

TEST(RegistryTest, ServerOfAnImage) {
  EXPECT_EQ(RegistryServer("busybox"), "docker.io");
  EXPECT_EQ(RegistryServer("library/busybox:1"), "docker.io");
  EXPECT_EQ(RegistryServer("ghcr.io/org/app:1"), "ghcr.io");
  EXPECT_EQ(RegistryServer("localhost:5000/app"), "localhost:5000");
  EXPECT_EQ(RegistryServer("localhost/busybox:latest"), "localhost");
}

TEST(RegistryTest, CredentialsFromTheDockerConfigFile) {
  std::string config = R"({"auths": {
      "https://index.docker.io/v1/": {"auth": ")" +
                       Base64Encode("hub:hubpass") + R"("},
      "ghcr.io": {"username": "me", "password": "pw"}}})";
  auto hub = CredentialsFromDockerConfig(config, "docker.io");
  ASSERT_TRUE(hub.has_value());
  EXPECT_EQ(hub->username, "hub");
  EXPECT_EQ(hub->password, "hubpass");
  auto ghcr = CredentialsFromDockerConfig(config, "ghcr.io");
  ASSERT_TRUE(ghcr.has_value());
  EXPECT_EQ(ghcr->username, "me");
  EXPECT_FALSE(CredentialsFromDockerConfig(config, "quay.io").has_value());
  EXPECT_FALSE(CredentialsFromDockerConfig("not json", "docker.io").has_value());
}

TEST(RegistryTest, AuthHeaderIsBase64UrlJson) {
  std::string header = RegistryAuthHeader(Registry{"u", "p?>"}, "ghcr.io");
  ASSERT_THAT(header, ::testing::StartsWith("X-Registry-Auth: "));
  auto decoded = Base64Decode(header.substr(17));
  ASSERT_TRUE(decoded.has_value());
  json auth = json::parse(*decoded);
  EXPECT_EQ(auth["username"], "u");
  EXPECT_EQ(auth["password"], "p?>");
  EXPECT_EQ(auth["serveraddress"], "ghcr.io");
}

TEST(RegistryTest, RedactHidesEveryOccurrence) {
  EXPECT_EQ(Redact("bad pw s3 and s3", "s3"), "bad pw [REDACTED] and [REDACTED]");
  EXPECT_EQ(Redact("nothing", ""), "nothing");
}

std::string Frame(char stream, std::string_view payload) {
  std::string out = {stream, 0, 0, 0};
  auto n = static_cast<std::uint32_t>(payload.size());
  out += static_cast<char>((n >> 24) & 0xff);
  out += static_cast<char>((n >> 16) & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  out += static_cast<char>(n & 0xff);
  out += payload;
  return out;
}

TEST(LogDemuxerTest, SplitsFramesWhateverTheChunking) {
  std::string stream = Frame(1, "one\n") + Frame(2, "two\n") + Frame(1, std::string(300, 'x'));
  for (std::size_t chunk : {1u, 3u, 7u, 8u, 9u, 1000u}) {
    LogDemuxer demux;
    std::string out;
    for (std::size_t i = 0; i < stream.size(); i += chunk) {
      demux.Feed(std::string_view(stream).substr(i, chunk),
                 [&out](std::string_view data) { out.append(data); });
    }
    EXPECT_EQ(out, "one\ntwo\n" + std::string(300, 'x')) << "chunk " << chunk;
  }
}

TEST(LogDemuxerTest, RawStreamsPassThrough) {
  LogDemuxer demux;
  std::string out;
  demux.Feed("plain text\n", [&out](std::string_view data) { out.append(data); });
  EXPECT_EQ(out, "plain text\n");
}

}  // namespace
}  // namespace baton::docker
