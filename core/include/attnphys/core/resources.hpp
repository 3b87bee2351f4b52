#pragma once
// Resource limits: a request that cannot fit is refused before it starts, with the size it needs and what to change
// (ED beyond memory, attention score buffers, DMRG bond dimensions, dataset files larger than the free disk), instead
// of an allocation failure (std::bad_alloc) or a full disk half-way through.
//
// Sizes are doubles (bytes): products of absurd extents must not wrap around before they are compared.
#include <string>

namespace attnphys {

// Bytes this process can still allocate: the smallest of the kernel's MemAvailable (/proc/meminfo), the room left
// under the cgroup's memory limit (v2 memory.max - memory.current, or v1), and ATTNPHYS_MEMORY_LIMIT (bytes, or
// with a suffix k, M, G, T: a cap for shared machines and batch jobs). +infinity when none is known.
double available_memory();
// Where available_memory() came from ("MemAvailable", "cgroup memory.max", "ATTNPHYS_MEMORY_LIMIT").
std::string available_memory_source();

// Bytes free for this user on the file system that holds `path` (or its nearest existing parent directory):
// statvfs f_bavail * f_frsize. +infinity when it cannot be determined.
double free_disk_space(const std::string& path);

// "1.5 GB", "312 kB" (decimal units, three significant digits).
std::string format_bytes(double bytes);

// Throws Error("<what> needs <bytes> of memory, more than the <available> available (<source>): <hint>") when
// `bytes` (non-finite counts as too large) exceeds available_memory().
void require_memory(double bytes, const std::string& what, const std::string& hint);
// Throws Error("<what> needs <bytes> of disk, more than the <free> free on the file system of '<dir>': <hint>").
void require_disk(double bytes, const std::string& path, const std::string& what, const std::string& hint);

}  // namespace attnphys
