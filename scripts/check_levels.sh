#!/usr/bin/env bash
# Checks that the library's levels point downward only: a file may include headprune headers of its
# own level or of a lower one, never of a higher one. Levels, lowest first (docs/architecture.md):
#   version < util < config < model < io < data < decode < eval < train < score < prune < report < jobs
# (version is include/headprune/version.h; config is include/headprune/config.h and src/config.cc). cli/ sits on top and is not checked.
# Prints every violation as FILE: includes HEADER (level A above B) and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
levels=(version util config model io data decode eval train score prune report jobs)
rank() {
  local i
  for i in "${!levels[@]}"; do
    if [ "${levels[$i]}" = "$1" ]; then echo "$i"; return; fi
  done
  echo -1
}
# The level of a path relative to include/headprune/ or src/: its first directory, or its stem.
level_of() {
  local rel=$1
  case "$rel" in
    */*) echo "${rel%%/*}" ;;
    *) rel=${rel%.*}; echo "$rel" ;;
  esac
}
bad=0
checked=0
while IFS= read -r file; do
  rel=${file#include/headprune/}
  rel=${rel#src/}
  own=$(level_of "$rel")
  own_rank=$(rank "$own")
  if [ "$own_rank" -lt 0 ]; then
    echo "$file: not in any level (${levels[*]})"
    bad=1
    continue
  fi
  checked=$((checked + 1))
  while IFS= read -r inc; do
    dep=$(level_of "$inc")
    dep_rank=$(rank "$dep")
    if [ "$dep_rank" -lt 0 ]; then
      echo "$file: includes headprune/$inc, which is in no level"
      bad=1
    elif [ "$dep_rank" -gt "$own_rank" ]; then
      echo "$file: includes headprune/$inc ($dep is above $own)"
      bad=1
    fi
  done < <(sed -n 's@^[[:space:]]*#[[:space:]]*include[[:space:]]*"headprune/\([^"]*\)".*@\1@p' "$file")
done < <(find include/headprune src -type f \( -name '*.h' -o -name '*.cc' \) | sort)
if [ "$bad" -ne 0 ]; then
  echo "check_levels: a lower level includes a higher one (see above)" >&2
  exit 1
fi
echo "check_levels: $checked files, every include points to the same or a lower level"
