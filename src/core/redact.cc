#include "core/redact.h"

#include <algorithm>

#include "core/task_kind.h"
#include "expr/expr.h"

namespace baton {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

void AddEnv(const StringMap& env, std::vector<std::string>& values) {
  for (const auto& [key, value] : env) {
    if (IsSecretKey(key) && !value.empty()) values.push_back(value);
  }
}

void AddTaskTree(const Task& task, std::vector<std::string>& values) {
  AddSecretValues(task, values);
  ForEachSubtask(task, [&](const Task& child) { AddTaskTree(child, values); });
  if (task.subjob) {
    for (const auto& [k, v] : task.subjob->secrets) {
      if (!v.empty()) values.push_back(v);
    }
    ForEachJobTask(*task.subjob, [&](const Task& child) { AddTaskTree(child, values); });
  }
}

void Sort(std::vector<std::string>& values) {
  // Longest first, so a secret containing another is replaced whole; equal lengths in
  // order, so duplicates are neighbours.
  std::sort(values.begin(), values.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a < b;
  });
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

// Secret-looking env templates of a task tree, for evaluation against a job's context.
void AddEnvTemplates(const StringMap& env, std::vector<std::string>& templates) {
  for (const auto& [key, value] : env) {
    if (IsSecretKey(key) && expr::HasTemplate(value)) templates.push_back(value);
  }
}

void AddTemplateTree(const Task& task, std::vector<std::string>& templates) {
  AddEnvTemplates(task.env, templates);
  for (const auto* steps : {&task.pre, &task.post, &task.sidecars}) {
    for (const AuxTask& step : *steps) AddEnvTemplates(step.env, templates);
  }
  ForEachSubtask(task, [&](const Task& child) { AddTemplateTree(child, templates); });
  // A sub-job's tasks are evaluated against the sub-job's own context, in its own record.
}

void Walk(nlohmann::json& node, const std::vector<std::string>& values, std::string_view key) {
  if (node.is_string()) {
    if (!values.empty()) node = RedactText(node.get_ref<const std::string&>(), values);
    return;
  }
  if (node.is_array()) {
    for (auto& item : node) Walk(item, values, "");
    return;
  }
  if (!node.is_object()) return;
  bool secrets = key == "secrets";
  bool env = key == "env";
  for (auto it = node.begin(); it != node.end(); ++it) {
    if ((secrets || (env && IsSecretKey(it.key()))) && it->is_string()) {
      *it = kRedacted;
    } else {
      Walk(*it, values, it.key());
    }
  }
}

}  // namespace

bool IsSecretKey(std::string_view key) {
  std::string upper = Upper(key);
  for (std::string_view marker : {"SECRET", "PASSWORD", "TOKEN", "ACCESS_KEY"}) {
    if (upper.find(marker) != std::string::npos) return true;
  }
  return false;
}

void AddSecretValues(const Task& task, std::vector<std::string>& values) {
  AddEnv(task.env, values);
  for (const auto* steps : {&task.pre, &task.post, &task.sidecars}) {
    for (const AuxTask& step : *steps) {
      AddEnv(step.env, values);
      // A pre/post step or a sidecar may pull its image with credentials of its own.
      if (step.registry && !step.registry->password.empty()) {
        values.push_back(step.registry->password);
      }
    }
  }
  if (task.registry && !task.registry->password.empty()) values.push_back(task.registry->password);
  Sort(values);
}

std::vector<std::string> SecretValues(const Job& job) {
  std::vector<std::string> values;
  for (const auto& [k, v] : job.secrets) {
    if (!v.empty()) values.push_back(v);
  }
  ForEachJobTask(job, [&](const Task& task) { AddTaskTree(task, values); });
  // A webhook's signing key written as it is (a template names a secret, hidden already).
  for (const Webhook& hook : job.webhooks) {
    if (!hook.secret.empty() && !expr::HasTemplate(hook.secret)) values.push_back(hook.secret);
  }
  Sort(values);
  return values;
}

