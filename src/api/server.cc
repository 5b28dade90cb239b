#include "api/server.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <thread>

#include "base/log.h"
#include "base/mutex.h"

namespace baton::api {
namespace {

using Clock = std::chrono::steady_clock;

http::Response ToHttp(Response response) {
  http::Response out;
  out.status = response.status;
  out.body = std::move(response.body);
  out.content_type = std::move(response.content_type);
  out.headers = std::move(response.headers);
  return out;
}

Request FromHttp(http::Request& in) {
  Request request;
  request.method = std::move(in.method);
  request.path = std::move(in.path);
  request.query = std::move(in.query);
  if (auto it = in.headers.find("content-type"); it != in.headers.end()) {
    request.content_type = it->second;
  }
  request.headers = std::move(in.headers);
  request.body = std::move(in.body);
  request.remote_addr = std::move(in.remote_addr);
  request.may_park = true;
  return request;
}

// GET /events as a streaming long poll: the hub's wake sends what the stream has; the
// client's leaving closes the stream.
http::Reply StreamReply(Response response) {
  std::shared_ptr<EventStream> stream = std::move(response.stream);
  auto poll = std::make_shared<http::LongPoll>();
  poll->OnGone([stream] { stream->Close(); });
  // Called on the hub's thread while it holds the stream; cleared by Close.
  stream->SetWake([weak = std::weak_ptr<http::LongPoll>(poll), raw = stream.get()] {
    if (auto p = weak.lock()) p->Send(raw->Take());
  });
  poll->Send(stream->Take());  // what came before the wake was set
  return http::Reply{.response = ToHttp(std::move(response)),
                     .later = std::move(poll),
                     .stream = true,
                     .ping = ": ping\n\n"};
}

}  // namespace

// The parked submissions and their checker: looks at a parked wait's job as soon as that
// job ends here (the coordinator tells which jobs ended), and at every parked wait when
// one is parked and at least every 200 ms (another coordinator may end a job; a wait may
// time out). Looking only every 200 ms made each waited submission 100 ms slower on average.
//
// Thread-safety: Park from any thread; Start and Stop from one.
class WaitRoom {
 public:
  explicit WaitRoom(Api& api) : api_(api) {}
  ~WaitRoom() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }

  // Answers every parked wait as on stop (503) and ends the checker.
  void Stop() BATON_EXCLUDES(mu_) {
    std::map<std::uint64_t, Parked> left;
    {
      MutexLock lock(mu_);
      stop_ = true;
      left.swap(parked_);
    }
    LookAgain();
    if (thread_.joinable()) thread_.join();
    for (auto& [id, parked] : left) GiveUp(parked);
  }

  // A poll answered when `wait`'s job ends (at once if stopping).
  std::shared_ptr<http::LongPoll> Park(std::shared_ptr<PendingWait> wait) BATON_EXCLUDES(mu_) {
    auto poll = std::make_shared<http::LongPoll>();
    Parked parked{std::move(wait), poll};
    std::uint64_t id = 0;
    {
      MutexLock lock(mu_);
      if (!stop_) {
        id = next_id_++;
        parked_.emplace(id, parked);
      }
    }
    if (id == 0) {
      GiveUp(parked);
      return poll;
    }
    // A client that leaves ends its wait (its job goes on) and frees its api.max_waits slot.
    poll->OnGone([this, id] { Forget(id); });
    LookAgain();  // its job may have ended before it was parked, with no other end to come
    return poll;
  }

 private:
  struct Parked {
    std::shared_ptr<PendingWait> wait;
    std::shared_ptr<http::LongPoll> poll;
  };

  void GiveUp(Parked& parked) {
    parked.poll->Answer(ToHttp(*api_.WaitAnswer(*parked.wait, /*give_up=*/true)));
  }

