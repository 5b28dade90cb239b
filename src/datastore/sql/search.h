// Job search and paging (ListJobs), written once for every SQL dialect.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "datastore/adapter_util.h"
#include "datastore/datastore.h"
#include "datastore/sql/dialect.h"

namespace baton::sql {

// A page of a job search as two statements over the same text parameters: the count,
// and the page (which takes two more: its size and offset, numbered after them).
struct JobSearch {
  std::string count_sql;
  std::string list_sql;
  std::vector<std::string> params;
};

// Every word of `query.q` narrows the result (WHERE ... AND ...): `tag:x` matches jobs
// tagged x; another word matches a state by name, or the name or description containing
// it whatever the case of its letters. The caller validates `query` (ValidateJobQuery).
JobSearch BuildJobSearch(Dialect dialect, const JobQuery& query);

// A page of scheduled jobs, newest first; with a `viewer` (not an admin), only those whose
// definition they may access (MayAccess), as the jobs' search filters jobs.
JobSearch BuildScheduledJobSearch(Dialect dialect, const std::optional<Principal>& viewer);

}  // namespace baton::sql
