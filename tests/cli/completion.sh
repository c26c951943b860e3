#!/usr/bin/env bash
# The bash completion offers exactly the options each subcommand's --help
# lists, and completes subcommand names. Usage: completion.sh TOOL SCRIPT
set -euo pipefail
tool=$1
script=$2
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
[ "$subs" = "convert diff inspect load scan " ] || { echo "subcommands completed: $subs"; status=1; }
[ "$(complete_words torchport sc)" = "scan" ] || { echo "'sc' does not complete to scan"; status=1; }
for sub in inspect load convert diff scan; do
  want=$("$tool" "$sub" --help | grep -oE '^ +(-[a-z],)?--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort -u)
  got=$(complete_words torchport "$sub" -- | sort -u)
  if [ "$want" != "$got" ]; then
    echo "$sub: --help lists:"; echo "$want"; echo "completion offers:"; echo "$got"
    status=1
  fi
done
[ $status = 0 ] && echo "completion matches --help for every subcommand"
exit $status
