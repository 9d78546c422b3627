// headprune's version, written here only: CMakeLists.txt reads it for project(), the CMake package
// and the Debian package; `headprune --version` prints it.
//
// API stability: headprune follows semantic versioning from 1.0. Before 1.0 (now), a minor release
// (0.x -> 0.x+1) may change the C++ API, and the CMake package accepts only the same minor version
// (find_package(headprune 0.1) finds 0.1.*); patch releases keep the API. Checkpoints, plans and
// importance files carry their own format versions and stay readable across releases.
#pragma once

#define HP_VERSION_MAJOR 0
#define HP_VERSION_MINOR 1
#define HP_VERSION_PATCH 0
#define HP_VERSION_STRING "0.1.0"
// One comparable number, e.g. #if HP_VERSION >= 100 for 0.1.0 or later.
#define HP_VERSION (HP_VERSION_MAJOR * 10000 + HP_VERSION_MINOR * 100 + HP_VERSION_PATCH)
