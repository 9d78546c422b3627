// headprune executable: all logic lives in the library and cli/app.cc.
#include <iostream>

#include "app.h"

int main(int argc, char** argv) { return hp::cli::run(argc, argv, std::cout, std::cerr); }