  void Forget(std::uint64_t id) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    parked_.erase(id);
  }

  void LookAgain() {
    look_again_ = true;
    api_.WakeFinishWaiters();
  }

  // The parked waits to look at: all of them, or those of the jobs that ended.
  std::vector<std::pair<std::uint64_t, Parked>> ToLookAt(bool all,
                                                         const std::set<std::string>& ended)
      BATON_EXCLUDES(mu_) {
    std::vector<std::pair<std::uint64_t, Parked>> found;
    MutexLock lock(mu_);
    for (const auto& [id, parked] : parked_) {
      if (all || ended.contains(parked.wait->job_id)) found.emplace_back(id, parked);
    }
    return found;
  }

  void Answer(std::uint64_t id, Parked& parked) BATON_EXCLUDES(mu_) {
    std::optional<Response> answer = api_.WaitAnswer(*parked.wait, /*give_up=*/false);
    if (!answer) return;
    {
      MutexLock lock(mu_);
      if (parked_.erase(id) == 0) return;  // its client went away meanwhile
    }
    parked.poll->Answer(ToHttp(std::move(*answer)));
  }

  bool Stopping() BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return stop_;
  }

  void Run() {
    constexpr auto kEvery = std::chrono::milliseconds(200);
    std::uint64_t seen = api_.FinishedJobs();
    Clock::time_point next_full = Clock::now();
    while (!Stopping()) {
      // Reset before the look: a wait parked during it sets it again, and the sleep below
      // returns at once.
      bool parked_since = look_again_.exchange(false);
      Coordinator::Finishes ended = api_.FinishedSince(seen);
      seen = ended.count;
      bool full = parked_since || !ended.ids || Clock::now() >= next_full;
      std::set<std::string> ended_ids;
      if (!full) ended_ids.insert(ended.ids->begin(), ended.ids->end());
      if (full) next_full = Clock::now() + kEvery;
      for (auto& [id, parked] : ToLookAt(full, ended_ids)) Answer(id, parked);
      auto left = std::chrono::ceil<std::chrono::milliseconds>(next_full - Clock::now());
      api_.WaitForFinishes(seen, std::clamp(left, std::chrono::milliseconds(0), kEvery),
                           look_again_);
    }
  }

  Api& api_;
  std::atomic<bool> look_again_ = false;
  std::thread thread_;
  Mutex mu_;
  std::map<std::uint64_t, Parked> parked_ BATON_GUARDED_BY(mu_);
  std::uint64_t next_id_ BATON_GUARDED_BY(mu_) = 1;
  bool stop_ BATON_GUARDED_BY(mu_) = false;
};

namespace {

// Api::Handle for one HTTP request. `waits` parks submissions; without it (the fuzzer's
// harness) they are answered at once and streams end with what they have.
http::Reply Serve(Api& api, WaitRoom* waits, http::Request& in) {
  const auto began = Clock::now();
  Response response = api.Handle(FromHttp(in));
  // How long the API took (the UI's and bench/'s "server time"), for every answer.
  response.headers.emplace_back(
      "Server-Timing",
      fmt::format("app;dur={:.2f}",
                  std::chrono::duration<double, std::milli>(Clock::now() - began).count()));
  if (response.stream != nullptr) {
    http::Reply reply = StreamReply(std::move(response));
    if (waits == nullptr) reply.later->End();
    return reply;
  }
  if (response.wait != nullptr && waits != nullptr) {
    return http::Reply{.later = waits->Park(std::move(response.wait))};
  }
  if (response.wait != nullptr) {
    std::optional<Response> answer = api.WaitAnswer(*response.wait, /*give_up=*/false);
    if (!answer) answer = api.WaitAnswer(*response.wait, /*give_up=*/true);
    auto poll = std::make_shared<http::LongPoll>();
    poll->Answer(ToHttp(std::move(*answer)));
    return http::Reply{.later = std::move(poll)};
  }
  return http::Reply{.response = ToHttp(std::move(response))};
}

}  // namespace

HttpProtocol::HttpProtocol(Api& api, std::size_t max_body_bytes)
    : server_(std::make_unique<http::Server>(
          [&api](http::Request& request) { return Serve(api, nullptr, request); },
          http::ServerOptions{.handler_threads = 1}, max_body_bytes)) {
  Status started = server_->Start();
  if (!started.ok())
    log::Error("the HTTP harness did not start", {{"error", std::string(started.message())}});
}

HttpProtocol::~HttpProtocol() { server_->Stop(); }

std::string HttpProtocol::ServeBytes(std::string_view input) { return server_->ServeBytes(input); }

Server::Server(Api& api, ServerOptions options, std::size_t max_body_bytes)
    : api_(api),
      address_(fmt::format("{}:{}", options.host, options.port)),
      waits_(std::make_unique<WaitRoom>(api)),
      server_(std::make_unique<http::Server>(
          [&api, waits = waits_.get()](http::Request& request) {
            return Serve(api, waits, request);
          },
          std::move(options), max_body_bytes)) {}

Server::~Server() { Stop(); }

Status Server::Bind() {
  if (bound_) return Status::Ok();
  BATON_RETURN_IF_ERROR(server_->Listen());
  bound_ = true;
  return Status::Ok();
}

Status Server::Start() {
  BATON_RETURN_IF_ERROR(Bind());
  if (started_) return Status::Ok();
  waits_->Start();
  BATON_RETURN_IF_ERROR(server_->Start());
  started_ = true;
  log::Info("the REST API is listening", {{"address", address_}, {"port", std::to_string(port())}});
  return Status::Ok();
}

void Server::Stop() {
  if (!started_) return;
  started_ = false;
  api_.StopWaiting();
  waits_->Stop();
  server_->Stop();
}

}  // namespace baton::api
