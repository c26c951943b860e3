# fish completion for torchport. Installed to share/fish/vendor_completions.d;
# tests/cli/completion.sh checks that each command's options are those its --help lists.
set -l commands inspect load convert diff scan help
complete -c torchport -f
complete -c torchport -n "not __fish_seen_subcommand_from $commands" -l help -d 'Print the help'
complete -c torchport -n "not __fish_seen_subcommand_from $commands" -l version -d 'Print the version'
complete -c torchport -n "not __fish_seen_subcommand_from $commands" -a inspect -d 'List the tensors and values of a checkpoint'
complete -c torchport -n "not __fish_seen_subcommand_from $commands" -a load -d 'Read every tensor of a checkpoint and report the speed'
complete -c torchport -n "not __fish_seen_subcommand_from $commands" -a convert -d 'Convert a checkpoint to safetensors, PyTorch format or a torchport record'
complete -c torchport -n "not __fish_seen_subcommand_from $commands" -a diff -d 'Compare the tensors of two checkpoints'
complete -c torchport -n "not __fish_seen_subcommand_from $commands" -a scan -d 'Say what checkpoints would make Python import and run, loading nothing'
complete -c torchport -n "not __fish_seen_subcommand_from $commands" -a help -d 'Print the help of torchport or of one command'
complete -c torchport -n '__fish_seen_subcommand_from help' -a 'inspect load convert diff scan'
complete -c torchport -n '__fish_seen_subcommand_from inspect' -F
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l json
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l tree
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l depth
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l top-level-key
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l shard
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l plan
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l quiet
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l verify
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l profile
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l allow
complete -c torchport -n '__fish_seen_subcommand_from inspect' -l help
complete -c torchport -n '__fish_seen_subcommand_from load' -F
complete -c torchport -n '__fish_seen_subcommand_from load' -l mmap
complete -c torchport -n '__fish_seen_subcommand_from load' -l quiet
complete -c torchport -n '__fish_seen_subcommand_from load' -l verify
complete -c torchport -n '__fish_seen_subcommand_from load' -l profile
complete -c torchport -n '__fish_seen_subcommand_from load' -l allow
complete -c torchport -n '__fish_seen_subcommand_from load' -l help
complete -c torchport -n '__fish_seen_subcommand_from convert' -F
complete -c torchport -n '__fish_seen_subcommand_from convert' -l format
complete -c torchport -n '__fish_seen_subcommand_from convert' -l dtype
complete -c torchport -n '__fish_seen_subcommand_from convert' -l top-level-key
complete -c torchport -n '__fish_seen_subcommand_from convert' -l remap
complete -c torchport -n '__fish_seen_subcommand_from convert' -l include
complete -c torchport -n '__fish_seen_subcommand_from convert' -l exclude
complete -c torchport -n '__fish_seen_subcommand_from convert' -l max-shard-size
complete -c torchport -n '__fish_seen_subcommand_from convert' -l max-materialized-bytes
complete -c torchport -n '__fish_seen_subcommand_from convert' -l dequantize
complete -c torchport -n '__fish_seen_subcommand_from convert' -l keep-quantized
complete -c torchport -n '__fish_seen_subcommand_from convert' -l densify
complete -c torchport -n '__fish_seen_subcommand_from convert' -l force
complete -c torchport -n '__fish_seen_subcommand_from convert' -l quiet
complete -c torchport -n '__fish_seen_subcommand_from convert' -l tensors-only
complete -c torchport -n '__fish_seen_subcommand_from convert' -l allow
complete -c torchport -n '__fish_seen_subcommand_from convert' -l profile
complete -c torchport -n '__fish_seen_subcommand_from convert' -l help
complete -c torchport -n '__fish_seen_subcommand_from diff' -F
complete -c torchport -n '__fish_seen_subcommand_from diff' -l atol
complete -c torchport -n '__fish_seen_subcommand_from diff' -l rtol
complete -c torchport -n '__fish_seen_subcommand_from diff' -l json
complete -c torchport -n '__fish_seen_subcommand_from diff' -l quiet
complete -c torchport -n '__fish_seen_subcommand_from diff' -l top-level-key
complete -c torchport -n '__fish_seen_subcommand_from diff' -l remap
complete -c torchport -n '__fish_seen_subcommand_from diff' -l profile
complete -c torchport -n '__fish_seen_subcommand_from diff' -l allow
complete -c torchport -n '__fish_seen_subcommand_from diff' -l help
complete -c torchport -n '__fish_seen_subcommand_from scan' -F
complete -c torchport -n '__fish_seen_subcommand_from scan' -l json
complete -c torchport -n '__fish_seen_subcommand_from scan' -l quiet
complete -c torchport -n '__fish_seen_subcommand_from scan' -l allow
complete -c torchport -n '__fish_seen_subcommand_from scan' -l include
complete -c torchport -n '__fish_seen_subcommand_from scan' -l exclude
complete -c torchport -n '__fish_seen_subcommand_from scan' -l profile
complete -c torchport -n '__fish_seen_subcommand_from scan' -l list-profiles
complete -c torchport -n '__fish_seen_subcommand_from scan' -l help
complete -c torchport -n '__fish_seen_subcommand_from convert' -l format -xa 'safetensors pytorch'
complete -c torchport -n '__fish_seen_subcommand_from convert' -l dtype -xa 'F16 BF16 F32 F64'