std::vector<std::string> SecretValues(const JobRecord& job) {
  std::vector<std::string> values = SecretValues(job.job);
  std::vector<std::string> templates;
  ForEachJobTask(job.job, [&](const Task& task) { AddTemplateTree(task, templates); });
  for (const std::string& text : templates) {
    // A value that changes at each evaluation would hide some other text, not the secret.
    if (text.find("randomInt") != std::string::npos || text.find("now(") != std::string::npos) {
      continue;
    }
    auto value = expr::EvaluateTemplate(text, job.context);
    if (value.ok() && !value->empty()) values.push_back(*value);
  }
  Sort(values);
  return values;
}

void MergeSecretValues(const std::vector<std::string>& more, std::vector<std::string>& values) {
  if (more.empty()) return;
  values.insert(values.end(), more.begin(), more.end());
  Sort(values);
}

namespace {

// Where `text`'s redacted form is final, and that form up to there. Every occurrence of
// every value is hidden (overlapping occurrences as one [REDACTED], adjacent ones each),
// so the result of a text does not depend on how it is cut: the part returned is what
// redacting the whole stream would give for it. Unless `final`, the part ends before the
// earliest position where the rest of `text` is the start of a value (which the next part
// may complete) and before an unfinished UTF-8 character; what follows is left in `rest`.
std::string Redact(std::string_view text, const std::vector<std::string>& values, bool final,
                   std::string* rest) {
  // Every occurrence, as [begin, end).
  std::vector<std::pair<std::size_t, std::size_t>> found;
  std::size_t longest = 0;
  for (const std::string& value : values) {
    if (value.empty()) continue;
    longest = std::max(longest, value.size());
    for (std::size_t pos = text.find(value); pos != std::string_view::npos;
         pos = text.find(value, pos + 1)) {
      found.emplace_back(pos, pos + value.size());
    }
  }
  std::sort(found.begin(), found.end());
  // Runs of overlapping occurrences.
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (const auto& [begin, end] : found) {
    if (!runs.empty() && begin < runs.back().second) {
      runs.back().second = std::max(runs.back().second, end);
    } else {
      runs.emplace_back(begin, end);
    }
  }
  std::size_t cut = text.size();
  if (!final) {
    // The earliest start of a value that the text ends inside of.
    const std::size_t from = text.size() - std::min(text.size(), longest == 0 ? 0 : longest - 1);
    for (std::size_t i = from; i < text.size() && cut == text.size(); ++i) {
      const std::string_view tail = text.substr(i);
      for (const std::string& value : values) {
        if (value.size() > tail.size() && std::string_view(value).starts_with(tail)) {
          cut = i;
          break;
        }
      }
    }
    // An unfinished UTF-8 character: the next part has the rest of it.
    for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
      const auto c = static_cast<unsigned char>(text[text.size() - back]);
      if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
      const std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (need > back) cut = std::min(cut, text.size() - back);
      break;
    }
    // A value starting there may overlap an occurrence before: hold the occurrence too.
    for (const auto& [begin, end] : runs) {
      if (begin < cut && cut < end) cut = begin;
    }
  }
  std::string out;
  out.reserve(cut);
  std::size_t at = 0;
  for (const auto& [begin, end] : runs) {
    if (end > cut) break;
    out.append(text.substr(at, begin - at));
    out.append(kRedacted);
    at = end;
  }
  out.append(text.substr(at, cut - at));
  if (rest != nullptr) rest->assign(text.substr(cut));
  return out;
}

}  // namespace

std::string RedactText(std::string_view text, const std::vector<std::string>& values) {
  if (values.empty()) return std::string(text);
  return Redact(text, values, true, nullptr);
}

std::string StreamRedactor::Next(std::string_view part, const std::vector<std::string>& values) {
  std::string text = std::move(held_);
  text.append(part);
  return Redact(text, values, false, &held_);
}

std::string StreamRedactor::Finish(const std::vector<std::string>& values) {
  std::string out = Redact(held_, values, true, nullptr);
  held_.clear();
  return out;
}

void RedactJson(nlohmann::json& json, const std::vector<std::string>& values) {
  Walk(json, values, "");
}

}  // namespace baton
