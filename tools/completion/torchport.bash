# bash completion for torchport. Installed to
# share/bash-completion/completions/torchport; or source it from ~/.bashrc.
_torchport() {
  local cur prev sub i
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  sub=
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      inspect | load | convert | diff | scan | help) sub=${COMP_WORDS[i]}; break ;;
    esac
  done
  if [[ -z $sub ]]; then
    COMPREPLY=($(compgen -W "inspect load convert diff scan help --help --version" -- "$cur"))
    return
  fi
  if [[ $sub == help ]]; then
    [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--help" -- "$cur")) ||
      COMPREPLY=($(compgen -W "inspect load convert diff scan" -- "$cur"))
    return
  fi
  local opts
  case $sub in
    inspect) opts="--json --tree --depth --top-level-key --shard --plan --quiet --verify --profile --allow --help" ;;
    load) opts="--mmap --quiet --verify --profile --allow --help" ;;
    convert) opts="--format --dtype --top-level-key --remap --include --exclude --max-shard-size --max-materialized-bytes --dequantize --keep-quantized --densify --force --quiet --tensors-only --allow --profile --help" ;;
    diff) opts="--atol --rtol --json --quiet --top-level-key --remap --profile --allow --help" ;;
    scan) opts="--json --quiet --allow --profile --list-profiles --include --exclude --help" ;;
  esac
  case $prev in
    --format)
      COMPREPLY=($(compgen -W "safetensors pytorch" -- "$cur"))
      return ;;
    --dtype)
      COMPREPLY=($(compgen -W "F16 BF16 F32 F64" -- "$cur"))
      return ;;
    --depth | --top-level-key | --shard | --remap | --include | --exclude | --max-shard-size | --max-materialized-bytes | --atol | --rtol)
      return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
    compopt -o filenames 2>/dev/null
  fi
}
complete -F _torchport torchport
