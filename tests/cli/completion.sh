#!/usr/bin/env bash
# The bash, zsh and fish completions offer exactly the options each
# subcommand's --help lists, and complete subcommand names. Usage: completion.sh TOOL SCRIPT
set -euo pipefail
tool=$1
script=$2
dir=$(dirname "$script")
zsh=$dir/_torchport
fish=$dir/torchport.fish
# shellcheck source=/dev/null
source "$script"
complete_words() {  # the words completed for the command line "$@" (last word being typed)
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  _torchport
  printf '%s\n' "${COMPREPLY[@]}" | sort
}
status=0
subs=$(complete_words torchport "" | grep -v '^-' | tr '\n' ' ')
[ "$subs" = "convert diff help inspect load scan " ] || { echo "subcommands completed: $subs"; status=1; }
[ "$(complete_words torchport help d)" = "diff" ] || { echo "'help d' does not complete to diff"; status=1; }
[ "$(complete_words torchport sc)" = "scan" ] || { echo "'sc' does not complete to scan"; status=1; }
for sub in inspect load convert diff scan; do
  want=$("$tool" "$sub" --help | grep -oE '^ +(-[a-z],)?--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort -u)
  got=$(complete_words torchport "$sub" -- | sort -u)
  if [ "$want" != "$got" ]; then
    echo "$sub: --help lists:"; echo "$want"; echo "completion offers:"; echo "$got"
    status=1
  fi
  # zsh and fish offer exactly the same options.
  zgot=$(grep -E "^ +$sub\) opts=\(" "$zsh" | grep -oE -- '--[a-z-]+' | sort -u)
  [ "$want" = "$zgot" ] || { echo "zsh $sub offers:"; echo "$zgot"; status=1; }
  fgot=$(grep -E "__fish_seen_subcommand_from $sub' -l [a-z-]+$" "$fish" | grep -oE -- '-l [a-z-]+$' |
    sed 's/^-l /--/' | sort -u)
  [ "$want" = "$fgot" ] || { echo "fish $sub offers:"; echo "$fgot"; status=1; }
done
for sub in inspect load convert diff scan help; do
  grep -q -- "-a $sub -d" "$fish" || { echo "fish: no command $sub"; status=1; }
  grep -q -- "'$sub:" "$zsh" || { echo "zsh: no command $sub"; status=1; }
done
[ $status = 0 ] && echo "completion matches --help for every subcommand"
exit $status
