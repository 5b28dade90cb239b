// /whoami, /users and /keys.
#include <fmt/format.h>

#include <algorithm>

#include "api/api.h"
#include "api/detail.h"
#include "auth/auth.h"

namespace baton::api {

using nlohmann::json;
using namespace detail;

Response Api::WhoAmI(const Call& call) {
  if (!call.who) {
    return Ok({{"username", ""}, {"roles", json::array()}, {"authEnabled", false}});
  }
  return Ok({{"username", call.who->username}, {"roles", call.who->roles}, {"authEnabled", true}});
}

// ---------------------------------------------------------------------- users, keys

namespace {

json UserJson(const UserRecord& user) {
  json out = {{"id", user.id},
              {"username", user.username},
              {"createdAt", FormatTime(user.created_at)},
              {"roles", user.roles}};
  if (!user.name.empty()) out["name"] = user.name;
  return out;
}

json KeyJson(const ApiKeyRecord& key) {
  json out = {
      {"id", key.id}, {"username", key.username}, {"createdAt", FormatTime(key.created_at)}};
  if (!key.name.empty()) out["name"] = key.name;
  if (key.revoked_at) out["revokedAt"] = FormatTime(*key.revoked_at);
  return out;
}

// The JSON object body of a request, with only `fields`, each a string (or, for
// `lists`, a list of strings): a 400 naming what is wrong otherwise. Read as JSON whatever
// its content type says, as Tork reads POST /users (curl -d sends form encoding).
Result<json> ObjectBody(const Request& request, std::initializer_list<std::string_view> fields,
                        std::initializer_list<std::string_view> lists = {}) {
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (request.body.empty()) body = json::object();
  if (body.is_discarded() || !body.is_object()) {
    return InvalidArgument("the body must be a JSON object");
  }
  for (const auto& [key, value] : body.items()) {
    bool is_list = std::find(lists.begin(), lists.end(), key) != lists.end();
    bool known = is_list || std::find(fields.begin(), fields.end(), key) != fields.end();
    if (!known) return InvalidArgument(fmt::format("unknown field \"{}\"", key.substr(0, 64)));
    if (value.is_null()) continue;
    if (is_list) {
      if (!value.is_array()) return InvalidArgument(fmt::format("{}: expected a list", key));
      for (const json& item : value) {
        if (!item.is_string()) {
          return InvalidArgument(fmt::format("{}: expected a list of strings", key));
        }
      }
    } else if (!value.is_string()) {
      return InvalidArgument(fmt::format("{}: expected a string", key));
    }
  }
  return body;
}

std::string Field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || !it->is_string() ? "" : it->get<std::string>();
}

}  // namespace

Response Api::CreateUser(const Request& request) {
  BATON_ASSIGN_OR_RETURN(
      json body, ObjectBody(request, {"username", "name", "password"}, {"roles"}), ErrorResponse);
  UserRecord user;
  user.username = Field(body, "username");
  // As Tork: blanks around the username are not part of it.
  while (!user.username.empty() && user.username.front() == ' ') user.username.erase(0, 1);
  while (!user.username.empty() && user.username.back() == ' ') user.username.pop_back();
  if (user.username.empty()) return ErrorResponse(InvalidArgument("must provide username"));
  if (Status s = ValidateName("username", user.username); !s.ok()) return ErrorResponse(s);
  std::string password = Field(body, "password");
  if (password.empty()) return ErrorResponse(InvalidArgument("must provide password"));
  user.name = Field(body, "name");
  if (body.contains("roles") && body["roles"].is_array()) {
    for (const json& role : body["roles"]) {
      std::string name = role.get<std::string>();
      if (Status s = ValidateName("roles", name); !s.ok()) return ErrorResponse(s);
      if (std::find(user.roles.begin(), user.roles.end(), name) == user.roles.end()) {
        user.roles.push_back(name);
      }
    }
  }
  BATON_ASSIGN_OR_RETURN(user.password_hash,
                         auth::HashPassword(password, options_.auth.bcrypt_cost), ErrorResponse);
  user.id = NewId();
  user.created_at = Now();
  if (Status s = datastore_.CreateUser(user); !s.ok()) {
    // Tork answers 400 for a taken username.
    if (s.code() == StatusCode::kAlreadyExists) {
      return ErrorResponse(InvalidArgument(fmt::format("user {} already exists", user.username)));
    }
    return ErrorResponse(s);
  }
  return Ok(UserJson(user));
}

Response Api::CreateKey(const Call& call) {
  BATON_ASSIGN_OR_RETURN(json body, ObjectBody(call.request, {"name", "username"}), ErrorResponse);
  std::string username = Field(body, "username");
  if (call.who) {
    if (username.empty()) username = call.who->username;
    if (username != call.who->username && !call.who->admin()) {
      return PermissionDenied(fmt::format(
          "only an admin may create a key for another user ({}); leave out username for your own",
          username.substr(0, 64)));
    }
  } else if (username.empty()) {
    return ErrorResponse(InvalidArgument(
        "must provide username: authentication is off, so the key's user is not the caller"));
  }
  // The key acts as its user: that user must exist.
  BATON_ASSIGN_OR_RETURN(auto user, datastore_.GetUser(username), ErrorResponse);
  ApiKeyRecord key;
  key.id = NewId();
  key.username = user.username;
  key.name = Field(body, "name");
  if (key.name.size() > 200) {
    return ErrorResponse(InvalidArgument("name: over 200 characters"));
  }
  key.created_at = Now();
  BATON_ASSIGN_OR_RETURN(auto made, auth::MakeApiKey(), ErrorResponse);
  key.key_hash = made.hash;
  if (Status s = datastore_.CreateApiKey(key); !s.ok()) return ErrorResponse(s);
  json out = KeyJson(key);
  out["key"] = made.key;  // the only time it is shown
  return Ok(out);
}

Response Api::ListKeys(const Call& call) {
  std::string username;
  if (auto it = call.request.query.find("username"); it != call.request.query.end()) {
    username = it->second;
  }
  if (call.who && !call.who->admin()) {
    if (!username.empty() && username != call.who->username) {
      return PermissionDenied("only an admin may list another user's keys");
    }
    username = call.who->username;
  }
  BATON_ASSIGN_OR_RETURN(auto keys, datastore_.ApiKeys(username), ErrorResponse);
  json list = json::array();
  for (const ApiKeyRecord& key : keys) list.push_back(KeyJson(key));
  return Ok(list);
}

Response Api::RevokeKey(const Call& call) {
  Status unknown = NotFound(fmt::format("no API key {}", call.id.substr(0, 64)));
  if (!IsId(call.id)) return ErrorResponse(unknown);
  // Another user's key is as unknown as a missing one, unless the caller is an admin.
  bool all = !call.who || call.who->admin();
  BATON_ASSIGN_OR_RETURN(auto keys, datastore_.ApiKeys(all ? "" : call.who->username),
                         ErrorResponse);
  auto it = std::find_if(keys.begin(), keys.end(),
                         [&](const ApiKeyRecord& k) { return k.id == call.id; });
  if (it == keys.end()) return ErrorResponse(unknown);
  if (Status s = datastore_.RevokeApiKey(call.id, Now()); !s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

}  // namespace baton::api
