// The `headprune` command: a launcher that links no LibTorch. OpenBLAS reads OPENBLAS_CORETYPE once,
// when it loads, and a program linked with LibTorch has loaded it (and spent half a second on
// LibTorch's start) before main(). So this launcher loads OpenBLAS alone, chooses its kernels for this
// CPU (util/blas.h: a user's setting always wins) and starts the program itself, headprune-core,
// once, with the same arguments. Without it a CPU that OpenBLAS does not know started LibTorch twice.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "headprune/util/blas.h"

#ifndef HP_CORE_FROM_BINDIR
#define HP_CORE_FROM_BINDIR "../libexec/headprune/headprune-core"
#endif

namespace {

// This program's directory ("" when /proc/self/exe cannot be read).
std::string own_dir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string self(buf, static_cast<size_t>(n));
  const auto slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

}  // namespace

int main(int, char** argv) {
  const std::string dir = own_dir();
  if (dir.empty()) {
    std::fprintf(stderr, "headprune: cannot find this program's path (/proc/self/exe): %s\n", std::strerror(errno));
    return 127;
  }
  // In the build tree the program is next to the launcher; installed, it is under libexec.
  std::string core = dir + "/headprune-core";
  if (::access(core.c_str(), X_OK) != 0) core = dir + "/" HP_CORE_FROM_BINDIR;
  if (::access(core.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "headprune: the program headprune-core is neither at %s/headprune-core nor at %s (an incomplete installation?)\n",
                 dir.c_str(), core.c_str());
    return 127;
  }
  // The BLAS LibTorch links (Debian's libblas.so.3 alternative); when it is not there, or not OpenBLAS,
  // there is nothing to choose and headprune-core reports what runs.
  if (::dlopen("libblas.so.3", RTLD_NOW | RTLD_GLOBAL) != nullptr) hp::choose_blas_kernels();
  ::execv(core.c_str(), argv);
  std::fprintf(stderr, "headprune: cannot start %s: %s\n", core.c_str(), std::strerror(errno));
  return 127;
}
