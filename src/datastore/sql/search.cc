#include "datastore/sql/search.h"

#include <fmt/format.h>

#include "datastore/sql/sql_columns.h"

namespace baton::sql {

// Only the rows of `table` (jobs, scheduled_jobs) the viewer may see (MayAccess): those
// without permissions, their own, and those naming them or one of their roles. In the
// query, so that pages and counts hold only visible rows. Appends its text parameters.
std::string VisibleTo(Dialect dialect, std::string_view table, const Principal& viewer,
                      std::vector<std::string>& params) {
  params.push_back(viewer.username);
  std::string visible =
      fmt::format("({0}.access = '' OR {0}.created_by = ${1}", table, params.size());
  for (const std::string& term : AccessTerms(viewer)) {
    params.push_back(term);
    visible +=
        fmt::format(" OR {}({}.access, ${}) > 0",
                    dialect == Dialect::kPostgres ? "strpos" : "instr", table, params.size());
  }
  return visible + ")";
}

JobSearch BuildScheduledJobSearch(Dialect dialect, const std::optional<Principal>& viewer) {
  JobSearch search;
  std::string where;
  if (viewer && !viewer->admin()) {
    where = " WHERE " + VisibleTo(dialect, "scheduled_jobs", *viewer, search.params);
  }
  const int next = static_cast<int>(search.params.size());
  search.count_sql = Placeholders(dialect, "SELECT count(*) FROM scheduled_jobs" + where);
  search.list_sql = Placeholders(
      dialect, fmt::format("SELECT " BATON_SQL_SCHEDULED_JOB_COLUMNS
                           " FROM scheduled_jobs{} ORDER BY created_at DESC, id DESC LIMIT ${} "
                           "OFFSET ${}",
                           where, next + 1, next + 2));
  return search;
}

JobSearch BuildJobSearch(Dialect dialect, const JobQuery& query) {
  JobSearch search;
  std::string where;
  auto next = [&search] { return static_cast<int>(search.params.size()); };
  for (std::string_view word : datastore_util::SplitWords(query.q)) {
    where += where.empty() ? " WHERE " : " AND ";
    if (word.starts_with("tag:") && word.size() > 4) {
      search.params.emplace_back(word.substr(4));
      where += TagMatch(dialect, next());
    } else {
      search.params.push_back(datastore_util::ContainsPattern(word));
      int pattern = next();
      search.params.push_back(datastore_util::AsciiUpper(word));
      int state = next();
      // The state first: a word that names one (the UI's filters) then settles most
      // rows without the two LIKEs (half the CPU of counting a large table).
      where += fmt::format("(jobs.state = ${} OR {} OR {})", state,
                           Contains(dialect, "jobs.name", pattern),
                           Contains(dialect, "jobs.description", pattern));
    }
  }
  if (!query.states.empty()) {
    where += where.empty() ? " WHERE " : " AND ";
    std::string list;
    for (JobState state : query.states) {
      search.params.emplace_back(ToString(state));
      list += fmt::format("{}${}", list.empty() ? "" : ", ", next());
    }
    where += "jobs.state IN (" + list + ")";
  }
  if (query.viewer && !query.viewer->admin()) {
    where += where.empty() ? " WHERE " : " AND ";
    where += VisibleTo(dialect, "jobs", *query.viewer, search.params);
  }
  search.count_sql = Placeholders(dialect, "SELECT count(*) FROM jobs" + where);
  search.list_sql = Placeholders(
      dialect, fmt::format("SELECT " BATON_SQL_JOB_COLUMNS
                           " FROM jobs{} ORDER BY created_at DESC, id DESC LIMIT ${} OFFSET ${}",
                           where, next() + 1, next() + 2));
  return search;
}

}  // namespace baton::sql
