// Shared by the libFuzzer harnesses: the input written to files the parsers read, several files in
// one input, and the oracle every harness applies to a rejected input.
//
// The oracle: a parser may reject any input, but only with a std::exception whose message names the
// file it read (so a user knows which file is bad). Anything else is a finding and aborts, so
// libFuzzer saves the input: a message without the file, an allocation failure (sizes must be checked
// before allocating), a non-standard exception, and of course every sanitizer report.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <new>
#include <string>
#include <vector>

namespace hp_fuzz {

// A private directory for this process's files (in /dev/shm when it exists: no disk writes).
inline const std::string& work_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("HP_FUZZ_TMP");
    std::string b = base ? base : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    std::string d = b + "/hp-fuzz-" + std::to_string(getpid());
    std::string cmd = "mkdir -p '" + d + "'";
    if (std::system(cmd.c_str()) != 0) std::abort();
    return d;
  }();
  return dir;
}

inline std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string path = work_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::abort();
  return path;
}

// Splits an input into `n` parts at the separator line "\n--8<--\n" (missing parts are empty), so one
// input can hold e.g. vocab.json and merges.txt. The seed corpus is written the same way.
inline std::vector<std::string> split(const uint8_t* data, size_t size, size_t n) {
  static const std::string sep = "\n--8<--\n";
  const std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() + 1 < n) {
    const size_t at = all.find(sep, start);
    if (at == std::string::npos) break;
    parts.push_back(all.substr(start, at - start));
    start = at + sep.size();
  }
  parts.push_back(all.substr(start));
  parts.resize(n);
  return parts;
}

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\n[hp-fuzz] FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Runs `parse`; a rejection must be a std::exception naming one of `names` (file paths or field
// names the caller expects in the message).
inline void expect_clean_rejection(const std::function<void()>& parse, const std::vector<std::string>& names) {
  try {
    parse();
  } catch (const std::bad_alloc&) {
    finding("std::bad_alloc: a size was trusted before it was checked");
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    for (const auto& n : names)
      if (msg.find(n) != std::string::npos) return;
    std::string expected;
    for (const auto& n : names) expected += " '" + n + "'";
    finding("the error does not name the file (expected one of" + expected + "): " + msg);
  } catch (...) {
    finding("a non-standard exception");
  }
}

}  // namespace hp_fuzz
