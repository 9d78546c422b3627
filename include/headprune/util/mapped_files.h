// Files mapped into memory (safetensors checkpoints, read as views) and what happens when one is
// truncated while mapped (re-saved in place by another program): a read past the new end raises
// SIGBUS, which would kill the program (and a Python interpreter with it). A handler installed with the
// first mapping answers a SIGBUS inside a registered mapping by mapping zero pages over the rest of it,
// so the read goes on, and marks the file; check_mapped_files() then throws an error naming it. It is
// called where results leave headprune: after a model is loaded, before an output file is published
// (io/files.h), after the Python module's forwards. A SIGBUS anywhere else takes its usual course.
#pragma once

#include <cstddef>
#include <string>

namespace hp {

// Registers [addr, addr + len) as `path`'s mapping; returns its slot, or -1 when every slot is taken
// (the caller then reads the file into memory instead).
int register_mapping(const void* addr, size_t len, const std::string& path);
void unregister_mapping(int slot);
// Throws std::runtime_error naming every file that was truncated while mapped (still registered).
void check_mapped_files();

}  // namespace hp
