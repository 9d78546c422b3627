#!/usr/bin/env bash
# Checks that the library's levels point downward only: a file may include headprune headers of its
# own level or of a lower one, never of a higher one. Levels, lowest first (docs/architecture.md):
#   version < util < config < model < io < data < decode < eval < train < score < prune < report < jobs < cli
# (version is include/headprune/version.h; config is include/headprune/config.h and src/config.cc; cli/ is
# the command line, on top of the library). Every quoted include is checked: public headers
# ("headprune/LEVEL/..."), private headers beside the file ("scoring_detail.h", "../io/hf_detail.h",
# resolved from the including file's directory) and cli/'s own headers. A quoted include that resolves
# to no file is an error too, so nothing escapes the check by its spelling.
# Prints every violation as FILE: includes HEADER (level A above B) and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
levels=(version util config model io data decode eval train score prune report jobs cli)
rank() {
  local i
  for i in "${!levels[@]}"; do
    if [ "${levels[$i]}" = "$1" ]; then echo "$i"; return; fi
  done
  echo -1
}
# The level of a path relative to the repository: include/headprune/LEVEL/..., src/LEVEL/..., cli/...;
# a file directly under include/headprune/ or src/ is the level of its stem (config.h, version.h).
level_of() {
  local rel=$1
  case "$rel" in
    cli/*) echo cli; return ;;
    include/headprune/*) rel=${rel#include/headprune/} ;;
    src/*) rel=${rel#src/} ;;
    *) echo "?"; return ;;
  esac
  case "$rel" in
    */*) echo "${rel%%/*}" ;;
    *) rel=${rel%.*}; echo "$rel" ;;
  esac
}
bad=0
checked=0
while IFS= read -r file; do
  own=$(level_of "$file")
  own_rank=$(rank "$own")
  if [ "$own_rank" -lt 0 ]; then
    echo "$file: not in any level (${levels[*]})"
    bad=1
    continue
  fi
  checked=$((checked + 1))
  dir=$(dirname "$file")
  while IFS= read -r inc; do
    case "$inc" in
      headprune/*) target=include/$inc ;;
      *) target=$(realpath -m --relative-to=. "$dir/$inc") ;;
    esac
    if [ ! -f "$target" ]; then
      echo "$file: includes \"$inc\", which is no file of the project"
      bad=1
      continue
    fi
    dep=$(level_of "$target")
    dep_rank=$(rank "$dep")
    if [ "$dep_rank" -lt 0 ]; then
      echo "$file: includes \"$inc\", which is in no level"
      bad=1
    elif [ "$dep_rank" -gt "$own_rank" ]; then
      echo "$file: includes \"$inc\" ($dep is above $own)"
      bad=1
    fi
  done < <(sed -n 's@^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*@\1@p' "$file")
done < <(find include/headprune src cli -type f \( -name '*.h' -o -name '*.cc' -o -name '*.def' \) | sort)
if [ "$bad" -ne 0 ]; then
  echo "check_levels: a lower level includes a higher one (see above)" >&2
  exit 1
fi
echo "check_levels: $checked files, every include points to the same or a lower level"
