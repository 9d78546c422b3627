# bash completion for headprune (installed as share/bash-completion/completions/headprune).
# Subcommands and options are read from the program's own --help, so they always match the build:
#   headprune <TAB>            subcommands
#   headprune prune --<TAB>    that subcommand's options (and the global ones)
# Anything else completes file and directory names (checkpoints, configs, output directories).
_headprune() {
  local cur=${COMP_WORDS[COMP_CWORD]} prog=${COMP_WORDS[0]} sub="" i w
  # The subcommand: the first word that is neither an option nor the value of a global option.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    case $w in
      --threads | --seed | --device | --log-level | --dist-timeout) ((i++)) ;;
      -*) ;;
      *) sub=$w; break ;;
    esac
  done
  # After `launch ... --`, complete the launched subcommand.
  if [[ $sub == launch ]]; then
    for ((i = i + 1; i < COMP_CWORD; i++)); do
      if [[ ${COMP_WORDS[i]} == -- ]]; then
        COMP_WORDS=("$prog" "${COMP_WORDS[@]:i+1}")
        COMP_CWORD=$((COMP_CWORD - i))
        _headprune
        return
      fi
    done
  fi
  if [[ -z $sub && $cur != -* ]]; then
    COMPREPLY=($(compgen -W "$("$prog" --help 2> /dev/null | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF { print $1 }')" -- "$cur"))
    return
  fi
  if [[ $cur == -* ]]; then
    local help
    help=$("$prog" ${sub:+"$sub"} --help 2> /dev/null)
    [[ -n $sub ]] && help+=$'\n'$("$prog" --help 2> /dev/null)
    COMPREPLY=($(compgen -W "$(grep -oE -- '--[a-z0-9][a-z0-9-]*' <<< "$help" | sort -u)" -- "$cur"))
    return
  fi
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _headprune headprune
