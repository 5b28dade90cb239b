#include "core/auth.h"

#include <fmt/format.h>

#include <algorithm>

namespace baton {

bool Principal::admin() const {
  return std::find(roles.begin(), roles.end(), kAdminRole) != roles.end();
}

Status ValidateName(std::string_view what, std::string_view name) {
  if (name.empty()) return InvalidArgument(fmt::format("{}: must not be empty", what));
  if (name.size() > 64) {
    return InvalidArgument(fmt::format("{}: {} characters; the limit is 64", what, name.size()));
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '@' || c == '-';
    if (!ok) {
      return InvalidArgument(fmt::format("{}: \"{}\" may hold only letters, digits and . _ @ -",
                                         what, name.substr(0, 64)));
    }
  }
  return Status::Ok();
}

bool MayAccess(const Principal& who, const Job& job) {
  if (who.admin() || job.permissions.empty()) return true;
  if (!job.created_by.empty() && job.created_by == who.username) return true;
  for (const Permission& p : job.permissions) {
    if (!p.user.empty() && p.user == who.username) return true;
    if (!p.role.empty() &&
        std::find(who.roles.begin(), who.roles.end(), p.role) != who.roles.end()) {
      return true;
    }
  }
  return false;
}

std::string AccessText(const Job& job) {
  if (job.permissions.empty()) return "";
  std::vector<std::string> terms;
  for (const Permission& p : job.permissions) {
    std::string term = p.user.empty() ? "r:" + p.role : "u:" + p.user;
    if (std::find(terms.begin(), terms.end(), term) == terms.end()) terms.push_back(term);
  }
  std::string text = "|";
  for (const std::string& t : terms) text += t + "|";
  return text;
}

std::vector<std::string> AccessTerms(const Principal& who) {
  std::vector<std::string> terms = {"|u:" + who.username + "|"};
  for (const std::string& role : who.roles) terms.push_back("|r:" + role + "|");
  return terms;
}

}  // namespace baton
