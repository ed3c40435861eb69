// What staging.cc shares with the writers of staging_writers.cc: the staging entries' names,
// locks and folder syncs, and what an output's path held when its writer started. Private to
// graph/src; the rules are staging.h's.
#pragma once

#include <filesystem>

#include "halo/graph/staging.h"

namespace halo::staging_internal {

// The KIND of a staging entry ".NAME.halo-KIND-PID": a writer's output, or an old one set aside.
constexpr const char* kTmp = "tmp";
constexpr const char* kOld = "old";

// The folder that holds p ("." for a bare name; a trailing separator ignored).
std::filesystem::path folder_of(const std::filesystem::path& p);
// This process's staging entry of the given kind for output p, beside it.
std::filesystem::path staging_name(const std::filesystem::path& p, const char* kind);
// Opens p and takes an exclusive flock, held until the fd is closed; -1 when p cannot be opened.
int lock_entry(const std::filesystem::path& p);
// fsync of a folder (its entries); SystemError naming it on failure.
void sync_dir(const std::filesystem::path& dir);
// What occupies p now (links not followed); absent when nothing does.
PathIdentity identity(const std::filesystem::path& p);
// Whether a and b are the same occupant (or both absent).
bool same(const PathIdentity& a, const PathIdentity& b);
// What target held when this process first resolved it.
PathIdentity first_seen(const std::filesystem::path& target);
// Records what target holds now, after a commit of this process.
void record_committed(const std::filesystem::path& target);

}  // namespace halo::staging_internal
